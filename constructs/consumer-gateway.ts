import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import {
  AGENT_FILTERS,
  LOCAL_LOAD_KEY,
  SITE_ROUTE_FILTER,
  TENANT_FILTERS,
  renderConsumerGatewayConfig,
  type AgentUpstream,
  type ConsumerUpstream,
} from './consumer-gateway-config.ts';
import type { ClusterEndpoint } from '../schemas/generated/gridnetworks.ts';
import type { PrefixAffinity, SiteAvailability, UsagePrice } from '../schemas/generated/gateway-config.ts';
import { GatewayWorkload } from './gateway-workload.ts';
import { siteRouteProblems } from './gateway-config-schema.ts';
import { PRAXIS_DIR, SERVING_DIR, SERVING_FILE, TLS_DIR, upstreamCaPath } from './gateway-paths.ts';
import { imageOf, type ImageReference } from './image-reference.ts';
import type { ListenerSources } from './operator-network-policy.ts';
import { OverlaySync } from './overlay-sync.ts';
import type { CredentialRef } from './provider-gateway-config.ts';
import { GridSynthError, issueAt } from './synth-error.ts';
import { checkTelemetry, instrumentContainer, type SiteTelemetry } from './observability.ts';
import {
  DEFAULT_INGEST_TOKEN_SECRET,
  INGEST_TOKEN_DIR,
  INGEST_TOKEN_FILE,
  ingestTokenVolume,
} from './operator-listeners.ts';
import { Size } from 'cdk8s';

/**
 * gridServing: the operator renders this gateway's serving config, overlay-sync delivers it beside the
 * overlay, the gateway reads it from GRID_SERVING_CONFIG, polls every site's signals endpoint with its TLS identity
 * (GRID_SIGNALS_TLS_DIR: the grid CA must issue its tls.crt) and routes with grid_site_route.
 */
export interface GridServingProps {
  /** grid_site_route's blocks (the reference chart's gridServing.siteRoute). @default - every field at its default */
  readonly siteRoute?: { readonly availability?: SiteAvailability; readonly prefixAffinity?: PrefixAffinity };
  /** How often the gateway polls each site's signals endpoint, in ms (100..600000). @default 5000 */
  readonly signalsPollIntervalMs?: number;
  /** How long a site's last sample is used while its polls fail, in ms. @default - three poll intervals */
  readonly signalsStaleAfterMs?: number;
  /** Port of the serving config sidecar's health and metrics. @default 9092 */
  readonly syncHealthPort?: number;
}

/** Where the caller keys Secret is projected (beside the other Secrets of the gateway's praxis directory). */
const CALLER_KEYS_DIR = `${PRAXIS_DIR}/caller-keys`;

export interface ConsumerGatewayProps {
  /** Namespace of the gateway (and of its overlay ConfigMap). */
  readonly namespace: string;
  /** GridNetwork the gateway routes in. */
  readonly network: string;
  /** The site this gateway belongs to (the overlay's expected `local_site`). */
  readonly site: string;
  /**
   * Gateway name: Deployment, Service, GridNetwork consumerGateways[].name and the overlay ConfigMap name.
   * @default 'consumer-gateway' - a fixed Service name, so what points at it survives a redeploy (a release-generated
   * one would not)
   */
  readonly name?: string;
  /** @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon */
  readonly image?: ImageReference;
  /**
   * @default 2 - the gateway is on every request's path; two replicas survive a node drain
   */
  readonly replicas?: number;
  /** @default 8080 - the client listener */
  readonly listenerPort?: number;
  /** @default 9901 - admin (/livez, /readyz, /metrics) beside the listener, as the reference config has it */
  readonly adminPort?: number;
  /**
   * Secret with ca.crt, tls.crt and tls.key: this gateway's client identity toward provider gateways.
   * @default '<name>-tls'
   */
  readonly tlsSecretName?: string;
  /**
   * Worker threads serving the listener (`--workers`, daemons/gateway/README.md "Workers"): one per CPU the pod
   * may use. Each is a whole gateway with its own overlay snapshot; `/metrics` stays one view.
   * @default 1 - one thread; scale out with replicas first
   */
  readonly workers?: number;
  /** @default 100m/128Mi requested, 1 CPU/512Mi limit per worker - a proxy that buffers at most one request body per request */
  readonly resources?: kplus.ContainerResources;
  /** @default ClusterIP - in-cluster workloads are the clients; expose it deliberately if needed */
  readonly serviceType?: kplus.ServiceType;
  /** @default 250 - docs/contract.md §3.1 debounce of the overlay directory watch */
  readonly reloadDebounceMs?: number;
  /** @default 5 - the reference gateway's shutdown grace */
  readonly shutdownTimeoutSecs?: number;
  /**
   * Every potentially routable provider cluster (local and remote); more can be added with addUpstream().
   * @default - none
   */
  readonly upstreams?: readonly ClusterEndpoint[];
  /**
   * Provider credentials. Always rejected: the provider gateway makes the final call and is the only pod that
   * mounts a credential. The prop exists so the mistake fails at synth.
   * @default - none
   */
  readonly credentials?: readonly CredentialRef[];
  /**
   * Who may scrape the admin port's /metrics besides the node's kubelet probes: the gateway's NetworkPolicy admits
   * these source CIDRs to the admin port (the admin listener binds every address with allow_public_admin).
   * @default - none: only the node reaches the admin port
   */
  readonly metricsScrapers?: ListenerSources;
  /**
   * Caller API keys (daemons/gateway/README.md "Tenants, keys and budgets"): the Secret holding the keys file
   * `agn key mint` writes. Set, the gateway runs caller_auth (401 without a valid key; the key never leaves this
   * gateway) and usage_meter (tokens and spend per tenant, priced from `prices`); both are extensions Praxis AI lacks.
   * @default - no caller authentication (the Praxis AI chain)
   */
  readonly callerKeys?: {
    readonly secretName: string;
    /** @default 'caller-keys.json' */
    readonly key?: string;
    /**
     * budget_enforce: 429 insufficient_quota once a tenant's converged spendRatio reaches softLimit (default 1), and
     * optional per-key limits per minute. Needs the site's gatewayAgeIngest (budgets and spend go through it).
     * @default - no enforcement: spend is metered and reported only
     */
    readonly budgetEnforce?: {
      readonly softLimit?: number;
      readonly requestsPerMinute?: number;
      readonly tokensPerMinute?: number;
    };
  };
  /** The site operator's gateway ingest URL (http://HOST:PORT): usage_meter reports spend there. @default - none */
  readonly spendReportUrl?: string;
  /**
   * With spendReportUrl: the Secret (key `token`) holding the ingest token usage_meter sends, projected read-only
   * into the gateway container as a directory (usage_meter.report.token_file).
   * @default 'grid-ingest-token'
   */
  readonly ingestTokenSecret?: string;
  /** usage_meter prices per upstream cluster (InferenceProvider.spec.cost). @default - none (tokens priced at 0) */
  readonly prices?: readonly UsagePrice[];
  /** Extra labels for every object this construct emits. @default - none (the workload labels only) */
  readonly labels?: Record<string, string>;
  /**
   * Labels of the site operator's pods when it serves the fleet dashboard: the NetworkPolicy admits them to the
   * admin port and overlay-sync's health port, whose /status the dashboard reads (GridSiteStack sets it).
   * @default - none: only the node and metricsScrapers reach those ports
   */
  readonly dashboardReaderLabels?: Record<string, string>;
  /**
   * Serve with grid_site_route from the operator's serving config and the sites' signals (GridServingProps). The
   * site's GridNetwork entry must then set gridServing (GridSiteStack does) and its operator should serve peerSignals.
   * @default - no serving config: intelligent_route on the overlay
   */
  readonly gridServing?: GridServingProps;
  /**
   * Steer by the gateway's own in-flight requests, the one signal that is never old (daemons/gateway/README.md
   * "Local load"): `two_choices` renders `local_load: { mode: two_choices }` on the route filter. On intelligent_route
   * it is an extension key Praxis AI refuses, so this consumer is then this project's gateway, not a Praxis AI config.
   * @default - off: the selection modes of docs/contract.md §3.1 exactly
   */
  readonly localLoad?: 'two_choices';
  /**
   * Session affinity on intelligent_route (docs/contract.md §3.1): a request carrying a session key in `header` goes to
   * the candidate its session was first routed to while that candidate is not excluded, so a multi-turn chat stays on
   * the backend whose prefix cache holds its conversation. A Praxis AI key (session_affinity), not an extension.
   * Not with gridServing (grid_site_route pins by prompt prefix instead).
   * @default - off
   */
  readonly sessionAffinity?: { readonly header: string; readonly ttlSecs?: number };
  /**
   * MCP tool servers callers reach at /mcp/<name> (mcp_route, an extension): each through the provider gateway of
   * its site, the overlay deciding which of its tools they may call (GridSiteStack fills it from every site's
   * toolProviders).
   * @default - none: no mcp_route
   */
  readonly toolServers?: readonly AgentUpstream[];
  /**
   * A2A agents callers reach at /a2a/<name> (a2a_route, an extension), through the provider gateway of their site
   * (GridSiteStack fills it with the agentProviders whose accessPolicy admits this site).
   * @default - none: no a2a_route
   */
  readonly agents?: readonly AgentUpstream[];
}

/**
 * The consumer (edge) gateway: receives client requests, picks a candidate from the overlay and forwards it to
 * the provider gateway serving the candidate's cluster (docs/contract.md §3.1), with overlay-sync keeping the overlay
 * current.
 */
export class ConsumerGateway extends Construct {
  readonly name: string;
  readonly namespace: string;
  readonly network: string;
  readonly site: string;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly replicas: number;
  readonly workers: number;
  readonly listenerPort: number;
  readonly adminPort: number;
  readonly tlsSecretName: string;
  readonly reloadDebounceMs: number;
  readonly shutdownTimeoutSecs: number;
  readonly overlaySync: OverlaySync;
  readonly workload: GatewayWorkload;
  private readonly upstreamList: ConsumerUpstream[] = [];
  private readonly callerKeysFile: string | undefined;
  private readonly prices: readonly UsagePrice[];
  private readonly spendReportUrl: string | undefined;
  private readonly budgetEnforce: NonNullable<ConsumerGatewayProps['callerKeys']>['budgetEnforce'];
  readonly gridServing: GridServingProps | undefined;
  readonly localLoad: 'two_choices' | undefined;
  readonly sessionAffinity: ConsumerGatewayProps['sessionAffinity'];
  readonly toolServers: readonly AgentUpstream[];
  readonly agents: readonly AgentUpstream[];

  constructor(scope: Construct, id: string, props: ConsumerGatewayProps) {
    super(scope, id);
    this.name = props.name ?? 'consumer-gateway';
    this.namespace = props.namespace;
    this.network = props.network;
    this.site = props.site;
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);
    this.replicas = props.replicas ?? 2;
    this.workers = props.workers ?? 1;
    this.listenerPort = props.listenerPort ?? 8080;
    this.adminPort = props.adminPort ?? 9901;
    this.tlsSecretName = props.tlsSecretName ?? `${this.name}-tls`;
    this.reloadDebounceMs = props.reloadDebounceMs ?? 250;
    this.shutdownTimeoutSecs = props.shutdownTimeoutSecs ?? 5;
    this.prices = props.prices ?? [];
    this.spendReportUrl = props.spendReportUrl;
    this.budgetEnforce = props.callerKeys?.budgetEnforce;
    this.gridServing = props.gridServing;
    this.localLoad = props.localLoad;
    if (this.localLoad !== undefined && (this.localLoad as string) !== 'two_choices') {
      throw new GridSynthError([
        issueAt(
          this,
          'localLoad',
          `"${String(this.localLoad)}" is not a local_load mode`,
          'set localLoad: two_choices, or leave it unset (off)',
        ),
      ]);
    }
    this.sessionAffinity = props.sessionAffinity;
    this.toolServers = props.toolServers ?? [];
    this.agents = props.agents ?? [];
    if (this.sessionAffinity !== undefined) {
      if (props.gridServing !== undefined) {
        throw new GridSynthError([
          issueAt(
            this,
            'sessionAffinity',
            'session affinity is a key of intelligent_route, and gridServing routes with grid_site_route',
            'drop sessionAffinity (grid_site_route keeps a chat where its prompt is held by prefix affinity), or drop gridServing',
          ),
        ]);
      }
      const header = this.sessionAffinity.header;
      if (typeof header !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/.test(header)) {
        throw new GridSynthError([
          issueAt(
            this,
            'sessionAffinity.header',
            `${JSON.stringify(header)} is not an HTTP header name`,
            'name a header such as x-session-id',
          ),
        ]);
      }
      const ttl = this.sessionAffinity.ttlSecs;
      if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 1 || ttl > 86_400)) {
        throw new GridSynthError([
          issueAt(
            this,
            'sessionAffinity.ttlSecs',
            `${ttl} is not a whole number of seconds from 1 to 86400`,
            'leave it unset: 3600 s',
          ),
        ]);
      }
    }
    const interval = props.gridServing?.signalsPollIntervalMs;
    if (interval !== undefined && (!Number.isInteger(interval) || interval < 100 || interval > 600_000)) {
      throw new GridSynthError([
        issueAt(
          this,
          'gridServing.signalsPollIntervalMs',
          `${interval} is not a whole number of milliseconds from 100 to 600000`,
          'poll every 5000 ms (the default) unless sites change faster',
        ),
      ]);
    }
    const siteRoute = props.gridServing?.siteRoute;
    const blockProblems =
      siteRoute === undefined
        ? []
        : siteRouteProblems({
            filter: 'grid_site_route',
            availability: siteRoute.availability ?? {},
            prefix_affinity: siteRoute.prefixAffinity ?? {},
          });
    if (blockProblems.length > 0) {
      throw new GridSynthError(
        blockProblems.map((p) =>
          issueAt(
            this,
            `gridServing.siteRoute${p.pointer.replace('/prefix_affinity', '.prefixAffinity').replace('/availability', '.availability').replaceAll('/', '.')}`,
            p.message,
            'see the availability and prefix_affinity tables in schemas/gateway/gateway-config.schema.json (GridSiteRouteFilter)',
          ),
        ),
      );
    }
    const stale = props.gridServing?.signalsStaleAfterMs;
    if (stale !== undefined && (!Number.isInteger(stale) || stale < 100 || stale > 3_600_000)) {
      throw new GridSynthError([
        issueAt(
          this,
          'gridServing.signalsStaleAfterMs',
          `${stale} is not a whole number of milliseconds from 100 to 3600000`,
          'leave it unset: three poll intervals',
        ),
      ]);
    }
    if (this.budgetEnforce !== undefined && this.spendReportUrl === undefined) {
      throw new GridSynthError([
        issueAt(
          this,
          'callerKeys.budgetEnforce',
          'budget enforcement needs the converged budgets, which come from the site operator',
          "declare the site's gatewayAgeIngest (the listener spend reports and budgets go through)",
        ),
      ]);
    }
    if (
      this.workers > 1 &&
      (this.budgetEnforce?.requestsPerMinute !== undefined || this.budgetEnforce?.tokensPerMinute !== undefined)
    ) {
      throw new GridSynthError([
        issueAt(
          this,
          'workers',
          `per-key limits are counted in each worker's memory, so ${this.workers} workers would let a key through up to ${this.workers} times its limit (the gateway refuses this too)`,
          'keep workers at 1 and scale with replicas, or drop callerKeys.budgetEnforce.requestsPerMinute/tokensPerMinute',
        ),
      ]);
    }
    const keysKey = props.callerKeys?.key ?? 'caller-keys.json';
    this.callerKeysFile = props.callerKeys === undefined ? undefined : `${CALLER_KEYS_DIR}/${keysKey}`;
    const first = props.credentials?.[0];
    if (first !== undefined) this.mountCredential(first);

    const labels = props.labels ?? {};
    this.overlaySync = new OverlaySync(this, 'OverlaySync', {
      namespace: this.namespace,
      network: this.network,
      gateway: this.name,
      localSite: this.site,
      image: this.imageReference,
      labels,
      ...(props.gridServing !== undefined
        ? {
            serving: true,
            ...(props.gridServing.syncHealthPort !== undefined
              ? { servingHealthPort: props.gridServing.syncHealthPort }
              : {}),
          }
        : {}),
    });
    this.workload = new GatewayWorkload(this, 'Workload', {
      component: 'consumer-gateway',
      name: this.name,
      namespace: this.namespace,
      labels,
      image: this.image,
      replicas: this.replicas,
      listenerPort: this.listenerPort,
      adminPort: this.adminPort,
      metricsScrapers: props.metricsScrapers,
      sidecarPorts: [
        this.overlaySync.healthPort,
        ...(props.gridServing !== undefined ? [this.overlaySync.servingHealthPort] : []),
      ],
      tlsSecretName: this.tlsSecretName,
      workers: this.workers,
      resources: props.resources,
      serviceType: props.serviceType ?? kplus.ServiceType.CLUSTER_IP,
      serviceAccount: this.overlaySync.serviceAccount,
      readsOverlay: true,
      ...(props.dashboardReaderLabels !== undefined
        ? {
            dashboardReader: {
              podLabels: props.dashboardReaderLabels,
              ports: [this.adminPort, this.overlaySync.healthPort],
            },
          }
        : {}),
    });
    const overlayVolume = this.workload.overlayVolume;
    if (overlayVolume === undefined) throw new Error('consumer gateway workload has no overlay volume');
    this.overlaySync.attachTo(this.workload.deployment, overlayVolume, this.workload.tmp);
    if (props.gridServing !== undefined) this.attachServing(props.gridServing);
    if (this.spendReportUrl !== undefined && props.callerKeys !== undefined) {
      // The ingest token: only the gateway container reads it (not the overlay-sync sidecars).
      const token = ingestTokenVolume(this, 'IngestToken', props.ingestTokenSecret ?? DEFAULT_INGEST_TOKEN_SECRET);
      this.workload.gatewayContainer.mount(INGEST_TOKEN_DIR, token, { readOnly: true });
    }
    if (props.callerKeys !== undefined) {
      this.workload.projectSecret(props.callerKeys.secretName, [
        { key: keysKey, path: `${CALLER_KEYS_DIR}/${keysKey}`.slice(PRAXIS_DIR.length + 1) },
      ]);
    }
    for (const upstream of props.upstreams ?? []) this.addUpstream(upstream);
    this.render();
  }

  /** The serving config's emptyDir, its sync containers, and the gateway's GRID_SERVING_CONFIG environment. */
  private attachServing(serving: GridServingProps): void {
    const volume = kplus.Volume.fromEmptyDir(this, 'Serving', 'grid-serving', { sizeLimit: Size.mebibytes(16) });
    this.overlaySync.attachServingTo(this.workload.deployment, volume, this.workload.tmp);
    const gateway = this.workload.gatewayContainer;
    gateway.mount(SERVING_DIR, volume, { readOnly: true });
    gateway.env.addVariable('GRID_SERVING_CONFIG', kplus.EnvValue.fromValue(SERVING_FILE));
    // The TLS Secret's client identity (gateway-paths.ts TLS_KEYS): what the sites' signals endpoints trust.
    gateway.env.addVariable('GRID_SIGNALS_TLS_DIR', kplus.EnvValue.fromValue(TLS_DIR));
    if (serving.signalsPollIntervalMs !== undefined)
      gateway.env.addVariable(
        'GRID_SIGNALS_POLL_INTERVAL_MS',
        kplus.EnvValue.fromValue(String(serving.signalsPollIntervalMs)),
      );
    if (serving.signalsStaleAfterMs !== undefined)
      gateway.env.addVariable(
        'GRID_SIGNALS_STALE_AFTER_MS',
        kplus.EnvValue.fromValue(String(serving.signalsStaleAfterMs)),
      );
  }

  /**
   * Exports the traces of the gateway (service.name consumer-gateway) and of its overlay-sync containers
   * (overlay-sync) as `telemetry` says.
   */
  enableTracing(telemetry: SiteTelemetry): void {
    checkTelemetry(this, telemetry);
    instrumentContainer(this.workload.gatewayContainer, telemetry, 'consumer-gateway', this.name);
    this.overlaySync.enableTracing(telemetry);
  }

  /** The upstreams in config order (a copy). */
  get upstreams(): ConsumerUpstream[] {
    return [...this.upstreamList];
  }

  /**
   * Adds a provider cluster this gateway may route to. The transport must be explicit (mutual_tls toward
   * provider gateways); a `tls` CA Secret is projected into the pod.
   */
  addUpstream(endpoint: ClusterEndpoint): void {
    const field = `upstreams[cluster=${endpoint.cluster}]`;
    const transport = endpoint.transport;
    if (transport === undefined) {
      throw new GridSynthError([
        issueAt(
          this,
          `${field}.transport`,
          `endpoint ${endpoint.address} has no transport`,
          'set transport.mode to mutual_tls (provider gateways), tls (verified server TLS) or plaintext (explicitly unencrypted)',
        ),
      ]);
    }
    if (this.upstreamList.some((u) => u.cluster === endpoint.cluster)) {
      throw new GridSynthError([
        issueAt(
          this,
          field,
          `cluster ${endpoint.cluster} is declared twice`,
          'declare each candidate cluster once; two providers that share a cluster need distinct routingClusterRef values',
        ),
      ]);
    }
    if (transport.caSecretRef !== undefined) {
      const key = transport.caSecretRef.key ?? 'ca.crt';
      this.workload.projectSecret(transport.caSecretRef.name, [
        { key, path: upstreamCaPath(transport.caSecretRef.name, key).slice(PRAXIS_DIR.length + 1) },
      ]);
    }
    this.upstreamList.push({ ...endpoint, transport });
    this.render();
  }

  /** Always throws: credentials are mounted only on the provider gateway that makes the final call. */
  mountCredential(credential: CredentialRef): never {
    throw new GridSynthError([
      issueAt(
        this,
        'credentials',
        `a consumer gateway never mounts provider credentials (got Secret ${credential.namespace}/${credential.name})`,
        'declare the credential on the InferenceProvider (spec.auth.secretRef); the provider gateway of its site injects it',
      ),
    ]);
  }

  private render(): void {
    if (this.workload === undefined) return;
    this.workload.setConfig(
      renderConsumerGatewayConfig({
        listenerPort: this.listenerPort,
        adminPort: this.adminPort,
        expectedScope: { network: this.network, gateway: this.name, namespace: this.namespace, localSite: this.site },
        upstreams: this.upstreamList,
        reloadDebounceMs: this.reloadDebounceMs,
        shutdownTimeoutSecs: this.shutdownTimeoutSecs,
        ...(this.localLoad === undefined ? {} : { localLoad: this.localLoad }),
        ...(this.sessionAffinity === undefined ? {} : { sessionAffinity: this.sessionAffinity }),
        ...(this.gridServing === undefined
          ? {}
          : {
              siteRoute: {
                ...(this.gridServing.siteRoute?.availability === undefined
                  ? {}
                  : { availability: this.gridServing.siteRoute.availability }),
                ...(this.gridServing.siteRoute?.prefixAffinity === undefined
                  ? {}
                  : { prefix_affinity: this.gridServing.siteRoute.prefixAffinity }),
              },
            }),
        ...(this.callerKeysFile === undefined
          ? {}
          : {
              callerKeysFile: this.callerKeysFile,
              prices: this.prices,
              ...(this.spendReportUrl === undefined
                ? {}
                : { spendReportUrl: this.spendReportUrl, spendReportTokenFile: INGEST_TOKEN_FILE }),
              ...(this.budgetEnforce === undefined ? {} : { budgetEnforce: this.budgetEnforce }),
            }),
        toolServers: this.toolServers,
        agents: this.agents,
      }),
      [
        ...(this.toolServers.length === 0 ? [] : [AGENT_FILTERS[0]]),
        ...(this.agents.length === 0 ? [] : [AGENT_FILTERS[1]]),
        ...(this.gridServing === undefined ? [] : [SITE_ROUTE_FILTER]),
        ...(this.callerKeysFile === undefined ? [] : TENANT_FILTERS),
        ...(this.localLoad === undefined || this.gridServing !== undefined ? [] : [LOCAL_LOAD_KEY]),
      ],
    );
  }
}
