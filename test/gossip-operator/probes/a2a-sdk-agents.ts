// Real A2A agents built with the official `@a2a-js/sdk` (A2A 1.0), for the operator's card probe and the gateway's
// A2A routing tests. The SDK's own pieces do the protocol: DefaultRequestHandler over an InMemoryTaskStore and an
// AgentExecutor, its framework-agnostic JsonRpcTransportHandler (and LegacyJsonRpcTransportHandler for v0.3
// callers: `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`), and its SSE formatter. Only the HTTP
// wiring is ours, on node:http: the SDK's express adapter needs express, which this project does not depend on.
//
// The agent's streaming skill works over time: a task is submitted, goes working, emits `steps` artifact chunks
// `stepDelayMs` apart and completes, so a stream has several events and a blocking send waits for the end. A task
// can be cancelled while it runs.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  AgentCard,
  formatSSEErrorEvent,
  formatSSEEvent,
  SSE_HEADERS,
  Task,
  TaskArtifactUpdateEvent,
  TaskStatusUpdateEvent,
} from '@a2a-js/sdk';
import { A2A_LEGACY_PROTOCOL_VERSION } from '@a2a-js/sdk/compat/v0_3';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  defaultServerCallContextBuilder,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  ServerCallContext,
  validateVersion,
} from '@a2a-js/sdk/server';

export interface A2aSkill {
  readonly id: string;
  readonly name: string;
  readonly description?: string;
  readonly tags?: readonly string[];
}

export interface A2aAgentOptions {
  readonly name?: string;
  readonly description?: string;
  readonly skills?: readonly A2aSkill[];
  /**
   * Where the card is served. `agent-card.json` (A2A 0.3 and 1.0) serves the 1.0 card; `agent.json` serves only the
   * older well-known path, with the card in the v0.3 shape the SDK translates it to (url, preferredTransport,
   * protocolVersion), as an agent of that era does.
   */
  readonly cardPath?: 'agent-card.json' | 'agent.json';
  /** When set, every request (card and JSON-RPC) must carry `Authorization: Bearer <requireToken>`, else 401. */
  readonly requireToken?: string;
  /** Served under this path (`/a2a`): JSON-RPC at it, the card below it. Default: the root. */
  readonly basePath?: string;
  /** Accept v0.3 callers (method names like `message/send`) besides 1.0 ones. Default true. */
  readonly legacyCompat?: boolean;
  /** Artifact chunks a task emits before it completes. Default 3. */
  readonly steps?: number;
  readonly stepDelayMs?: number;
  readonly streaming?: boolean;
  readonly pushNotifications?: boolean;
  /** Replaces the card body served (a card missing a field, bad JSON, a huge body): for the probe's failure cases. */
  readonly cardBody?: string;
  /** Serve HTTPS with this server certificate and key (PEM). */
  readonly tls?: { readonly cert: string; readonly key: string };
}

export interface SeenRequest {
  readonly http: string;
  readonly path: string;
  /** The JSON-RPC method of a POST, when it carried one. */
  readonly rpc?: string;
  readonly authorization?: string;
  readonly a2aVersion?: string;
}

export interface A2aAgent {
  /** The agent's endpoint: JSON-RPC is POSTed here, the card is below it. */
  readonly url: string;
  /** The 1.0 card the agent describes itself with (what agent-card.json serves). */
  readonly card: AgentCard;
  readonly seen: SeenRequest[];
  /** Ids of the tasks the executor ran, in order. */
  readonly tasks: string[];
  /** Replaces the skills on the card from the next request on. */
  setSkills(skills: readonly A2aSkill[]): void;
  close(): Promise<void>;
}

export const STREAMING_SKILL: A2aSkill = {
  id: 'count-words',
  name: 'Count words',
  description: 'Counts the words of a text, one chunk at a time.',
  tags: ['text', 'streaming'],
};

const MAX_BODY_BYTES = 1024 * 1024;

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The streaming executor: submitted, working, `steps` artifact chunks over time, completed (or canceled). */
function streamingExecutor(steps: number, stepDelayMs: number, tasks: string[]): AgentExecutor {
  const cancelled = new Set<string>();
  const contexts = new Map<string, string>();
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const status = (taskId: string, contextId: string, state: string) =>
    AgentEvent.statusUpdate(
      TaskStatusUpdateEvent.fromJSON({ taskId, contextId, status: { state, timestamp: new Date().toISOString() } }),
    );
  return {
    async execute(context, bus) {
      const { taskId, contextId } = context;
      tasks.push(taskId);
      contexts.set(taskId, contextId);
      const text = context.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(' ');
      const words = text.split(/\s+/).filter((w) => w !== '');
      if (context.task === undefined) {
        // fromJSON reads the wire form; the user's message is already the SDK's own object, so it goes in as is.
        const task = Task.fromJSON({ id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED' } });
        bus.publish(AgentEvent.task({ ...task, history: [context.userMessage] }));
      }
      bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING'));
      for (let step = 0; step < steps; step++) {
        await sleep(stepDelayMs);
        if (cancelled.has(taskId)) return;
        bus.publish(
          AgentEvent.artifactUpdate(
            TaskArtifactUpdateEvent.fromJSON({
              taskId,
              contextId,
              artifact: {
                artifactId: 'word-count',
                name: 'word-count',
                parts: [{ text: `chunk ${step + 1}/${steps}: ${words.length} words` }],
              },
              append: step > 0,
              lastChunk: step === steps - 1,
            }),
          ),
        );
      }
      bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED'));
      bus.finished();
    },
    async cancelTask(taskId, bus) {
      cancelled.add(taskId);
      bus.publish(status(taskId, contexts.get(taskId) ?? '', 'TASK_STATE_CANCELED'));
      bus.finished();
    },
  };
}

function cardOf(options: A2aAgentOptions, url: string, skills: readonly A2aSkill[]): AgentCard {
  const legacy = options.legacyCompat ?? true;
  return AgentCard.fromJSON({
    name: options.name ?? 'sdk-streaming-agent',
    description: options.description ?? 'An agent built with @a2a-js/sdk that works over time.',
    version: '1.0.0',
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      ...(legacy ? [{ url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' }] : []),
    ],
    capabilities: { streaming: options.streaming ?? true, pushNotifications: options.pushNotifications ?? false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: skills.map((s) => ({
      id: s.id,
      name: s.name,
      description: s.description ?? '',
      tags: [...(s.tags ?? [])],
    })),
  });
}

/**
 * The card in the v0.3 shape, made by the SDK's own translator. Without express that translator is reachable only
 * through the v0.3 JSON-RPC method that answers with a card, so a throwaway handler serves this card as its
 * extended card and is asked for it.
 */
async function legacyCardOf(card: AgentCard): Promise<unknown> {
  const capabilities = { extensions: [], ...card.capabilities, extendedAgentCard: true };
  const translator = new DefaultRequestHandler(
    { ...card, capabilities },
    new InMemoryTaskStore(),
    streamingExecutor(0, 0, []),
    undefined,
    undefined,
    undefined,
    async () => card,
  );
  const answer = await new LegacyJsonRpcTransportHandler(translator).handle(
    { jsonrpc: '2.0', id: 1, method: 'agent/getAuthenticatedExtendedCard' },
    new ServerCallContext(),
  );
  const result = answer as { result?: unknown; error?: { message?: string } };
  if (result.result === undefined)
    throw new Error(`the SDK did not translate the card to v0.3: ${result.error?.message ?? 'no result'}`);
  return result.result;
}

export async function startA2aAgent(options: A2aAgentOptions = {}): Promise<A2aAgent> {
  const seen: SeenRequest[] = [];
  const tasks: string[] = [];
  const base = (options.basePath ?? '').replace(/\/$/, '');
  const legacy = options.legacyCompat ?? true;
  // The older path's card is the v0.3 translation, which needs a v0.3 interface on the card.
  if (options.cardPath === 'agent.json' && !legacy)
    throw new Error('cardPath agent.json serves the v0.3 card: it needs legacyCompat');
  const skills: readonly A2aSkill[] = options.skills ?? [STREAMING_SKILL];
  const listener = (req: http.IncomingMessage, res: http.ServerResponse) => {
    void handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  };
  const server =
    options.tls !== undefined
      ? https.createServer({ cert: options.tls.cert, key: options.tls.key }, listener)
      : http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `${options.tls !== undefined ? 'https' : 'http'}://127.0.0.1:${port}${base}`;
  const card = cardOf(options, url, skills);
  const requestHandler = new DefaultRequestHandler(
    card,
    new InMemoryTaskStore(),
    streamingExecutor(options.steps ?? 3, options.stepDelayMs ?? 50, tasks),
  );
  const v1 = new JsonRpcTransportHandler(requestHandler);
  const v03 = new LegacyJsonRpcTransportHandler(requestHandler);
  const cardPath = `${base}/.well-known/${options.cardPath ?? 'agent-card.json'}`;

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://agent').pathname;
    const text = req.method === 'POST' ? await readBody(req) : '';
    let body: { method?: unknown; id?: unknown } | undefined;
    try {
      body = text === '' ? undefined : (JSON.parse(text) as typeof body);
    } catch {
      body = undefined;
    }
    const authorization = header(req, 'authorization');
    const a2aVersion = header(req, 'a2a-version');
    seen.push({
      http: req.method ?? '',
      path,
      ...(typeof body?.method === 'string' ? { rpc: body.method } : {}),
      ...(authorization !== undefined ? { authorization } : {}),
      ...(a2aVersion !== undefined ? { a2aVersion } : {}),
    });
    if (options.requireToken !== undefined && authorization !== `Bearer ${options.requireToken}`) {
      res
        .writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' })
        .end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    if (req.method === 'GET' && path === cardPath) {
      if (options.cardBody !== undefined)
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(options.cardBody);
      const served =
        options.cardPath === 'agent.json'
          ? await legacyCardOf(card)
          : AgentCard.toJSON(await requestHandler.getAgentCard());
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(served));
      return;
    }
    if (req.method !== 'POST' || (path !== (base === '' ? '/' : base) && path !== `${base}/`)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    await rpc(req, res, text, body);
  }

  /** What the SDK's express jsonRpcHandler does, on node:http: pick the revision, run the transport, answer JSON or SSE. */
  async function rpc(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    text: string,
    body: { method?: unknown; id?: unknown } | undefined,
  ): Promise<void> {
    const requestedVersion = header(req, 'a2a-version');
    // As the SDK decides: a caller that names no A2A-Version is a v0.3 caller (method names like `message/send`).
    const useLegacy = legacy && (requestedVersion ?? A2A_LEGACY_PROTOCOL_VERSION) === A2A_LEGACY_PROTOCOL_VERSION;
    const mapError = useLegacy
      ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError
      : JsonRpcTransportHandler.mapToJSONRPCError;
    const id = body?.id ?? null;
    const context = defaultServerCallContextBuilder({
      extensions: undefined,
      user: undefined,
      headers: req.headers,
      ...(requestedVersion !== undefined ? { requestedVersion } : {}),
    });
    try {
      validateVersion(context.requestedVersion, await requestHandler.getAgentCard(), 'JSONRPC');
    } catch (error) {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id, error: mapError(error) }));
      return;
    }
    const answer = await (useLegacy ? v03 : v1).handle(text, context);
    if (typeof (answer as AsyncGenerator<unknown>)[Symbol.asyncIterator] !== 'function') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      return;
    }
    const iterator = (answer as AsyncGenerator<unknown>)[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await iterator.next();
    } catch (error) {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id, error: mapError(error) }));
      return;
    }
    res.writeHead(200, SSE_HEADERS as Record<string, string>);
    res.flushHeaders();
    try {
      if (!first.done) res.write(formatSSEEvent(first.value));
      for (let next = await iterator.next(); !next.done; next = await iterator.next())
        res.write(formatSSEEvent(next.value));
    } catch (error) {
      if (!res.writableEnded) res.write(formatSSEErrorEvent({ jsonrpc: '2.0', id, error: mapError(error) }));
    } finally {
      res.end();
    }
  }

  return {
    url,
    card,
    seen,
    tasks,
    setSkills(next) {
      // The request handler holds this card object and reads it on every request: changed in place, it is served at once.
      card.skills = cardOf(options, url, next).skills;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
