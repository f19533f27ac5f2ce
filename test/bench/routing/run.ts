// The routing bench's I/O shell: starts the bench grid under one policy (real operators, gateways and sims on
// loopback), replays a trace against its consumer gateway on the trace's own clock (open loop: a slow answer never
// delays the next send), and reads what the sims' vLLM metrics and the gateway's retry counter say about the window.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { synthGrid } from '../../../constructs/grid.ts';
import { type LocalGrid, startLocalGrid } from '../../../daemons/local-grid/runner.ts';
import { waitFor } from '../../../daemons/local-grid/traffic.ts';
import { BACKENDS, CONSUMER_SITE, MODEL, SESSION_HEADER, type Policy, benchDeclaration } from './policies.ts';
import type { TraceRequest } from './workload.ts';

/** What one request did, times in ms from the trace's start. */
export interface RequestOutcome {
  readonly index: number;
  readonly kind: TraceRequest['kind'];
  readonly stream: boolean;
  readonly sentAtMs: number;
  /** When the answer ended, or the request failed. */
  readonly endedAtMs: number;
  /** HTTP status; 0 when no answer came (connection error, timeout). */
  readonly status: number;
  readonly ok: boolean;
  /** x-sim-provider: the backend that answered. */
  readonly backend?: string;
  /** First content chunk (streaming) or the whole answer (non-streaming), from the send. */
  readonly ttftMs?: number;
  readonly e2eMs?: number;
  readonly outputTokens: number;
  readonly error?: string;
}

export interface FleetCounters {
  readonly prefixQueries: number;
  readonly prefixHits: number;
  readonly generationTokens: number;
}

export interface BenchGrid {
  readonly grid: LocalGrid;
  readonly consumer: string;
  readonly consumerAdmin: string;
  readonly startMs: number;
}

function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) sum += v;
  }
  return sum;
}

async function text(url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
  return response.text();
}

/** The fleet's prefix-cache and generation counters, summed over the sims that answer (a killed one counts 0). */
export async function fleetCounters(
  grid: LocalGrid,
  backends: readonly string[] = BACKENDS.map((b) => b.name),
): Promise<Record<string, FleetCounters>> {
  const out: Record<string, FleetCounters> = {};
  await Promise.all(
    backends.map(async (name) => {
      try {
        const t = await text(`http://${grid.sim(name).listenAddress}/metrics`);
        out[name] = {
          prefixQueries: metricSum(t, 'vllm:prefix_cache_queries_total'),
          prefixHits: metricSum(t, 'vllm:prefix_cache_hits_total'),
          generationTokens: metricSum(t, 'vllm:generation_tokens_total'),
        };
      } catch {
        // A killed sim: its counters are gone with it.
      }
    }),
  );
  return out;
}

/** The counters' change between two reads, summed over the sims read both times. */
export function counterDelta(
  before: Record<string, FleetCounters>,
  after: Record<string, FleetCounters>,
): FleetCounters {
  let prefixQueries = 0;
  let prefixHits = 0;
  let generationTokens = 0;
  for (const [name, a] of Object.entries(after)) {
    const b = before[name];
    if (b === undefined) continue;
    prefixQueries += a.prefixQueries - b.prefixQueries;
    prefixHits += a.prefixHits - b.prefixHits;
    generationTokens += a.generationTokens - b.generationTokens;
  }
  return { prefixQueries, prefixHits, generationTokens };
}

/** The consumer gateway's retries (grid_gateway_retries_total, every cluster). */
export async function gatewayRetries(bench: BenchGrid): Promise<number> {
  return metricSum(await text(`http://${bench.consumerAdmin}/metrics`), 'grid_gateway_retries_total');
}

/** Candidates in the consumer's overlay, read from the file its overlay-sync wrote. */
function overlayCandidates(grid: LocalGrid): number {
  const sync = grid.byRole('overlay-sync', CONSUMER_SITE).find((p) => p.env['OVERLAY_SYNC_OUTPUT'] !== undefined);
  const file = sync?.env['OVERLAY_SYNC_OUTPUT'];
  if (file === undefined || !existsSync(file)) return 0;
  try {
    const doc = JSON.parse(readFileSync(file, 'utf8')) as {
      overlay?: { candidates?: { kind: string; name: string }[] };
    };
    return (doc.overlay?.candidates ?? []).filter((c) => c.kind === 'inference_model' && c.name === MODEL).length;
  } catch {
    return 0;
  }
}

/** Synthesizes the bench grid under `policy` into `dir`, starts it and waits until every backend is a candidate. */
export async function startBenchGrid(
  policy: Policy,
  dir: string,
  progress: (m: string) => void = () => undefined,
): Promise<BenchGrid> {
  const started = performance.now();
  synthGrid(benchDeclaration(policy), join(dir, 'dist'));
  const grid = await startLocalGrid({
    distDir: join(dir, 'dist'),
    stateDir: join(dir, 'state'),
    profile: 'fast',
    readyTimeoutMs: 90_000,
    progress,
  });
  try {
    await waitFor(
      `all ${BACKENDS.length} backends in the consumer's overlay`,
      async () => (overlayCandidates(grid) >= BACKENDS.length ? true : undefined),
      90_000,
    );
  } catch (error) {
    await grid.stop();
    throw error;
  }
  const consumer = grid.byRole('consumer-gateway', CONSUMER_SITE)[0]!;
  return {
    grid,
    consumer: consumer.listenAddress!,
    consumerAdmin: consumer.adminAddress!.replace(/^0\.0\.0\.0:/, '127.0.0.1:'),
    startMs: performance.now() - started,
  };
}

/** Whether an SSE chunk carries answer text (a delta with non-empty content). */
function hasContent(chunk: string): boolean {
  return /"content":"[^"]/.test(chunk);
}

/** Sends one trace request and follows it to its end; never throws. */
export async function sendRequest(
  consumer: string,
  request: TraceRequest,
  sessionAffinity: boolean,
  t0: number,
  timeoutMs: number,
): Promise<RequestOutcome> {
  const outcome = await follow(consumer, request, sessionAffinity, t0, timeoutMs);
  return { ...outcome, endedAtMs: performance.now() - t0 };
}

async function follow(
  consumer: string,
  request: TraceRequest,
  sessionAffinity: boolean,
  t0: number,
  timeoutMs: number,
): Promise<Omit<RequestOutcome, 'endedAtMs'>> {
  const sentAtMs = performance.now() - t0;
  const base = { index: request.index, kind: request.kind, stream: request.stream, sentAtMs };
  const started = performance.now();
  try {
    const response = await fetch(`http://${consumer}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(sessionAffinity && request.session !== undefined ? { [SESSION_HEADER]: request.session } : {}),
      },
      body: JSON.stringify({
        model: MODEL,
        messages: request.messages,
        max_tokens: request.maxTokens,
        stream: request.stream,
      }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const backend = response.headers.get('x-sim-provider') ?? undefined;
    const withBackend = backend === undefined ? {} : { backend };
    if (!response.ok || response.body === null) {
      const body = await response.text().catch(() => '');
      return {
        ...base,
        ...withBackend,
        status: response.status,
        ok: false,
        outputTokens: 0,
        error: body.slice(0, 200),
      };
    }
    if (!request.stream) {
      const body = (await response.json()) as { usage?: { completion_tokens?: number } };
      const ms = performance.now() - started;
      return {
        ...base,
        ...withBackend,
        status: response.status,
        ok: true,
        ttftMs: ms,
        e2eMs: ms,
        outputTokens: body.usage?.completion_tokens ?? request.maxTokens,
      };
    }
    let ttftMs: number | undefined;
    let done = false;
    let tail = '';
    const decoder = new TextDecoder();
    for await (const chunk of response.body) {
      const s = decoder.decode(chunk as Uint8Array, { stream: true });
      if (ttftMs === undefined && hasContent(s)) ttftMs = performance.now() - started;
      tail = (tail + s).slice(-64);
      if (tail.includes('data: [DONE]')) done = true;
    }
    const e2eMs = performance.now() - started;
    if (!done)
      return {
        ...base,
        ...withBackend,
        status: response.status,
        ok: false,
        outputTokens: 0,
        error: 'stream ended before [DONE]',
      };
    return {
      ...base,
      ...withBackend,
      status: response.status,
      ok: true,
      ...(ttftMs === undefined ? {} : { ttftMs }),
      e2eMs,
      outputTokens: request.maxTokens,
    };
  } catch (error) {
    return { ...base, status: 0, ok: false, outputTokens: 0, error: (error as Error).message.slice(0, 200) };
  }
}

export interface ReplayOptions {
  readonly sessionAffinity: boolean;
  readonly timeoutMs: number;
  /** Called at these offsets (ms from the trace's start) while the trace plays, e.g. to read counters or kill. */
  readonly at?: readonly { readonly atMs: number; readonly run: () => Promise<void> }[];
}

/**
 * Replays `trace` open loop: each request leaves at its offset whatever the others are doing. Resolves once every
 * request has ended (or timed out) and every `at` action has run.
 */
export async function replay(
  bench: BenchGrid,
  trace: readonly TraceRequest[],
  options: ReplayOptions,
): Promise<{ outcomes: RequestOutcome[]; lateP99Ms: number }> {
  const t0 = performance.now();
  const pending: Promise<RequestOutcome>[] = [];
  const late: number[] = [];
  const actions = (options.at ?? []).map(async (a) => {
    const wait = a.atMs - (performance.now() - t0);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await a.run();
  });
  for (const request of trace) {
    const wait = request.atMs - (performance.now() - t0);
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    late.push(performance.now() - t0 - request.atMs);
    pending.push(sendRequest(bench.consumer, request, options.sessionAffinity, t0, options.timeoutMs));
  }
  const outcomes = await Promise.all(pending);
  await Promise.all(actions);
  late.sort((a, b) => a - b);
  return { outcomes, lateP99Ms: late[Math.min(late.length - 1, Math.floor(late.length * 0.99))] ?? 0 };
}
