// a2a_route (consumer): A2A JSON-RPC to the grid's agents. POST <prefix><agent> carries message/send,
// message/stream (an SSE stream, passed through as it arrives), tasks/get, tasks/cancel and the rest, in the 0.3 and
// the 1.0 method names; GET <prefix><agent>/.well-known/agent-card.json (or agent.json) answers the agent's card with
// its JSON-RPC URL replaced by this gateway's, so a client that resolves the card keeps calling through the grid.
// Every request goes to the agent's site's provider gateway over mTLS; that gateway keeps a task with the replica
// that holds it. Agents are not in the routing overlay (its contract carries models and tools only): the compiler
// renders each site's AgentToAgentProviders here.
import type { A2ARouteFilter } from '../../../schemas/generated/gateway-config.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import { ROUTING_CANDIDATE_HEADER, ROUTING_REQUEST_ID_HEADER, singleHeader, stripHopHeaders } from '../context.ts';
import type { GatewayRequest, ResponseObserver } from '../context.ts';
import { GatewayError, methodNotAllowed } from '../errors.ts';
import { A2A_HEADERS, agentAllowlist, namedPath } from '../agents/agent-headers.ts';
import { A2A_METHODS } from '../agents/a2a-tasks.ts';
import type { AgentMetrics } from '../agents/agent-metrics.ts';
import { INVALID_REQUEST, jsonRpcError, methodLabel, parseMessages } from '../agents/jsonrpc.ts';
import { applyHeaderAllowlist } from './header-policy.ts';
import { DEFAULT_AGENT_MAX_BODY_BYTES, tooLarge, type PathRouteFilter } from './mcp-route.ts';
import { CARD_PATHS } from './agent-provider-route.ts';

export const DEFAULT_A2A_PREFIX = '/a2a/';
/** An agent card larger than this is passed through as the agent sent it, not rewritten. */
const MAX_CARD_BYTES = 256 * 1024;
/** A Host header a URL can be built from: a host name or address and an optional port, nothing else. */
const HOST = /^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

export interface A2aRouteOptions {
  config: A2ARouteFilter;
  metrics: AgentMetrics;
  isClusterAvailable(cluster: string): boolean;
}

export function createA2aRoute(options: A2aRouteOptions): PathRouteFilter {
  const { config, metrics } = options;
  const prefix = config.path_prefix ?? DEFAULT_A2A_PREFIX;
  const agents = new Map(config.agents.map((agent) => [agent.name, agent]));
  const allowed = agentAllowlist(config.forward_request_headers, A2A_HEADERS);
  const maxBody = config.max_body_bytes ?? DEFAULT_AGENT_MAX_BODY_BYTES;

  return {
    name: 'a2a_route',
    prefixes: [prefix],
    apply(request: GatewayRequest): void | Promise<void> {
      const startedAt = request.trace?.now();
      stripHopHeaders(request.headers);
      const named = namedPath(request.path, prefix);
      const agent = named === undefined ? undefined : agents.get(named.name);
      if (named === undefined || agent === undefined) {
        throw jsonRpcError(
          404,
          'agent_not_found',
          INVALID_REQUEST,
          `no agent ${named === undefined ? 'at this path' : `"${named.name}"`} is routed to this gateway's callers; agents are at ${prefix}<agent>`,
        );
      }
      const card = CARD_PATHS.includes(named.rest);
      if (!card && named.rest !== '')
        throw new GatewayError(404, 'unknown_path', 'not_found_error', `no route for ${request.path.slice(0, 128)}`);
      if (card ? request.method !== 'GET' : request.method !== 'POST') throw methodNotAllowed(card ? 'GET' : 'POST');
      if (!options.isClusterAvailable(agent.cluster))
        throw jsonRpcError(
          503,
          'no_available_candidate',
          INVALID_REQUEST,
          `agent "${agent.name}" is unreachable from this gateway`,
          null,
          { 'retry-after': '1' },
        );
      request.cluster = agent.cluster;
      request.labels.cluster = agent.cluster;
      if (agent.site !== undefined) {
        request.routedSite = agent.site;
        request.res.routedSite = agent.site;
      }
      applyHeaderAllowlist(request.headers, allowed);
      request.headers.set(ROUTING_CANDIDATE_HEADER, `a2a/${agent.name}`);
      request.headers.set(ROUTING_REQUEST_ID_HEADER, request.requestId);
      if (startedAt !== undefined)
        request.trace!.routed({ site: agent.site, cluster: agent.cluster, operation: 'invoke_agent' }, startedAt);
      if (card) {
        request.responseObserver = cardRewriter(`${publicOrigin(request)}${prefix}${agent.name}`);
        return;
      }
      return readBoundedBody(request.req, maxBody, tooLarge).then((body) => {
        request.body = body;
        for (const message of parseMessages(body)) {
          metrics.a2aMessages.inc({
            agent: agent.name,
            method: methodLabel(message.method, A2A_METHODS),
            site: agent.site ?? 'unknown',
            tenant: request.tenant ?? 'none',
          });
        }
      });
    },
  };
}

/** The origin the caller reached this gateway at, from its Host header (http unless the listener is TLS). */
function publicOrigin(request: GatewayRequest): string {
  const host = singleHeader(request, 'host');
  const scheme = (request.req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
  if (host === undefined || !HOST.test(host))
    throw new GatewayError(
      400,
      'invalid_host',
      'invalid_request_error',
      'the request has no usable Host header to answer the agent card with',
    );
  return `${scheme}://${host}`;
}

/**
 * Replaces the card's JSON-RPC URLs with `url`: the 0.3 `url` (its preferredTransport then JSONRPC) and
 * additionalInterfaces, the 1.0 supportedInterfaces. Interfaces in other bindings (gRPC, HTTP+JSON) are dropped:
 * the gateway routes JSON-RPC only, and an address behind it would bypass the grid. A card that is not a 200 JSON
 * object under MAX_CARD_BYTES is passed through unchanged.
 */
export function cardRewriter(url: string): ResponseObserver {
  const chunks: Buffer[] = [];
  let size = 0;
  let rewrite = false;
  let overflow = false;
  return {
    start(status, headers) {
      const type = headers['content-type'];
      rewrite = status === 200 && typeof type === 'string' && type.toLowerCase().includes('json');
      if (rewrite) delete headers['content-length'];
    },
    push(chunk) {
      if (!rewrite || overflow) return chunk;
      size += chunk.length;
      if (size > MAX_CARD_BYTES) {
        overflow = true;
        return Buffer.concat([...chunks.splice(0), chunk]);
      }
      chunks.push(chunk);
      return Buffer.alloc(0);
    },
    end(complete) {
      if (!rewrite || overflow || !complete) return Buffer.concat(chunks.splice(0));
      const original = Buffer.concat(chunks.splice(0));
      try {
        return Buffer.from(JSON.stringify(rewriteCard(JSON.parse(original.toString('utf8')), url)));
      } catch {
        return original;
      }
    },
  };
}

export function rewriteCard(card: unknown, url: string): unknown {
  if (typeof card !== 'object' || card === null || Array.isArray(card)) return card;
  const out = { ...(card as Record<string, unknown>) };
  const isJsonRpc = (binding: unknown): boolean =>
    binding === undefined || (typeof binding === 'string' && binding.toUpperCase() === 'JSONRPC');
  // The card's own URL is where a 0.3 client sends everything: the gateway, in the one binding it routes.
  if (typeof out['url'] === 'string') out['url'] = url;
  if (out['preferredTransport'] !== undefined) out['preferredTransport'] = 'JSONRPC';
  for (const key of ['additionalInterfaces', 'supportedInterfaces']) {
    const list = out[key];
    if (!Array.isArray(list)) continue;
    out[key] = list
      .filter(
        (i) =>
          typeof i === 'object' &&
          i !== null &&
          isJsonRpc((i as Record<string, unknown>)['transport'] ?? (i as Record<string, unknown>)['protocolBinding']),
      )
      .map((i) => ({ ...(i as Record<string, unknown>), url }));
  }
  return out;
}
