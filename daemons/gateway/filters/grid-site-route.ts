// grid_site_route (consumer of a gateway serving gridServing; reference praxis-proxy/grid docs/site-selection.md and
// docs/architecture/prefix-affinity.md): chooses the site for each request from the SiteView, then the cluster of
// that site's serving entry, and answers x-grid-site / x-grid-backend. The decision is SiteRouter's; this shell reads
// the request (model, prompt keys, stored-state ids), applies the decision to it, and watches the answer (confirms or
// drops prompt blocks, tags stored ids with the site).
import { stableId } from '../../../schemas/fnv1a.ts';
import type { GridSiteRouteFilter } from '../../../schemas/generated/gateway-config.ts';
import { GatewayError, badRequest } from '../errors.ts';
import {
  ROUTING_CANDIDATE_HEADER,
  ROUTING_REQUEST_ID_HEADER,
  ROUTING_REVISION_HEADER,
  chainObservers,
  stripPrefixedHeaders,
} from '../context.ts';
import type { Filter, GatewayRequest, ResponseObserver } from '../context.ts';
import { applyHeaderAllowlist, headerAllowlist } from './header-policy.ts';
import type { SiteRouteMetrics } from '../site-route/metrics.ts';
import { promptKeys } from '../site-route/prefix-keys.ts';
import { SiteRouter } from '../site-route/site-router.ts';
import type { CandidateLoad } from '../routing/candidate-load.ts';
import type { Decision, Refusal } from '../site-route/site-router.ts';
import { IdTagger, PinConflict, pinOf } from '../site-route/stored-state.ts';
import type { ServingEntry, SiteView } from '../site-route/site-view.ts';

export const RESPONSE_GRID_SITE_HEADER = 'x-grid-site';
export const RESPONSE_GRID_BACKEND_HEADER = 'x-grid-backend';

const REVISION = /^[0-9a-f]{64}$/;
/** Paths whose answers carry stored response or conversation ids. */
/** One request's site choice: what it was decided from and where it is now (a failover or the observer reads it). */
interface SiteRouting {
  readonly model: string | undefined;
  readonly keys: readonly string[] | undefined;
  current: ServingEntry;
}

const STORED_STATE_PATH = /^\/v1\/(responses|conversations)(\/|$)/;

export interface GridSiteRouteOptions {
  config: GridSiteRouteFilter;
  view: SiteView;
  isClusterAvailable(cluster: string): boolean;
  /** Header the request parser wrote the model into: kept on a provider hop. */
  modelHeader: string;
  metrics?: SiteRouteMetrics;
  /** The gateway's own in-flight requests per cluster; counted and read only with config.local_load. */
  load?: CandidateLoad;
  nowMs?: () => number;
  random?: () => number;
}

export interface GridSiteRoute extends Filter {
  readonly router: SiteRouter;
  listModels(): readonly string[];
}

/** The body fields stored-state pinning reads (pinOf), as they appear in JSON, and the escape that could spell them. */
const STORED_STATE_FIELDS = [Buffer.from('"previous_response_id"'), Buffer.from('"conversation"')];
const UNICODE_ESCAPE = Buffer.from('\\u');

/**
 * Whether a body may name stored state: a byte search, so the common request (a chat completion with prefix
 * affinity off) is not parsed whole here. A key written with \u escapes could spell a field without these bytes, so
 * any \u escape counts as "may".
 */
function mayNameStoredState(body: Buffer | null): boolean {
  if (body === null || body.length === 0) return false;
  return body.includes(UNICODE_ESCAPE) || STORED_STATE_FIELDS.some((field) => body.includes(field));
}

function jsonBody(request: GatewayRequest): Record<string, unknown> | undefined {
  if (request.method !== 'POST' || request.body === null || request.body.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(request.body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    // Not JSON: no prompt keys and no stored-state ids; the backend answers the body as it sees fit.
    return undefined;
  }
}

export function createGridSiteRoute(options: GridSiteRouteOptions): GridSiteRoute {
  const { config, view } = options;
  const nowMs = options.nowMs ?? Date.now;
  const router = new SiteRouter({
    view,
    config,
    isClusterAvailable: options.isClusterAvailable,
    ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
    ...(options.load === undefined ? {} : { load: options.load }),
    nowMs,
    ...(options.random === undefined ? {} : { random: options.random }),
  });
  const hopClusters = new Set(config.provider_hop_clusters ?? []);
  const hopHeaders = headerAllowlist(config.forward_request_headers);
  const modelHeader = options.modelHeader.toLowerCase();

  /** Points the request at `entry`'s site and cluster, with the hop context when that cluster is a provider hop. */
  function applyEntry(request: GatewayRequest, route: SiteRouting, entry: ServingEntry): void {
    route.current = entry;
    request.cluster = entry.cluster;
    request.routedSite = entry.site;
    request.labels.cluster = entry.cluster;
    // Counted from here until the response closes; a failover moves the count to the site it moves to.
    const load = router.load;
    if (load !== undefined) load.begin(request, load.cell(entry.cluster, entry.cluster, entry.site));
    request.res.addHeader(RESPONSE_GRID_SITE_HEADER, entry.site);
    request.res.addHeader(RESPONSE_GRID_BACKEND_HEADER, entry.cluster);
    stripPrefixedHeaders(request.headers, 'x-ai-routing-');
    if (!hopClusters.has(entry.cluster)) return;
    applyHeaderAllowlist(request.headers, hopHeaders);
    const hopModel = route.model ?? entry.models[0];
    if (hopModel !== undefined) {
      request.headers.set(modelHeader, hopModel);
      // The provider gateway routes on the candidate's stable_id, the same identity the overlay gives it.
      request.headers.set(ROUTING_CANDIDATE_HEADER, stableId('inference_model', hopModel, entry.site, entry.cluster));
    }
    request.headers.set(ROUTING_REQUEST_ID_HEADER, request.requestId);
    const revision = view.revision();
    if (revision !== undefined && REVISION.test(revision)) request.headers.set(ROUTING_REVISION_HEADER, revision);
  }

  /**
   * A connect failure marks the cluster's endpoint down, so deciding again demotes that site: the request moves to
   * another site when one is left, else it is retried where it was (runPipeline).
   */
  function failover(request: GatewayRequest): boolean {
    const route = request.failoverState as SiteRouting;
    if (route.model === undefined) return false;
    const again = router.decide(route.model, route.keys);
    if (again.kind !== 'routed' || again.entry.cluster === route.current.cluster) return false;
    if (route.keys !== undefined && route.keys.length > 0) router.memory.sent(again.entry.cluster, route.keys, nowMs());
    applyEntry(request, route, again.entry);
    return true;
  }

  function refuse(decision: Refusal): never {
    const headers: Record<string, string> =
      decision.retryAfterSeconds === undefined ? {} : { 'retry-after': String(decision.retryAfterSeconds) };
    const type =
      decision.status === 429
        ? 'requests'
        : decision.status === 404
          ? 'not_found_error'
          : decision.status === 400
            ? 'invalid_request_error'
            : 'service_unavailable';
    throw new GatewayError(decision.status, decision.code, type, decision.message, headers);
  }

  return {
    name: 'grid_site_route',
    router,
    listModels: () => view.models(),
    apply(request: GatewayRequest): void {
      const startedAt = request.trace?.now();
      // Client-sent hop context is never trusted, whatever happens next.
      stripPrefixedHeaders(request.headers, 'x-ai-routing-');
      stripPrefixedHeaders(request.headers, 'x-ai-provider-');
      // Parsed only when something reads it: prompt keys (prefix affinity) or a stored-state id to pin on.
      const body = router.prefix.enabled || mayNameStoredState(request.body) ? jsonBody(request) : undefined;
      let pin;
      try {
        pin = pinOf(request.target, body);
      } catch (error) {
        if (error instanceof PinConflict) {
          router.refuse(400, 'conflicting_stored_state', error.message, 'bad_pin');
          throw badRequest('conflicting_stored_state', error.message);
        }
        throw error;
      }
      const model = request.model;
      let keys: readonly string[] | undefined;
      let decision: Decision;
      if (pin !== undefined) {
        // "A request naming one goes only to that site, with the tag stripped, and is not hashed."
        decision = router.decidePinned(pin.site, model);
        if (decision.kind === 'routed') {
          if (pin.body !== null) request.body = Buffer.from(JSON.stringify(pin.body));
          if (pin.target !== null) request.target = pin.target;
        }
      } else if (request.method === 'POST' && request.path === '/v1/conversations') {
        decision = router.decideNewConversation();
      } else {
        if (model === undefined) refuse(router.refuse(400, 'model_required', 'the request names no model', 'no_model'));
        keys = router.prefix.enabled ? promptKeys(request.path, body, model)?.keys : undefined;
        decision = router.decide(model, keys);
      }
      if (decision.kind === 'refused') refuse(decision);
      const route: SiteRouting = { model, keys, current: decision.entry };
      if (model !== undefined) request.labels.model = model;
      applyEntry(request, route, decision.entry);
      if (startedAt !== undefined)
        request.trace!.routed({ site: decision.entry.site, cluster: decision.entry.cluster, model }, startedAt);
      if (pin === undefined && model !== undefined && decision.path !== 'pinned') {
        request.failoverState = route;
        request.failover = failover;
      }
      const observed = keys !== undefined && keys.length > 0 ? keys : undefined;
      const tags = STORED_STATE_PATH.test(request.path);
      if (observed === undefined && !tags) return;
      if (observed !== undefined) router.memory.sent(route.current.cluster, observed, nowMs());
      let tagger: IdTagger | undefined;
      const observer: ResponseObserver = {
        start(status, headers) {
          // Made here, not before: a failover may have moved the request to another site since.
          if (tags) tagger = new IdTagger(route.current.site);
          if (observed !== undefined) {
            if (status >= 200 && status < 300) router.memory.confirmed(route.current.cluster, observed, nowMs());
            else if (status === 429 || status >= 500) router.memory.dropped(route.current.cluster, observed);
          }
          // Tagging lengthens the body: it goes out chunked instead of with the upstream's length.
          if (tagger !== undefined) delete (headers as Record<string, unknown>)['content-length'];
        },
        push: (chunk) => (tagger === undefined ? chunk : tagger.push(chunk)),
        end: () => (tagger === undefined ? Buffer.alloc(0) : tagger.end()),
      };
      request.responseObserver =
        request.responseObserver === undefined ? observer : chainObservers(request.responseObserver, observer);
    },
  };
}
