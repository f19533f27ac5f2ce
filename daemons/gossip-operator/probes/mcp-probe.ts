/**
 * The AgentToolProvider probe (seeds 001/003): an MCP client over streamable HTTP that lists the server's tools the
 * way the protocol's own clients do, for both generations of servers.
 *
 * - The stateless revision (2026-07-28) has no handshake and no session: `server/discover` says which revisions the
 *   server speaks, and every request carries the revision in the MCP-Protocol-Version header and its `_meta`, and
 *   its method in the Mcp-Method header.
 * - The session revisions (2025-03-26 to 2025-11-25, what SDK servers in stateful mode speak): `initialize` with
 *   version negotiation, the `notifications/initialized` notification, the Mcp-Session-Id header the server issued
 *   on every later request, and the session ended with HTTP DELETE when the probe is done.
 *
 * A dual-era client asks `server/discover` first and falls back to `initialize` when the server does not answer it
 * with a result (an older server refuses it: HTTP 400 for a request without a session, or method not found). Then
 * `tools/list`, following `nextCursor` within MAX_PAGES and MAX_TOOLS. Answers may be JSON or a text/event-stream
 * whose message with the request's id is the answer. A probe either succeeds (Available) or fails (Unavailable).
 *
 * The session handshake (openSession) and the exchange are exported for the list watcher (mcp-list-watch.ts), which
 * holds a session of its own open to hear `notifications/tools/list_changed`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type ProbeFailure, type ProbeTls, probeHttp } from './http-probe.ts';
import { SseParser } from './sse-parser.ts';

export interface McpProbeConfig {
  readonly endpoint: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  /** One budget for the whole exchange: every request shares it. */
  readonly timeoutMs: number;
  /** Ends every request of the exchange early (the list watcher's stop()). */
  readonly signal?: AbortSignal;
}

export interface McpTool {
  readonly name: string;
  readonly description?: string;
}

/** Which step of the exchange failed: it names the failure in status and logs. */
export type McpProbeStep = 'discover' | 'initialize' | 'initialized' | 'tools/list';

export type McpProbeResult =
  | {
      readonly ok: true;
      readonly tools: readonly McpTool[];
      /** The revision actually spoken: negotiated by initialize, or chosen from server/discover's list. */
      readonly protocolVersion: string;
      /** Whether the server issued a session (Mcp-Session-Id) for the probe. */
      readonly session: boolean;
      /**
       * Whether initialize advertised `capabilities.tools.listChanged`: the server announces changes on its GET
       * stream and a list watcher can hear them. Always false on the stateless revision, which has no such stream.
       */
      readonly toolsListChanged: boolean;
    }
  | {
      readonly ok: false;
      readonly reason: 'http_status' | 'invalid_response' | 'unsupported_version' | ProbeFailure;
      readonly step: McpProbeStep;
      readonly detail: string;
    };

/** The stateless revision this client speaks. */
export const STATELESS_PROTOCOL_VERSION = '2026-07-28';
/** Session revisions of streamable HTTP this client speaks, newest first (2024-11-05 is the older HTTP+SSE transport). */
export const SESSION_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export const MAX_TOOLS = 1024;
/** tools/list pages followed at most: a server paging one tool at a time still fits MAX_TOOLS in fewer. */
export const MAX_PAGES = 64;
// What status.discoveredTools holds (maxLength 128): a longer name could never be written there.
const MAX_TOOL_NAME_BYTES = 128;
/** Descriptions are kept for status, cut to this many characters. */
export const MAX_DESCRIPTION_CHARS = 512;
const MAX_RESPONSE_BYTES = 1024 * 1024;
/** A session id is visible ASCII (the transport spec), and the probe keeps nothing longer. */
const SESSION_ID = /^[\x21-\x7e]{1,256}$/;

const CLIENT_INFO = { name: 'agn-gossip-operator', version: '1' };
const META = {
  'io.modelcontextprotocol/protocolVersion': STATELESS_PROTOCOL_VERSION,
  'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
  'io.modelcontextprotocol/clientCapabilities': {},
};

export type McpProbeFailure = Extract<McpProbeResult, { ok: false }>;
type Failure = McpProbeFailure;

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The JSON-RPC message answering the request (undefined for a notification or a body that holds none). */
  readonly message: unknown;
  readonly unparsable?: string;
}

/** The requests of one probe or one watcher session, under one time budget. */
export class Exchange {
  readonly #config: McpProbeConfig;
  readonly #deadline: number;
  #nextId = 1;
  constructor(config: McpProbeConfig) {
    this.#config = config;
    this.#deadline = Date.now() + config.timeoutMs;
  }

  /** Time left of the probe's whole budget: every step shares one timeout. */
  remainingMs(): number {
    return Math.max(1, this.#deadline - Date.now());
  }

  headers(extra: Readonly<Record<string, string>>): Record<string, string> {
    return {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...extra,
      ...bearer(this.#config),
    };
  }

  async send(
    step: McpProbeStep,
    method: string,
    params: Record<string, unknown> | undefined,
    headers: Readonly<Record<string, string>>,
    notification = false,
  ): Promise<Answer | Failure> {
    const id = notification ? undefined : this.#nextId++;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      ...(id === undefined ? {} : { id }),
      method,
      ...(params === undefined ? {} : { params }),
    });
    // The stateless revision names the method in a header too (Mcp-Method), which servers check against the body.
    const modern = headers['mcp-protocol-version'] === STATELESS_PROTOCOL_VERSION;
    const response = await probeHttp({
      url: new URL(this.#config.endpoint),
      method: 'POST',
      headers: this.headers(modern ? { ...headers, 'mcp-method': method } : headers),
      body,
      timeoutMs: this.remainingMs(),
      maxBytes: MAX_RESPONSE_BYTES,
      ...(this.#config.tls ? { tls: this.#config.tls } : {}),
      ...(this.#config.signal ? { signal: this.#config.signal } : {}),
    });
    if (!response.ok) return { ok: false, reason: response.failure, step, detail: `${method}: ${response.detail}` };
    if (id === undefined) return { status: response.status, headers: response.headers, message: undefined };
    const eventStream = String(response.headers['content-type'] ?? '').includes('text/event-stream');
    try {
      return {
        status: response.status,
        headers: response.headers,
        message: answerOf(response.body.toString('utf8'), eventStream, id),
      };
    } catch (error) {
      return {
        status: response.status,
        headers: response.headers,
        message: undefined,
        unparsable: (error as Error).message,
      };
    }
  }

  /** Ends a session (HTTP DELETE). Best effort: a server may answer 405 when clients cannot end sessions. */
  async end(headers: Readonly<Record<string, string>>): Promise<void> {
    await probeHttp({
      url: new URL(this.#config.endpoint),
      method: 'DELETE',
      headers: this.headers(headers),
      timeoutMs: Math.min(this.remainingMs(), 2_000),
      maxBytes: 64 * 1024,
      ...(this.#config.tls ? { tls: this.#config.tls } : {}),
      ...(this.#config.signal ? { signal: this.#config.signal } : {}),
    });
  }
}

/** The Authorization header for the provider's credential, when it has one. */
export function bearer(config: Pick<McpProbeConfig, 'bearerToken'>): Record<string, string> {
  return config.bearerToken === undefined ? {} : { authorization: `Bearer ${config.bearerToken}` };
}

export async function probeMcpTools(config: McpProbeConfig): Promise<McpProbeResult> {
  const exchange = new Exchange(config);
  const discovered = await discover(exchange);
  if (discovered !== 'legacy') {
    if (!discovered.ok) return discovered;
    const headers = { 'mcp-protocol-version': STATELESS_PROTOCOL_VERSION };
    const tools = await listTools(exchange, headers, { _meta: META });
    return 'tools' in tools
      ? {
          ok: true,
          tools: tools.tools,
          protocolVersion: STATELESS_PROTOCOL_VERSION,
          session: false,
          toolsListChanged: false,
        }
      : tools;
  }
  return await sessionProbe(exchange);
}

/** server/discover: ok when the server speaks the stateless revision, 'legacy' when it does not answer it as one. */
async function discover(exchange: Exchange): Promise<{ ok: true } | Failure | 'legacy'> {
  const answer = await exchange.send(
    'discover',
    'server/discover',
    { _meta: META },
    { 'mcp-protocol-version': STATELESS_PROTOCOL_VERSION },
  );
  if (!('status' in answer)) return answer.reason === 'too_large' || answer.reason === 'protocol' ? 'legacy' : answer;
  // A refused credential is the answer whatever the revision: initialize would only be refused again.
  if (answer.status === 401 || answer.status === 403)
    return {
      ok: false,
      reason: 'http_status',
      step: 'discover',
      detail: `server/discover answered HTTP ${answer.status}`,
    };
  const result = (answer.message as { result?: { supportedVersions?: unknown } } | undefined)?.result;
  if (answer.status < 200 || answer.status > 299 || result === undefined) return 'legacy';
  const versions = result.supportedVersions;
  // A result without a list of revisions is no discover result: a server that answers every method alike.
  if (!Array.isArray(versions) || !versions.every((v) => typeof v === 'string')) return 'legacy';
  if (versions.includes(STATELESS_PROTOCOL_VERSION)) return { ok: true };
  // A server of a later stateless revision that dropped this one; one that lists only session revisions is legacy.
  if (versions.some((v) => (SESSION_PROTOCOL_VERSIONS as readonly string[]).includes(v))) return 'legacy';
  return {
    ok: false,
    reason: 'unsupported_version',
    step: 'discover',
    detail: `server/discover lists ${versions.slice(0, 8).join(', ') || 'no revision'}; this client speaks ${STATELESS_PROTOCOL_VERSION} and ${SESSION_PROTOCOL_VERSIONS.join(', ')}`,
  };
}

/** A session-revision handshake that went through: what every later request of the session carries. */
export interface McpSession {
  /** The negotiated revision (one of SESSION_PROTOCOL_VERSIONS). */
  readonly protocolVersion: string;
  /** The Mcp-Session-Id the server issued; undefined for a server without sessions. */
  readonly sessionId: string | undefined;
  /** Mcp-Session-Id and MCP-Protocol-Version, as every request after initialize sends them. */
  readonly headers: Readonly<Record<string, string>>;
  /** initialize's `capabilities.tools.listChanged`. */
  readonly toolsListChanged: boolean;
}

/**
 * initialize with version negotiation, then notifications/initialized. A session the server issued but whose
 * handshake then failed is ended here, so a caller gets either a usable session or a failure and nothing to clean.
 */
export async function openSession(exchange: Exchange): Promise<McpSession | Failure> {
  const init = await exchange.send(
    'initialize',
    'initialize',
    { protocolVersion: SESSION_PROTOCOL_VERSIONS[0], capabilities: {}, clientInfo: CLIENT_INFO },
    {},
  );
  if (!('status' in init)) return init;
  const failed = answerFailure('initialize', 'initialize', init);
  if (failed !== undefined) return failed;
  const result = (
    init.message as { result?: { protocolVersion?: unknown; capabilities?: { tools?: { listChanged?: unknown } } } }
  ).result;
  const version = result?.protocolVersion;
  if (typeof version !== 'string' || !(SESSION_PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
    return {
      ok: false,
      reason: 'unsupported_version',
      step: 'initialize',
      detail: `initialize negotiated ${typeof version === 'string' ? JSON.stringify(version.slice(0, 64)) : 'no protocolVersion'}; this client speaks ${SESSION_PROTOCOL_VERSIONS.join(', ')}`,
    };
  }
  const rawSession = init.headers['mcp-session-id'];
  const sessionId = typeof rawSession === 'string' ? rawSession : undefined;
  if (sessionId !== undefined && !SESSION_ID.test(sessionId)) {
    return {
      ok: false,
      reason: 'invalid_response',
      step: 'initialize',
      detail: 'initialize issued an Mcp-Session-Id that is not 1-256 visible ASCII characters',
    };
  }
  // MCP-Protocol-Version on every request after initialize from 2025-06-18; a 2025-03-26 server does not expect it.
  const headers: Record<string, string> = {
    ...(sessionId === undefined ? {} : { 'mcp-session-id': sessionId }),
    ...(version === '2025-03-26' ? {} : { 'mcp-protocol-version': version }),
  };
  const initialized = await exchange.send('initialized', 'notifications/initialized', undefined, headers, true);
  const refused: Failure | undefined = !('status' in initialized)
    ? initialized
    : initialized.status < 200 || initialized.status > 299
      ? {
          ok: false,
          reason: 'http_status',
          step: 'initialized',
          detail: `notifications/initialized answered HTTP ${initialized.status}`,
        }
      : undefined;
  if (refused !== undefined) {
    if (sessionId !== undefined) await exchange.end(headers);
    return refused;
  }
  return {
    protocolVersion: version,
    sessionId,
    headers,
    toolsListChanged: result?.capabilities?.tools?.listChanged === true,
  };
}

async function sessionProbe(exchange: Exchange): Promise<McpProbeResult> {
  const session = await openSession(exchange);
  if ('ok' in session) return session;
  try {
    const tools = await listTools(exchange, session.headers, undefined);
    return 'tools' in tools
      ? {
          ok: true,
          tools: tools.tools,
          protocolVersion: session.protocolVersion,
          session: session.sessionId !== undefined,
          toolsListChanged: session.toolsListChanged,
        }
      : tools;
  } finally {
    if (session.sessionId !== undefined) await exchange.end(session.headers);
  }
}

/** The failure an answer stands for (HTTP status, JSON-RPC error, no message), or undefined when it carries a result. */
function answerFailure(step: McpProbeStep, method: string, answer: Answer): Failure | undefined {
  if (answer.status < 200 || answer.status > 299)
    return { ok: false, reason: 'http_status', step, detail: `${method} answered HTTP ${answer.status}` };
  if (answer.unparsable !== undefined)
    return { ok: false, reason: 'invalid_response', step, detail: `${method}: ${answer.unparsable}` };
  const message = answer.message as { error?: { code?: unknown }; result?: unknown } | undefined;
  if (message?.error !== undefined)
    return {
      ok: false,
      reason: 'invalid_response',
      step,
      detail: `${method} returned a JSON-RPC error (code ${String(message.error?.code ?? 'unknown')})`,
    };
  if (typeof message?.result !== 'object' || message.result === null)
    return { ok: false, reason: 'invalid_response', step, detail: `${method} answer has no result object` };
  return undefined;
}

async function listTools(
  exchange: Exchange,
  headers: Readonly<Record<string, string>>,
  base: Record<string, unknown> | undefined,
): Promise<{ tools: McpTool[] } | Failure> {
  const tools = new Map<string, McpTool>();
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const params = { ...base, ...(cursor === undefined ? {} : { cursor }) };
    const answer = await exchange.send('tools/list', 'tools/list', params, headers);
    if (!('status' in answer)) return answer;
    const failed = answerFailure('tools/list', 'tools/list', answer);
    if (failed !== undefined) return failed;
    const result = (answer.message as { result: { tools?: unknown; nextCursor?: unknown } }).result;
    const parsed = parseTools(result.tools, tools.size);
    if (typeof parsed === 'string')
      return { ok: false, reason: 'invalid_response', step: 'tools/list', detail: parsed };
    for (const tool of parsed) if (!tools.has(tool.name)) tools.set(tool.name, tool);
    if (result.nextCursor === undefined || result.nextCursor === null) return { tools: [...tools.values()] };
    if (typeof result.nextCursor !== 'string')
      return {
        ok: false,
        reason: 'invalid_response',
        step: 'tools/list',
        detail: 'tools/list nextCursor is not a string',
      };
    if (seen.has(result.nextCursor))
      return {
        ok: false,
        reason: 'invalid_response',
        step: 'tools/list',
        detail: 'tools/list returned a nextCursor it already returned (a paging loop)',
      };
    seen.add(result.nextCursor);
    cursor = result.nextCursor;
  }
  return {
    ok: false,
    reason: 'invalid_response',
    step: 'tools/list',
    detail: `tools/list still had a nextCursor after ${MAX_PAGES} pages`,
  };
}

/** One page's tools, checked; `already` counts the tools of earlier pages against MAX_TOOLS. */
export function parseTools(tools: unknown, already = 0): McpTool[] | string {
  if (!Array.isArray(tools)) return 'tools/list response has no result.tools array';
  if (already + tools.length > MAX_TOOLS) return `tools/list lists more than ${MAX_TOOLS} tools`;
  const out: McpTool[] = [];
  for (const [index, tool] of tools.entries()) {
    const name = (tool as { name?: unknown } | null)?.name;
    if (
      typeof name !== 'string' ||
      name.trim() === '' ||
      Buffer.byteLength(name) > MAX_TOOL_NAME_BYTES ||
      /[\u0000-\u001f\u007f]/.test(name)
    ) {
      return `result.tools[${index}].name is missing, blank, too long or has control characters`;
    }
    const description = (tool as { description?: unknown }).description;
    out.push(
      typeof description === 'string' && description !== ''
        ? { name, description: description.slice(0, MAX_DESCRIPTION_CHARS) }
        : { name },
    );
  }
  return out;
}

/**
 * The JSON-RPC message answering request `id`: the body itself, or in an event stream the data of the event whose
 * message has that id (a server may send notifications before it).
 */
export function answerOf(text: string, eventStream: boolean, id: number): unknown {
  if (!eventStream) {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error('answer is not JSON');
    }
  }
  // The body is whole and already bounded by the probe's read: every event of it, the last one ended too.
  const events: string[] = [];
  new SseParser(Number.MAX_SAFE_INTEGER, (event) => events.push(event.data)).push(Buffer.from(`${text}\n\n`, 'utf8'));
  for (const data of events) {
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      throw new Error('an event of the answer stream is not JSON');
    }
    if ((message as { id?: unknown } | null)?.id === id) return message;
  }
  throw new Error(`the answer stream holds no message with id ${id}`);
}
