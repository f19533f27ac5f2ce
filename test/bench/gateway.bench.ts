// Gateway data-plane benchmark: the same sim backend reached directly, through the runtime floor (a minimal Node 24
// proxy, floor-proxy.ts), through nginx, through the consumer gateway, and consumer -> provider over mTLS, measured
// in one run so the ratios between paths hold even on a busy machine.
//   npm run bench:gateway [-- --case closed --case rate --case stream --case cold --case idle] [--window-ms 2000]
//     [--rounds 5] [--concurrency 32] [--rates 500,1000] [--rate-ms 2000] [--streams 100] [--stream-rounds 3] [--idle-gap-s 30]
//     [--cold-warmups default,0] [--sched] [--pace spin|sleep|spin,sleep]
// Cases (all by default):
//   closed  closed loop, CONCURRENCY in flight: each path warms until two consecutive windows agree within 10 % on
//           CPU per request, then ROUNDS rounds of one window per path (paths interleaved); median and spread.
//   rate    open loop at fixed rates: ROUNDS rounds of one RATE_MS window per path (paths interleaved), latency from
//           each request's scheduled send time (no coordinated omission) pooled over the rounds, added p50/p99/p99.9
//           over direct, proxy CPU per request and its ratios per round (median and spread). This process waits for
//           each send time by spinning, which holds one of the two cores for the whole case; --pace sleep has a thread
//           sleep until each send time instead (pacer.ts), --pace spin,sleep runs the case both ways. On this
//           virtual machine a sleeping thread is woken late (its CPU halts and the hypervisor gives it away), so
//           spinning is the default. "sent late p99" is how late requests left, which every latency includes.
//   stream  SSE chat completions of 64 events, STREAMS concurrent streams started at a steady rate (not in one burst):
//           STREAM_ROUNDS rounds of one window per path (paths interleaved); added time to first byte and inter-chunk
//           gaps pooled over the rounds (one window's p99 is its 4th-slowest of ~325 streams), and per round; events
//           that arrived coalesced with another in one read (each is written 40 ms apart).
//   cold    a fresh consumer gateway at 500 req/s (open loop) from the moment /readyz answers 200: CPU per request
//           and p99 in each of the first 10 one-second windows, against the warm consumer at the same rate.
//   idle    the consumer -> provider hop after IDLE_GAP_S without traffic: TLS handshakes the provider counted
//           (grid_gateway_tls_handshakes_total) across the gap and the burst after it.
//   tracing (only when asked for) the closed loop over three consumer -> provider pairs on the same sim: the gateways
//           of the commit before tracing existed (--tracing-base REF, default the parent of the commit that added
//           daemons/gateway/tracing/tracing.ts, checked out with `git worktree`), this code with tracing off, and this
//           code exporting every span (OTEL_TRACES_SAMPLER always_on) to an OTLP/HTTP receiver in this process.
// --sched traces the rate case with `perf sched record` (sched-wait.ts) and adds, per path, how often its processes
// (the proxies, the sim, this load generator) waited 1 ms or more for a CPU after a wakeup, per 100 requests: what the
// machine adds to the latency tail whatever the proxy does.
// Beside the floor, the floor of the hop: two minimal proxies, one forwarding to the other over mutual TLS.
// CPU per request is the CPU time of the proxy processes (the gateways, floor proxy or nginx master+worker; never
// the sim or this load generator) from /proc (proc-cpu.ts: the scheduler's nanoseconds per thread), divided by the
// requests completed in the window.
import { benchGatewayWorkers, formatWorkersReport } from './gateway-workers.bench.ts';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join, relative } from 'node:path';
import { Pool } from 'undici';
import { benchArgs } from './bench-args.ts';
import { floorListenTls, floorUpstreamTls } from './floor-hop.ts';
import { Pacer } from './pacer.ts';
import { median } from './stats.ts';
import { treeCpuSeconds } from './proc-cpu.ts';
import { monotonicSeconds, processTree, recordSched, stealSeconds, waitsOf } from './sched-wait.ts';
import type { SchedEvent, SchedRecording } from './sched-wait.ts';
import { ensureDebianPackages } from '../../image/debian-tools.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import {
  PROVIDER_SNI,
  candidate,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
} from '../gateway/helpers.ts';
import type { Daemon } from '../gateway/helpers.ts';

const USAGE =
  'usage: npm run bench:gateway -- [--case closed|rate|stream|cold|idle|workers]... [--window-ms 2000] [--rounds 5] [--concurrency 32] ' +
  '[--rates 500,1000] [--rate-ms 2000] [--streams 100] [--stream-rounds 3] [--idle-gap-s 30] [--cold-warmups default,0] [--sched] [--pace spin|sleep|spin,sleep] ' +
  '[--tracing-base REF]';
const CASES = ['closed', 'rate', 'stream', 'cold', 'idle', 'workers', 'tracing'] as const;
/** Cases run when none is named: all but tracing, which checks out and starts a second copy of the gateways. */
const DEFAULT_CASES = CASES.filter((c) => c !== 'tracing');
/** How the open loop waits for each send time: spinning on this thread (the default), or a sleeping pacer thread. */
const PACES = ['sleep', 'spin'] as const;
type Pace = (typeof PACES)[number];
type Case = (typeof CASES)[number];

function options(): {
  cases: Set<Case>;
  windowMs: number;
  rounds: number;
  concurrency: number;
  rates: number[];
  rateMs: number;
  streams: number;
  streamRounds: number;
  idleGapS: number;
  coldWarmups: (number | undefined)[];
  sched: boolean;
  paces: Pace[];
  tracingBase: string | undefined;
} {
  const {
    values,
    positive: num,
    whole,
    count,
    fail,
  } = benchArgs('bench:gateway', USAGE, {
    case: { type: 'string', multiple: true },
    'window-ms': { type: 'string' },
    rounds: { type: 'string' },
    concurrency: { type: 'string' },
    rates: { type: 'string' },
    'rate-ms': { type: 'string' },
    streams: { type: 'string' },
    'stream-rounds': { type: 'string' },
    'idle-gap-s': { type: 'string' },
    'cold-warmups': { type: 'string' },
    sched: { type: 'boolean' },
    pace: { type: 'string' },
    'tracing-base': { type: 'string' },
  });
  const cases = new Set<Case>();
  for (const c of values.case ?? DEFAULT_CASES) {
    if (!(CASES as readonly string[]).includes(c)) fail(`unknown --case "${c}", expected one of ${CASES.join(', ')}`);
    cases.add(c as Case);
  }
  return {
    cases,
    windowMs: num('window-ms', values['window-ms'], 2000),
    // Five rounds: on a shared 2-core machine the closed-loop ratio of one path to the floor moves 0.86-1.16 within a
    // three-round run, and its median with it; over eight rounds it stays within 1.00-1.12.
    rounds: whole('rounds', values.rounds, 5),
    concurrency: whole('concurrency', values.concurrency, 32),
    rates: (values.rates ?? '500,1000').split(',').map((r) => num('rates', r, 0)),
    rateMs: num('rate-ms', values['rate-ms'], 2000),
    streams: whole('streams', values.streams, 100),
    // Three rounds of about 12 s per path: ~975 streams per path, so the pooled p99 is the 10th-slowest stream, not the
    // 4th of one window (a single window's added p99 ranges from -0.08 to 2.37 ms for the same consumer).
    streamRounds: whole('stream-rounds', values['stream-rounds'], 3),
    idleGapS: num('idle-gap-s', values['idle-gap-s'], 30),
    // Each entry is one cold start: "default" is the gateway's own warm-up, a number sets AGN_GATEWAY_WARMUP_REQUESTS.
    coldWarmups: (values['cold-warmups'] ?? 'default,0')
      .split(',')
      .map((w) => (w === 'default' ? undefined : count('cold-warmups', w, 0))),
    sched: values.sched === true,
    tracingBase: values['tracing-base'],
    paces: (values.pace ?? 'spin')
      .split(',')
      .map((p) =>
        (PACES as readonly string[]).includes(p)
          ? (p as Pace)
          : fail(`--pace takes spin, sleep or both ("spin,sleep"), got "${p}"`),
      ),
  };
}

const OPTS = options();
const TOKEN = 'bench-backend-token';
const FLOOR_HOP = 'floor hop: two minimal proxies (mTLS)';
const BODY = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello' }] });
const STREAM_BODY = JSON.stringify({ model: 'ms', stream: true, messages: [{ role: 'user', content: 'hello' }] });
/** The stream sim writes 61 tokens: role chunk + 61 token chunks + stop chunk + [DONE] = 64 events. */
const STREAM_TOKENS = 61;
const STREAM_EVENTS = STREAM_TOKENS + 3;
const STREAM_TOKENS_PER_SECOND = 25;
const WARMUP_MAX_WINDOWS = 12;

interface BenchPath {
  name: string;
  origin: string;
  /** Origin for the streaming model (nginx proxies it on its own port). */
  streamOrigin: string;
  headers: Record<string, string>;
  pids: () => number[];
  /** The processes of a path of several (the hop's two gateways), each reported on its own in the closed loop. */
  parts?: { name: string; pids: () => number[] }[];
}

const cpuOf = (pids: number[]): number => pids.reduce((sum, pid) => sum + treeCpuSeconds(pid), 0);

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const sortedOf = (values: number[]): Float64Array => Float64Array.from(values).sort();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const ms = (ns: bigint): number => Number(ns) / 1e6;
const fmt = (n: number, digits = 0): string => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** "median (min-max)" of the finite values, or '-' when there are none (a path with no proxy process has no CPU). */
function spread(values: readonly number[], digits = 0): string {
  const finite = values.filter(Number.isFinite);
  return finite.length === 0
    ? '-'
    : `${fmt(median(finite), digits)} (${fmt(Math.min(...finite), digits)}-${fmt(Math.max(...finite), digits)})`;
}

/** Round by round, `values[i] / base[i]`, as a spread: ratios are taken within a round, never across rounds. */
function roundRatios(values: readonly number[], base: readonly number[] | undefined): string {
  return base === undefined
    ? '-'
    : spread(
        values.map((v, i) => v / base[i]!),
        2,
      );
}
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
let failedRequests = 0;

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  process.stdout.write(
    `${line(header)}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${rows.map(line).join('\n')}\n\n`,
  );
}

// ---------------------------------------------------------------- closed loop

interface Window {
  requests: number;
  errors: number;
  rps: number;
  cpuUs: number;
  /** CPU per request of each of the path's parts, in their order. */
  partsUs: number[];
  latencies: number[];
}

/** CONCURRENCY workers, each sending its next request when one completes, while `sample` runs. */
async function closedLoop<T>(
  path: BenchPath,
  concurrency: number,
  sample: (window: (durationMs?: number) => Promise<Window>) => Promise<T>,
): Promise<T> {
  const pool = new Pool(path.origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 60_000 });
  let latencies: number[] = [];
  let errors = 0;
  let stop = false;
  const worker = async (): Promise<void> => {
    while (!stop) {
      const started = process.hrtime.bigint();
      try {
        const res = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', ...path.headers },
          body: BODY,
        });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(String(res.statusCode));
        latencies.push(ms(process.hrtime.bigint() - started));
      } catch {
        errors++;
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  const window = async (durationMs = OPTS.windowMs): Promise<Window> => {
    latencies = [];
    errors = 0;
    const cpu0 = cpuOf(path.pids());
    const parts0 = (path.parts ?? []).map((part) => cpuOf(part.pids()));
    const t0 = process.hrtime.bigint();
    await sleep(durationMs);
    const cpu1 = cpuOf(path.pids());
    const parts1 = (path.parts ?? []).map((part) => cpuOf(part.pids()));
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    const done = latencies;
    failedRequests += errors;
    const perRequest = (seconds: number): number => (seconds * 1e6) / Math.max(1, done.length);
    return {
      requests: done.length,
      errors,
      rps: done.length / elapsed,
      cpuUs: path.pids().length === 0 ? NaN : perRequest(cpu1 - cpu0),
      partsUs: parts1.map((c, i) => perRequest(c - parts0[i]!)),
      latencies: done,
    };
  };
  try {
    return await sample(window);
  } finally {
    stop = true;
    await Promise.all(workers);
    await pool.close();
  }
}

/** Warm-up: windows until two consecutive ones agree within 10 % (CPU/request, or req/s for direct). */
async function warm(path: BenchPath): Promise<number> {
  return closedLoop(path, OPTS.concurrency, async (window) => {
    let previous: number | undefined;
    for (let i = 1; i <= WARMUP_MAX_WINDOWS; i++) {
      const w = await window();
      const figure = Number.isNaN(w.cpuUs) ? w.rps : w.cpuUs;
      if (previous !== undefined && Math.abs(figure - previous) / Math.max(figure, previous) <= 0.1) return i;
      previous = figure;
    }
    return WARMUP_MAX_WINDOWS;
  });
}

async function closedCase(
  paths: BenchPath[],
  bases: readonly string[] = ['floor (minimal Node proxy)', 'nginx'],
): Promise<void> {
  process.stdout.write(
    `## closed loop: ${OPTS.concurrency} in flight, ${OPTS.windowMs} ms windows, ${OPTS.rounds} rounds (load average ${load()})\n\n`,
  );
  const warmups = new Map<string, number>();
  for (const path of paths) warmups.set(path.name, await warm(path));
  const windows = new Map<string, Window[]>(paths.map((p) => [p.name, []]));
  for (let round = 0; round < OPTS.rounds; round++) {
    for (const path of paths) {
      windows.get(path.name)!.push(
        await closedLoop(path, OPTS.concurrency, async (window) => {
          await sleep(300);
          return window();
        }),
      );
    }
  }
  const rows: string[][] = [];
  const roundRatio = (name: string, base: string): string =>
    roundRatios(
      windows.get(name)!.map((w) => w.cpuUs),
      windows.get(base)?.map((w) => w.cpuUs),
    );
  for (const path of paths) {
    const ws = windows.get(path.name)!;
    const lat = sortedOf(ws.flatMap((w) => w.latencies));
    rows.push([
      path.name,
      String(warmups.get(path.name)),
      spread(ws.map((w) => w.rps)),
      fmt(percentile(lat, 50), 2),
      fmt(percentile(lat, 99), 2),
      String(ws.reduce((s, w) => s + w.errors, 0)),
      spread(ws.map((w) => w.cpuUs)),
      ...bases.map((base) => roundRatio(path.name, base)),
    ]);
  }
  table(
    [
      'path',
      'warm-up windows',
      'req/s median (min-max)',
      'p50 ms',
      'p99 ms',
      'errors',
      'proxy CPU us/req median (min-max)',
      ...bases.map((b) => `CPU vs ${b}`),
    ],
    rows,
  );
  for (const path of paths) {
    const ws = windows.get(path.name)!;
    const parts = (path.parts ?? []).map((part, i) => {
      return `${part.name} ${spread(ws.map((w) => w.partsUs[i]!))} us/req`;
    });
    if (parts.length > 0) process.stdout.write(`${path.name}, by process: ${parts.join(', ')}\n\n`);
  }
  // The hop against what two minimal proxies cost over the same mutual TLS, round by round.
  const hop = paths.at(-1)!.name;
  if (windows.has(FLOOR_HOP))
    process.stdout.write(`${hop} vs ${FLOOR_HOP}: CPU per request ${roundRatio(hop, FLOOR_HOP)}\n\n`);
}

// ---------------------------------------------------------------- tracing cost

const BEFORE_TRACING = 'hop, code before tracing';
const TRACING_OFF = 'hop, tracing off';

/** The commit before tracing: --tracing-base, else the parent of the commit that added the tracing module. */
function tracingBase(): string {
  if (OPTS.tracingBase !== undefined) return OPTS.tracingBase;
  const added = execFileSync(
    'git',
    ['log', '--diff-filter=A', '--format=%H', '--', 'daemons/gateway/tracing/tracing.ts'],
    { encoding: 'utf8' },
  )
    .trim()
    .split('\n')
    .at(-1);
  if (added === undefined || added === '')
    throw new Error('no commit added daemons/gateway/tracing/tracing.ts; pass --tracing-base REF');
  return `${added}^`;
}

async function tracingCase(ctx: {
  dir: string;
  providerJson: string;
  consumerHop: string;
  daemons: Daemon[];
}): Promise<void> {
  const base = tracingBase();
  const baseDir = join(ctx.dir, 'before-tracing');
  execFileSync('git', ['worktree', 'add', '--detach', baseDir, base], { stdio: 'ignore' });
  const { symlinkSync } = await import('node:fs');
  symlinkSync(join(process.cwd(), 'node_modules'), join(baseDir, 'node_modules'));
  const receiver = await (await import('../shared/otlp-receiver.ts')).startOtlpReceiver();
  try {
    const pair = async (name: string, root: string, env: Record<string, string>): Promise<BenchPath> => {
      const provider = spawnDaemon(
        relative(process.cwd(), join(root, 'daemons/gateway/main.ts')),
        ['--config', ctx.providerJson],
        env,
      );
      ctx.daemons.push(provider);
      const providerPort = await waitForPort(provider, 'provider');
      const config = JSON.parse(await (await import('node:fs/promises')).readFile(ctx.consumerHop, 'utf8')) as {
        filter_chains: { filters: { filter: string; clusters?: { endpoints: string[] }[] }[] }[];
      };
      config.filter_chains[0]!.filters.find((f) => f.filter === 'load_balancer')!.clusters![0]!.endpoints = [
        `127.0.0.1:${providerPort}`,
      ];
      const file = join(ctx.dir, `consumer-${name.replace(/\W+/g, '-')}.json`);
      await writeFile(file, JSON.stringify(config));
      const consumer = spawnDaemon(
        relative(process.cwd(), join(root, 'daemons/gateway/main.ts')),
        ['--config', file],
        env,
      );
      ctx.daemons.push(consumer);
      const port = await waitForPort(consumer, 'edge');
      const admin = await waitForPort(consumer, 'admin');
      await waitFor(`${name} ready`, async () =>
        (await fetch(`http://127.0.0.1:${admin}/readyz`)).status === 200 ? true : undefined,
      );
      const parts = [
        { name: 'consumer gateway', pids: () => [consumer.proc.pid ?? -1] },
        { name: 'provider gateway', pids: () => [provider.proc.pid ?? -1] },
      ];
      return {
        name,
        origin: `http://127.0.0.1:${port}`,
        streamOrigin: `http://127.0.0.1:${port}`,
        headers: {},
        pids: () => parts.flatMap((p) => p.pids()),
        parts,
      };
    };
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_on' };
    const paths = [
      await pair(BEFORE_TRACING, baseDir, {}),
      await pair(TRACING_OFF, process.cwd(), {}),
      await pair('hop, tracing on (every span exported)', process.cwd(), otel),
    ];
    process.stdout.write(
      `## tracing: the code before tracing is ${execFileSync('git', ['rev-parse', '--short', base], { encoding: 'utf8' }).trim()} (${base})\n\n`,
    );
    await closedCase(paths, [BEFORE_TRACING, TRACING_OFF]);
    process.stdout.write(
      `spans the receiver decoded: ${receiver.spans.length}; refused exports: ${receiver.refused.length}\n\n`,
    );
  } finally {
    await receiver.close();
    execFileSync('git', ['worktree', 'remove', '--force', baseDir], { stdio: 'ignore' });
  }
}

// ---------------------------------------------------------------- open loop at a fixed rate

interface RateResult {
  latencies: Float64Array;
  /** How late each request left after its scheduled send time, ms: the load generator's own lateness, in every latency. */
  lateness: Float64Array;
  errors: number;
  cpuUs: number;
  achieved: number;
}

/** The rate case (and the cold case) paces its sends with this under --pace sleep; undefined: it spins. */
let pacer: Pacer | undefined;

async function fixedRate(path: BenchPath, rate: number, durationMs: number, shared?: Pool): Promise<RateResult> {
  const pool = shared ?? new Pool(path.origin, { connections: 512, pipelining: 1, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  const lateness: number[] = [];
  let errors = 0;
  const pending: Promise<void>[] = [];
  const interval = 1e9 / rate;
  const send = (scheduled: bigint): void => {
    lateness.push(ms(process.hrtime.bigint() - scheduled));
    pending.push(
      pool
        .request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', ...path.headers },
          body: BODY,
        })
        .then(
          async (res) => {
            await res.body.dump();
            if (res.statusCode !== 200) errors++;
            else latencies.push(ms(process.hrtime.bigint() - scheduled));
          },
          () => {
            errors++;
          },
        ),
    );
  };
  const cpu0 = cpuOf(path.pids());
  const t0 = process.hrtime.bigint();
  const total = Math.round((rate * durationMs) / 1000);
  let sent = 0;
  while (sent < total) {
    const now = process.hrtime.bigint();
    while (sent < total && t0 + BigInt(Math.round(sent * interval)) <= now) {
      send(t0 + BigInt(Math.round(sent * interval)));
      sent++;
    }
    // Not a timer: one of 1 ms or more adds its own lateness, up to its period, to every latency, against direct's p50
    // of 0.10-0.18 ms. Spinning sends on time but holds a core; the pacer's thread (--pace sleep) sleeps until the next
    // send time, and on a 2-core virtual machine wakes milliseconds late at the p99 (pacer.ts).
    if (sent < total)
      await (pacer === undefined
        ? new Promise((resolve) => setImmediate(resolve))
        : pacer.until(t0 + BigInt(Math.round(sent * interval))));
  }
  await Promise.all(pending);
  const cpu1 = cpuOf(path.pids());
  if (shared === undefined) await pool.close();
  failedRequests += errors;
  return {
    latencies: sortedOf(latencies),
    lateness: sortedOf(lateness),
    errors,
    cpuUs: path.pids().length === 0 ? NaN : ((cpu1 - cpu0) * 1e6) / Math.max(1, latencies.length),
    achieved: (latencies.length * 1000) / durationMs,
  };
}

/** One measured window of the rate case: when it ran (monotonic seconds) and the processes its requests passed through. */
interface RateWindow {
  from: number;
  to: number;
  pids: Set<number>;
  /** Seconds of CPU the hypervisor took during the window (stealSeconds()). */
  steal: number;
}

async function rateCase(
  paths: BenchPath[],
  sharedPids: () => number[],
  dir: string,
  pace: Pace,
): Promise<Map<number, number>> {
  const consumerAt = new Map<number, number>();
  const paced = pace === 'sleep' ? 'sends paced by a sleeping thread' : 'sends paced by spinning, one core busy';
  for (const rate of OPTS.rates) {
    process.stdout.write(
      `## open loop at ${rate} req/s (${paced}): ${OPTS.rounds} rounds of one ${OPTS.rateMs} ms window per path (paths interleaved), after 1 s at the rate; ` +
        `latency pooled over the rounds, CPU per request and its ratios per round, median (min-max) (load average ${load()})\n\n`,
    );
    // One client pool per path for the warm second and every window: connections are open before measuring.
    const pools = new Map(
      paths.map((path) => [
        path.name,
        new Pool(path.origin, { connections: 512, pipelining: 1, keepAliveTimeout: 60_000 }),
      ]),
    );
    const results = new Map<string, RateResult[]>(paths.map((path) => [path.name, []]));
    const windows = new Map<string, RateWindow[]>(paths.map((path) => [path.name, []]));
    let recording: SchedRecording | undefined;
    let events: SchedEvent[] = [];
    try {
      for (const path of paths) await fixedRate(path, rate, 1000, pools.get(path.name));
      if (OPTS.sched) recording = await recordSched(join(dir, `sched-${rate}-${pace}.data`));
      for (let round = 0; round < OPTS.rounds; round++) {
        for (const path of paths) {
          // The proxies with their children (nginx's workers); the sim and this process alone (every daemon here is a child).
          const pids = new Set([...path.pids().flatMap(processTree), ...sharedPids()]);
          const from = monotonicSeconds();
          const steal = stealSeconds();
          results.get(path.name)!.push(await fixedRate(path, rate, OPTS.rateMs, pools.get(path.name)));
          windows.get(path.name)!.push({ from, to: monotonicSeconds(), pids, steal: stealSeconds() - steal });
        }
      }
    } finally {
      await Promise.all([...pools.values()].map((pool) => pool.close()));
      if (recording !== undefined) events = await recording.stop();
    }
    const pooled = (name: string): Float64Array => sortedOf(results.get(name)!.flatMap((r) => [...r.latencies]));
    const ratio = (name: string, base: string): string =>
      roundRatios(
        results.get(name)!.map((r) => r.cpuUs),
        results.get(base)?.map((r) => r.cpuUs),
      );
    consumerAt.set(rate, median((results.get('consumer gateway') ?? []).map((r) => r.cpuUs)));
    const direct = pooled('direct to sim');
    /** The path's pooled percentile `p` over direct's, as printed. */
    const addedOver = (name: string, p: number): string =>
      name === 'direct to sim' ? '-' : fmt(percentile(pooled(name), p) - percentile(direct, p), 2);
    const rows = paths.map((path) => {
      const rs = results.get(path.name)!;
      const latencies = pooled(path.name);
      const added = (p: number): string => addedOver(path.name, p);
      return [
        path.name,
        fmt(median(rs.map((r) => r.achieved))),
        fmt(percentile(latencies, 50), 2),
        fmt(percentile(latencies, 99), 2),
        fmt(percentile(latencies, 99.9), 2),
        added(50),
        added(99),
        added(99.9),
        fmt(percentile(sortedOf(rs.flatMap((r) => [...r.lateness])), 99), 2),
        String(rs.reduce((n, r) => n + r.errors, 0)),
        spread(rs.map((r) => r.cpuUs)),
        path.name === 'direct to sim' ? '-' : ratio(path.name, 'floor (minimal Node proxy)'),
        path.name === 'direct to sim' ? '-' : ratio(path.name, 'nginx'),
      ];
    });
    table(
      [
        'path',
        'req/s',
        'p50 ms',
        'p99 ms',
        'p99.9 ms',
        'added p50 ms',
        'added p99 ms',
        'added p99.9 ms',
        'sent late p99 ms',
        'errors',
        'proxy CPU us/req',
        'CPU vs floor',
        'CPU vs nginx',
      ],
      rows,
    );
    const hop = paths.at(-1)!.name;
    if (results.has(FLOOR_HOP))
      process.stdout.write(`${hop} vs ${FLOOR_HOP}: CPU per request ${ratio(hop, FLOOR_HOP)}\n\n`);
    if (recording !== undefined) schedTable(paths, results, windows, events, (name) => addedOver(name, 99));
  }
  return consumerAt;
}

/**
 * Per path, the waits for a CPU after a wakeup of its processes (the proxies, the sim, this load generator) inside its
 * windows, per 100 requests completed in them. Where a path's processes wait 1 ms or longer more often than once per
 * 100 requests, its p99 holds a millisecond of the machine's scheduling unless those waits fall on the same requests.
 */
function schedTable(
  paths: BenchPath[],
  results: Map<string, RateResult[]>,
  windows: Map<string, RateWindow[]>,
  events: SchedEvent[],
  addedP99: (name: string) => string,
): void {
  process.stdout.write(
    `scheduler waits in the same windows (perf sched: from a wakeup of the path's processes, the proxies, the sim and this load generator, to running):\n\n`,
  );
  const rows = paths.map((path) => {
    const waits = sortedOf(windows.get(path.name)!.flatMap((w) => waitsOf(events, w.pids, w.from, w.to)));
    const requests = results.get(path.name)!.reduce((n, r) => n + r.latencies.length, 0);
    const per100 = (ms: number): string => fmt((100 * waits.filter((w) => w >= ms).length) / Math.max(1, requests), 2);
    return [
      path.name,
      String(requests),
      fmt(waits.length / Math.max(1, requests), 1),
      fmt(percentile(waits, 99), 3),
      per100(1),
      per100(2.5),
      fmt(waits.at(-1) ?? NaN, 2),
      fmt(windows.get(path.name)!.reduce((ms, w) => ms + w.steal * 1000, 0)),
      addedP99(path.name),
    ];
  });
  table(
    [
      'path',
      'requests',
      'switch-ins per request',
      'wait p99 ms',
      'waits >= 1 ms per 100 requests',
      'waits >= 2.5 ms per 100 requests',
      'longest wait ms',
      'steal ms (all CPUs)',
      'added p99 ms',
    ],
    rows,
  );
}

// ---------------------------------------------------------------- streaming

interface StreamResult {
  streams: number;
  errors: number;
  ttfb: Float64Array;
  gaps: Float64Array;
  /** Token events (written 40 ms apart) that arrived in one read with another event. */
  coalesced: number;
  /** Streams whose event count was not STREAM_EVENTS. */
  short: number;
  cpuUs: number;
}

/** How long one stream lasts at the sim's pace: what spreads STREAMS concurrent streams evenly over time. */
const STREAM_SECONDS = STREAM_EVENTS / STREAM_TOKENS_PER_SECOND;

/**
 * `concurrency` streams at all times, their starts spread evenly over one stream's length (worker i starts i/N of a
 * stream late, and each starts its next stream when one ends), so the window sees streams starting at a steady
 * rate as a long-running service does, not `concurrency` requests arriving in one burst. One client pool for the
 * warm-up and the window; only streams that start inside the window are measured.
 */
async function streamRun(
  path: BenchPath,
  concurrency: number,
  warmMs: number,
  durationMs: number,
): Promise<StreamResult> {
  const pool = new Pool(path.streamOrigin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 60_000 });
  const ttfb: number[] = [];
  const gaps: number[] = [];
  let streams = 0;
  let errors = 0;
  let coalesced = 0;
  let short = 0;
  let stop = false;
  const startedAt = process.hrtime.bigint();
  const measureFrom = startedAt + BigInt(warmMs) * 1_000_000n;
  const one = async (): Promise<void> => {
    const started = process.hrtime.bigint();
    const measured = started >= measureFrom;
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', ...path.headers },
      body: STREAM_BODY,
    });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(String(res.statusCode));
    }
    let events = 0;
    let last: bigint | undefined;
    for await (const chunk of res.body) {
      const now = process.hrtime.bigint();
      if (measured) {
        if (last === undefined) ttfb.push(ms(now - started));
        else gaps.push(ms(now - last));
      }
      last = now;
      const text = (chunk as Buffer).toString('utf8');
      let inRead = 0;
      for (let at = text.indexOf('\n\n'); at !== -1; at = text.indexOf('\n\n', at + 2)) inRead++;
      // The sim writes the role chunk and the first token together, and the stop chunk and [DONE] together: only
      // token events in between must each come in their own read.
      const firstEvent = events;
      events += inRead;
      if (measured && inRead > 1 && firstEvent >= 2 && events <= STREAM_EVENTS - 2) coalesced += inRead - 1;
    }
    if (events !== STREAM_EVENTS) short++;
    if (measured) streams++;
  };
  let cpu0 = NaN;
  const worker = async (i: number): Promise<void> => {
    await sleep((i * STREAM_SECONDS * 1000) / concurrency);
    while (!stop) {
      try {
        await one();
      } catch {
        errors++;
      }
    }
  };
  const workers = Array.from({ length: concurrency }, (_, i) => worker(i));
  await sleep(warmMs);
  cpu0 = cpuOf(path.pids());
  await sleep(durationMs);
  stop = true;
  await Promise.all(workers);
  const cpu1 = cpuOf(path.pids());
  await pool.close();
  failedRequests += errors + short;
  return {
    streams,
    errors,
    ttfb: sortedOf(ttfb),
    gaps: sortedOf(gaps),
    coalesced,
    short,
    cpuUs: path.pids().length === 0 ? NaN : ((cpu1 - cpu0) * 1e6) / Math.max(1, streams),
  };
}

async function streamCase(paths: BenchPath[]): Promise<void> {
  const duration = Math.max(OPTS.windowMs * 4, 8000);
  // The warm-up is one stream's length, so every worker has started before the window opens.
  const warm = Math.ceil(STREAM_SECONDS * 1000) + 1000;
  process.stdout.write(
    `## streaming: ${OPTS.streams} concurrent SSE chat streams of ${STREAM_EVENTS} events, one token every ${1000 / STREAM_TOKENS_PER_SECOND} ms, ` +
      `starts spread evenly over a stream's length (a steady ${fmt(OPTS.streams / STREAM_SECONDS)} new streams/s); ${OPTS.streamRounds} rounds of the streams ` +
      `starting in one ${duration} ms window per path after a ${warm} ms warm-up (paths interleaved); TTFB and gaps pooled over the rounds, ` +
      `added TTFB p99 also per round, median (min-max) (load average ${load()})\n\n`,
  );
  const results = new Map<string, StreamResult[]>(paths.map((path) => [path.name, []]));
  for (let round = 0; round < OPTS.streamRounds; round++) {
    for (const path of paths) results.get(path.name)!.push(await streamRun(path, OPTS.streams, warm, duration));
  }
  const pooled = (rs: StreamResult[], of: 'ttfb' | 'gaps'): Float64Array => sortedOf(rs.flatMap((r) => [...r[of]]));
  const direct = results.get('direct to sim')!;
  const directTtfb = pooled(direct, 'ttfb');
  const directGaps = pooled(direct, 'gaps');
  const rows = paths.map((path) => {
    const rs = results.get(path.name)!;
    const ttfb = pooled(rs, 'ttfb');
    const gaps = pooled(rs, 'gaps');
    const isDirect = path.name === 'direct to sim';
    const added = (a: Float64Array, b: Float64Array, p: number): string =>
      isDirect ? '-' : fmt(percentile(a, p) - percentile(b, p), 2);
    // Each round against direct's window of the same round.
    const perRound = isDirect
      ? '-'
      : spread(
          rs.map((r, i) => percentile(r.ttfb, 99) - percentile(direct[i]!.ttfb, 99)),
          2,
        );
    const sum = (f: (r: StreamResult) => number): number => rs.reduce((n, r) => n + f(r), 0);
    return [
      path.name,
      String(sum((r) => r.streams)),
      fmt(percentile(ttfb, 50), 2),
      fmt(percentile(ttfb, 99), 2),
      added(ttfb, directTtfb, 50),
      added(ttfb, directTtfb, 99),
      perRound,
      fmt(percentile(gaps, 50), 2),
      fmt(percentile(gaps, 99), 2),
      added(gaps, directGaps, 99),
      String(sum((r) => r.coalesced)),
      String(sum((r) => r.errors + r.short)),
      spread(rs.map((r) => r.cpuUs)),
    ];
  });
  table(
    [
      'path',
      'streams',
      'TTFB p50 ms',
      'TTFB p99 ms',
      'added TTFB p50 ms',
      'added TTFB p99 ms',
      'added TTFB p99 per round',
      'gap p50 ms',
      'gap p99 ms',
      'added gap p99 ms',
      'coalesced events',
      'failed streams',
      'proxy CPU us/stream',
    ],
    rows,
  );
}

// ---------------------------------------------------------------- cold start

/** The cold consumer takes COLD_RATE req/s (open loop) from ready on: CPU per request compares at one offered rate. */
const COLD_RATE = 500;
/** The cold gateway's own steady state: these seconds after ready, at COLD_RATE, median of their CPU per request. */
const OWN_STEADY_FROM = 21;
const OWN_STEADY_TO = 25;

async function coldCase(
  configPath: string,
  steadyUs: number | undefined,
  warmupRequests: number | undefined,
): Promise<void> {
  const warmup = warmupRequests === undefined ? 'its default warm-up' : `AGN_GATEWAY_WARMUP_REQUESTS=${warmupRequests}`;
  process.stdout.write(
    `## cold start (${warmup}): a fresh consumer gateway at ${COLD_RATE} req/s (open loop) from the moment /readyz answers 200 (load average ${load()})\n\n`,
  );
  const spawnedAt = process.hrtime.bigint();
  const gateway = spawnDaemon(
    'daemons/gateway/main.ts',
    ['--config', configPath],
    warmupRequests === undefined ? {} : { AGN_GATEWAY_WARMUP_REQUESTS: String(warmupRequests) },
  );
  try {
    const port = await waitForPort(gateway, 'edge', 60_000);
    const admin = await waitForPort(gateway, 'admin', 60_000);
    await waitFor(
      'cold consumer ready',
      async () =>
        (await fetch(`http://127.0.0.1:${admin}/readyz`).catch(() => undefined))?.status === 200 ? true : undefined,
      60_000,
    );
    const readyMs = ms(process.hrtime.bigint() - spawnedAt);
    const startupCpuMs = cpuOf([gateway.proc.pid!]) * 1000;
    const path: BenchPath = {
      name: 'cold consumer',
      origin: `http://127.0.0.1:${port}`,
      streamOrigin: '',
      headers: {},
      pids: () => [gateway.proc.pid!],
    };
    const pool = new Pool(path.origin, { connections: 512, pipelining: 1, keepAliveTimeout: 60_000 });
    const windows: RateResult[] = [];
    for (let i = 0; i < 10; i++) windows.push(await fixedRate(path, COLD_RATE, 1000, pool));
    // The same process once warm: the rate case's consumer is another process measured earlier, and two processes
    // of the same code differ by more than the first second's excess here; so the first seconds are also compared
    // with this gateway's own seconds OWN_STEADY_FROM..OWN_STEADY_TO at the same rate.
    for (let i = 10; i < OWN_STEADY_FROM - 1; i++) await fixedRate(path, COLD_RATE, 1000, pool);
    const own: number[] = [];
    for (let i = OWN_STEADY_FROM; i <= OWN_STEADY_TO; i++)
      own.push((await fixedRate(path, COLD_RATE, 1000, pool)).cpuUs);
    const ownSteadyUs = median(own);
    await pool.close();
    const warmed = gateway.lines.find((l) => l['msg'] === 'request path warmed up');
    process.stdout.write(
      `spawn -> ready: ${fmt(readyMs)} ms wall, ${fmt(startupCpuMs)} ms CPU before ready` +
        `${warmed === undefined ? ' (no warm-up)' : `, of which the warm-up: ${String(warmed['requests'])} loopback requests in ${String(warmed['duration_ms'])} ms`}\n\n`,
    );
    table(
      [
        'second after ready',
        'req/s',
        'p99 ms',
        'errors',
        'CPU us/req',
        `vs its own seconds ${OWN_STEADY_FROM}-${OWN_STEADY_TO} (median ${fmt(ownSteadyUs)} us)`,
        steadyUs === undefined
          ? `vs the warm consumer (no ${COLD_RATE} req/s rate case in this run)`
          : `vs the warm consumer at ${COLD_RATE} req/s (${fmt(steadyUs)} us)`,
      ],
      windows.map((w, i) => [
        String(i + 1),
        fmt(w.achieved),
        fmt(percentile(w.latencies, 99), 2),
        String(w.errors),
        fmt(w.cpuUs),
        fmt(w.cpuUs / ownSteadyUs, 2),
        steadyUs === undefined ? '-' : fmt(w.cpuUs / steadyUs, 2),
      ]),
    );
    process.stdout.write(
      `its seconds ${OWN_STEADY_FROM}-${OWN_STEADY_TO}: ${own.map((u) => fmt(u)).join(', ')} us/req\n\n`,
    );
  } finally {
    await gateway.stop();
  }
}

// ---------------------------------------------------------------- idle gap on the hop

async function handshakeCount(adminPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const counts: Record<string, number> = { new: 0, resumed: 0 };
  for (const match of text.matchAll(/^grid_gateway_tls_handshakes_total\{[^}]*session="(new|resumed)"[^}]*\} (\d+)/gm))
    counts[match[1]!]! += Number(match[2]);
  return counts;
}

async function idleCase(hop: BenchPath, providerAdmin: number): Promise<void> {
  process.stdout.write(`## consumer -> provider hop across a ${OPTS.idleGapS} s idle gap (load average ${load()})\n\n`);
  await closedLoop(hop, OPTS.concurrency, (window) => window(1000));
  const before = await handshakeCount(providerAdmin);
  // What each gateway costs doing nothing (its timers): paid every second in every pod, and per request at low rates.
  await sleep(1000);
  const idle0 = (hop.parts ?? []).map((part) => cpuOf(part.pids()));
  const idleStarted = performance.now();
  await sleep(OPTS.idleGapS * 1000 - 1000);
  const idleS = (performance.now() - idleStarted) / 1000;
  const idleCpu = (hop.parts ?? []).map(
    (part, i) => `${part.name} ${(((cpuOf(part.pids()) - idle0[i]!) / idleS) * 1000).toFixed(2)} ms/s`,
  );
  const after = await closedLoop(hop, OPTS.concurrency, (window) => window(1000));
  const later = await handshakeCount(providerAdmin);
  table(
    ['figure', 'value'],
    [
      ['provider TLS handshakes before the gap (new + resumed)', `${before['new']} + ${before['resumed']}`],
      [`idle gap`, `${OPTS.idleGapS} s`],
      ['requests in the 1 s after the gap', String(after.requests)],
      ['failed requests after the gap', String(after.errors)],
      [
        'TLS handshakes during the gap and the load after it',
        `${later['new']! - before['new']!} new, ${later['resumed']! - before['resumed']!} resumed`,
      ],
      ['CPU while idle (the gap, less its first second)', idleCpu.join(', ')],
    ],
  );
}

// ---------------------------------------------------------------- setup

function nginxBinary(): string | undefined {
  for (const path of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'])
    if (existsSync(path)) return path;
  return undefined;
}

/** nginx from Debian when it is missing (a fresh CI machine); undefined, with the reason printed, when that fails. */
function ensureNginx(): string | undefined {
  const found = nginxBinary();
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    process.stdout.write(
      'nginx is not installed and cannot be installed here (needs root and apt-get): the nginx path is skipped\n',
    );
    return undefined;
  }
  process.stdout.write('nginx is not installed: apt-get install -y nginx-light\n');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const attempt of [
    ['install', '-y', '-qq', 'nginx-light'],
    ['update', '-qq'],
    ['install', '-y', '-qq', 'nginx-light'],
  ]) {
    try {
      execFileSync('apt-get', attempt, { stdio: 'ignore', env, timeout: 300_000 });
      if (attempt[0] === 'install') return nginxBinary();
    } catch {
      // update and retry once
    }
  }
  process.stdout.write('apt-get could not install nginx-light: the nginx path is skipped\n');
  return undefined;
}

async function startNginx(
  bin: string,
  dir: string,
  simPort: number,
  streamSimPort: number,
): Promise<{ proc: ChildProcess; port: number; streamPort: number }> {
  const prefix = join(dir, 'nginx');
  await mkdir(join(prefix, 'logs'), { recursive: true });
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const streamPort = port + 1;
  const server = (listen: number, upstream: string): string => `
  server {
    listen 127.0.0.1:${listen};
    location / {
      proxy_pass http://${upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer ${TOKEN}";
      proxy_buffering off;
    }
  }`;
  await writeFile(
    join(prefix, 'nginx.conf'),
    `worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_timeout 75s;
  keepalive_requests 1000000;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream sim { server 127.0.0.1:${simPort}; keepalive 256; keepalive_requests 1000000; }
  upstream simstream { server 127.0.0.1:${streamSimPort}; keepalive 256; keepalive_requests 1000000; }
${server(port, 'sim')}
${server(streamPort, 'simstream')}
}
`,
  );
  const proc = spawn(bin, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' });
  await waitFor('nginx', async () =>
    (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200 ? true : undefined,
  );
  return { proc, port, streamPort };
}

async function main(): Promise<void> {
  const { dir, cleanup } = await tempDir('bench');
  const daemons: Daemon[] = [];
  let nginx: ChildProcess | undefined;
  const startedAt = Date.now();
  const loadAtStart = load();
  const sleeper = OPTS.paces.includes('sleep') ? await Pacer.start() : undefined;
  try {
    const pki = await makePki(dir);
    const tokenFile = join(dir, 'sim-token');
    await writeFile(tokenFile, TOKEN);
    // The sims' engine steps take no time (the streaming one is paced by --tokens-per-second alone): the benchmark
    // measures the gateways, not a model of a GPU.
    const instant = ['--step-overhead-ms', '0', '--prefill-ms-per-token', '0', '--decode-ms-per-seq', '0'];
    const sim = spawnDaemon('daemons/sim/main.ts', [
      '--name',
      'sim',
      '--models',
      'm1',
      '--token-file',
      tokenFile,
      ...instant,
    ]);
    const streamSim = spawnDaemon('daemons/sim/main.ts', [
      '--name',
      'sim-stream',
      '--models',
      'ms',
      '--token-file',
      tokenFile,
      '--completion-tokens',
      String(STREAM_TOKENS),
      '--tokens-per-second',
      String(STREAM_TOKENS_PER_SECOND),
      ...instant,
    ]);
    daemons.push(sim, streamSim);
    const simPort = await waitForPort(sim, 'sim');
    const streamSimPort = await waitForPort(streamSim, 'sim');

    const floor = spawnDaemon('test/bench/floor-proxy.ts', [
      '--upstream',
      `m1=127.0.0.1:${simPort},ms=127.0.0.1:${streamSimPort}`,
      '--token-file',
      tokenFile,
    ]);
    daemons.push(floor);
    const floorPort = await waitForPort(floor, 'floor');
    // The floor of the provider hop: a minimal proxy forwarding over mutual TLS (client certificate, SNI) to another
    // minimal proxy that checks it and forwards to the sims, as the consumer and provider gateways do.
    const floorProvider = spawnDaemon('test/bench/floor-proxy.ts', [
      '--upstream',
      `m1=127.0.0.1:${simPort},ms=127.0.0.1:${streamSimPort}`,
      '--token-file',
      tokenFile,
      ...floorListenTls(pki),
    ]);
    daemons.push(floorProvider);
    const floorProviderPort = await waitForPort(floorProvider, 'floor');
    const floorEdge = spawnDaemon('test/bench/floor-proxy.ts', [
      '--upstream',
      `m1=127.0.0.1:${floorProviderPort},ms=127.0.0.1:${floorProviderPort}`,
      '--token-file',
      tokenFile,
      ...floorUpstreamTls(pki),
    ]);
    daemons.push(floorEdge);
    const floorEdgePort = await waitForPort(floorEdge, 'floor');

    const cred = {
      strategy: 'bearer_token' as const,
      secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
    };
    const overlayDirect = join(dir, 'overlay-direct.json');
    await writeOverlay(
      overlayDirect,
      payload([
        { ...candidate('m1', 'local', 'sim'), credential: cred },
        { ...candidate('ms', 'local', 'simstream'), credential: cred },
      ]),
    );
    const consumerPlain = join(dir, 'consumer-plain.json');
    await writeFile(
      consumerPlain,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlayDirect,
          credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: tokenFile }],
          clusters: [
            { name: 'sim', endpoints: [`127.0.0.1:${simPort}`] },
            { name: 'simstream', endpoints: [`127.0.0.1:${streamSimPort}`] },
          ],
        }),
      ),
    );
    const plain = spawnDaemon('daemons/gateway/main.ts', ['--config', consumerPlain]);
    daemons.push(plain);

    const providerJson = join(dir, 'provider.json');
    const route = (model: string, cluster: string): Record<string, unknown> => ({
      candidate_id: stableId('inference_model', model, 'east', 'prov'),
      model,
      cluster,
      paths: ['/v1/chat/completions'],
      credential: { secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } },
    });
    await writeFile(
      providerJson,
      JSON.stringify(
        providerConfig({
          pki,
          routes: [route('m1', 'backend'), route('ms', 'backend-stream')],
          credentials: [{ name: 'cred', namespace: 'grid-system', key: 'token', file: tokenFile }],
          clusters: [
            { name: 'backend', endpoints: [`127.0.0.1:${simPort}`] },
            { name: 'backend-stream', endpoints: [`127.0.0.1:${streamSimPort}`] },
          ],
        }),
      ),
    );
    const provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerJson]);
    daemons.push(provider);
    const providerPort = await waitForPort(provider, 'provider');
    const providerAdmin = await waitForPort(provider, 'admin');

    const overlayHop = join(dir, 'overlay-hop.json');
    await writeOverlay(overlayHop, payload([candidate('m1', 'east', 'prov'), candidate('ms', 'east', 'prov')]));
    const consumerHop = join(dir, 'consumer-hop.json');
    await writeFile(
      consumerHop,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlayHop,
          hops: ['prov'],
          clusters: [
            {
              name: 'prov',
              endpoints: [`127.0.0.1:${providerPort}`],
              tls: {
                ca: { ca_path: pki.caPath },
                client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
                sni: PROVIDER_SNI,
              },
            },
          ],
        }),
      ),
    );
    const hop = spawnDaemon('daemons/gateway/main.ts', ['--config', consumerHop]);
    daemons.push(hop);
    const plainPort = await waitForPort(plain, 'edge');
    const hopPort = await waitForPort(hop, 'edge');
    for (const [d, name] of [
      [plain, 'plain'],
      [hop, 'hop'],
    ] as const) {
      const admin = await waitForPort(d, 'admin');
      await waitFor(`${name} consumer ready`, async () =>
        (await fetch(`http://127.0.0.1:${admin}/readyz`)).status === 200 ? true : undefined,
      );
    }

    if (OPTS.sched) ensureDebianPackages(['linux-perf']);
    const nginxBin = ensureNginx();
    let nginxPorts: { port: number; streamPort: number } | undefined;
    if (nginxBin !== undefined) {
      const started = await startNginx(nginxBin, dir, simPort, streamSimPort);
      nginx = started.proc;
      nginxPorts = started;
    }

    const pid = (d: Daemon): number => d.proc.pid ?? -1;
    const url = (port: number): string => `http://127.0.0.1:${port}`;
    const hopParts = [
      { name: 'consumer gateway', pids: () => [pid(hop)] },
      { name: 'provider gateway', pids: () => [pid(provider)] },
    ];
    const floorHopParts = [
      { name: 'edge floor proxy', pids: () => [pid(floorEdge)] },
      { name: 'provider floor proxy', pids: () => [pid(floorProvider)] },
    ];
    const paths: BenchPath[] = [
      {
        name: 'direct to sim',
        origin: url(simPort),
        streamOrigin: url(streamSimPort),
        headers: { authorization: `Bearer ${TOKEN}` },
        pids: () => [],
      },
      {
        name: 'floor (minimal Node proxy)',
        origin: url(floorPort),
        streamOrigin: url(floorPort),
        headers: {},
        pids: () => [pid(floor)],
      },
      ...(nginxPorts === undefined || nginx?.pid === undefined
        ? []
        : [
            {
              name: 'nginx',
              origin: url(nginxPorts.port),
              streamOrigin: url(nginxPorts.streamPort),
              headers: {},
              pids: () => [nginx!.pid!],
            },
          ]),
      {
        name: 'consumer gateway',
        origin: url(plainPort),
        streamOrigin: url(plainPort),
        headers: {},
        pids: () => [pid(plain)],
      },
      {
        name: FLOOR_HOP,
        origin: url(floorEdgePort),
        streamOrigin: url(floorEdgePort),
        headers: {},
        pids: () => floorHopParts.flatMap((part) => part.pids()),
        parts: floorHopParts,
      },
      {
        name: 'consumer -> provider (mTLS), both gateways',
        origin: url(hopPort),
        streamOrigin: url(hopPort),
        headers: {},
        pids: () => hopParts.flatMap((part) => part.pids()),
        parts: hopParts,
      },
    ];

    process.stdout.write(
      `# gateway benchmark, ${new Date(startedAt).toISOString()}: node ${process.version}, ${cpus().length} CPUs, load average ${loadAtStart} at the start; ` +
        `non-streaming chat completions of 16 tokens unless said; ${nginxBin === undefined ? 'nginx skipped' : 'nginx worker_processes 1'}\n\n`,
    );
    if (OPTS.cases.has('closed')) await closedCase(paths);
    let steadyAt: Map<number, number> | undefined;
    if (OPTS.cases.has('rate')) {
      for (const pace of OPTS.paces) {
        pacer = pace === 'sleep' ? sleeper : undefined;
        const consumerAt = await rateCase(paths, () => [pid(sim), process.pid], dir, pace);
        // The cold case compares with the warm consumer paced as it is (the first --pace).
        steadyAt ??= consumerAt;
      }
    }
    if (OPTS.cases.has('stream')) await streamCase(paths);
    pacer = OPTS.paces[0] === 'sleep' ? sleeper : undefined;
    if (OPTS.cases.has('cold'))
      for (const warmup of OPTS.coldWarmups) await coldCase(consumerPlain, steadyAt?.get(COLD_RATE), warmup);
    if (OPTS.cases.has('idle')) await idleCase(paths.at(-1)!, providerAdmin);
    // Two workers against one, in alternating windows so both see the same background load.
    if (OPTS.cases.has('workers')) process.stdout.write(`${formatWorkersReport(await benchGatewayWorkers())}\n`);
    if (OPTS.cases.has('tracing')) await tracingCase({ dir, providerJson, consumerHop, daemons });

    process.stdout.write(
      `failed requests in every window of every case: ${failedRequests}\n` +
        `load average: ${loadAtStart} at the start, ${load()} at the end; runtime ${fmt((Date.now() - startedAt) / 1000)} s\n`,
    );
    if (failedRequests > 0) process.exitCode = 1;
  } finally {
    await sleeper?.close();
    nginx?.kill('SIGTERM');
    await Promise.all(daemons.map((d) => d.stop()));
    await cleanup();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:gateway failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
