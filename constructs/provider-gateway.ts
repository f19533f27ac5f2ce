import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import type { TrustedPeer } from '../schemas/generated/gateway-config.ts';
import { GatewayWorkload } from './gateway-workload.ts';
import { PRAXIS_DIR, credentialPath } from './gateway-paths.ts';
import { imageOf, type ImageReference } from './image-reference.ts';
import type { ListenerSources } from './operator-network-policy.ts';
import {
  AGENT_PROVIDER_FILTER,
  renderProviderGatewayConfig,
  routeCredentials,
  type AgentServerInput,
  type BackendCluster,
  type CredentialRef,
  type ProviderRouteInput,
} from './provider-gateway-config.ts';
import { GridSynthError, addIssueCheck, issueAt } from './synth-error.ts';
import { checkTelemetry, instrumentContainer, type SiteTelemetry } from './observability.ts';
import { exposureIssues, type ProviderGatewayPortName, type ServiceExposure } from './service-exposure.ts';

export interface ProviderGatewayProps {
  readonly namespace: string;
  /** The site this gateway fronts; the default attribution id. */
  readonly site: string;
  /**
   * @default 'provider-gateway' - a fixed Service name, so consumer endpoints and TLS SANs never follow a release name
   */
  readonly name?: string;
  /** @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon */
  readonly image?: ImageReference;
  /** @default 2 - every cross-site request passes through it; two replicas survive a node drain */
  readonly replicas?: number;
  /** @default 8443 - the mTLS listener */
  readonly listenerPort?: number;
  /** @default 9901 - admin (/livez, /readyz, /metrics) */
  readonly adminPort?: number;
  /**
   * Secret with ca.crt (CA that signs consumer client certificates), tls.crt and tls.key (this gateway's server identity).
   * @default '<name>-tls'
   */
  readonly tlsSecretName?: string;
  /**
   * Consumer identities allowed in (peer_identity_trust); at least one is required, the filter has no "allow all".
   */
  readonly trustedPeers: readonly TrustedPeer[];
  /** Written to x-ai-provider-attribution. @default the site name */
  readonly providerId?: string;
  /**
   * Worker threads serving the listener (`--workers`, daemons/gateway/README.md "Workers"): one per CPU the pod
   * may use. Each is a whole gateway; `/metrics` stays one view.
   * @default 1 - one thread; scale out with replicas first
   */
  readonly workers?: number;
  /** @default 100m/128Mi requested, 1 CPU/512Mi limit per worker */
  readonly resources?: kplus.ContainerResources;
  /**
   * @default ClusterIP - expose it to other sites deliberately (LoadBalancer, an ingress or a mesh gateway) and
   * declare that address as the site's gatewayEndpoint
   */
  readonly serviceType?: kplus.ServiceType;
  /**
   * How other sites reach the listener (Service type, node port, load-balancer annotations); set either this or
   * serviceType. The site's gatewayEndpoint.address must name the port it opens.
   * @default - serviceType
   */
  readonly exposure?: ServiceExposure<ProviderGatewayPortName>;
  /** @default 5 - the reference gateway's shutdown grace */
  readonly shutdownTimeoutSecs?: number;
  /** Authorized routes; more with addRoute(). @default - none (synth fails until one is added) */
  readonly routes?: readonly ProviderRouteInput[];
  /** Backend clusters; more with addBackend(). @default - none */
  readonly backends?: readonly BackendCluster[];
  /**
   * Who may scrape the admin port's /metrics besides the node's kubelet probes: the gateway's NetworkPolicy admits
   * these source CIDRs to the admin port (the admin listener binds every address with allow_public_admin).
   * @default - none: only the node reaches the admin port
   */
  readonly metricsScrapers?: ListenerSources;
  /** Extra labels for every object this construct emits. @default - none (the workload labels only) */
  readonly labels?: Record<string, string>;
}

/**
 * The provider gateway: the mTLS security boundary in front of private backends (docs/contract.md §3.2). It is the only
 * pod that mounts provider credentials, each projected at /etc/praxis/credentials/<secret>/<key>.
 */
export class ProviderGateway extends Construct {
  readonly name: string;
  readonly namespace: string;
  readonly site: string;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly replicas: number;
  readonly workers: number;
  readonly listenerPort: number;
  readonly adminPort: number;
  readonly tlsSecretName: string;
  readonly providerId: string;
  readonly shutdownTimeoutSecs: number;
  readonly trustedPeers: readonly TrustedPeer[];
  readonly workload: GatewayWorkload;
  private readonly routeList: ProviderRouteInput[] = [];
  private readonly backendList: BackendCluster[] = [];
  private readonly agentList: AgentServerInput[] = [];

  constructor(scope: Construct, id: string, props: ProviderGatewayProps) {
    super(scope, id);
    this.name = props.name ?? 'provider-gateway';
    this.namespace = props.namespace;
    this.site = props.site;
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);
    this.replicas = props.replicas ?? 2;
    this.workers = props.workers ?? 1;
    this.listenerPort = props.listenerPort ?? 8443;
    this.adminPort = props.adminPort ?? 9901;
    this.tlsSecretName = props.tlsSecretName ?? `${this.name}-tls`;
    this.providerId = props.providerId ?? props.site;
    this.shutdownTimeoutSecs = props.shutdownTimeoutSecs ?? 5;
    this.trustedPeers = [...props.trustedPeers];
    if (props.exposure !== undefined) {
      const issues = exposureIssues(this, 'exposure', props.exposure, ['listener']);
      if (props.serviceType !== undefined)
        issues.push(
          issueAt(
            this,
            'serviceType',
            'both serviceType and exposure are set',
            'keep exposure (it carries the type) and drop serviceType',
          ),
        );
      if (issues.length > 0) throw new GridSynthError(issues);
    }
    this.workload = new GatewayWorkload(this, 'Workload', {
      component: 'provider-gateway',
      name: this.name,
      namespace: this.namespace,
      labels: props.labels ?? {},
      image: this.image,
      replicas: this.replicas,
      listenerPort: this.listenerPort,
      adminPort: this.adminPort,
      metricsScrapers: props.metricsScrapers,
      tlsSecretName: this.tlsSecretName,
      workers: this.workers,
      resources: props.resources,
      serviceType: props.serviceType ?? kplus.ServiceType.CLUSTER_IP,
      ...(props.exposure === undefined ? {} : { exposure: props.exposure }),
      readsOverlay: false,
    });
    for (const backend of props.backends ?? []) this.addBackend(backend);
    for (const route of props.routes ?? []) this.addRoute(route);
    this.render();
    addIssueCheck(this, () =>
      this.routeList
        .filter((route) => !this.backendList.some((backend) => backend.name === route.backendCluster))
        .map((route) =>
          issueAt(
            this,
            `routes[candidate_id=${route.candidateId}].cluster`,
            `backend cluster ${route.backendCluster} is not declared`,
            'add the backend with addBackend() or point the route at a declared backend',
          ),
        ),
    );
  }

  get routes(): ProviderRouteInput[] {
    return [...this.routeList];
  }

  get backends(): BackendCluster[] {
    return [...this.backendList];
  }

  get agentServers(): AgentServerInput[] {
    return [...this.agentList];
  }

  /** Serves one MCP tool server or A2A agent at /mcp/<name> or /a2a/<name>, mounting its credential here only. */
  addAgentServer(server: AgentServerInput): void {
    const field = `agentServers[${server.protocol}/${server.name}]`;
    if (this.agentList.some((s) => s.protocol === server.protocol && s.name === server.name)) {
      throw new GridSynthError([
        issueAt(
          this,
          field,
          `${server.protocol} server ${server.name} is declared twice`,
          'give every tool server and agent of a site a unique name',
        ),
      ]);
    }
    if (server.credential !== undefined) this.mountCredential(field, server.credential);
    this.agentList.push(server);
    this.render();
  }

  private mountCredential(field: string, credential: CredentialRef): void {
    if (credential.namespace !== this.namespace) {
      throw new GridSynthError([
        issueAt(
          this,
          `${field}.credential.secretRef.namespace`,
          `Secret ${credential.namespace}/${credential.name} is outside the gateway namespace ${this.namespace}, so it cannot be mounted`,
          `create the credential Secret in ${this.namespace} and reference it there`,
        ),
      ]);
    }
    this.workload.projectSecret(credential.name, [
      { key: credential.key, path: credentialPath(credential.name, credential.key).slice(PRAXIS_DIR.length + 1) },
    ]);
  }

  /** Authorizes one (candidate, model) and mounts its credential, if any, into this gateway only. */
  addRoute(route: ProviderRouteInput): void {
    const field = `routes[candidate_id=${route.candidateId}]`;
    if (this.routeList.some((r) => r.candidateId === route.candidateId)) {
      throw new GridSynthError([
        issueAt(
          this,
          field,
          `candidate_id ${route.candidateId} is routed twice (model ${route.model})`,
          'each (model, site, cluster) must be declared by exactly one provider',
        ),
      ]);
    }
    if (route.credential !== undefined) this.mountCredential(field, route.credential);
    this.routeList.push(route);
    this.render();
  }

  addBackend(backend: BackendCluster): void {
    if (this.backendList.some((b) => b.name === backend.name)) {
      throw new GridSynthError([
        issueAt(
          this,
          `backends[name=${backend.name}]`,
          `backend cluster ${backend.name} is declared twice`,
          'give every backend cluster a unique name',
        ),
      ]);
    }
    this.backendList.push(backend);
    this.render();
  }

  /** Exports the gateway's traces (service.name provider-gateway) as `telemetry` says. */
  enableTracing(telemetry: SiteTelemetry): void {
    checkTelemetry(this, telemetry);
    instrumentContainer(this.workload.gatewayContainer, telemetry, 'provider-gateway', this.name);
  }

  /** The credential references this gateway mounts (sorted, distinct). */
  get credentials(): ReturnType<typeof routeCredentials> {
    return routeCredentials([...this.routeList, ...this.agentList]);
  }

  private render(): void {
    if (this.workload === undefined) return;
    this.workload.setConfig(
      renderProviderGatewayConfig({
        listenerPort: this.listenerPort,
        adminPort: this.adminPort,
        providerId: this.providerId,
        trustedPeers: this.trustedPeers,
        routes: this.routeList,
        backends: this.backendList,
        shutdownTimeoutSecs: this.shutdownTimeoutSecs,
        agentServers: this.agentList,
      }),
      this.agentList.length === 0 ? [] : [AGENT_PROVIDER_FILTER],
    );
  }
}
