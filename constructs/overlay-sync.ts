import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { overlayConfigMapName } from '../schemas/overlay/configmap-name.ts';
import { servingConfigMapName } from '../schemas/serving/serving-config.ts';
import { imageOf, type ImageReference } from './image-reference.ts';
import {
  OVERLAY_DATA_KEY,
  OVERLAY_DIR,
  OVERLAY_FILE,
  SERVING_DATA_KEY,
  SERVING_DIR,
  SERVING_FILE,
} from './gateway-paths.ts';
import { grantNamespaced } from './rbac.ts';
import { CONSUMER_POD } from '../schemas/workload-labels.ts';
import {
  CONTAINER_SECURITY,
  SERVICE_ACCOUNT_MOUNT_PATH,
  daemonCommand,
  healthProbes,
  resources,
  serviceAccountTokenVolume,
} from './workload-defaults.ts';
import { checkTelemetry, instrumentContainer, type SiteTelemetry } from './observability.ts';

export interface OverlaySyncProps {
  /** The gateway's namespace; the overlay ConfigMap, the ServiceAccount and the Role live there. */
  readonly namespace: string;
  /** GridNetwork name; part of the ConfigMap name and of the expected scope. */
  readonly network: string;
  /** The gateway name the operator renders the overlay for (GridNetwork consumerGateways[].name). */
  readonly gateway: string;
  /** The site the overlay must be rendered for (expected `local_site`). */
  readonly localSite: string;
  /** Labels for the ServiceAccount and RBAC objects. @default - none */
  readonly labels?: Record<string, string>;
  /**
   * The project image.
   * @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon
   */
  readonly image?: ImageReference;
  /**
   * Port of /livez, /readyz, /status and /metrics.
   * @default 9091 - docs/contract.md §4 default (OVERLAY_SYNC_HEALTH_ADDR 0.0.0.0:9091)
   */
  readonly healthPort?: number;
  /**
   * Largest overlay accepted, in bytes.
   * @default 1048576 - docs/contract.md §2.4 limit for overlay-sync (1 MiB; the gateway allows 2 MiB)
   */
  readonly maxBytes?: number;
  /**
   * Requests and limits of the sidecar (the init container uses the same).
   * @default 20m/32Mi requested, 200m/128Mi limit - it holds one ConfigMap watch
   */
  readonly resources?: kplus.ContainerResources;
  /**
   * Also deliver the gateway's serving config (gridServing): the Role grants its ConfigMap too, and attachServingTo
   * adds a second init container and sidecar of the same daemon for it.
   * @default false
   */
  readonly serving?: boolean;
  /**
   * Port of the serving config sidecar's /livez, /readyz, /status and /metrics.
   * @default 9092 - beside the overlay sidecar's
   */
  readonly servingHealthPort?: number;
}

/**
 * The overlay-sync daemon of one gateway (docs/contract.md §4): its own ServiceAccount, a Role that can only
 * get/list/watch the gateway's one overlay ConfigMap (resourceNames), and the init container + sidecar that
 * copy that ConfigMap into a shared emptyDir the gateway watches. Only these containers mount a token.
 */
export class OverlaySync extends Construct {
  readonly configMapName: string;
  readonly namespace: string;
  readonly network: string;
  readonly gateway: string;
  readonly localSite: string;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly healthPort: number;
  readonly maxBytes: number;
  readonly resources: kplus.ContainerResources;
  readonly serviceAccount: kplus.ServiceAccount;
  readonly serviceAccountName: string;
  /** The serving config ConfigMap (grid-serving-{network}-{gateway}) when `serving` is set. */
  readonly servingConfigMapName: string | undefined;
  readonly servingHealthPort: number;
  /** The init containers and sidecars attached to the gateway's Deployment, in the order added. */
  private readonly attached: kplus.Container[] = [];

  constructor(scope: Construct, id: string, props: OverlaySyncProps) {
    super(scope, id);
    this.namespace = props.namespace;
    this.network = props.network;
    this.gateway = props.gateway;
    this.localSite = props.localSite;
    this.configMapName = overlayConfigMapName(props.network, props.gateway);
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);
    this.healthPort = props.healthPort ?? 9091;
    this.maxBytes = props.maxBytes ?? 1_048_576;
    this.resources = props.resources ?? resources(20, 32, 200, 128);
    this.serviceAccountName = `${props.gateway}-overlay-sync`;
    this.servingConfigMapName = props.serving === true ? servingConfigMapName(props.network, props.gateway) : undefined;
    this.servingHealthPort = props.servingHealthPort ?? 9092;
    const labels = props.labels ?? {};
    this.serviceAccount = new kplus.ServiceAccount(this, 'ServiceAccount', {
      metadata: { name: this.serviceAccountName, namespace: this.namespace, labels },
      // The token is projected into the overlay-sync containers only (see attachTo), never automounted pod-wide.
      automountToken: false,
    });
    this.grantWatch(labels);
  }

  /** get/list/watch on exactly this gateway's overlay ConfigMap, from the permission table. */
  private grantWatch(labels: Record<string, string>): void {
    grantNamespaced(this, 'Watch', {
      daemon: 'overlay-sync',
      name: this.serviceAccountName,
      namespace: this.namespace,
      serviceAccountName: this.serviceAccountName,
      serviceAccountNamespace: this.namespace,
      names: {
        overlayConfigMap: [
          this.configMapName,
          ...(this.servingConfigMapName === undefined ? [] : [this.servingConfigMapName]),
        ],
      },
      labels,
    });
  }

  /**
   * The docs/contract.md §4 environment; `once` selects init-container mode (write a valid file, then exit). The
   * serving config adds OVERLAY_SYNC_CONTRACT and its own ConfigMap, key, output and health port.
   */
  private environment(once: boolean, serving = false): Record<string, kplus.EnvValue> {
    const env: Record<string, kplus.EnvValue> = {
      ...(serving ? { OVERLAY_SYNC_CONTRACT: kplus.EnvValue.fromValue('serving') } : {}),
      OVERLAY_SYNC_NAMESPACE: kplus.EnvValue.fromValue(this.namespace),
      OVERLAY_SYNC_CONFIGMAP: kplus.EnvValue.fromValue(
        serving ? (this.servingConfigMapName ?? '') : this.configMapName,
      ),
      OVERLAY_SYNC_DATA_KEY: kplus.EnvValue.fromValue(serving ? SERVING_DATA_KEY : OVERLAY_DATA_KEY),
      OVERLAY_SYNC_OUTPUT: kplus.EnvValue.fromValue(serving ? SERVING_FILE : OVERLAY_FILE),
      OVERLAY_SYNC_EXPECTED_NETWORK: kplus.EnvValue.fromValue(this.network),
      OVERLAY_SYNC_EXPECTED_GATEWAY: kplus.EnvValue.fromValue(this.gateway),
      OVERLAY_SYNC_EXPECTED_NAMESPACE: kplus.EnvValue.fromValue(this.namespace),
      OVERLAY_SYNC_EXPECTED_LOCAL_SITE: kplus.EnvValue.fromValue(this.localSite),
      OVERLAY_SYNC_MAX_BYTES: kplus.EnvValue.fromValue(String(this.maxBytes)),
      OVERLAY_SYNC_HEALTH_ADDR: kplus.EnvValue.fromValue(
        `0.0.0.0:${serving ? this.servingHealthPort : this.healthPort}`,
      ),
    };
    if (once) env['OVERLAY_SYNC_ONCE'] = kplus.EnvValue.fromValue('true');
    return env;
  }

  /**
   * Adds the init container (the gateway starts with a valid overlay on disk) and the sidecar (keeps it
   * current) to a gateway Deployment, sharing `overlayVolume` as a directory mount, never a subPath, so the
   * atomic rename is seen by the gateway's directory watch. The Deployment must run as `serviceAccount`.
   */
  attachTo(deployment: kplus.Deployment, overlayVolume: kplus.Volume, tmp: kplus.Volume): void {
    const token = serviceAccountTokenVolume(this, 'Token', 'overlay-sync-token');
    const mounts: kplus.VolumeMount[] = [
      { path: OVERLAY_DIR, volume: overlayVolume },
      { path: SERVICE_ACCOUNT_MOUNT_PATH, volume: token, readOnly: true },
      { path: '/tmp', volume: tmp },
    ];
    const common = {
      image: this.image,
      command: daemonCommand('overlay-sync'),
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      securityContext: CONTAINER_SECURITY,
      resources: this.resources,
      volumeMounts: mounts,
    };
    this.attached.push(
      deployment.addInitContainer({ ...common, name: 'overlay-sync-init', envVariables: this.environment(true) }),
    );
    this.attached.push(
      deployment.addContainer({
        ...common,
        name: CONSUMER_POD.overlaySyncContainer,
        envVariables: this.environment(false),
        ports: [{ number: this.healthPort, name: CONSUMER_POD.overlaySyncHealthPort }],
        ...healthProbes(this.healthPort, '/livez', '/readyz'),
      }),
    );
  }

  /**
   * Adds the serving config's init container (the gateway starts with a valid serving config on disk) and sidecar
   * (keeps it current), writing into `servingVolume` as a directory mount, like attachTo does for the overlay.
   */
  attachServingTo(deployment: kplus.Deployment, servingVolume: kplus.Volume, tmp: kplus.Volume): void {
    if (this.servingConfigMapName === undefined) throw new Error('attachServingTo on an OverlaySync without serving');
    const token = serviceAccountTokenVolume(this, 'ServingToken', 'serving-sync-token');
    const common = {
      image: this.image,
      command: daemonCommand('overlay-sync'),
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      securityContext: CONTAINER_SECURITY,
      resources: this.resources,
      volumeMounts: [
        { path: SERVING_DIR, volume: servingVolume },
        { path: SERVICE_ACCOUNT_MOUNT_PATH, volume: token, readOnly: true },
        { path: '/tmp', volume: tmp },
      ],
    };
    this.attached.push(
      deployment.addInitContainer({ ...common, name: 'serving-sync-init', envVariables: this.environment(true, true) }),
    );
    this.attached.push(
      deployment.addContainer({
        ...common,
        name: 'serving-sync',
        envVariables: this.environment(false, true),
        ports: [{ number: this.servingHealthPort, name: 'serving-health' }],
        ...healthProbes(this.servingHealthPort, '/livez', '/readyz'),
      }),
    );
  }

  /**
   * Exports the traces of every container attached so far, init containers too (service.name overlay-sync; their
   * k8s.container.name tells the overlay's from the serving config's). Call it after attachTo/attachServingTo.
   */
  enableTracing(telemetry: SiteTelemetry): void {
    checkTelemetry(this, telemetry);
    for (const container of this.attached) instrumentContainer(container, telemetry, 'overlay-sync', this.gateway);
  }
}
