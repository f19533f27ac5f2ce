import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { imageOf, type ImageReference } from './image-reference.ts';
import { workloadLabels } from './labels.ts';
import { grantClusterWide, grantNamespaced, metricsScraperAccount } from './rbac.ts';
import {
  DEFAULT_ENROLLMENT_PORT,
  DEFAULT_GATEWAY_AGE_PORT,
  DEFAULT_SIGNALS_PORT,
  listenerIssues,
  renderListeners,
  type OperatorListenerProps,
} from './operator-listeners.ts';
import { operatorNetworkPolicy } from './operator-network-policy.ts';
import { dashboardIssues, renderDashboard, type OperatorDashboardProps } from './operator-dashboard.ts';
import { GridSynthError, issueAt, type SynthIssue } from './synth-error.ts';
import { checkTelemetry, instrumentContainer, type SiteTelemetry } from './observability.ts';
import {
  CONTAINER_SECURITY,
  POD_SECURITY,
  daemonCommand,
  healthProbes,
  resources,
  tmpVolume,
} from './workload-defaults.ts';
import {
  applyExposureExtras,
  exposedPorts,
  exposureIssues,
  kplusServiceType,
  type OperatorPortName,
  type ServiceExposure,
} from './service-exposure.ts';
import {
  inviteTokenSecretName,
  operatorStateConfigMapName,
  siteNameLedgerConfigMapName,
} from '../schemas/object-names.ts';

/** A Secret the operator reads by name (the swim key, site certificate, CA, provider credentials). */
export interface SecretName {
  readonly name: string;
  readonly namespace: string;
}

export interface GossipOperatorProps extends OperatorListenerProps {
  /** Namespace of the operator and of the gateways whose overlays it applies. */
  readonly namespace: string;
  readonly network: string;
  /** This site's name: its SWIM identity and the `local_site` of the overlays it renders. */
  readonly site: string;
  /**
   * Emit the Namespace object (with the `restricted` Pod Security level every AGN pod meets).
   * @default true - the operator's namespace is the site's namespace
   */
  readonly createNamespace?: boolean;
  /** @default 'gossip-operator' */
  readonly name?: string;
  /** @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon */
  readonly image?: ImageReference;
  /**
   * @default 1 - one SWIM member per site; a second replica would only wait on the Lease
   */
  readonly replicas?: number;
  /** @default 7946 - SWIM over UDP, push-pull over TCP (docs/contract.md §5) */
  readonly gossipPort?: number;
  /** @default 9090 - the operator's admin listener: /livez, /readyz, /metrics and the dashboard (GRID_ADMIN_ADDRESS) */
  readonly adminPort?: number;
  /**
   * This site's data-plane address announced to peers (GRID_GATEWAY_ADDRESS).
   * @default - none; peers then keep this site Discovered (GatewayAddressMissing)
   */
  readonly gatewayAddress?: string;
  /**
   * The address other sites reach this operator's gossip port at (GRID_GOSSIP_ADVERTISE), when it differs from
   * the pod address (behind a LoadBalancer or NAT).
   * @default - the operator advertises its bind address
   */
  readonly gossipAdvertiseAddress?: string;
  /** The overlay ConfigMaps this operator applies (names in its namespace); the Role is scoped to them. */
  readonly overlayConfigMaps: readonly string[];
  /**
   * Serving config ConfigMaps (grid-serving-{network}-{gateway}) of the gateways this site deploys, gridServing on or
   * off: the Role can get and delete exactly these, so the operator removes a serving config once it is turned off.
   * @default - none
   */
  readonly servingConfigMaps?: readonly string[];
  /** Secrets the site's resources reference; the Role can get exactly these. */
  readonly referencedSecrets: readonly SecretName[];
  /**
   * Generated consumer config ConfigMaps (praxisConfig.configMapName of gateways with generate: true). Non-empty
   * also grants the content-hashed grid-mount-requirements ConfigMaps, which resourceNames cannot scope.
   * @default - none; the site generates no consumer config
   */
  readonly praxisConfigMaps?: readonly string[];
  /** Consumer Deployments delegated with praxisConfig.mountReconciliation: the Role can get/patch exactly these. @default - none */
  readonly delegatedDeployments?: readonly string[];
  /** SiteInvites declared at this site: the Role can manage exactly their token Secrets. @default - none */
  readonly invites?: readonly string[];
  /** @default '<name>-leader' - the Lease leader election renews; the Role can update only this one */
  readonly leaseName?: string;
  /**
   * The in-cluster Service's type (gossip, admin and every listener port).
   * @default ClusterIP - reach other sites through `publicService`, which carries only what peers need
   */
  readonly serviceType?: kplus.ServiceType;
  /**
   * A second Service, `<name>-public`, that carries only the ports other sites use: SWIM (UDP and TCP on one port;
   * a LoadBalancer with both protocols needs Kubernetes 1.26 or later), and the peer signals and enrollment ports
   * when those listeners are on. The admin port (metrics, the dashboard) and the gateway ingest stay on the
   * in-cluster Service. Advertise its address as gossipAdvertiseAddress (and peerSignals.advertise).
   * @default - none: the operator is reachable inside its cluster only
   */
  readonly publicService?: ServiceExposure<OperatorPortName>;
  /** @default 100m/128Mi requested, 1 CPU/512Mi limit - the routing core renders overlays for up to 1024 candidates */
  readonly resources?: kplus.ContainerResources;
  /**
   * Emit the metrics scraper ServiceAccount (only get on the nonResourceURL /metrics) whose TokenRequest token
   * metricsConfig.auth sends, and let the operator mint tokens for that one account.
   * @default true
   */
  readonly metricsScraper?: boolean;
  /**
   * Who may open the fleet dashboard on the admin port (README "Fleet dashboard"). `token`: a bearer token or a
   * session cookie from the token Secret, projected into the pod.
   * @default - nothing rendered: the operator's default for its public admin bind, off
   */
  readonly dashboard?: OperatorDashboardProps;
  /**
   * The consumer gateways of this namespace whose pods the dashboard reads (with `dashboard.access: token`): the
   * Role then lists and watches pods in the namespace. Their NetworkPolicies must admit the operator pods.
   * @default - none
   */
  readonly dashboardGateways?: readonly string[];
  /** Extra labels for every object this construct emits. @default - none (the workload labels only) */
  readonly labels?: Record<string, string>;
}

/**
 * The per-site control plane (docs/contract.md §5): namespace, ServiceAccount, least-privilege RBAC from the permission
 * table, a Deployment that mounts its token (it is an API client), and the gossip/metrics Service.
 */
export class GossipOperator extends Construct {
  readonly name: string;
  readonly namespace: string;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly replicas: number;
  readonly gossipPort: number;
  readonly adminPort: number;
  readonly leaseName: string;
  /** The scraper ServiceAccount's name, undefined when metricsScraper is false. */
  readonly metricsScraperName: string | undefined;
  readonly selectorLabels: Record<string, string>;
  readonly serviceAccount: kplus.ServiceAccount;
  readonly deployment: kplus.Deployment;
  readonly service: kplus.Service;
  /** The Service other sites reach the operator through (`publicService`), when declared. */
  readonly publicService: kplus.Service | undefined;
  /**
   * The ingress policy of the operator pods, rendered only when an opt-in listener is on (without one the operator
   * pods stay unisolated): SWIM and admin open to every source, each opt-in listener limited by its `from`/`gateways`.
   */
  readonly networkPolicy: kplus.k8s.KubeNetworkPolicy | undefined;

  constructor(scope: Construct, id: string, props: GossipOperatorProps) {
    super(scope, id);
    this.name = props.name ?? 'gossip-operator';
    this.namespace = props.namespace;
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);
    this.replicas = props.replicas ?? 1;
    this.gossipPort = props.gossipPort ?? 7946;
    this.adminPort = props.adminPort ?? 9090;
    this.leaseName = props.leaseName ?? `${this.name}-leader`;
    this.metricsScraperName = props.metricsScraper === false ? undefined : `${this.name}-metrics-scraper`;
    this.selectorLabels = workloadLabels('gossip-operator', this.name);
    const labels = { ...(props.labels ?? {}), ...this.selectorLabels };

    const issues: SynthIssue[] = [];
    const foreign = props.referencedSecrets.find((secret) => secret.namespace !== this.namespace);
    if (foreign !== undefined) {
      issues.push(
        issueAt(
          this,
          'referencedSecrets',
          `Secret ${foreign.namespace}/${foreign.name} is outside the operator namespace ${this.namespace}`,
          `create the Secret in ${this.namespace} and reference it there, so the operator's Role stays one namespace wide`,
        ),
      );
    }
    const taken = new Map<number, string>([[this.gossipPort, 'gossipPort (SWIM)']]);
    if (!taken.has(this.adminPort)) taken.set(this.adminPort, 'adminPort');
    issues.push(...listenerIssues(this, props, taken));
    if (props.publicService !== undefined)
      issues.push(...exposureIssues(this, 'publicService', props.publicService, this.publicPortNames(props)));
    issues.push(...dashboardIssues(this, props.dashboard));
    if (issues.length > 0) throw new GridSynthError(issues);

    if (props.createNamespace ?? true) {
      new kplus.Namespace(this, 'Namespace', {
        metadata: {
          name: this.namespace,
          labels: { ...(props.labels ?? {}), 'pod-security.kubernetes.io/enforce': 'restricted' },
        },
      });
    }

    this.serviceAccount = new kplus.ServiceAccount(this, 'ServiceAccount', {
      metadata: { name: this.name, namespace: this.namespace, labels },
      automountToken: false,
    });
    const grant = {
      daemon: 'gossip-operator' as const,
      name: this.name,
      serviceAccountName: this.name,
      serviceAccountNamespace: this.namespace,
      labels,
    };
    grantClusterWide(this, 'Grid', { ...grant, names: {} });
    grantNamespaced(this, 'Site', {
      ...grant,
      namespace: this.namespace,
      names: {
        overlayConfigMaps: props.overlayConfigMaps,
        servingConfigMaps: props.servingConfigMaps ?? [],
        referencedSecrets: props.referencedSecrets.map((secret) => secret.name),
        leaderLease: [this.leaseName],
        operatorState: [operatorStateConfigMapName(props.site), siteNameLedgerConfigMapName(props.site)],
        inviteSecrets: (props.invites ?? []).map(inviteTokenSecretName),
        metricsScraper: this.metricsScraperName === undefined ? [] : [this.metricsScraperName],
        praxisConfigMaps: props.praxisConfigMaps ?? [],
        delegatedDeployments: props.delegatedDeployments ?? [],
        dashboardGateways: props.dashboard?.access === 'token' ? (props.dashboardGateways ?? []) : [],
      },
    });
    if (this.metricsScraperName !== undefined) {
      metricsScraperAccount(this, 'MetricsScraper', {
        name: this.metricsScraperName,
        namespace: this.namespace,
        labels,
      });
    }

    this.deployment = new kplus.Deployment(this, 'Deployment', {
      metadata: { name: this.name, namespace: this.namespace, labels },
      replicas: this.replicas,
      select: false,
      serviceAccount: this.serviceAccount,
      // The operator is an API client: it is the one pod whose only container gets the token.
      automountServiceAccountToken: true,
      securityContext: POD_SECURITY,
      podMetadata: { labels },
      // A standby must not start a second SWIM member while the old one still answers probes.
      strategy: kplus.DeploymentStrategy.recreate(),
    });
    this.deployment.select(kplus.LabelSelector.of({ labels: this.selectorLabels }));
    // The operator's own settings (daemons/gossip-operator/config.ts). The SWIM key is never an env literal
    // (GRID_SWIM_ENCRYPT_KEY stays unset): the operator reads GridNetwork spec.tls.swimKeySecretRef by name.
    const env: Record<string, kplus.EnvValue> = {
      GRID_SITE_NAME: kplus.EnvValue.fromValue(props.site),
      GRID_OPERATOR_NAMESPACE: kplus.EnvValue.fromFieldRef(kplus.EnvFieldPaths.POD_NAMESPACE),
      GRID_GOSSIP_BIND: kplus.EnvValue.fromValue(`0.0.0.0:${this.gossipPort}`),
      GRID_ADMIN_ADDRESS: kplus.EnvValue.fromValue(`0.0.0.0:${this.adminPort}`),
    };
    if (props.gossipAdvertiseAddress !== undefined)
      env['GRID_GOSSIP_ADVERTISE'] = kplus.EnvValue.fromValue(props.gossipAdvertiseAddress);
    if (this.metricsScraperName !== undefined)
      env['GRID_METRICS_SCRAPER_SERVICE_ACCOUNT'] = kplus.EnvValue.fromValue(this.metricsScraperName);
    if (props.gatewayAddress !== undefined)
      env['GRID_GATEWAY_ADDRESS'] = kplus.EnvValue.fromValue(props.gatewayAddress);
    // The opt-in listeners add nothing unless their props are set. The enrollment Secrets (the grid CA key among
    // them) are mounted into this, the operator's only container. RBAC needs nothing new: the redeem path reads
    // SiteInvites through the cluster-wide grid read rule and its token Secrets through the inviteSecrets rule.
    const listeners = renderListeners(this, props);
    Object.assign(env, listeners.env);
    const dashboard = renderDashboard(this, props.dashboard);
    Object.assign(env, dashboard.env);
    const tmp = tmpVolume(this);
    this.deployment.addContainer({
      name: 'gossip-operator',
      image: this.image,
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      command: daemonCommand('gossip-operator'),
      envVariables: env,
      ports: [
        { number: this.gossipPort, name: 'gossip-udp', protocol: kplus.Protocol.UDP },
        { number: this.gossipPort, name: 'gossip-tcp', protocol: kplus.Protocol.TCP },
        { number: this.adminPort, name: 'admin' },
        ...listeners.containerPorts,
      ],
      securityContext: CONTAINER_SECURITY,
      resources: props.resources ?? resources(100, 128, 1000, 512),
      ...healthProbes(this.adminPort, '/livez', '/readyz'),
      volumeMounts: [{ path: '/tmp', volume: tmp }, ...listeners.volumeMounts, ...dashboard.volumeMounts],
    });

    this.service = new kplus.Service(this, 'Service', {
      metadata: { name: this.name, namespace: this.namespace, labels },
      type: props.serviceType ?? kplus.ServiceType.CLUSTER_IP,
      selector: kplus.Pods.select(this, 'Pods', { labels: this.selectorLabels }),
      ports: [
        { name: 'gossip-udp', port: this.gossipPort, targetPort: this.gossipPort, protocol: kplus.Protocol.UDP },
        { name: 'gossip-tcp', port: this.gossipPort, targetPort: this.gossipPort, protocol: kplus.Protocol.TCP },
        { name: 'metrics', port: this.adminPort, targetPort: this.adminPort },
        ...listeners.servicePorts,
      ],
    });

    this.publicService =
      props.publicService === undefined ? undefined : this.renderPublicService(props, props.publicService, labels);

    const { peerSignals, gatewayAgeIngest, enrollment } = props;
    this.networkPolicy =
      peerSignals === undefined && gatewayAgeIngest === undefined && enrollment === undefined
        ? undefined
        : operatorNetworkPolicy(this, 'NetworkPolicy', {
            name: this.name,
            namespace: this.namespace,
            labels,
            operatorLabels: this.selectorLabels,
            gossipPort: this.gossipPort,
            adminPort: this.adminPort,
            signals:
              peerSignals === undefined
                ? undefined
                : { port: peerSignals.port ?? DEFAULT_SIGNALS_PORT, from: peerSignals.from },
            gatewayAge:
              gatewayAgeIngest === undefined
                ? undefined
                : { port: gatewayAgeIngest.port ?? DEFAULT_GATEWAY_AGE_PORT, reporters: gatewayAgeIngest.gateways },
            enrollment:
              enrollment === undefined
                ? undefined
                : { port: enrollment.port ?? DEFAULT_ENROLLMENT_PORT, from: enrollment.from },
          });
  }

  /** Exports the operator's traces (service.name gossip-operator) as `telemetry` says. */
  enableTracing(telemetry: SiteTelemetry): void {
    checkTelemetry(this, telemetry);
    for (const container of this.deployment.containers)
      instrumentContainer(container, telemetry, 'gossip-operator', this.name);
  }

  private publicPortNames(props: GossipOperatorProps): OperatorPortName[] {
    return [
      'gossip',
      ...(props.peerSignals === undefined ? [] : ['signals' as const]),
      ...(props.enrollment === undefined ? [] : ['enrollment' as const]),
    ];
  }

  private renderPublicService(
    props: GossipOperatorProps,
    exposure: ServiceExposure<OperatorPortName>,
    labels: Record<string, string>,
  ): kplus.Service {
    const ports: (kplus.ServicePort & { exposureName: OperatorPortName })[] = [
      {
        name: 'gossip-udp',
        port: this.gossipPort,
        targetPort: this.gossipPort,
        protocol: kplus.Protocol.UDP,
        exposureName: 'gossip',
      },
      {
        name: 'gossip-tcp',
        port: this.gossipPort,
        targetPort: this.gossipPort,
        protocol: kplus.Protocol.TCP,
        exposureName: 'gossip',
      },
    ];
    if (props.peerSignals !== undefined) {
      const port = props.peerSignals.port ?? DEFAULT_SIGNALS_PORT;
      ports.push({ name: 'signals', port, targetPort: port, exposureName: 'signals' });
    }
    if (props.enrollment !== undefined) {
      const port = props.enrollment.port ?? DEFAULT_ENROLLMENT_PORT;
      ports.push({ name: 'enrollment', port, targetPort: port, exposureName: 'enrollment' });
    }
    const service = new kplus.Service(this, 'PublicService', {
      metadata: {
        name: `${this.name}-public`,
        namespace: this.namespace,
        labels,
        ...(exposure.annotations === undefined ? {} : { annotations: { ...exposure.annotations } }),
      },
      type: kplusServiceType(exposure.type),
      selector: kplus.Pods.select(this, 'PublicPods', { labels: this.selectorLabels }),
      ports: exposedPorts(exposure, ports),
      ...(exposure.loadBalancerSourceRanges === undefined
        ? {}
        : { loadBalancerSourceRanges: [...exposure.loadBalancerSourceRanges] }),
    });
    applyExposureExtras(service, exposure);
    return service;
  }
}
