// agent_provider_route (provider): the hop's MCP and A2A paths. After peer_identity_trust it takes the consumer's
// hop context (the same checks as provider_route), serves /mcp/<name> and /a2a/<name>[/.well-known/...] from the
// named tool server or agent with its credential, and drops every client header the allowlist does not name. A
// stateful MCP server holds a session in one replica: the session id the server creates is answered with that
// replica's index in it (agents/mcp-session.ts) and the session's later requests go to that replica only. An A2A
// agent holds a task in the replica that created it unless its replicas share a task store: the task ids its
// answers name are remembered with the replica (bounded, with a TTL), and a request about a task goes there.
import type { AgentProviderRouteFilter, AgentServer } from '../../../schemas/generated/gateway-config.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import {
  PROVIDER_REQUEST_ID_HEADER,
  ROUTING_CANDIDATE_HEADER,
  ROUTING_REQUEST_ID_HEADER,
  credentialRef,
  singleHeader,
  stripHopHeaders,
} from '../context.ts';
import type { CredentialRef, GatewayRequest, ResponseObserver } from '../context.ts';
import { GatewayError, forbidden, methodNotAllowed } from '../errors.ts';
import { REQUEST_ID_PATTERN } from '../routing/request-id.ts';
import { AffinityTable, DEFAULT_AFFINITY_TTL_SECONDS, MAX_AFFINITY_ENTRIES } from '../routing/affinity.ts';
import { A2A_HEADERS, MCP_HEADERS, agentAllowlist, namedPath, queryOf } from '../agents/agent-headers.ts';
import { TaskIdScanner, requestTaskId } from '../agents/a2a-tasks.ts';
import type { AgentMetrics } from '../agents/agent-metrics.ts';
import { INVALID_REQUEST, SESSION_NOT_FOUND, jsonRpcError, parseMessages } from '../agents/jsonrpc.ts';
import { MCP_SESSION_HEADER, unwrapReplicaSession, wrapReplicaSession } from '../agents/mcp-session.ts';
import type { HeaderAllowlist } from './header-policy.ts';
import { applyHeaderAllowlist } from './header-policy.ts';
import { DEFAULT_AGENT_MAX_BODY_BYTES, tooLarge, type PathRouteFilter } from './mcp-route.ts';

const CANDIDATE_ID = /^[\x21-\x7e]{1,256}$/;
export const CARD_PATHS = ['/.well-known/agent-card.json', '/.well-known/agent.json'];
/** How much of one answer (a JSON body or an SSE event) is read for task ids. */
const TASK_SCAN_BYTES = 1024 * 1024;
const EMPTY = Buffer.alloc(0);

interface Served {
  readonly server: AgentServer;
  readonly credential: CredentialRef | undefined;
}

export interface AgentProviderRouteOptions {
  config: AgentProviderRouteFilter;
  metrics: AgentMetrics;
  /** How many endpoints a cluster has (a pinned replica index must be one of them). */
  endpointCount(cluster: string): number;
  nowMs?: () => number;
}

/** One filter behind two prefixes: the server routes /mcp/ and /a2a/ requests of a provider listener here. */
export function createAgentProviderRoute(options: AgentProviderRouteOptions): PathRouteFilter {
  const { config, metrics } = options;
  const now = options.nowMs ?? Date.now;
  const servers = new Map<string, Served>(
    config.servers.map((server) => [
      `${server.protocol}/${server.name}`,
      { server, credential: credentialRef(server.credential) },
    ]),
  );
  const mcpHeaders = agentAllowlist(config.forward_request_headers, MCP_HEADERS);
  const a2aHeaders = agentAllowlist(config.forward_request_headers, A2A_HEADERS);
  const maxBody = config.max_body_bytes ?? DEFAULT_AGENT_MAX_BODY_BYTES;
  const tasks = new AffinityTable(
    config.task_affinity?.ttl_secs ?? DEFAULT_AFFINITY_TTL_SECONDS,
    config.task_affinity?.max_entries ?? MAX_AFFINITY_ENTRIES,
  );

  function hopContext(request: GatewayRequest): string {
    const candidate = singleHeader(request, ROUTING_CANDIDATE_HEADER);
    const requestId = singleHeader(request, ROUTING_REQUEST_ID_HEADER);
    if (candidate === undefined || !CANDIDATE_ID.test(candidate))
      throw forbidden('invalid_routing_candidate', `missing or invalid ${ROUTING_CANDIDATE_HEADER}`);
    if (requestId === undefined || !REQUEST_ID_PATTERN.test(requestId))
      throw forbidden('invalid_routing_request_id', `missing or invalid ${ROUTING_REQUEST_ID_HEADER}`);
    return requestId;
  }

  function route(
    request: GatewayRequest,
    served: Served,
    target: string,
    allowed: HeaderAllowlist,
    requestId: string,
  ): void {
    applyHeaderAllowlist(request.headers, allowed);
    stripHopHeaders(request.headers);
    request.headers.set(PROVIDER_REQUEST_ID_HEADER, requestId);
    request.cluster = served.server.cluster;
    request.labels.cluster = served.server.cluster;
    request.credential = served.credential;
    request.target = target;
  }

  function mcp(request: GatewayRequest, name: string, rest: string, requestId: string): void | Promise<void> {
    const served = servers.get(`mcp/${name}`);
    if (served === undefined || rest !== '')
      throw jsonRpcError(
        404,
        'tool_server_not_found',
        INVALID_REQUEST,
        `this provider serves no tool server "${name}"`,
      );
    const method = request.method;
    if (method !== 'POST' && method !== 'GET' && method !== 'DELETE') throw methodNotAllowed('POST, GET, DELETE');
    const cluster = served.server.cluster;
    const session = singleHeader(request, MCP_SESSION_HEADER);
    if (session !== undefined) {
      const pinned = unwrapReplicaSession(session);
      if (pinned === undefined || pinned.replica >= options.endpointCount(cluster)) {
        metrics.mcpRefused.inc({ server: name, reason: 'session_not_found' });
        throw jsonRpcError(
          404,
          'session_not_found',
          SESSION_NOT_FOUND,
          'Session not found: not a session this provider issued; start a new session',
        );
      }
      request.pinnedEndpoint = pinned.replica;
    }
    route(request, served, `${served.server.path ?? '/mcp'}${queryOf(request.target)}`, mcpHeaders, requestId);
    if (session !== undefined) request.headers.set(MCP_SESSION_HEADER, unwrapReplicaSession(session)!.inner);
    request.responseObserver = replicaPinner(request);
    if (method !== 'POST') return;
    return readBoundedBody(request.req, maxBody, tooLarge).then((body) => {
      request.body = body;
      parseMessages(body);
    });
  }

  function a2a(request: GatewayRequest, name: string, rest: string, requestId: string): void | Promise<void> {
    const served = servers.get(`a2a/${name}`);
    if (served === undefined)
      throw jsonRpcError(404, 'agent_not_found', INVALID_REQUEST, `this provider serves no agent "${name}"`);
    if (CARD_PATHS.includes(rest)) {
      if (request.method !== 'GET') throw methodNotAllowed('GET');
      // The card where the config says the agent serves it, else at the well-known name the caller asked for below
      // the agent's endpoint path (where the operator's probe found it).
      route(
        request,
        served,
        served.server.card_path ?? `${(served.server.path ?? '/').replace(/\/+$/, '')}${rest}`,
        a2aHeaders,
        requestId,
      );
      return;
    }
    if (rest !== '')
      throw jsonRpcError(404, 'unknown_path', INVALID_REQUEST, `no route for ${request.path.slice(0, 128)}`);
    if (request.method !== 'POST') throw methodNotAllowed('POST');
    route(request, served, `${served.server.path ?? '/'}${queryOf(request.target)}`, a2aHeaders, requestId);
    const cluster = served.server.cluster;
    return readBoundedBody(request.req, maxBody, tooLarge).then((body) => {
      request.body = body;
      const messages = parseMessages(body);
      for (const message of messages) {
        const task = requestTaskId(message);
        const replica = task === undefined ? undefined : tasks.lookup(`${cluster}\u0000${task}`, now());
        if (replica !== undefined && Number(replica) < options.endpointCount(cluster))
          request.pinnedEndpoint = Number(replica);
      }
      if (options.endpointCount(cluster) > 1) request.responseObserver = taskLearner(request, cluster);
    });
  }

  /** Remembers which replica answered for each task the answer names. */
  function taskLearner(request: GatewayRequest, cluster: string): ResponseObserver {
    let scanner: TaskIdScanner | undefined;
    return {
      start(status, headers) {
        const type = headers['content-type'];
        if (status === 200)
          scanner = new TaskIdScanner(typeof type === 'string' ? type : undefined, TASK_SCAN_BYTES, (task) =>
            tasks.bind(`${cluster}\u0000${task}`, String(request.endpointIndex ?? 0), now()),
          );
      },
      push(chunk) {
        scanner?.push(chunk);
        return chunk;
      },
      end(complete) {
        if (complete) scanner?.end();
        return EMPTY;
      },
    };
  }

  return {
    name: 'agent_provider_route',
    prefixes: ['/mcp/', '/a2a/'],
    apply(request: GatewayRequest): void | Promise<void> {
      const requestId = hopContext(request);
      const mcpPath = namedPath(request.path, '/mcp/');
      if (mcpPath !== undefined) return mcp(request, mcpPath.name, mcpPath.rest, requestId);
      const a2aPath = namedPath(request.path, '/a2a/');
      if (a2aPath !== undefined) return a2a(request, a2aPath.name, a2aPath.rest, requestId);
      throw new GatewayError(404, 'unknown_path', 'not_found_error', `no route for ${request.path.slice(0, 128)}`);
    },
  };
}

/** Answers the server's session id with the replica that created it inside. */
function replicaPinner(request: GatewayRequest): ResponseObserver {
  return {
    start(_status, headers) {
      const value = headers[MCP_SESSION_HEADER];
      if (typeof value === 'string')
        headers[MCP_SESSION_HEADER] = wrapReplicaSession(request.endpointIndex ?? 0, value);
    },
    push: (chunk) => chunk,
    end: () => EMPTY,
  };
}
