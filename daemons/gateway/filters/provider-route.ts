// provider_route (docs/contract.md §3.2): consumes the edge's hop context after peer authentication and authorizes the
// request against an exact provider-local (candidate, model, path) map. It strips every routing and provider
// header and every client header the allowlist does not name (header-policy.ts: the client's Authorization,
// Cookie, API keys, OpenAI-Organization, x-forwarded-*), then writes provider-owned attribution for the backend.
import type { ProviderRoute, ProviderRouteFilter } from '../../../schemas/generated/gateway-config.ts';
import { badRequest, forbidden, notFound } from '../errors.ts';
import {
  PROVIDER_ATTRIBUTION_HEADER,
  PROVIDER_REQUEST_ID_HEADER,
  PROVIDER_REVISION_HEADER,
  ROUTING_CANDIDATE_HEADER,
  ROUTING_REQUEST_ID_HEADER,
  ROUTING_REVISION_HEADER,
  credentialRef,
  stripHopHeaders,
} from '../context.ts';
import type { CredentialRef, Filter, GatewayRequest } from '../context.ts';
import { REQUEST_ID_PATTERN } from '../routing/request-id.ts';
import { applyHeaderAllowlist, headerAllowlist } from './header-policy.ts';

const CANDIDATE_ID = /^[\x21-\x7e]{1,256}$/;
const REVISION = /^[0-9a-f]{64}$/;

export interface ProviderRouteFilterRuntime extends Filter {
  listModels(): readonly string[];
}

function oneHeader(request: GatewayRequest, name: string): string | undefined | null {
  const value = request.req.headers[name];
  if (Array.isArray(value)) return null;
  return value;
}

/**
 * Exact match only, as Praxis AI's provider_route: a route lists every path it allows (there is no default and no
 * wildcard), so /v1/responses/{id} is allowed only where a config names that exact path. The path is the request
 * target without its query string.
 */
export function pathAllowed(route: ProviderRoute, path: string): boolean {
  return route.paths.includes(path);
}

export function createProviderRoute(config: ProviderRouteFilter, parser: Filter): ProviderRouteFilterRuntime {
  // One route per candidate_id: the config loader refuses a repeat, as Praxis AI does.
  // Each route with its credential reference as credential_inject reads it, made once rather than per request.
  const byCandidate = new Map<string, { route: ProviderRoute; credential: CredentialRef | undefined }>(
    config.routes.map((route) => [route.candidate_id, { route, credential: credentialRef(route.credential) }]),
  );
  const models = [...new Set(config.routes.map((r) => r.model))];
  const backendHeaders = headerAllowlist(config.forward_request_headers);

  return {
    name: 'provider_route',
    listModels: () => models,
    apply(request: GatewayRequest): void | Promise<void> {
      const candidate = oneHeader(request, ROUTING_CANDIDATE_HEADER);
      const requestId = oneHeader(request, ROUTING_REQUEST_ID_HEADER);
      const revision = oneHeader(request, ROUTING_REVISION_HEADER);
      // Routing and provider headers are never in the allowlist: stripped whatever it says.
      applyHeaderAllowlist(request.headers, backendHeaders);
      stripHopHeaders(request.headers);
      if (candidate === undefined || candidate === null || !CANDIDATE_ID.test(candidate)) {
        throw forbidden('invalid_routing_candidate', `missing or invalid ${ROUTING_CANDIDATE_HEADER}`);
      }
      if (requestId === undefined || requestId === null || !REQUEST_ID_PATTERN.test(requestId)) {
        throw forbidden('invalid_routing_request_id', `missing or invalid ${ROUTING_REQUEST_ID_HEADER}`);
      }
      if (revision === null || (revision !== undefined && !REVISION.test(revision))) {
        throw forbidden('invalid_routing_revision', `malformed ${ROUTING_REVISION_HEADER}`);
      }
      // The parser reads the body (a Promise) unless it is already read; not an async function, so a request pays
      // one reaction on the body read and no suspended frame.
      const parsed = parser.apply(request);
      if (parsed === undefined) return authorize(request, candidate, requestId, revision);
      return parsed.then(() => authorize(request, candidate, requestId, revision));
    },
  };

  /** The parsed request against the candidate's route; the backend's attribution headers once it is allowed. */
  function authorize(
    request: GatewayRequest,
    candidate: string,
    requestId: string,
    revision: string | undefined,
  ): void {
    const model = request.model;
    if (model === undefined) throw badRequest('model_required', 'the request names no model');
    const routed = byCandidate.get(candidate);
    if (routed === undefined)
      throw forbidden('unknown_candidate', 'the routing candidate is not served by this provider');
    const route = routed.route;
    if (route.model !== model) throw notFound('model_not_routed', `model "${model}" is not routed for this candidate`);
    if (!pathAllowed(route, request.path))
      throw notFound('path_not_routed', `path ${request.path} is not routed for this candidate`);
    request.trace?.routed({ candidate, cluster: route.cluster, model: route.model }, request.trace.now());
    request.cluster = route.cluster;
    request.labels.model = route.model;
    request.labels.cluster = route.cluster;
    request.credential = routed.credential;
    request.headers.set(PROVIDER_REQUEST_ID_HEADER, requestId);
    if (config.provider_id !== undefined) request.headers.set(PROVIDER_ATTRIBUTION_HEADER, config.provider_id);
    if (revision !== undefined) request.headers.set(PROVIDER_REVISION_HEADER, revision);
  }
}
