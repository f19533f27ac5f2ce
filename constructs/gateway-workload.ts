import { createHash } from 'node:crypto';
import { Construct } from 'constructs';
import { Lazy, Size } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import { applyExposureExtras, exposedPorts, kplusServiceType, type ServiceExposure } from './service-exposure.ts';
import YAML from 'yaml';
import type { GatewayConfig } from '../schemas/generated/gateway-config.ts';
import { MAX_GATEWAY_WORKERS } from '../schemas/gateway/workers.ts';
import { gatewayConfigProblems } from './gateway-config-schema.ts';
import { gatewayNetworkPolicy, metricsScraperIssues } from './gateway-network-policy.ts';
import { OVERLAY_DIR, PRAXIS_CONFIG_KEY, PRAXIS_CONFIG_PATH, PRAXIS_DIR, TLS_KEYS } from './gateway-paths.ts';
import { GRID_PREFIX, type GridComponent, workloadLabels } from './labels.ts';
import { CONSUMER_POD } from '../schemas/workload-labels.ts';
import type { ListenerSources } from './operator-network-policy.ts';
import { addIssueCheck, issueAt } from './synth-error.ts';
import {
  CONTAINER_SECURITY,
  POD_SECURITY,
  daemonCommand,
  healthProbes,
  projectedVolume,
  resources,
  tmpVolume,
} from './workload-defaults.ts';

/** Annotation carrying the config digest, so a config change rolls the pods (listeners and clusters need a restart). */
export const CONFIG_DIGEST_ANNOTATION = `${GRID_PREFIX}config-sha256`;

/**
 * A gateway container's default resources for `workers` worker threads: each worker is a whole gateway (its own V8
 * heap, about 100 MiB resident, and its own request bodies), so requests and limits scale per worker from one
 * worker's 100m/128Mi requested, 1 CPU/512Mi limit. The limit gives every worker a whole core under load.
 */
export function gatewayResources(workers: number): kplus.ContainerResources {
  return resources(100 * workers, 128 * workers, 1000 * workers, 512 * workers);
}

/** CPU quantity (`1500m`, `2`, `0.5`) in millicores, or undefined when it is not a plain CPU quantity. */
function cpuMillis(amount: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(m?)$/.exec(amount);
  if (match === null) return undefined;
  return match[2] === 'm' ? Number(match[1]) : Number(match[1]) * 1000;
}

export interface GatewayWorkloadProps {
  readonly component: Extract<GridComponent, 'consumer-gateway' | 'provider-gateway'>;
  readonly name: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly image: string;
  readonly replicas: number;
  readonly listenerPort: number;
  readonly adminPort: number;
  /** Admitted to the admin port (and sidecarPorts) by the gateway's NetworkPolicy besides the node. */
  readonly metricsScrapers?: ListenerSources;
  /** Health/metrics ports of sidecars in the pod (overlay-sync's on a consumer): scraped like the admin port. */
  readonly sidecarPorts?: readonly number[];
  /** The operator pods the NetworkPolicy admits to these ports, for the fleet dashboard. @default - none */
  readonly dashboardReader?: { readonly podLabels: Record<string, string>; readonly ports: readonly number[] };
  readonly tlsSecretName: string;
  /** Worker threads serving the listener (`--workers`); 1 is the single-threaded gateway and renders no flag. */
  readonly workers: number;
  /** Explicit resources; absent means gatewayResources(workers). */
  readonly resources: kplus.ContainerResources | undefined;
  readonly serviceType: kplus.ServiceType;
  /** How other sites reach the listener; when set it decides the Service type, node port and annotations. */
  readonly exposure?: ServiceExposure<'listener'>;
  /** The pod's ServiceAccount (the consumer's is overlay-sync's); absent means the namespace default, no token. */
  readonly serviceAccount?: kplus.IServiceAccount;
  /** Whether the gateway reads a routing overlay (consumer role): adds the shared overlay emptyDir. */
  readonly readsOverlay: boolean;
}

/**
 * The Deployment, Service and config ConfigMap shared by both gateway roles. Config, TLS files and (provider
 * only) credentials are one projected volume at /etc/praxis; the config is rendered lazily from the owning
 * construct's model, validated against the gateway-config schema at synth, and its digest rolls the pods.
 */
export class GatewayWorkload extends Construct {
  readonly deployment: kplus.Deployment;
  readonly service: kplus.Service;
  readonly configMap: kplus.k8s.KubeConfigMap;
  /** Isolates the pods for ingress: the listener from anywhere, the admin port from the node and the scrapers. */
  readonly networkPolicy: kplus.k8s.KubeNetworkPolicy;
  readonly configMapName: string;
  readonly gatewayContainer: kplus.Container;
  /** The emptyDir overlay-sync writes and the gateway watches; only on a gateway that reads an overlay. */
  readonly overlayVolume: kplus.Volume | undefined;
  readonly tmp: kplus.Volume;
  /** The sources of the /etc/praxis projected volume; Secrets added here appear in the pod at synth. */
  private readonly praxisSources: kplus.k8s.VolumeProjection[];
  private config: GatewayConfig | undefined;
  private extensionFilters: readonly string[] = [];

  constructor(scope: Construct, id: string, props: GatewayWorkloadProps) {
    super(scope, id);
    this.configMapName = `${props.name}-config`;
    const selectorLabels = workloadLabels(props.component, props.name);
    const labels = { ...props.labels, ...selectorLabels };

    this.configMap = new kplus.k8s.KubeConfigMap(this, 'Config', {
      metadata: { name: this.configMapName, namespace: props.namespace, labels },
      data: Lazy.any({ produce: () => ({ [PRAXIS_CONFIG_KEY]: this.renderYaml() }) }),
    });

    this.praxisSources = [
      { configMap: { name: this.configMapName, items: [{ key: PRAXIS_CONFIG_KEY, path: PRAXIS_CONFIG_KEY }] } },
      { secret: { name: props.tlsSecretName, items: TLS_KEYS.map((key) => ({ key, path: `tls/${key}` })) } },
    ];
    // 0440 + fsGroup: readable by the gateway's group only; key files are never world-readable.
    const praxis = projectedVolume(this, 'Praxis', 'praxis', { defaultMode: 0o440, sources: this.praxisSources });
    this.overlayVolume = props.readsOverlay
      ? kplus.Volume.fromEmptyDir(this, 'Overlay', 'routing-overlay', { sizeLimit: Size.mebibytes(16) })
      : undefined;
    this.tmp = tmpVolume(this);

    this.deployment = new kplus.Deployment(this, 'Deployment', {
      metadata: { name: props.name, namespace: props.namespace, labels },
      replicas: props.replicas,
      // Explicit selector labels instead of cdk8s-plus' generated address label: Services and NetworkPolicies
      // of other constructs select these pods by name.
      select: false,
      serviceAccount: props.serviceAccount,
      automountServiceAccountToken: false,
      securityContext: POD_SECURITY,
      podMetadata: { labels },
    });
    this.deployment.select(kplus.LabelSelector.of({ labels: selectorLabels }));

    this.gatewayContainer = this.deployment.addContainer({
      name: CONSUMER_POD.gatewayContainer,
      image: props.image,
      command: daemonCommand('gateway', [
        '--config',
        PRAXIS_CONFIG_PATH,
        ...(props.workers > 1 ? ['--workers', String(props.workers)] : []),
      ]),
      // The image tag is pinned, so a node's cached copy is the same image.
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      ports: [
        { number: props.listenerPort, name: 'listener' },
        { number: props.adminPort, name: CONSUMER_POD.gatewayAdminPort },
      ],
      securityContext: CONTAINER_SECURITY,
      // A worker count synth refuses (workerIssues) still needs a valid quantity to get that far.
      resources: props.resources ?? gatewayResources(validWorkerCount(props.workers) ? props.workers : 1),
      ...healthProbes(props.adminPort, '/livez', '/readyz'),
      volumeMounts: [
        { path: PRAXIS_DIR, volume: praxis, readOnly: true },
        ...(this.overlayVolume === undefined
          ? []
          : [{ path: OVERLAY_DIR, volume: this.overlayVolume, readOnly: true }]),
        { path: '/tmp', volume: this.tmp },
      ],
    });

    const exposure = props.exposure;
    const listenerPorts = [
      { name: 'listener', port: props.listenerPort, targetPort: props.listenerPort, exposureName: 'listener' as const },
    ];
    this.service = new kplus.Service(this, 'Service', {
      metadata: {
        name: props.name,
        namespace: props.namespace,
        labels,
        ...(exposure?.annotations === undefined ? {} : { annotations: { ...exposure.annotations } }),
      },
      type: exposure === undefined ? props.serviceType : kplusServiceType(exposure.type),
      selector: kplus.Pods.select(this, 'Pods', { labels: selectorLabels }),
      ports:
        exposure === undefined
          ? listenerPorts.map(({ exposureName: _, ...port }) => port)
          : exposedPorts(exposure, listenerPorts),
      ...(exposure?.loadBalancerSourceRanges === undefined
        ? {}
        : { loadBalancerSourceRanges: [...exposure.loadBalancerSourceRanges] }),
    });
    if (exposure !== undefined) applyExposureExtras(this.service, exposure);

    // Every rendered config binds the admin listener publicly (allow_public_admin); this policy is why that is safe.
    this.networkPolicy = gatewayNetworkPolicy(this, 'NetworkPolicy', {
      name: props.name,
      namespace: props.namespace,
      podLabels: selectorLabels,
      labels,
      listenerPort: props.listenerPort,
      scrapePorts: [props.adminPort, ...(props.sidecarPorts ?? [])],
      metricsScrapers: props.metricsScrapers,
      ...(props.dashboardReader !== undefined ? { dashboardReader: props.dashboardReader } : {}),
    });
    addIssueCheck(this, () => metricsScraperIssues(this, props.metricsScrapers));
    addIssueCheck(this, () => workerIssues(this, props.workers, props.resources));
    addIssueCheck(this, () => {
      if (this.config === undefined)
        return [issueAt(this, 'config', 'no gateway config was rendered', 'this is a bug in the gateway construct')];
      return gatewayConfigProblems(this.config, this.extensionFilters).map((problem) =>
        issueAt(
          this,
          `${PRAXIS_CONFIG_KEY}${problem.pointer}`,
          problem.message,
          'declare the missing routes, peers or upstreams of this gateway (see schemas/gateway/gateway-config.schema.json)',
        ),
      );
    });
  }

  /** Replaces the rendered config and stamps its digest on the pod template. */
  setConfig(config: GatewayConfig, extensionFilters: readonly string[] = []): void {
    this.config = config;
    this.extensionFilters = extensionFilters;
    const digest = createHash('sha256').update(this.renderYaml()).digest('hex');
    this.deployment.podMetadata.addAnnotation(CONFIG_DIGEST_ANNOTATION, digest);
  }

  /** The current config (a copy), for assertions and for the stack's cross-checks. */
  get currentConfig(): GatewayConfig | undefined {
    return this.config === undefined ? undefined : structuredClone(this.config);
  }

  /** Projects keys of a Secret of the gateway's namespace under /etc/praxis (paths relative to it). */
  projectSecret(secretName: string, items: readonly { readonly key: string; readonly path: string }[]): void {
    const existing = this.praxisSources.find((source) => source.secret?.name === secretName);
    if (existing?.secret !== undefined) {
      const known = new Set((existing.secret.items ?? []).map((item) => item.path));
      const merged = [...(existing.secret.items ?? []), ...items.filter((item) => !known.has(item.path))];
      const index = this.praxisSources.indexOf(existing);
      this.praxisSources[index] = { secret: { name: secretName, items: merged } };
      return;
    }
    this.praxisSources.push({
      secret: { name: secretName, items: items.map((item) => ({ key: item.key, path: item.path })) },
    });
  }

  /** The Secret names projected into the pod (TLS first, then in the order added). */
  get projectedSecretNames(): string[] {
    return this.praxisSources.flatMap((source) => (source.secret?.name === undefined ? [] : [source.secret.name]));
  }

  private renderYaml(): string {
    return YAML.stringify(this.config ?? {}, { lineWidth: 0 });
  }
}

function validWorkerCount(workers: number): boolean {
  return Number.isInteger(workers) && workers >= 1 && workers <= MAX_GATEWAY_WORKERS;
}

/** A worker count the gateway would refuse, or a CPU limit that would throttle its workers to less than a core each. */
function workerIssues(
  scope: Construct,
  workers: number,
  explicit: kplus.ContainerResources | undefined,
): ReturnType<typeof issueAt>[] {
  if (!validWorkerCount(workers)) {
    return [
      issueAt(
        scope,
        'workers',
        `workers must be a whole number from 1 to ${MAX_GATEWAY_WORKERS}, got ${workers}`,
        'give one worker per CPU the pod may use (daemons/gateway/README.md "Workers")',
      ),
    ];
  }
  const limit = explicit?.cpu?.limit?.amount;
  const millis = limit === undefined ? undefined : cpuMillis(limit);
  if (workers > 1 && millis !== undefined && millis < 1000 * workers) {
    return [
      issueAt(
        scope,
        'resources.cpu.limit',
        `a CPU limit of ${limit} gives ${workers} workers less than one core each: they would be throttled to the throughput of fewer workers while each holds a whole gateway's memory`,
        `set resources.cpu.limit to at least ${workers} CPUs, or declare workers: ${Math.max(1, Math.floor((millis ?? 0) / 1000))}`,
      ),
    ];
  }
  return [];
}
