// intelligent_route (docs/contract.md §3.1): strips client-sent routing and provider headers, selects a candidate for
// the requested model from the accepted snapshot (one snapshot per request), and for provider-hop clusters writes the
// x-ai-routing-* hop context. Credential references stay in process; only the reference moves to credential_inject.
// A request to another site's provider gateway carries only the allowlisted client headers (header-policy.ts).
import type { IntelligentRouteFilter } from '../../../schemas/generated/gateway-config.ts';
import { badRequest, notFound, unavailable } from '../errors.ts';
import {
  ROUTING_CANDIDATE_HEADER,
  ROUTING_REQUEST_ID_HEADER,
  ROUTING_REVISION_HEADER,
  singleHeader,
  stripHopHeaders,
  stripPrefixedHeaders,
} from '../context.ts';
import type { Filter, GatewayRequest } from '../context.ts';
import type { OverlayStore } from '../overlay-store.ts';
import { applyHeaderAllowlist, headerAllowlist } from './header-policy.ts';
import {
  AffinityTable,
  DEFAULT_AFFINITY_TTL_SECONDS,
  MAX_AFFINITY_ENTRIES,
  MAX_SESSION_KEY_BYTES,
} from '../routing/affinity.ts';
import { selectCandidate, type SelectionDeps } from '../routing/selection.ts';
import type { CandidateLoad } from '../routing/candidate-load.ts';
import type { RoutingCandidate, RoutingSnapshot } from '../routing/snapshot.ts';

/** What a failover needs, kept on the request (request.failoverState) rather than in a closure made per request. */
interface Failover {
  readonly snapshot: RoutingSnapshot;
  readonly model: string;
  readonly alternate: RoutingCandidate;
}

export interface IntelligentRouteOptions {
  config: IntelligentRouteFilter;
  store: OverlayStore;
  isClusterAvailable(cluster: string): boolean;
  /** Header the request parser wrote the model into: kept when the header policy applies. */
  modelHeader: string;
  /**
   * The gateway's own in-flight requests per candidate; read and counted only when the config sets local_load (an
   * extension), so a Praxis AI config runs exactly the selection of docs/contract.md §3.1.
   */
  load?: CandidateLoad;
  random?: () => number;
  nowMs?: () => number;
}

export interface IntelligentRoute extends Filter {
  listModels(): readonly string[] | null;
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function createIntelligentRoute(options: IntelligentRouteOptions): IntelligentRoute {
  const { config, store } = options;
  const hopClusters = new Set(config.provider_hop_clusters ?? []);
  const hopHeaders = headerAllowlist(config.forward_request_headers);
  const modelHeader = options.modelHeader.toLowerCase();
  const random = options.random ?? Math.random;
  const nowMs = options.nowMs ?? Date.now;
  const affinityConfig = config.session_affinity;
  // Off unless enabled: true, as in Praxis AI, so one session_affinity block means the same to both gateways.
  const affinity =
    affinityConfig?.enabled === true
      ? new AffinityTable(
          affinityConfig.ttl_secs ?? DEFAULT_AFFINITY_TTL_SECONDS,
          affinityConfig.max_entries ?? MAX_AFFINITY_ENTRIES,
        )
      : undefined;
  // Only the sources the config names (Praxis AI has no default header; the loader requires header or cookie).
  const sessionHeader = affinityConfig?.header?.toLowerCase();
  const sessionCookie = affinityConfig?.cookie;
  function sessionKey(request: GatewayRequest): string | undefined {
    if (affinity === undefined) return undefined;
    const key =
      (sessionHeader === undefined ? undefined : singleHeader(request, sessionHeader)) ??
      (sessionCookie === undefined ? undefined : cookieValue(singleHeader(request, 'cookie'), sessionCookie));
    if (key === undefined || key === '' || Buffer.byteLength(key) > MAX_SESSION_KEY_BYTES) return undefined;
    return key;
  }

  const load = config.local_load === undefined ? undefined : options.load;
  if (config.local_load !== undefined && load === undefined)
    throw new Error("intelligent_route local_load needs the gateway's candidate load");

  // The same for every request: made once, not per request.
  const selectionDeps: SelectionDeps = {
    random,
    nowMs,
    isExcluded: (c) => !options.isClusterAvailable(c.candidate.cluster),
    ...(affinity === undefined ? {} : { affinity }),
    ...(load === undefined
      ? {}
      : { load: { inFlight: (c: RoutingCandidate) => load.inFlight(c.stableId, c.candidate.cluster) } }),
  };

  /** Points the request at `selected`: cluster, credential, routed site, and the hop context for a provider hop. */
  function applyCandidate(
    request: GatewayRequest,
    selected: RoutingCandidate,
    snapshot: RoutingSnapshot,
    model: string,
    failedOver: boolean,
  ): void {
    const candidate = selected.candidate;
    request.cluster = candidate.cluster;
    request.routedSite = candidate.site;
    request.res.routedSite = candidate.site;
    request.labels.cluster = candidate.cluster;
    request.credential = selected.credential;
    // Counted from here until the response closes; a failover moves the count to the candidate it moves to.
    if (load !== undefined) load.begin(request, load.cell(selected.stableId, candidate.cluster, candidate.site));
    // A failover drops the hop context written for the candidate it replaces.
    if (failedOver) stripPrefixedHeaders(request.headers, 'x-ai-routing-');
    if (hopClusters.has(candidate.cluster)) {
      applyHeaderAllowlist(request.headers, hopHeaders);
      request.headers.set(modelHeader, model);
      request.headers.set(ROUTING_CANDIDATE_HEADER, selected.stableId);
      // The hop carries the id the caller gets as x-request-id, so one id names the request at both sites.
      request.headers.set(ROUTING_REQUEST_ID_HEADER, request.requestId);
      if (snapshot.revision !== null) request.headers.set(ROUTING_REVISION_HEADER, snapshot.revision);
    }
  }

  /** One failover per request, to the first alternate that was available when it was routed. */
  function failover(request: GatewayRequest): boolean {
    const state = request.failoverState as Failover | undefined;
    if (state === undefined) return false;
    request.failoverState = undefined;
    applyCandidate(request, state.alternate, state.snapshot, state.model, true);
    return true;
  }

  return {
    name: 'intelligent_route',
    listModels: () => store.current()?.models ?? null,
    apply(request: GatewayRequest): void {
      const startedAt = request.trace?.now();
      // Client-sent hop context is never trusted, whatever happens next.
      stripHopHeaders(request.headers);
      const snapshot = store.current();
      if (snapshot === null) throw unavailable('overlay_not_loaded', 'no routing overlay has been accepted yet', 5);
      request.snapshot = snapshot;
      const model = request.model;
      if (model === undefined) throw notFound('no_route', 'the request names no model, and no other route applies');
      if (model.length === 0) throw badRequest('invalid_model', 'model is blank');
      const outcome = selectCandidate(
        snapshot,
        { kind: 'inference_model', name: model, sessionKey: sessionKey(request) },
        selectionDeps,
      );
      store.noteServed(snapshot);
      if (outcome.kind === 'no_candidate') throw notFound('model_not_found', `no provider serves model "${model}"`);
      request.labels.model = model;
      if (outcome.kind === 'all_excluded') {
        throw unavailable(
          'no_available_candidate',
          `every provider of model "${model}" is unavailable or not admitting new requests`,
        );
      }
      if (outcome.path !== undefined && load !== undefined) load.selections[outcome.path]++;
      applyCandidate(request, outcome.candidate, snapshot, model, false);
      if (startedAt !== undefined) {
        const chosen = outcome.candidate;
        request.trace!.routed(
          { site: chosen.candidate.site, candidate: chosen.stableId, cluster: chosen.candidate.cluster, model },
          startedAt,
        );
      }
      const alternate = outcome.alternates.find((c) => options.isClusterAvailable(c.candidate.cluster));
      if (alternate !== undefined) {
        request.failoverState = { snapshot, model, alternate } satisfies Failover;
        request.failover = failover;
      }
    },
  };
}
