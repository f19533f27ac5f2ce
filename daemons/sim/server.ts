// An OpenAI-compatible simulated inference backend for demos, tests and benchmarks: chat completions,
// completions, embeddings and the Responses API (plain and SSE streaming), /v1/models, /health, a required bearer
// token, and an `x-sim-provider` header naming itself on every answer. Generation runs on the engine model
// (daemons/sim/engine/): requests queue, batch, hit the prefix cache and stream at the pace of its steps, and
// /metrics reports its state under vLLM's names; /admin/state can force a reported value or a fault.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Counter, Registry } from 'prom-client';
import { applyStateUpdate } from './state.ts';
import type { SimState } from './state.ts';
import {
  chatChunk,
  chatCompletion,
  completion,
  completionChunk,
  embeddings,
  responseObject,
  sseEvent,
  usageChunk,
} from './responses.ts';
import type { Usage } from './responses.ts';
import { Engine, isRefusal } from './engine/engine.ts';
import type { EngineConfig } from './engine/config.ts';
import type { FinishedRequest, TokenEvent } from './engine/engine.ts';
import { EngineLoop } from './engine-loop.ts';
import { registerEngineMetrics } from './engine-metrics.ts';
import { chatPrompt, completionPrompt, embeddingInputs, responsesPrompt } from './prompt.ts';
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
  /** Front-end delay before a request reaches the engine. */
  latencyMs?: number;
  /** A cap on each sequence's decode speed (a floor on the engine's step time); 0 leaves the engine's pace. */
  tokensPerSecond?: number;
  /** Output tokens of a request that sets no max_tokens. */
  completionTokens?: number;
  maxBodyBytes?: number;
  /** The engine's parameters over its defaults (daemons/sim/README.md); INSTANT_TIMING makes its steps take no time. */
  engine?: Partial<EngineConfig>;
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
  const engine = new Engine(options.engine);
  const state: SimState = {
    queue_depth: null,
    kv_cache_utilization: null,
    healthy: true,
    latency_ms: options.latencyMs ?? 0,
    tokens_per_second: options.tokensPerSecond ?? 0,
    completion_tokens: options.completionTokens ?? 16,
    step_overhead_ms: engine.config.stepOverheadMs,
    prefill_ms_per_token: engine.config.prefillMsPerToken,
    decode_ms_per_seq: engine.config.decodeMsPerSeq,
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
  // vLLM labels its metrics with the first served model name.
  const metrics = registerEngineMetrics(registry, engine, state, options.models[0] ?? options.name);
  const loop = new EngineLoop(engine, {
    timing: () => ({
      stepOverheadMs: state.step_overhead_ms,
      prefillMsPerToken: state.prefill_ms_per_token,
      decodeMsPerSeq: state.decode_ms_per_seq,
      minStepMs: state.tokens_per_second > 0 ? 1000 / state.tokens_per_second : 0,
    }),
    onSteps: (steps) => metrics.record(steps),
  });
  const served = new Counter({
    name: 'sim_requests_total',
    help: 'Requests answered by path and status.',
    labelNames: ['path', 'status'],
    registers: [registry],
  });

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
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-sim-provider': options.name,
    });
    res.end(text);
  };
  const fail = (res: ServerResponse, status: number, code: string, message: string): void =>
    send(res, status, {
      error: { message, type: status === 401 ? 'authentication_error' : 'invalid_request_error', code },
    });

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
      return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
        ? (parsed as Record<string, unknown>)
        : 'body must be a JSON object';
    } catch {
      return 'body is not valid JSON';
    }
  }

  function record(req: IncomingMessage, path: string, model: string | undefined, stream: boolean): void {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (
        (name.startsWith('x-ai-') || name === 'x-gateway-model-name' || name === 'traceparent') &&
        typeof value === 'string'
      )
        headers[name] = value;
    }
    requests.push({
      method: req.method ?? 'GET',
      path,
      model,
      stream,
      headers,
      headerNames: Object.keys(req.headers),
      authorized: true,
    });
    if (requests.length > MAX_RECORDS) requests.splice(0, requests.length - MAX_RECORDS);
  }

  /** Answers from the engine: each token as it is produced when streaming, the whole answer when the request ends. */
  async function handleInference(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const body = await readJson(req);
    if (typeof body === 'string') return fail(res, body.includes('large') ? 413 : 400, 'invalid_body', body);
    const model = typeof body['model'] === 'string' ? body['model'] : undefined;
    const stream = body['stream'] === true;
    // OpenAI sends one extra chunk with `choices: []` and the usage when the stream asks for it.
    const streamOptions = body['stream_options'];
    const includeUsage =
      typeof streamOptions === 'object' &&
      streamOptions !== null &&
      (streamOptions as Record<string, unknown>)['include_usage'] === true;
    if (model === undefined) return fail(res, 400, 'model_required', 'model is required');
    if (!models.has(model))
      return fail(res, 404, 'model_not_found', `model "${model}" is not served by ${options.name}`);
    record(req, path, model, stream);
    inferring++;
    res.on('close', () => inferring--);
    if (state.fault === 'hang') return; // never answers; the gateway's timeout must fire
    if (state.fault === 'reset') {
      req.socket.destroy();
      return;
    }
    if (state.fault === 'status_500') return fail(res, 500, 'sim_fault', 'simulated backend failure');
    const arrivalMs = loop.now();
    const prompt =
      path === '/v1/chat/completions'
        ? chatPrompt(body)
        : path === '/v1/completions'
          ? completionPrompt(body)
          : path === '/v1/responses'
            ? responsesPrompt(body)
            : undefined;
    if (typeof prompt === 'string') return fail(res, 400, 'invalid_request_error', prompt);
    if (state.latency_ms > 0) await new Promise((r) => setTimeout(r, state.latency_ms));
    if (res.destroyed) return;
    // Embeddings are not generation: answered at once, outside the engine.
    if (prompt === undefined) {
      const { count, promptTokens } = embeddingInputs(body);
      return send(res, 200, embeddings(model, count, promptTokens));
    }
    const created = Math.floor(Date.now() / 1000);
    const id = randomBytes(8).toString('hex');
    const text: string[] = [];
    let finished = false;
    let outputTokens = 0;
    const writer = answerWriter(path, res, { id, model, created, stream, includeUsage });
    const deliver = (event: TokenEvent): void => {
      if (res.destroyed || res.writableEnded) return;
      text.push(event.text);
      if (event.finish !== undefined) {
        finished = true;
        writer.finish(event, event.finish, text.join(''));
        return;
      }
      if (stream && state.fault === 'reset_mid_stream' && event.index === Math.floor(outputTokens / 2)) {
        res.socket?.destroy();
        return;
      }
      writer.token(event);
    };
    // Delivered from the engine's timer: a failure cuts this answer, never the loop serving the others.
    const admission = loop.submit(
      {
        id,
        promptTokenIds: prompt.tokenIds,
        maxTokens: prompt.maxTokens,
        completionTokens: Math.max(1, state.completion_tokens),
        arrivalMs,
      },
      (event) => {
        try {
          deliver(event);
        } catch {
          res.destroy();
        }
      },
    );
    if (isRefusal(admission)) {
      return send(res, 400, {
        error: { message: admission.message, type: 'BadRequestError', param: admission.param, code: 400 },
      });
    }
    outputTokens = admission.outputTokens;
    res.on('close', () => {
      if (!finished) loop.abort(id);
    });
    writer.start();
  }

  interface AnswerWriter {
    start(): void;
    token(event: TokenEvent): void;
    /** The last token, the request's usage and the whole text. */
    finish(last: TokenEvent, done: FinishedRequest, text: string): void;
  }

  interface AnswerContext {
    id: string;
    model: string;
    created: number;
    stream: boolean;
    includeUsage: boolean;
  }

  /** How one API writes its answer: the stream's opening, each token, and the end with the usage. */
  function answerWriter(path: string, res: ServerResponse, c: AnswerContext): AnswerWriter {
    const usage = (done: FinishedRequest): Usage => ({
      promptTokens: done.promptTokens,
      completionTokens: done.completionTokens,
      cachedTokens: done.cachedTokens,
    });
    const openStream = (): void => {
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        'x-sim-provider': options.name,
      });
      res.flushHeaders();
    };
    if (path === '/v1/chat/completions') {
      const cid = `chatcmpl-${c.id}`;
      if (!c.stream)
        return {
          start() {},
          token() {},
          finish: (_last, done, text) =>
            send(res, 200, chatCompletion(cid, c.model, c.created, text, done.finishReason, usage(done), options.name)),
        };
      const token = (event: TokenEvent): void => {
        // The role comes with the first token, as vLLM sends it.
        if (event.index === 0) res.write(chatChunk(cid, c.model, c.created, { role: 'assistant', content: '' }, null));
        res.write(chatChunk(cid, c.model, c.created, { content: event.text }, null));
      };
      return {
        start: openStream,
        token,
        finish(last, done) {
          token(last);
          res.write(chatChunk(cid, c.model, c.created, {}, done.finishReason));
          if (c.includeUsage) res.write(usageChunk(cid, 'chat.completion.chunk', c.model, c.created, usage(done)));
          res.end('data: [DONE]\n\n');
        },
      };
    }
    if (path === '/v1/completions') {
      const cid = `cmpl-${c.id}`;
      if (!c.stream)
        return {
          start() {},
          token() {},
          finish: (_last, done, text) =>
            send(res, 200, completion(cid, c.model, c.created, text, done.finishReason, usage(done))),
        };
      return {
        start: openStream,
        token: (event) => void res.write(completionChunk(cid, c.model, c.created, event.text, null)),
        finish(last, done) {
          res.write(completionChunk(cid, c.model, c.created, last.text, null));
          res.write(completionChunk(cid, c.model, c.created, '', done.finishReason));
          if (c.includeUsage) res.write(usageChunk(cid, 'text_completion', c.model, c.created, usage(done)));
          res.end('data: [DONE]\n\n');
        },
      };
    }
    const rid = `resp_${c.id}`;
    const answer = (text: string, done: FinishedRequest): Record<string, unknown> => {
      const response = responseObject(rid, c.model, c.created, { text, finish: done.finishReason, usage: usage(done) });
      remember(response);
      return response;
    };
    if (!c.stream) return { start() {}, token() {}, finish: (_last, done, text) => send(res, 200, answer(text, done)) };
    let sequence = 0;
    const delta = (text: string): void =>
      void res.write(
        sseEvent('response.output_text.delta', {
          type: 'response.output_text.delta',
          sequence_number: sequence++,
          item_id: `msg_${c.id}`,
          output_index: 0,
          content_index: 0,
          delta: text,
        }),
      );
    return {
      start() {
        openStream();
        res.write(
          sseEvent('response.created', {
            type: 'response.created',
            sequence_number: sequence++,
            response: responseObject(rid, c.model, c.created, undefined),
          }),
        );
      },
      token: (event) => delta(event.text),
      finish(last, done, text) {
        delta(last.text);
        const response = answer(text, done);
        const type = response['status'] === 'incomplete' ? 'response.incomplete' : 'response.completed';
        res.end(sseEvent(type, { type, sequence_number: sequence, response }));
      },
    };
  }

  function remember(response: Record<string, unknown>): void {
    stored.set(String(response['id']), response);
    if (stored.size > MAX_STORED_RESPONSES) stored.delete(stored.keys().next().value as string);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    if (path === '/health')
      return send(res, state.healthy ? 200 : 503, {
        status: state.healthy ? 'ok' : 'unhealthy',
        provider: options.name,
      });
    if (path === '/metrics') {
      loop.sync();
      const text = (await registry.metrics()) + poolSeries();
      res.writeHead(200, { 'content-type': registry.contentType, 'x-sim-provider': options.name });
      res.end(text);
      return;
    }
    if (!bearer.accepts(req.headers['authorization']))
      return fail(res, 401, 'invalid_api_key', 'a valid bearer token is required');
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
      return send(res, 200, {
        object: 'list',
        data: [...models].map((id) => ({ id, object: 'model', created: 0, owned_by: options.name })),
      });
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
      loop.close();
    },
  };
}
