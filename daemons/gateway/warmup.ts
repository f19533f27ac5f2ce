// Warm-up before readiness: a fresh gateway spends several times its steady CPU per request for its first seconds
// (V8 runs the request path's JavaScript unoptimised until it has seen enough calls), which is exactly when a
// rollout or a scale-up sends it traffic. So before it reports ready, the gateway sends itself requests over
// loopback through its own request shell (the same handler its listeners use, its request parser, its load
// balancer and undici) to a private sink upstream: non-streaming and streaming chat completions, a few thousand.
// Nothing leaves the process, no configured upstream is called, and the figures go to a throw-away registry.
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { GatewayResponse } from './response.ts';
import { Pool } from 'undici';
import type { Logger } from '../shared/log.ts';
import { listen } from '../shared/listen.ts';
import type { GatewayRole } from './config.ts';
import type { Filter } from './context.ts';
import { startLoadBalancer } from './filters/load-balancer.ts';
import type { LoadBalancer } from './filters/load-balancer.ts';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MODEL_HEADER, createRequestParser } from './filters/request-parser.ts';
import { createGatewayMetrics } from './metrics.ts';
import type { Pipeline } from './pipeline.ts';

/** Requests sent through the request path before ready (measured by the cold case of `npm run bench:gateway`). */
export const WARMUP_REQUESTS = 3_000;
const WARMUP_CONCURRENCY = 16;
/** Every STREAM_EVERY-th warm-up request is streamed (SSE), as a share of real traffic is. */
const STREAM_EVERY = 4;
const WARMUP_CLUSTER = 'warmup';

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-warmup',
  object: 'chat.completion',
  created: 0,
  model: 'warmup',
  choices: [{ index: 0, message: { role: 'assistant', content: 'warm' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
const CHUNK = (content: string): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-warmup', object: 'chat.completion.chunk', created: 0, model: 'warmup', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

export interface WarmupOptions {
  role: GatewayRole;
  logger: Logger;
  /** The gateway's request handler (what its listeners call); `counted` false keeps warm-up out of its metrics. */
  serve(
    req: IncomingMessage,
    res: GatewayResponse,
    pipeline: Pipeline,
    loadBalancer: LoadBalancer,
    counted: boolean,
  ): void;
  requests?: number;
}

export interface WarmupResult {
  readonly requests: number;
  readonly failed: number;
  readonly ms: number;
}

export async function warmRequestPath(options: WarmupOptions): Promise<WarmupResult> {
  const started = performance.now();
  const sink = createServer((req, res) => {
    const streamed = req.headers['x-warmup-stream'] === '1';
    req.resume();
    req.on('end', () => {
      if (!streamed) {
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(COMPLETION),
          'x-request-id': 'warmup',
        });
        res.end(COMPLETION);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(CHUNK('wa'));
      res.write(CHUNK('rm'));
      res.end('data: [DONE]\n\n');
    });
  });
  const front = createServer({ ServerResponse: GatewayResponse });
  const sinkPort = (await listen(sink, 0, '127.0.0.1')).port;
  const loadBalancer = await startLoadBalancer({
    config: { filter: 'load_balancer', clusters: [{ name: WARMUP_CLUSTER, endpoints: [`127.0.0.1:${sinkPort}`] }] },
    metrics: createGatewayMetrics(options.role, { process: false, eventLoop: false }),
    logger: options.logger,
    isClosing: () => false,
  });
  const route: Filter = {
    name: 'warmup_route',
    apply(request) {
      request.cluster = WARMUP_CLUSTER;
      request.labels.cluster = WARMUP_CLUSTER;
    },
  };
  const parser = createRequestParser({
    field: 'model',
    header: DEFAULT_MODEL_HEADER,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
  });
  const pipeline: Pipeline = {
    filters: [parser, route, loadBalancer],
    routeIndex: 1,
    listModels: () => null,
    pathRoutes: [],
  };
  front.on('request', (req: IncomingMessage, res: GatewayResponse) =>
    options.serve(req, res, pipeline, loadBalancer, false),
  );
  const frontPort = (await listen(front, 0, '127.0.0.1')).port;
  const client = new Pool(`http://127.0.0.1:${frontPort}`, { connections: WARMUP_CONCURRENCY, pipelining: 1 });
  const total = options.requests ?? WARMUP_REQUESTS;
  const plain = JSON.stringify({ model: 'warmup', messages: [{ role: 'user', content: 'warm up' }] });
  const streamed = JSON.stringify({ model: 'warmup', stream: true, messages: [{ role: 'user', content: 'warm up' }] });
  let next = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const stream = next++ % STREAM_EVERY === 0;
      try {
        const res = await client.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(stream ? { 'x-warmup-stream': '1' } : {}) },
          body: stream ? streamed : plain,
        });
        await res.body.dump();
        if (res.statusCode !== 200) failed++;
      } catch {
        failed++;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: WARMUP_CONCURRENCY }, worker));
  } finally {
    await client.close();
    await loadBalancer.close(true);
    front.closeAllConnections();
    sink.closeAllConnections();
    await Promise.all([new Promise((resolve) => front.close(resolve)), new Promise((resolve) => sink.close(resolve))]);
  }
  return { requests: total, failed, ms: Math.round(performance.now() - started) };
}
