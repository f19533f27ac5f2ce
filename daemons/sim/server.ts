// An OpenAI-compatible simulated inference backend for demos, tests and benchmarks: chat completions,
// completions, embeddings and the Responses API (plain and SSE streaming), /v1/models, /health, Prometheus
// /metrics with a settable queue depth and KV-cache utilisation, a required bearer token, and an
// `x-sim-provider` header naming itself on every answer.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Counter, Gauge, Registry } from 'prom-client';
import { applyStateUpdate } from './state.ts';
import type { SimState } from './state.ts';
import { chatChunk, chatCompletion, completion, completionChunk, embeddings, responseObject, sseEvent, tokenText, usageChunk } from './responses.ts';
import { listen } from '../shared/listen.ts';
import { BearerTokens } from './bearer-tokens.ts';

/** How long close() lets running requests finish before cutting them. */
const DRAIN_MS = 5000;
export interface SimOptions {
  name: string;
  models: readonly string[];
  /** The bearer token, or the rotating tokens main.ts keeps from --token-file. */
  token: string | BearerTokens;
  /** Where the sim's metrics go (main.ts adds its token reload counter); a new registry by default. */
  registry?: Registry;
  host?: string;
  port?: number;
  latencyMs?: number;
  tokensPerSecond?: number;
  completionTokens?: number;
  maxBodyBytes?: number;
}

/** What a test can read back about a request the sim accepted (never the credential itself). */
export interface SimRequestRecord {
  method: string;
  path: string;
  model: string | undefined;
  stream: boolean;
  /** Every x-ai-* header and the model header as received. */
  headers: Record<string, string>;
  /** Names of every header received, lowercase (values are not kept: one is the credential). */
  headerNames: string[];
  authorized: boolean;
}

export interface SimServer {
  readonly port: number;
  readonly state: SimState;
  readonly requests: SimRequestRecord[];
  /** Requests being answered right now: the load an EPP stand-in in a test reads as the site's in-flight. */
  readonly running: number;
  close(): Promise<void>;
}

const MAX_RECORDS = 200;
const MAX_STORED_RESPONSES = 200;

export async function startSim(options: SimOptions): Promise<SimServer> {
  const bearer = typeof options.token === 'string' ? new BearerTokens(options.token) : options.token;
  const state: SimState = {
    queue_depth: 0,
    kv_cache_utilization: 0,
    healthy: true,
    latency_ms: options.latencyMs ?? 0,
    tokens_per_second: options.tokensPerSecond ?? 0,
    completion_tokens: options.completionTokens ?? 16,
    fault: 'none',
    pool_capacity: 0,
    pool_background: 0,
    pool_skewed_queue: 0,
  };
  const models = new Set(options.models);
  const maxBody = options.maxBodyBytes ?? 10 * 1024 * 1024;
  const requests: SimRequestRecord[] = [];
  const stored = new Map<string, Record<string, unknown>>();
  let running = 0;
  /** Inference requests being answered (not /metrics or /admin): the pool's own load. */
  let inferring = 0;

  const registry = options.registry ?? new Registry();
  const registers = [registry];
  new Gauge({ name: 'sim_queue_depth', help: 'Normalized queue depth set through /admin/state.', registers, collect() { this.set(state.queue_depth); } });
  new Gauge({ name: 'sim_kv_cache_utilization', help: 'KV-cache utilisation set through /admin/state.', registers, collect() { this.set(state.kv_cache_utilization); } });
  new Gauge({ name: 'vllm:num_requests_waiting', help: 'Queue depth in the vLLM metric name.', registers, collect() { this.set(state.queue_depth); } });
  new Gauge({ name: 'vllm:gpu_cache_usage_perc', help: 'KV-cache utilisation in the vLLM metric name.', registers, collect() { this.set(state.kv_cache_utilization); } });
  new Gauge({ name: 'vllm:num_requests_running', help: 'Requests being served.', registers, collect() { this.set(running); } });
  const served = new Counter({ name: 'sim_requests_total', help: 'Requests answered by path and status.', labelNames: ['path', 'status'], registers });

  /** The EPP pool series as the operator scrapes them (one ready endpoint), or nothing while pool_capacity is 0. */
  const poolSeries = (): string => {
    if (state.pool_capacity === 0) return '';
    const held = inferring + state.pool_background;
    const runningNow = Math.min(held, state.pool_capacity);
    const waiting = held - runningNow + state.pool_skewed_queue;
    return [
      '# TYPE llm_d_epp_average_running_requests gauge',
      `llm_d_epp_average_running_requests ${runningNow}`,
      '# TYPE llm_d_epp_average_queue_size gauge',
      `llm_d_epp_average_queue_size ${waiting}`,
      '# TYPE llm_d_epp_ready_endpoints gauge',
      'llm_d_epp_ready_endpoints 1',
      '',
    ].join('\n');
  };
  const send = (res: ServerResponse, status: number, body: unknown): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-sim-provider': options.name });
    res.end(text);
  };
  const fail = (res: ServerResponse, status: number, code: string, message: string): void =>
    send(res, status, { error: { message, type: status === 401 ? 'authentication_error' : 'invalid_request_error', code } });

  async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | string> {
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBody) return 'request body too large';
      chunks.push(chunk);
    }
    if (total === 0) return {};
    try {
      const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : 'body must be a JSON object';
    } catch {
      return 'body is not valid JSON';
    }
  }

  function record(req: IncomingMessage, path: string, model: string | undefined, stream: boolean): void {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if ((name.startsWith('x-ai-') || name === 'x-gateway-model-name') && typeof value === 'string') headers[name] = value;
    }
    requests.push({ method: req.method ?? 'GET', path, model, stream, headers, headerNames: Object.keys(req.headers), authorized: true });
    if (requests.length > MAX_RECORDS) requests.splice(0, requests.length - MAX_RECORDS);
  }

  /** Streams `count` tokens at the configured rate; stops when the client goes away. */
  async function streamTokens(res: ServerResponse, count: number, write: (i: number) => string): Promise<boolean> {
    const interval = state.tokens_per_second > 0 ? 1000 / state.tokens_per_second : 0;
    for (let i = 0; i < count; i++) {
      if (res.destroyed) return false;
      if (state.fault === 'reset_mid_stream' && i === Math.floor(count / 2)) {
        res.socket?.destroy();
        return false;
      }
      res.write(write(i));
      if (interval > 0) await new Promise((r) => setTimeout(r, interval));
    }
    return !res.destroyed;
  }

  async function handleInference(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const body = await readJson(req);
    if (typeof body === 'string') return fail(res, body.includes('large') ? 413 : 400, 'invalid_body', body);
    const model = typeof body['model'] === 'string' ? body['model'] : undefined;
    const stream = body['stream'] === true;
    // OpenAI sends one extra chunk with `choices: []` and the usage when the stream asks for it.
    const streamOptions = body['stream_options'];
    const includeUsage = typeof streamOptions === 'object' && streamOptions !== null && (streamOptions as Record<string, unknown>)['include_usage'] === true;
    if (model === undefined) return fail(res, 400, 'model_required', 'model is required');
    if (!models.has(model)) return fail(res, 404, 'model_not_found', `model "${model}" is not served by ${options.name}`);
    record(req, path, model, stream);
    inferring++;
    res.on('close', () => inferring--);
    if (state.fault === 'hang') return; // never answers; the gateway's timeout must fire
    if (state.fault === 'reset') {
      req.socket.destroy();
      return;
    }
    if (state.fault === 'status_500') return fail(res, 500, 'sim_fault', 'simulated backend failure');
    if (state.latency_ms > 0) await new Promise((r) => setTimeout(r, state.latency_ms));
    if (res.destroyed) return;
    const created = Math.floor(Date.now() / 1000);
    const tokens = state.completion_tokens;
    const id = randomBytes(8).toString('hex');
    if (path === '/v1/embeddings') {
      const input = body['input'];
      return send(res, 200, embeddings(model, Array.isArray(input) ? Math.min(input.length, 256) : 1));
    }
    if (!stream) {
      if (path === '/v1/chat/completions') return send(res, 200, chatCompletion(`chatcmpl-${id}`, model, created, tokens, options.name));
      if (path === '/v1/completions') return send(res, 200, completion(`cmpl-${id}`, model, created, tokens));
      const response = responseObject(`resp_${id}`, model, created, tokens, 'completed');
      remember(response);
      return send(res, 200, response);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-sim-provider': options.name });
    res.flushHeaders();
    if (path === '/v1/chat/completions') {
      const cid = `chatcmpl-${id}`;
      res.write(chatChunk(cid, model, created, { role: 'assistant', content: '' }, null));
      if (!(await streamTokens(res, tokens, (i) => chatChunk(cid, model, created, { content: tokenText(i) }, null)))) return;
      res.write(chatChunk(cid, model, created, {}, 'stop'));
      if (includeUsage) res.write(usageChunk(cid, 'chat.completion.chunk', model, created, tokens));
      res.end('data: [DONE]\n\n');
      return;
    }
    if (path === '/v1/completions') {
      const cid = `cmpl-${id}`;
      if (!(await streamTokens(res, tokens, (i) => completionChunk(cid, model, created, tokenText(i), null)))) return;
      res.write(completionChunk(cid, model, created, '', 'stop'));
      if (includeUsage) res.write(usageChunk(cid, 'text_completion', model, created, tokens));
      res.end('data: [DONE]\n\n');
      return;
    }
    const rid = `resp_${id}`;
    let sequence = 0;
    res.write(sseEvent('response.created', { type: 'response.created', sequence_number: sequence++, response: responseObject(rid, model, created, tokens, 'in_progress') }));
    const ok = await streamTokens(res, tokens, (i) =>
      sseEvent('response.output_text.delta', { type: 'response.output_text.delta', sequence_number: sequence++, item_id: `msg_${id}`, output_index: 0, content_index: 0, delta: tokenText(i) }),
    );
    if (!ok) return;
    const done = responseObject(rid, model, created, tokens, 'completed');
    remember(done);
    res.end(sseEvent('response.completed', { type: 'response.completed', sequence_number: sequence, response: done }));
  }

  function remember(response: Record<string, unknown>): void {
    stored.set(String(response['id']), response);
    if (stored.size > MAX_STORED_RESPONSES) stored.delete(stored.keys().next().value as string);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    if (path === '/health') return send(res, state.healthy ? 200 : 503, { status: state.healthy ? 'ok' : 'unhealthy', provider: options.name });
    if (path === '/metrics') {
      const text = (await registry.metrics()) + poolSeries();
      res.writeHead(200, { 'content-type': registry.contentType, 'x-sim-provider': options.name });
      res.end(text);
      return;
    }
    if (!bearer.accepts(req.headers['authorization'])) return fail(res, 401, 'invalid_api_key', 'a valid bearer token is required');
    if (path === '/admin/state') {
      if (method === 'GET') return send(res, 200, state);
      if (method !== 'POST') return fail(res, 405, 'method_not_allowed', 'use GET or POST');
      const update = await readJson(req);
      const problem = typeof update === 'string' ? update : applyStateUpdate(state, update);
      return problem === undefined ? send(res, 200, state) : fail(res, 400, 'invalid_state', problem);
    }
    if (path === '/admin/requests') {
      if (method === 'DELETE') requests.length = 0;
      return send(res, 200, { requests });
    }
    if (path === '/v1/models') {
      return send(res, 200, { object: 'list', data: [...models].map((id) => ({ id, object: 'model', created: 0, owned_by: options.name })) });
    }
    if (['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'].includes(path)) {
      if (method !== 'POST') return fail(res, 405, 'method_not_allowed', 'use POST');
      return handleInference(req, res, path);
    }
    const sub = /^\/v1\/responses\/([A-Za-z0-9_.-]+)$/.exec(path);
    if (sub !== null) {
      record(req, path, undefined, false);
      const found = stored.get(sub[1] ?? '');
      if (found === undefined) return fail(res, 404, 'response_not_found', 'no such response');
      if (method === 'DELETE') {
        stored.delete(sub[1] ?? '');
        return send(res, 200, { id: found['id'], object: 'response.deleted', deleted: true });
      }
      return send(res, 200, found);
    }
    return fail(res, 404, 'not_found', `no route for ${path.slice(0, 128)}`);
  }

  const server: Server = createServer((req, res) => {
    running++;
    res.on('close', () => {
      running--;
      served.inc({ path: (req.url ?? '/').split('?')[0]?.slice(0, 64) ?? '/', status: String(res.statusCode) });
    });
    handle(req, res).catch(() => {
      if (!res.headersSent) fail(res, 500, 'internal_error', 'sim failed');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 30_000;
  const bound = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  return {
    port: bound.port,
    state,
    requests,
    get running() {
      return running;
    },
    // Like a real backend on SIGTERM: unhealthy at once, no new connections, the requests already running finish
    // (bounded by DRAIN_MS), then whatever is left is cut.
    close: async () => {
      state.healthy = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const deadline = Date.now() + DRAIN_MS;
      while (running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      server.closeAllConnections();
      await closed;
    },
  };
}
