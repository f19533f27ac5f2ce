// mcp_route (consumer): MCP streamable HTTP to the grid's tool servers. POST <prefix><server> carries JSON-RPC
// (answered as JSON or as an SSE stream, passed through as it arrives), GET opens the server's own SSE stream of a
// session, DELETE ends a session. The server is the AgentToolProvider the accepted overlay places at a site (its
// mcp_tool candidates share cluster tool/<server>); every request goes to that site's provider gateway over mTLS,
// as inference does. A session the server creates is pinned by its id (agents/mcp-session.ts), so any consumer
// replica routes it back to the same site; a session whose site no longer serves the server is answered 404, which
// MCP clients take as "start a new session". tools/call of a tool the overlay does not list for this gateway's
// callers is answered -32602 and never sent.
import type { McpRouteFilter } from '../../../schemas/generated/gateway-config.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import {
  ROUTING_CANDIDATE_HEADER,
  ROUTING_REQUEST_ID_HEADER,
  ROUTING_REVISION_HEADER,
  singleHeader,
  stripHopHeaders,
} from '../context.ts';
import type { Filter, GatewayRequest, ResponseObserver } from '../context.ts';
import { GatewayError, methodNotAllowed } from '../errors.ts';
import type { OverlayStore } from '../overlay-store.ts';
import { MCP_HEADERS, agentAllowlist, namedPath } from '../agents/agent-headers.ts';
import type { AgentMetrics } from '../agents/agent-metrics.ts';
import {
  INVALID_PARAMS,
  INVALID_REQUEST,
  SESSION_NOT_FOUND,
  jsonRpcError,
  methodLabel,
  parseMessages,
} from '../agents/jsonrpc.ts';
import { MCP_SESSION_HEADER, unwrapSiteSession, wrapSiteSession } from '../agents/mcp-session.ts';
import { applyHeaderAllowlist } from './header-policy.ts';

export const DEFAULT_MCP_PREFIX = '/mcp/';
export const DEFAULT_AGENT_MAX_BODY_BYTES = 1024 * 1024;
const MCP_METHODS = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'server/discover',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);
const EMPTY = Buffer.alloc(0);

export interface McpRouteOptions {
  config: McpRouteFilter;
  store: OverlayStore;
  metrics: AgentMetrics;
  isClusterAvailable(cluster: string): boolean;
}

export interface PathRouteFilter extends Filter {
  /** The path prefixes this route serves. */
  readonly prefixes: readonly string[];
}

export function tooLarge(maxBytes: number): GatewayError {
  return jsonRpcError(
    413,
    'request_too_large',
    INVALID_REQUEST,
    `Invalid Request: the message exceeds ${maxBytes} bytes`,
    null,
    { connection: 'close' },
  );
}

export function createMcpRoute(options: McpRouteOptions): PathRouteFilter {
  const { config, store, metrics } = options;
  const prefix = config.path_prefix ?? DEFAULT_MCP_PREFIX;
  const hopClusters = new Set(config.provider_hop_clusters ?? []);
  const allowed = agentAllowlist(config.forward_request_headers, MCP_HEADERS);
  const maxBody = config.max_body_bytes ?? DEFAULT_AGENT_MAX_BODY_BYTES;

  return {
    name: 'mcp_route',
    prefixes: [prefix],
    apply(request: GatewayRequest): void | Promise<void> {
      const startedAt = request.trace?.now();
      stripHopHeaders(request.headers);
      const named = namedPath(request.path, prefix);
      if (named === undefined || named.rest !== '')
        throw new GatewayError(
          404,
          'unknown_path',
          'not_found_error',
          `no route for ${request.path.slice(0, 128)}; MCP servers are at ${prefix}<server>`,
        );
      const method = request.method;
      if (method !== 'POST' && method !== 'GET' && method !== 'DELETE') throw methodNotAllowed('POST, GET, DELETE');
      const snapshot = store.current();
      if (snapshot === null)
        throw jsonRpcError(
          503,
          'overlay_not_loaded',
          INVALID_REQUEST,
          'no routing overlay has been accepted yet',
          null,
          { 'retry-after': '5' },
        );
      request.snapshot = snapshot;
      const name = named.name;
      const cluster = `tool/${name}`;
      const server = snapshot.toolServer(cluster);
      if (server === undefined) {
        metrics.mcpRefused.inc({ server: 'unknown', reason: 'server_not_found' });
        throw jsonRpcError(
          404,
          'tool_server_not_found',
          INVALID_REQUEST,
          `no tool server "${name}" is routed to this gateway's callers`,
        );
      }
      const session = singleHeader(request, MCP_SESSION_HEADER);
      if (session !== undefined) {
        const pinned = unwrapSiteSession(session);
        if (pinned === undefined) {
          metrics.mcpRefused.inc({ server: name, reason: 'session_not_found' });
          throw jsonRpcError(
            404,
            'session_not_found',
            SESSION_NOT_FOUND,
            'Session not found: not a session this grid issued; start a new session',
          );
        }
        if (pinned.site !== server.site) {
          metrics.mcpRefused.inc({ server: name, reason: 'session_site_gone' });
          throw jsonRpcError(
            404,
            'session_not_found',
            SESSION_NOT_FOUND,
            `Session not found: its tool server was at site "${pinned.site}", which no longer serves "${name}" (now "${server.site}"); start a new session`,
          );
        }
        request.headers.set(MCP_SESSION_HEADER, pinned.inner);
      } else if (request.headers.has(MCP_SESSION_HEADER)) {
        throw jsonRpcError(400, 'invalid_session', INVALID_REQUEST, 'Bad Request: more than one Mcp-Session-Id header');
      }
      if (!server.admitting)
        throw jsonRpcError(
          503,
          'no_available_candidate',
          INVALID_REQUEST,
          `tool server "${name}" is not admitting new requests`,
          null,
          { 'retry-after': '1' },
        );
      if (!options.isClusterAvailable(cluster))
        throw jsonRpcError(
          503,
          'no_available_candidate',
          INVALID_REQUEST,
          `tool server "${name}" is unreachable from this gateway`,
          null,
          { 'retry-after': '1' },
        );

      request.cluster = cluster;
      request.routedSite = server.site;
      request.res.routedSite = server.site;
      request.labels.cluster = cluster;
      applyHeaderAllowlist(request.headers, allowed);
      if (hopClusters.has(cluster)) {
        request.headers.set(ROUTING_CANDIDATE_HEADER, server.stableId);
        request.headers.set(ROUTING_REQUEST_ID_HEADER, request.requestId);
        if (snapshot.revision !== null) request.headers.set(ROUTING_REVISION_HEADER, snapshot.revision);
      }
      request.responseObserver = sessionPinner(server.site);
      store.noteServed(snapshot);
      if (startedAt !== undefined)
        request.trace!.routed(
          { site: server.site, candidate: server.stableId, cluster, operation: 'execute_tool' },
          startedAt,
        );
      if (method !== 'POST') return;
      return readBoundedBody(request.req, maxBody, tooLarge).then((body) => {
        request.body = body;
        const messages = parseMessages(body);
        for (const message of messages) {
          if (message.method !== 'tools/call') continue;
          const tool = message.params?.['name'];
          if (typeof tool !== 'string' || !server.tools.has(tool)) {
            metrics.mcpRefused.inc({ server: name, reason: 'unknown_tool' });
            const shown = typeof tool === 'string' ? `"${tool.slice(0, 128)}"` : 'with no name';
            // HTTP 200: a JSON-RPC error answering the call, as a server answers a tool it does not have.
            throw jsonRpcError(
              200,
              'unknown_tool',
              INVALID_PARAMS,
              `Unknown tool: ${shown} is not a tool of "${name}" this gateway's callers may call`,
              message.id ?? null,
            );
          }
        }
        for (const message of messages) {
          metrics.mcpMessages.inc({
            server: name,
            method: methodLabel(message.method, MCP_METHODS),
            site: server.site,
          });
          if (message.method === 'tools/call') {
            metrics.mcpToolCalls.inc({
              server: name,
              tool: message.params!['name'] as string,
              site: server.site,
              tenant: request.tenant ?? 'none',
            });
          }
        }
      });
    },
  };
}

/** Rewrites the session id the server created into one that names its site (and passes every byte through as is). */
function sessionPinner(site: string): ResponseObserver {
  return {
    start(_status, headers) {
      const value = headers[MCP_SESSION_HEADER];
      if (typeof value === 'string') headers[MCP_SESSION_HEADER] = wrapSiteSession(site, value);
    },
    push: (chunk) => chunk,
    end: () => EMPTY,
  };
}
