// Gateway workers benchmark (issue 18, "Cores"): the consumer gateway with `--workers 1` against `--workers 2`, same
// config, same upstream, same closed-loop load, alternating rounds so drift in the machine's other load hits both.
//
//   npm run bench:gateway-workers [-- --window-ms 3000 --concurrency 32 --rounds 2 --upstream minimal|sim]
//
// On a 2-core machine the load generator and the upstream compete with the gateway for the same cores, so both are
// as cheap as we can make them: the load generator (this process) writes one pre-built request per connection on
// raw sockets and reads only the status line and the framing; the default upstream ("minimal") answers every
// request with one pre-built chat completion, without parsing more than the head. Per window it records requests/s,
// failed requests (any non-200, reset or timeout), the gateway's CPU time per request (utime + stime of the whole
// process from /proc: every worker thread), what the load generator and the upstream used, and the load average.
//
// Warm-up runs windows until two consecutive ones agree within 10 % (a fresh gateway costs several times its steady
// cost in its first seconds), then >= 3 measured windows; the median of those is the figure, min-max its spread.
// Exports benchGatewayWorkers() (one run, a result object) and formatWorkersReport(); runnable alone.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from '../gateway/helpers.ts';

export interface WorkersBenchOptions {
  /** Length of one window. */
  readonly windowMs: number;
  /** Connections, each with one request in flight (closed loop). */
  readonly concurrency: number;
  /** Rounds of (1 worker, 2 workers). */
  readonly rounds: number;
  readonly measuredWindows: number;
  /** Warm-up gives up (and the run says so) after this many windows without two agreeing within 10 %. */
  readonly maxWarmupWindows: number;
  readonly upstream: 'minimal' | 'sim';
  readonly log?: (line: string) => void;
}

export const DEFAULT_WORKERS_BENCH: WorkersBenchOptions = { windowMs: 3_000, concurrency: 32, rounds: 2, measuredWindows: 3, maxWarmupWindows: 12, upstream: 'minimal' };

export interface Window {
  readonly rps: number;
  readonly failed: number;
  /** Gateway process CPU (all threads) per answered request, microseconds. */
  readonly gatewayCpuUs: number;
  /** Gateway CPU as cores busy (1.0 = one core the whole window). */
  readonly gatewayCores: number;
  readonly loadGenCores: number;
  readonly upstreamCores: number;
}

export interface ConfigResult {
  readonly workers: number;
  readonly round: number;
  readonly warmupWindows: number;
  readonly warmedUp: boolean;
  readonly windows: readonly Window[];
  readonly rps: number;
  readonly rpsMin: number;
  readonly rpsMax: number;
  readonly gatewayCpuUs: number;
  readonly gatewayCores: number;
  readonly failed: number;
}

export interface WorkersBenchResult {
  readonly options: WorkersBenchOptions;
  readonly cpus: number;
  readonly node: string;
  readonly loadAverageStart: readonly number[];
  readonly loadAverageEnd: readonly number[];
  readonly results: readonly ConfigResult[];
  /** Median two-worker requests/s over median single-worker requests/s (all rounds). */
  readonly throughputRatio: number;
  /** Two-worker CPU per request over single-worker CPU per request: above 1 means workers cost per request. */
  readonly cpuPerRequestRatio: number;
  readonly failed: number;
}

const CHAT_ANSWER = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 0,
  model: 'm1',
  choices: [{ index: 0, message: { role: 'assistant', content: 'bench answer of a few tokens' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 },
});
const UPSTREAM_RESPONSE = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(CHAT_ANSWER)}\r\n\r\n${CHAT_ANSWER}`);
const REQUEST_BODY = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello' }] });

const HEAD_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i;
const CHUNKED = /\r\ntransfer-encoding:\s*chunked/i;
const CHUNKED_END = Buffer.from('\r\n0\r\n\r\n');

/**
 * Splits HTTP/1.1 messages off a byte stream by their framing (content-length or chunked), calling `onMessage` with
 * each head's first line. Enough for the fixed messages of this benchmark, not a general parser.
 */
function messageSplitter(onMessage: (firstLine: string) => void): (chunk: Buffer) => void {
  let buffer: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    for (;;) {
      const headEnd = buffer.indexOf(HEAD_END);
      if (headEnd < 0) return;
      const head = buffer.toString('latin1', 0, headEnd);
      const bodyStart = headEnd + 4;
      let end: number;
      const length = CONTENT_LENGTH.exec(head);
      if (length !== null) {
        end = bodyStart + Number(length[1]);
        if (buffer.length < end) return;
      } else if (CHUNKED.test(head)) {
        const last = buffer.indexOf(CHUNKED_END, bodyStart - 2);
        if (last < 0) return;
        end = last + CHUNKED_END.length;
      } else {
        end = bodyStart;
      }
      onMessage(head.slice(0, head.indexOf('\r\n') >>> 0));
      buffer = buffer.subarray(end);
    }
  };
}

/** The cheapest upstream that still speaks HTTP/1.1 keep-alive: one canned answer per request. */
async function startMinimalUpstream(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.on('data', messageSplitter(() => socket.write(UPSTREAM_RESPONSE)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** utime + stime of one process (every thread), in seconds. */
function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Load {
  /** Answered (200) and failed requests since the last take(). */
  take(): { ok: number; failed: number };
  stop(): Promise<void>;
}

/** Closed loop: `concurrency` keep-alive connections, each sending its next request when the previous answer ends. */
async function startLoad(port: number, concurrency: number): Promise<Load> {
  const request = Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(REQUEST_BODY)}\r\n\r\n${REQUEST_BODY}`,
  );
  let ok = 0;
  let failed = 0;
  let stopping = false;
  const open = new Set<Socket>();
  const closed: Promise<void>[] = [];
  const connection = (): void => {
    const socket = connect({ host: '127.0.0.1', port, noDelay: true });
    open.add(socket);
    closed.push(new Promise<void>((resolve) => socket.once('close', () => resolve())));
    socket.setTimeout(10_000, () => socket.destroy(new Error('timeout')));
    socket.on(
      'data',
      messageSplitter((status) => {
        if (status.startsWith('HTTP/1.1 200 ')) ok++;
        else failed++;
        if (!stopping) socket.write(request);
      }),
    );
    socket.on('error', () => {
      if (!stopping) failed++;
    });
    socket.on('close', () => {
      open.delete(socket);
      // A connection the gateway closed is replaced, so the loop keeps `concurrency` requests in flight.
      if (!stopping) connection();
    });
    socket.once('connect', () => socket.write(request));
  };
  for (let i = 0; i < concurrency; i++) connection();
  return {
    take() {
      const taken = { ok, failed };
      ok = 0;
      failed = 0;
      return taken;
    },
    async stop() {
      stopping = true;
      // Each connection ends after its request in flight is answered (or at its timeout).
      await new Promise((r) => setTimeout(r, 200));
      for (const s of open) s.destroy();
      await Promise.all(closed);
    },
  };
}

async function runWindow(load: Load, windowMs: number, gatewayPid: number, upstreamPid: number | undefined): Promise<Window> {
  load.take();
  const cpu0 = processCpuSeconds(gatewayPid);
  const up0 = upstreamPid === undefined ? 0 : processCpuSeconds(upstreamPid);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, windowMs));
  const elapsedS = (performance.now() - t0) / 1000;
  const { ok, failed } = load.take();
  const cpu = processCpuSeconds(gatewayPid) - cpu0;
  const own = process.cpuUsage(own0);
  const upstreamCpu = upstreamPid === undefined ? (own.user + own.system) / 1e6 : processCpuSeconds(upstreamPid) - up0;
  return {
    rps: ok / elapsedS,
    failed,
    gatewayCpuUs: ok === 0 ? NaN : (cpu * 1e6) / ok,
    gatewayCores: cpu / elapsedS,
    // With the minimal upstream in this process, the two share one figure (reported as the load generator's).
    loadGenCores: (own.user + own.system) / 1e6 / elapsedS,
    upstreamCores: upstreamPid === undefined ? 0 : upstreamCpu / elapsedS,
  };
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

function startGateway(config: string, workers: number): { proc: ChildProcess; ready: Promise<{ port: number; admin: number }> } {
  const proc = spawn(process.execPath, [join(ROOT, 'daemons/gateway/main.ts'), '--config', config, '--workers', String(workers)], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  proc.stdout!.resume();
  const ready = (async () => {
    // LOG_LEVEL=warn hides the listening lines: the ports are fixed in the config instead.
    const text = readFileSync(config, 'utf8');
    const parsed = JSON.parse(text) as { listeners: { address: string }[]; admin: { address: string } };
    const port = Number(parsed.listeners[0]!.address.split(':')[1]);
    const admin = Number(parsed.admin.address.split(':')[1]);
    await waitFor(
      `gateway --workers ${workers} ready`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`gateway exited ${proc.exitCode}: ${err.slice(0, 400)}`);
        const res = await fetch(`http://127.0.0.1:${admin}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      30_000,
    );
    return { port, admin };
  })();
  return { proc, ready };
}

async function stopProcess(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null) return proc.exitCode;
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/** A free loopback port (bound and released; the gateway binds it a moment later). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function measureConfig(config: string, workers: number, round: number, options: WorkersBenchOptions, upstreamPid: number | undefined): Promise<ConfigResult> {
  const log = options.log ?? (() => undefined);
  const gateway = startGateway(config, workers);
  try {
    const { port } = await gateway.ready;
    const load = await startLoad(port, options.concurrency);
    const warmup: Window[] = [];
    let warmedUp = false;
    while (warmup.length < options.maxWarmupWindows) {
      const w = await runWindow(load, options.windowMs, gateway.proc.pid!, upstreamPid);
      warmup.push(w);
      log(`  workers=${workers} round ${round} warm-up ${warmup.length}: ${w.rps.toFixed(0)} req/s, ${w.gatewayCpuUs.toFixed(0)} us CPU/req, failed ${w.failed}`);
      const prev = warmup.at(-2);
      if (prev !== undefined && Math.abs(w.rps - prev.rps) <= 0.1 * Math.max(w.rps, prev.rps)) {
        warmedUp = true;
        break;
      }
    }
    const windows: Window[] = [];
    for (let i = 0; i < options.measuredWindows; i++) {
      const w = await runWindow(load, options.windowMs, gateway.proc.pid!, upstreamPid);
      windows.push(w);
      log(`  workers=${workers} round ${round} window ${i + 1}: ${w.rps.toFixed(0)} req/s, ${w.gatewayCpuUs.toFixed(0)} us CPU/req, gateway ${w.gatewayCores.toFixed(2)} cores, failed ${w.failed}`);
    }
    await load.stop();
    const rps = windows.map((w) => w.rps);
    return {
      workers,
      round,
      warmupWindows: warmup.length,
      warmedUp,
      windows,
      rps: median(rps),
      rpsMin: Math.min(...rps),
      rpsMax: Math.max(...rps),
      gatewayCpuUs: median(windows.map((w) => w.gatewayCpuUs)),
      gatewayCores: median(windows.map((w) => w.gatewayCores)),
      failed: [...warmup, ...windows].reduce((sum, w) => sum + w.failed, 0),
    };
  } finally {
    const code = await stopProcess(gateway.proc);
    if (code !== 0) throw new Error(`gateway --workers ${workers} exited ${code} on SIGTERM`);
  }
}

/** One run: `rounds` x (1 worker, 2 workers) through the consumer gateway. */
export async function benchGatewayWorkers(partial: Partial<WorkersBenchOptions> = {}): Promise<WorkersBenchResult> {
  const options = { ...DEFAULT_WORKERS_BENCH, ...partial };
  const loadAverageStart = loadavg();
  const { dir, cleanup } = await tempDir('bench-workers');
  let upstream: { port: number; close: () => Promise<void> } | undefined;
  let sim: ChildProcess | undefined;
  try {
    await writeFile(join(dir, 'sim-token'), 'bench-workers-token');
    let upstreamPort: number;
    if (options.upstream === 'sim') {
      upstreamPort = await freePort();
      sim = spawn(process.execPath, [join(ROOT, 'daemons/sim/main.ts'), '--name', 'sim', '--models', 'm1', '--token-file', join(dir, 'sim-token'), '--port', String(upstreamPort)], {
        cwd: ROOT,
        env: { ...process.env, LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      });
      const port = upstreamPort;
      await waitFor('sim', async () => ((await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200 ? true : undefined), 30_000);
    } else {
      upstream = await startMinimalUpstream();
      upstreamPort = upstream.port;
    }
    const overlay = join(dir, 'overlay.json');
    await writeOverlay(overlay, payload([{ ...candidate('m1', 'local', 'up'), credential: { strategy: 'bearer_token', secretRef: { name: 'tok', namespace: 'grid-system', key: 'token' } } }]));
    const config = join(dir, 'consumer.json');
    const base = consumerConfig({
      overlayPath: overlay,
      credentials: [{ name: 'tok', namespace: 'grid-system', key: 'token', file: join(dir, 'sim-token') }],
      clusters: [{ name: 'up', endpoints: [`127.0.0.1:${upstreamPort}`] }],
    });
    const results: ConfigResult[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      for (const workers of [1, 2]) {
        // Fixed ports (the bench reads them from the config; port 0 would need the log lines).
        await writeFile(config, JSON.stringify({ ...base, listeners: [{ name: 'edge', address: `127.0.0.1:${await freePort()}`, filter_chains: ['main'] }], admin: { address: `127.0.0.1:${await freePort()}` } }));
        results.push(await measureConfig(config, workers, round, options, sim?.pid));
      }
    }
    const of = (workers: number): ConfigResult[] => results.filter((r) => r.workers === workers);
    const rps = (workers: number): number => median(of(workers).flatMap((r) => r.windows.map((w) => w.rps)));
    const cpu = (workers: number): number => median(of(workers).flatMap((r) => r.windows.map((w) => w.gatewayCpuUs)));
    return {
      options,
      cpus: cpus().length,
      node: process.version,
      loadAverageStart,
      loadAverageEnd: loadavg(),
      results,
      throughputRatio: rps(2) / rps(1),
      cpuPerRequestRatio: cpu(2) / cpu(1),
      failed: results.reduce((sum, r) => sum + r.failed, 0),
    };
  } finally {
    await upstream?.close();
    if (sim !== undefined) await stopProcess(sim);
    await cleanup();
  }
}

export function formatWorkersReport(result: WorkersBenchResult): string {
  const { options } = result;
  const pad = (s: string, n: number): string => s.padEnd(n);
  const lines = [
    `gateway workers benchmark: consumer gateway --workers 1 vs 2, ${options.concurrency} connections closed loop, ${options.upstream} upstream, ` +
      `${options.windowMs} ms windows (warm-up until two agree within 10 %, then ${options.measuredWindows}), ${options.rounds} rounds, ` +
      `node ${result.node}, ${result.cpus} CPUs, load average at start ${result.loadAverageStart.map((l) => l.toFixed(2)).join(' ')}`,
    '',
    `${pad('workers', 9)}${pad('round', 7)}${pad('warm-up', 9)}${pad('req/s median', 14)}${pad('min-max', 15)}${pad('CPU us/req', 12)}${pad('gateway cores', 15)}${pad('loadgen+up cores', 18)}failed`,
  ];
  for (const r of result.results) {
    const loadGen = median(r.windows.map((w) => w.loadGenCores + w.upstreamCores));
    lines.push(
      `${pad(String(r.workers), 9)}${pad(String(r.round), 7)}${pad(`${r.warmupWindows}${r.warmedUp ? '' : '!'}`, 9)}${pad(r.rps.toFixed(0), 14)}` +
        `${pad(`${r.rpsMin.toFixed(0)}-${r.rpsMax.toFixed(0)}`, 15)}${pad(r.gatewayCpuUs.toFixed(0), 12)}${pad(r.gatewayCores.toFixed(2), 15)}${pad(loadGen.toFixed(2), 18)}${r.failed}`,
    );
  }
  lines.push(
    '',
    `two workers / one worker: throughput ${result.throughputRatio.toFixed(2)}x measured, CPU per request ${result.cpuPerRequestRatio.toFixed(2)}x; failed requests ${result.failed}`,
    `with a whole core per worker (a pod given 2 CPUs, load generated elsewhere) the throughput ratio would be 2 / the CPU ratio = ${(2 / result.cpuPerRequestRatio).toFixed(2)}x (a projection, not a measurement)`,
    `load average at the end: ${result.loadAverageEnd.map((l) => l.toFixed(2)).join(' ')} (the load generator and upstream share the cores with the gateway; "!" = warm-up never agreed within 10 %)`,
  );
  return lines.join('\n');
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      'window-ms': { type: 'string' },
      concurrency: { type: 'string' },
      rounds: { type: 'string' },
      windows: { type: 'string' },
      upstream: { type: 'string' },
    },
  });
  const number = (text: string | undefined, fallback: number): number => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new Error(`expected a positive whole number, got "${text}"`);
    return n;
  };
  const upstream = values.upstream ?? 'minimal';
  benchGatewayWorkers({
    windowMs: number(values['window-ms'], DEFAULT_WORKERS_BENCH.windowMs),
    concurrency: number(values.concurrency, DEFAULT_WORKERS_BENCH.concurrency),
    rounds: number(values.rounds, DEFAULT_WORKERS_BENCH.rounds),
    measuredWindows: Math.max(3, number(values.windows, DEFAULT_WORKERS_BENCH.measuredWindows)),
    upstream: upstream === 'sim' ? 'sim' : upstream === 'minimal' ? 'minimal' : (() => { throw new Error(`--upstream must be minimal or sim, got "${upstream}"`); })(),
    log: (line) => process.stdout.write(`${line}\n`),
  }).then(
    (result) => {
      process.stdout.write(`\n${formatWorkersReport(result)}\n`);
      if (result.failed > 0) process.exitCode = 1;
    },
    (error: unknown) => {
      process.stderr.write(`bench:gateway-workers failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
