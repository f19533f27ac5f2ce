import type {
  ClusterConfig,
  FilterConfig,
  GatewayConfig,
  GridSiteRouteFilter,
  LocalLoad,
  UpstreamTlsConfig,
  UsagePrice,
} from '../schemas/generated/gateway-config.ts';
import type { ClusterEndpoint, ClusterTransport } from '../schemas/generated/gridnetworks.ts';
import {
  MODEL_HEADER,
  OVERLAY_FILE,
  TLS_CA_PATH,
  TLS_CERT_PATH,
  TLS_KEY_PATH,
  adminAddress,
  upstreamCaPath,
} from './gateway-paths.ts';

/**
 * One potentially routable provider cluster, local or remote, as the consumer's load_balancer sees it: the
 * GridNetwork clusterEndpoints[] entry (cluster = the candidate's cluster, address = the provider gateway serving
 * it). `transport` is the security switch and must be explicit; the construct rejects an endpoint without one.
 */
export type ConsumerUpstream = ClusterEndpoint & { readonly transport: ClusterTransport };

export interface ConsumerGatewayConfigInput {
  readonly listenerPort: number;
  readonly adminPort: number;
  readonly expectedScope: {
    readonly network: string;
    readonly gateway: string;
    readonly namespace: string;
    readonly localSite: string;
  };
  readonly upstreams: readonly ConsumerUpstream[];
  readonly reloadDebounceMs: number;
  readonly shutdownTimeoutSecs: number;
  /**
   * Caller keys file path in the pod: turns on caller_auth (first) and usage_meter (after intelligent_route), both
   * extensions Praxis AI does not have. Undefined: the Praxis AI chain of docs/contract.md §3.1, nothing else.
   */
  readonly callerKeysFile?: string;
  /** usage_meter prices per upstream cluster, from each provider's InferenceProvider.spec.cost. */
  readonly prices?: readonly UsagePrice[];
  /** usage_meter.report.url: the site operator's gateway ingest listener. */
  readonly spendReportUrl?: string;
  /** usage_meter.report.token_file: the projected ingest token (with spendReportUrl). */
  readonly spendReportTokenFile?: string;
  /** budget_enforce right after caller_auth (needs spendReportUrl). */
  readonly budgetEnforce?: {
    readonly softLimit?: number;
    readonly requestsPerMinute?: number;
    readonly tokensPerMinute?: number;
  };
  /**
   * gridServing: the consumer route is grid_site_route (site choice from the serving config and the sites' signals)
   * in place of intelligent_route, with these availability and prefix_affinity blocks. An extension Praxis AI lacks.
   */
  readonly siteRoute?: Pick<GridSiteRouteFilter, 'availability' | 'prefix_affinity'>;
  /**
   * local_load on the consumer route (intelligent_route or grid_site_route): steer by the gateway's own in-flight
   * requests. An extension key of intelligent_route, so a consumer meant for Praxis AI never sets it.
   */
  readonly localLoad?: LocalLoad['mode'];
  /** session_affinity on intelligent_route (docs/contract.md §3.1), keyed by this request header. */
  readonly sessionAffinity?: { readonly header: string; readonly ttlSecs?: number };
  /**
   * MCP tool servers (AgentToolProviders) of every site this consumer reaches: mcp_route, with a cluster
   * tool/<name> toward the provider gateway of the server's site. The overlay decides which tools callers may call.
   */
  readonly toolServers?: readonly AgentUpstream[];
  /** A2A agents (AgentToAgentProviders) this consumer's site may call: a2a_route, cluster agent/<name>. */
  readonly agents?: readonly AgentUpstream[];
}

/** A tool server or agent, and how this consumer reaches the provider gateway of its site. */
export interface AgentUpstream {
  readonly name: string;
  readonly site: string;
  readonly address: string;
  readonly transport: ClusterTransport;
}

/** The extension filters a consumer renders for the tool servers and agents it reaches. */
export const AGENT_FILTERS = ['mcp_route', 'a2a_route'] as const;
export const toolCluster = (name: string): string => `tool/${name}`;
export const agentCluster = (name: string): string => `agent/${name}`;

/** The extension filter a consumer with gridServing renders. */
export const SITE_ROUTE_FILTER = 'grid_site_route';

/** The extension filters a consumer with caller keys renders. */
export const TENANT_FILTERS = ['caller_auth', 'budget_enforce', 'usage_meter'] as const;

/** The one extension key inside a Praxis AI filter the compiler renders, for a consumer declared with localLoad. */
export const LOCAL_LOAD_KEY = 'intelligent_route/local_load';

function budgetEnforceFilter(budget: NonNullable<ConsumerGatewayConfigInput['budgetEnforce']>): FilterConfig {
  return {
    filter: 'budget_enforce',
    ...(budget.softLimit === undefined ? {} : { soft_limit: budget.softLimit }),
    ...(budget.requestsPerMinute === undefined ? {} : { requests_per_minute: budget.requestsPerMinute }),
    ...(budget.tokensPerMinute === undefined ? {} : { tokens_per_minute: budget.tokensPerMinute }),
  };
}

/** The SNI of a TLS transport: the declared one, else the host of the address (what a client would send). */
export function transportSni(upstream: ConsumerUpstream): string {
  if (upstream.transport.sni !== undefined) return upstream.transport.sni;
  const host = upstream.address.slice(0, upstream.address.lastIndexOf(':'));
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

function upstreamTls(upstream: ConsumerUpstream): UpstreamTlsConfig | undefined {
  const transport = upstream.transport;
  switch (transport.mode) {
    case 'mutual_tls':
      // The grid CA verifies the provider gateway; the site certificate is this gateway's client identity.
      return {
        ca: { ca_path: TLS_CA_PATH },
        client_cert: { cert_path: TLS_CERT_PATH, key_path: TLS_KEY_PATH },
        sni: transportSni(upstream),
        verify: true,
      };
    case 'tls':
      // No `ca` means the system trust store (Praxis AI has no `ca_system` field and denies unknown keys).
      return transport.caSecretRef === undefined
        ? { sni: transportSni(upstream), verify: true }
        : {
            ca: { ca_path: upstreamCaPath(transport.caSecretRef.name, transport.caSecretRef.key ?? 'ca.crt') },
            sni: transportSni(upstream),
            verify: true,
          };
    case 'plaintext':
      return undefined;
  }
}

/** The consumer route: intelligent_route on the overlay, or grid_site_route on the serving config (gridServing). */
function routeFilter(input: ConsumerGatewayConfigInput, hopClusters: string[]): FilterConfig {
  if (input.siteRoute !== undefined) {
    return {
      filter: 'grid_site_route',
      model_header: MODEL_HEADER,
      provider_hop_clusters: hopClusters,
      ...(input.siteRoute.availability === undefined ? {} : { availability: input.siteRoute.availability }),
      ...(input.siteRoute.prefix_affinity === undefined ? {} : { prefix_affinity: input.siteRoute.prefix_affinity }),
      ...(input.localLoad === undefined ? {} : { local_load: { mode: input.localLoad } }),
    };
  }
  return {
    filter: 'intelligent_route',
    overlay_file: OVERLAY_FILE,
    model_header: MODEL_HEADER,
    provider_hop_clusters: hopClusters,
    expected_overlay_scope: {
      network: input.expectedScope.network,
      gateway: input.expectedScope.gateway,
      namespace: input.expectedScope.namespace,
      local_site: input.expectedScope.localSite,
    },
    reload: { enabled: true, debounce_ms: input.reloadDebounceMs },
    ...(input.sessionAffinity === undefined
      ? {}
      : {
          session_affinity: {
            enabled: true,
            header: input.sessionAffinity.header,
            ...(input.sessionAffinity.ttlSecs === undefined ? {} : { ttl_secs: input.sessionAffinity.ttlSecs }),
          },
        }),
    ...(input.localLoad === undefined ? {} : { local_load: { mode: input.localLoad } }),
  };
}

/**
 * The consumer chain of docs/contract.md §3.1: request parsers → intelligent_route → load_balancer. There is no
 * credential_inject: the provider gateway makes the final call, so no credential is ever needed here.
 * Every upstream is a provider hop (it leads to a provider gateway that routes on the candidate's stable_id).
 */
export function renderConsumerGatewayConfig(input: ConsumerGatewayConfigInput): GatewayConfig {
  const byCluster = (a: { cluster: string }, b: { cluster: string }): number =>
    a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0;
  const upstreams = [...input.upstreams].sort(byCluster);
  const tools = [...(input.toolServers ?? [])].map((t) => ({ ...t, cluster: toolCluster(t.name) })).sort(byCluster);
  const agents = [...(input.agents ?? [])].map((a) => ({ ...a, cluster: agentCluster(a.name) })).sort(byCluster);
  const clusters: ClusterConfig[] = [...upstreams, ...tools, ...agents].map((upstream) => {
    const tls = upstreamTls(upstream);
    return tls === undefined
      ? { name: upstream.cluster, endpoints: [upstream.address] }
      : { name: upstream.cluster, endpoints: [upstream.address], tls };
  });
  const agentRoutes: FilterConfig[] = [
    ...(tools.length === 0
      ? []
      : [
          {
            filter: 'mcp_route',
            overlay_file: OVERLAY_FILE,
            expected_overlay_scope: {
              network: input.expectedScope.network,
              gateway: input.expectedScope.gateway,
              namespace: input.expectedScope.namespace,
              local_site: input.expectedScope.localSite,
            },
            reload: { enabled: true, debounce_ms: input.reloadDebounceMs },
            provider_hop_clusters: tools.map((t) => t.cluster),
          } satisfies FilterConfig,
        ]),
    ...(agents.length === 0
      ? []
      : [
          {
            filter: 'a2a_route',
            agents: agents.map((a) => ({ name: a.name, cluster: a.cluster, site: a.site })),
          } satisfies FilterConfig,
        ]),
  ];
  return {
    listeners: [{ name: 'consumer', address: `0.0.0.0:${input.listenerPort}`, filter_chains: ['main'] }],
    filter_chains: [
      {
        name: 'main',
        filters: [
          ...(input.callerKeysFile === undefined
            ? []
            : [{ filter: 'caller_auth', keys_file: input.callerKeysFile } satisfies FilterConfig]),
          ...(input.callerKeysFile === undefined || input.budgetEnforce === undefined
            ? []
            : [budgetEnforceFilter(input.budgetEnforce)]),
          { filter: 'json_body_field', field: 'model', header: MODEL_HEADER },
          { filter: 'openai_responses_format' },
          routeFilter(
            input,
            upstreams.map((upstream) => upstream.cluster),
          ),
          ...agentRoutes,
          ...(input.callerKeysFile === undefined
            ? []
            : [
                {
                  filter: 'usage_meter',
                  prices: [...(input.prices ?? [])].sort((a, b) =>
                    a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0,
                  ),
                  ...(input.spendReportUrl === undefined
                    ? {}
                    : {
                        report: {
                          url: input.spendReportUrl,
                          ...(input.spendReportTokenFile === undefined
                            ? {}
                            : { token_file: input.spendReportTokenFile }),
                        },
                      }),
                } satisfies FilterConfig,
              ]),
          { filter: 'load_balancer', clusters },
        ],
      },
    ],
    // 0.0.0.0 so the kubelet's probes reach /livez and /readyz; the port is not exposed by the Service.
    ...adminAddress(input.adminPort),
    shutdown_timeout_secs: input.shutdownTimeoutSecs,
  };
}
