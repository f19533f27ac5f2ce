// Builds each listener's filter pipeline from config and runs it: filters in order, the load balancer last. A
// connect failure (no request byte reached the upstream) is retried once: on the route's next viable candidate
// when the route filter offers one, else on another endpoint of the same cluster.
import type { FilterConfig } from '../../schemas/generated/gateway-config.ts';
import type { ResolvedListener } from './config.ts';
import type { Filter, GatewayRequest } from './context.ts';
import { UpstreamConnectError, upstreamUnreachable } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { OverlayStore } from './overlay-store.ts';
import { createCallerAuth } from './filters/caller-auth.ts';
import { createCredentialInject } from './filters/credential-inject.ts';
import type { GatewayFiles } from './gateway-files.ts';
import { createUsageMeter } from './filters/usage-meter.ts';
import { createBudgetEnforce } from './filters/budget-enforce.ts';
import type { BudgetView } from './operator-reporter.ts';
import type { KeyQuota } from './usage/key-quota.ts';
import type { SpendLedger } from './usage/spend-ledger.ts';
import type { UsageMetrics } from './usage/usage-metrics.ts';
import { createIntelligentRoute } from './filters/intelligent-route.ts';
import { createGridSiteRoute } from './filters/grid-site-route.ts';
import type { SiteRouteMetrics } from './site-route/metrics.ts';
import type { SiteView } from './site-route/site-view.ts';
import type { LoadBalancer } from './filters/load-balancer.ts';
import type { CandidateLoad } from './routing/candidate-load.ts';
import { createPeerIdentityTrust } from './filters/peer-identity-trust.ts';
import { createProviderRoute } from './filters/provider-route.ts';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MODEL_HEADER, createRequestParser } from './filters/request-parser.ts';
import type { Logger } from '../shared/log.ts';
import type { AgentMetrics } from './agents/agent-metrics.ts';
import { createA2aRoute } from './filters/a2a-route.ts';
import { createAgentProviderRoute } from './filters/agent-provider-route.ts';
import { createMcpRoute, type PathRouteFilter } from './filters/mcp-route.ts';

export interface Pipeline {
  readonly filters: readonly Filter[];
  /** Index of the route filter (intelligent_route, grid_site_route or provider_route); -1 when there is none. */
  readonly routeIndex: number;
  listModels(): readonly string[] | null;
  /**
   * The agent protocols' pipelines (mcp_route, a2a_route, agent_provider_route), by path prefix: the filters before
   * the route that authorize a caller or a peer, the agent route, then credential_inject and load_balancer. The
   * inference-only filters (the request parser, usage_meter) have no part in them.
   */
  readonly pathRoutes: readonly PathRoute[];
}

export interface PathRoute {
  readonly prefix: string;
  readonly pipeline: Pipeline;
}

/** Filters that authorize the caller (consumer) or the peer (provider), and so run first on every path. */
const AUTHORIZING_FILTERS = new Set(['caller_auth', 'budget_enforce', 'peer_identity_trust']);

export interface PipelineDeps {
  logger: Logger;
  /** Where the caller keys and credential files are registered; the gateway reads them before it listens. */
  files: GatewayFiles;
  loadBalancer: LoadBalancer;
  overlay: OverlayStore | undefined;
  usage: { metrics: UsageMetrics; ledger: SpendLedger; quota: KeyQuota; budgets: BudgetView };
  /** The serving config and site signals grid_site_route chooses from; (GRID_SERVING_CONFIG); required when a listener runs it. */
  siteView?: SiteView | undefined;
  siteRouteMetrics?: SiteRouteMetrics;
  /** The gateway's own in-flight requests per candidate, for route filters with local_load. */
  candidateLoad?: CandidateLoad;
  /** Random source of the route filters' draws; Math.random unless a test seeds it. */
  random?: () => number;
  /** The overlay store of mcp_route's overlay_file (the same store as intelligent_route's when they name one file). */
  mcpOverlay?: OverlayStore | undefined;
  /** The gateway's agent metrics (agents/agent-metrics.ts); required when a listener runs an agent route. */
  agentMetrics?: AgentMetrics;
}

export function buildPipeline(listener: ResolvedListener, deps: PipelineDeps): Pipeline {
  const configs = listener.filters;
  const bodyField = configs.find(
    (f): f is Extract<FilterConfig, { filter: 'json_body_field' }> => f.filter === 'json_body_field',
  );
  const routeConfig = configs.find(
    (f) => f.filter === 'intelligent_route' || f.filter === 'provider_route' || f.filter === 'grid_site_route',
  ) as Extract<FilterConfig, { filter: 'intelligent_route' | 'provider_route' | 'grid_site_route' }> | undefined;
  const modelHeader = bodyField?.header ?? routeConfig?.model_header ?? DEFAULT_MODEL_HEADER;
  const parser = createRequestParser({
    field: bodyField?.field ?? 'model',
    header: modelHeader,
    maxBodyBytes: listener.listener.max_body_bytes ?? DEFAULT_MAX_BODY_BYTES,
  });
  const filters: Filter[] = [];
  let routeIndex = -1;
  let listModels: () => readonly string[] | null = () => null;
  for (const config of configs) {
    switch (config.filter) {
      case 'json_body_field':
      case 'openai_responses_format':
        // The parser runs once: before intelligent_route, or inside provider_route after the hop checks.
        break;
      case 'intelligent_route': {
        if (deps.overlay === undefined) throw new Error('intelligent_route needs an overlay store');
        filters.push(parser);
        const route = createIntelligentRoute({
          config,
          store: deps.overlay,
          isClusterAvailable: deps.loadBalancer.isClusterAvailable,
          modelHeader,
          ...(deps.candidateLoad === undefined ? {} : { load: deps.candidateLoad }),
          ...(deps.random === undefined ? {} : { random: deps.random }),
        });
        routeIndex = filters.length;
        filters.push(route);
        listModels = route.listModels;
        break;
      }
      case 'grid_site_route': {
        if (deps.siteView === undefined)
          throw new Error('grid_site_route needs a site view (the serving config and site signals)');
        filters.push(parser);
        const route = createGridSiteRoute({
          config,
          view: deps.siteView,
          isClusterAvailable: deps.loadBalancer.isClusterAvailable,
          modelHeader,
          ...(deps.siteRouteMetrics === undefined ? {} : { metrics: deps.siteRouteMetrics }),
          ...(deps.candidateLoad === undefined ? {} : { load: deps.candidateLoad }),
          ...(deps.random === undefined ? {} : { random: deps.random }),
        });
        routeIndex = filters.length;
        filters.push(route);
        listModels = route.listModels;
        break;
      }
      case 'provider_route': {
        const route = createProviderRoute(config, parser);
        routeIndex = filters.length;
        filters.push(route);
        listModels = route.listModels;
        break;
      }
      case 'caller_auth':
        filters.push(createCallerAuth(config, deps.files));
        break;
      case 'usage_meter':
        filters.push(createUsageMeter(config, deps.usage.metrics, deps.usage.ledger, deps.usage.quota));
        break;
      case 'budget_enforce':
        filters.push(createBudgetEnforce(config, deps.usage.budgets, deps.usage.quota));
        break;
      case 'peer_identity_trust':
        filters.push(createPeerIdentityTrust(config));
        break;
      case 'credential_inject':
        filters.push(createCredentialInject(config, deps.files, deps.logger));
        break;
      case 'load_balancer':
        filters.push(deps.loadBalancer);
        break;
      case 'mcp_route':
      case 'a2a_route':
      case 'agent_provider_route':
        // Their own pipelines, by path prefix (buildPathRoutes).
        break;
    }
  }
  return { filters, routeIndex, listModels: () => listModels(), pathRoutes: buildPathRoutes(configs, filters, deps) };
}

function buildPathRoutes(configs: readonly FilterConfig[], built: readonly Filter[], deps: PipelineDeps): PathRoute[] {
  const routes: PathRouteFilter[] = [];
  for (const config of configs) {
    if (config.filter !== 'mcp_route' && config.filter !== 'a2a_route' && config.filter !== 'agent_provider_route')
      continue;
    if (deps.agentMetrics === undefined) throw new Error(`${config.filter} needs the gateway's agent metrics`);
    if (config.filter === 'mcp_route') {
      if (deps.mcpOverlay === undefined) throw new Error('mcp_route needs an overlay store');
      routes.push(
        createMcpRoute({
          config,
          store: deps.mcpOverlay,
          metrics: deps.agentMetrics,
          isClusterAvailable: deps.loadBalancer.isClusterAvailable,
        }),
      );
    } else if (config.filter === 'a2a_route') {
      routes.push(
        createA2aRoute({
          config,
          metrics: deps.agentMetrics,
          isClusterAvailable: deps.loadBalancer.isClusterAvailable,
        }),
      );
    } else {
      const clusters = deps.loadBalancer.clusters;
      routes.push(
        createAgentProviderRoute({
          config,
          metrics: deps.agentMetrics,
          endpointCount: (cluster) => clusters.get(cluster)?.endpoints.length ?? 0,
        }),
      );
    }
  }
  // The same filter objects as the inference pipeline's (one credential_inject, one load balancer per listener).
  const before = built.filter((f) => AUTHORIZING_FILTERS.has(f.name));
  const after = built.filter((f) => f.name === 'credential_inject' || f.name === 'load_balancer');
  return routes.flatMap((route) => {
    const pipeline: Pipeline = {
      filters: [...before, route, ...after],
      routeIndex: before.length,
      listModels: () => null,
      pathRoutes: [],
    };
    return route.prefixes.map((prefix) => ({ prefix, pipeline }));
  });
}

/**
 * Runs the filters in order. Synchronous filters run back to back without a Promise or an await; the first one that
 * returns a Promise (the body read, the upstream call) hands the rest over to it. A connect failure is retried once;
 * what is left goes to `fail`. One reaction on the filters' Promise and no Promise returned: the retry and its
 * failure hang off the rejection, so a request that succeeds pays no second chained Promise (bench:gateway-instructions,
 * two runs: 6 300 and 13 200 instructions per request).
 */
export function runPipeline(
  pipeline: Pipeline,
  request: GatewayRequest,
  metrics: GatewayMetrics,
  loadBalancer: LoadBalancer,
  fail: (error: unknown) => void,
): void {
  let pending: void | Promise<void>;
  try {
    pending = runFilters(pipeline.filters, request, 0);
  } catch (error) {
    retry(error, pipeline, request, metrics, loadBalancer).catch(fail);
    return;
  }
  pending?.then(undefined, (error: unknown) => retry(error, pipeline, request, metrics, loadBalancer).catch(fail));
}

/** Runs filters[start..]; returns a Promise only once a filter returns one. */
function runFilters(filters: readonly Filter[], request: GatewayRequest, start: number): void | Promise<void> {
  for (let i = start; i < filters.length; i++) {
    const pending = filters[i]!.apply(request);
    if (pending !== undefined)
      return i + 1 === filters.length ? pending : pending.then(() => runFilters(filters, request, i + 1));
  }
}

async function retry(
  error: unknown,
  pipeline: Pipeline,
  request: GatewayRequest,
  metrics: GatewayMetrics,
  loadBalancer: LoadBalancer,
): Promise<void> {
  if (!(error instanceof UpstreamConnectError)) throw error;
  const unreachable = (e: UpstreamConnectError): Error =>
    upstreamUnreachable(`could not connect to cluster "${e.cluster}" (${e.causeCode})`);
  if (request.callerGone) throw unreachable(error);
  let start: number;
  if (request.failover?.(request) === true) {
    start = pipeline.routeIndex + 1;
  } else if (loadBalancer.isClusterAvailable(error.cluster)) {
    start = pipeline.filters.length - 1;
  } else {
    throw unreachable(error);
  }
  metrics.retries.inc({ role: metrics.role, cluster: error.cluster });
  try {
    await runFilters(pipeline.filters, request, start);
  } catch (second) {
    throw second instanceof UpstreamConnectError ? unreachable(second) : second;
  }
}
