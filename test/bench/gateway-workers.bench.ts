// Gateway workers benchmark: the consumer gateway with `--workers 1` against `--workers 2`, same
// config, same upstream, same closed-loop load.
//
//   npm run bench:gateway-workers [-- --window-ms 3000 --concurrency 32 --pairs 5 --upstream minimal|sim --idle-ms 10000]
//
// Before any load, both gateways sit idle for IDLE_MS (after 3 s to settle) and their CPU per idle second is recorded:
// what a scaled-out pod of idle workers costs (each worker thread's own timers and its event-loop monitor).
//
// This machine is shared (other work comes and goes within seconds), so the two gateways run side by side and are
// measured in alternating windows, 1 worker then 2 workers, each pair a few seconds apart: the ratio of each pair
// sees nearly the same background load, and the figure is the median of the pairs' ratios. Only the gateway being
// measured has traffic; the other is idle (its connections open, no requests).
//
// On a 2-core machine the load generator and the upstream compete with the gateway for the same cores, so both are
// as cheap as we can make them: the load generator (this process) writes one pre-built request per connection on
// raw sockets and reads only the status line and the framing; the default upstream ("minimal", also in this
// process) answers every request with one pre-built chat completion, parsing no more than the head. Per window it
// records requests/s, failed requests (any non-200, reset, early close or 10 s without an answer), the gateway's CPU
// time per request (utime + stime of the whole process from /proc: every worker thread), the cores the gateway and
// the load generator used, and the load average. Each pair also states the most a second worker could add on these
// cores at the measured CPU per request (ratioCeiling): what the ratio is to be read against.
//
// Linux's autogroup scheduling (kernel.sched_autogroup_enabled = 1, as on this machine) gives each session an equal
// share of the CPUs: while other sessions are busy, the gateway gets about one session's share, so
// a second worker finds no second core to use, and the run says so. Measure the scaling on an otherwise idle machine.
// Each gateway runs in its own session (its own autogroup), so its worker count does not change the load
// generator's share.
//
// Warm-up alternates windows until each gateway has two consecutive windows within 10 % of each other (a fresh
// gateway costs several times its steady cost in its first seconds), then >= 3 measured pairs.
// Exports benchGatewayWorkers() (one run, a result object) and formatWorkersReport(); runnable alone.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { ROOT, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from '../gateway/helpers.ts';
import { processCpuSeconds } from './proc-cpu.ts';
import { benchArgs } from './bench-args.ts';
import { median } from './stats.ts';

export interface WorkersBenchOptions {
  /** Length of one window. */
  readonly windowMs: number;
  /** Connections per gateway, each with one request in flight (closed loop). */
  readonly concurrency: number;
  /** Measured pairs of windows (1 worker, then 2 workers); at least 3. */
  readonly pairs: number;
  /** Warm-up gives up (and the report says so) after this many windows per gateway without two agreeing within 10 %. */
  readonly maxWarmupWindows: number;
  readonly upstream: 'minimal' | 'sim';
  /** How long both gateways are measured idle before the load starts; 0 skips it. */
  readonly idleMs: number;
  readonly log?: (line: string) => void;
}

export const DEFAULT_WORKERS_BENCH: WorkersBenchOptions = {
  windowMs: 3_000,
  concurrency: 32,
  pairs: 5,
  maxWarmupWindows: 12,
  upstream: 'minimal',
  idleMs: 10_000,
};

/** Idle gateways settle this long after /readyz before their idle CPU is measured. */
const IDLE_SETTLE_MS = 3_000;

export interface Window {
  readonly rps: number;
  readonly failed: number;
  /** Gateway process CPU (all threads) per answered request, microseconds. */
  readonly gatewayCpuUs: number;
  /** Gateway CPU as cores busy (1.0 = one core the whole window). */
  readonly gatewayCores: number;
  /** The load generator's process (with the minimal upstream in it) and the sim, if used, as cores busy. */
  readonly loadGenCores: number;
  readonly loadAverage: number;
}

export interface Pair {
  readonly one: Window;
  readonly two: Window;
  readonly throughputRatio: number;
  readonly cpuPerRequestRatio: number;
  /** The highest throughputRatio this machine allows the pair (ratioCeiling()). */
  readonly ceiling: number;
}

/**
 * The most a second worker can add here, from the single-worker window: at the same CPU per request for the gateway
 * (g) and for the load generator with the upstream (o), `cpus` cores carry at most cpus / (g + o) requests per
 * second, and one worker carried gatewayCores / g = loadGenCores / o, so two workers reach at most
 * cpus / (gatewayCores + loadGenCores) times one. On 2 cores a load generator and upstream using 0.55 of a core
 * beside one busy worker cap the ratio at 2 / 1.55 = 1.29, whatever the gateway does.
 */
export function ratioCeiling(one: Pick<Window, 'gatewayCores' | 'loadGenCores'>, cpuCount: number): number {
  return cpuCount / (one.gatewayCores + one.loadGenCores);
}

export interface WorkersBenchResult {
  readonly options: WorkersBenchOptions;
  readonly cpus: number;
  readonly node: string;
  readonly loadAverageStart: readonly number[];
  readonly loadAverageEnd: readonly number[];
  /** CPU milliseconds per second of each gateway while idle (no connections), when measured. */
  readonly idle: { readonly one: number; readonly two: number } | undefined;
  /** Warm-up windows per gateway, and whether two consecutive ones agreed within 10 %. */
  readonly warmup: { readonly one: number; readonly two: number; readonly agreed: boolean };
  readonly pairs: readonly Pair[];
  /** Median over pairs of (two-worker req/s / single-worker req/s). */
  readonly throughputRatio: number;
  /** Median over pairs of (two-worker CPU per request / single-worker CPU per request). */
  readonly cpuPerRequestRatio: number;
  /** Median over pairs of the machine's ceiling on throughputRatio. */
  readonly ceiling: number;
  /** Failed requests in every window, warm-up included. */
  readonly failed: number;
}

const CHAT_ANSWER = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 0,
  model: 'm1',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'bench answer of a few tokens' }, finish_reason: 'stop' },
  ],
  usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 },
});
const UPSTREAM_RESPONSE = Buffer.from(
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(CHAT_ANSWER)}\r\n\r\n${CHAT_ANSWER}`,
);
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
    socket.on(
      'data',
      messageSplitter(() => socket.write(UPSTREAM_RESPONSE)),
    );
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

interface Load {
  /** Answered (200) and failed requests since the last take(). */
  take(): { ok: number; failed: number };
  /** Stops sending: each connection finishes its request in flight and then waits. */
  pause(): Promise<void>;
  resume(): void;
  stop(): Promise<void>;
}

/**
 * Closed loop: `concurrency` keep-alive connections, each sending its next request when the previous answer ends.
 * Starts paused. A connection the gateway closes (its keep-alive timeout while paused) is replaced.
 */
function startLoad(port: number, concurrency: number): Load {
  const request = Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(REQUEST_BODY)}\r\n\r\n${REQUEST_BODY}`,
  );
  let ok = 0;
  let failed = 0;
  let paused = true;
  let stopping = false;
  /** Connected sockets with no request outstanding. */
  const idle = new Set<Socket>();
  const open = new Set<Socket>();
  const closed: Promise<void>[] = [];
  const send = (socket: Socket): void => {
    if (paused || stopping) {
      idle.add(socket);
      return;
    }
    idle.delete(socket);
    socket.write(request);
    socket.setTimeout(10_000);
  };
  const connection = (): void => {
    const socket = connect({ host: '127.0.0.1', port, noDelay: true });
    open.add(socket);
    closed.push(new Promise<void>((resolve) => socket.once('close', () => resolve())));
    socket.on('timeout', () => socket.destroy(new Error('no answer within 10 s')));
    socket.on(
      'data',
      messageSplitter((status) => {
        socket.setTimeout(0);
        if (status.startsWith('HTTP/1.1 200 ')) ok++;
        else failed++;
        send(socket);
      }),
    );
    socket.on('error', () => {
      if (!stopping) failed++;
    });
    socket.on('close', () => {
      open.delete(socket);
      const wasIdle = idle.delete(socket);
      // An idle connection closed by the gateway's keep-alive timeout is no failure; one with a request out is
      // counted by its 'error' (a reset) or here (a clean close before the answer).
      if (!wasIdle && !stopping && socket.errored === null) failed++;
      if (!stopping) connection();
    });
    socket.once('connect', () => send(socket));
  };
  for (let i = 0; i < concurrency; i++) connection();
  return {
    take() {
      const taken = { ok, failed };
      ok = 0;
      failed = 0;
      return taken;
    },
    async pause() {
      paused = true;
      const deadline = Date.now() + 10_000;
      while (idle.size < open.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    },
    resume() {
      paused = false;
      for (const socket of [...idle]) send(socket);
    },
    async stop() {
      stopping = true;
      await this.pause();
      for (const socket of open) socket.destroy();
      await Promise.all(closed);
    },
  };
}

async function runWindow(
  load: Load,
  windowMs: number,
  gatewayPid: number,
  simPid: number | undefined,
): Promise<Window> {
  load.take();
  const cpu0 = processCpuSeconds(gatewayPid);
  const sim0 = simPid === undefined ? 0 : processCpuSeconds(simPid);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  load.resume();
  await new Promise((r) => setTimeout(r, windowMs));
  const { ok, failed } = load.take();
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = processCpuSeconds(gatewayPid) - cpu0;
  const own = process.cpuUsage(own0);
  const sim = simPid === undefined ? 0 : processCpuSeconds(simPid) - sim0;
  const loadAverage = loadavg()[0]!;
  await load.pause();
  return {
    rps: ok / elapsedS,
    failed,
    gatewayCpuUs: ok === 0 ? NaN : (cpu * 1e6) / ok,
    gatewayCores: cpu / elapsedS,
    loadGenCores: ((own.user + own.system) / 1e6 + sim) / elapsedS,
    loadAverage,
  };
}

interface RunningGateway {
  readonly workers: number;
  readonly proc: ChildProcess;
  readonly port: number;
}

/** Starts `node daemons/gateway/main.ts --config … --workers N` on fixed free ports and waits for /readyz. */
async function startGateway(dir: string, base: Record<string, unknown>, workers: number): Promise<RunningGateway> {
  const port = await freePort();
  const admin = await freePort();
  const config = join(dir, `consumer-${workers}.json`);
  await writeFile(
    config,
    JSON.stringify({
      ...base,
      listeners: [{ name: 'edge', address: `127.0.0.1:${port}`, filter_chains: ['main'] }],
      admin: { address: `127.0.0.1:${admin}` },
    }),
  );
  const proc = spawn(
    process.execPath,
    [join(ROOT, 'daemons/gateway/main.ts'), '--config', config, '--workers', String(workers)],
    {
      cwd: ROOT,
      // Its own session, so its own autogroup: a second worker thread does not take CPU from the load generator's
      // share (which would make the load generator the bottleneck of the two-worker windows).
      detached: true,
      env: { ...process.env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  await waitFor(
    `gateway --workers ${workers} ready`,
    async () => {
      if (proc.exitCode !== null)
        throw new Error(`gateway --workers ${workers} exited ${proc.exitCode}: ${err.slice(0, 400)}`);
      const res = await fetch(`http://127.0.0.1:${admin}/readyz`).catch(() => undefined);
      return res?.status === 200 ? true : undefined;
    },
    30_000,
  );
  return { workers, proc, port };
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

function autogroupEnabled(): boolean {
  try {
    return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/** Both gateways' CPU per second (ms) over `ms` without a connection, after IDLE_SETTLE_MS. */
async function idleCpu(gateways: readonly RunningGateway[], ms: number): Promise<{ one: number; two: number }> {
  await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
  const before = gateways.map((g) => processCpuSeconds(g.proc.pid!));
  await new Promise((resolve) => setTimeout(resolve, ms));
  const [one, two] = gateways.map((g, i) => ((processCpuSeconds(g.proc.pid!) - before[i]!) * 1e6) / ms) as [
    number,
    number,
  ];
  return { one, two };
}

const within10 = (a: Window | undefined, b: Window | undefined): boolean =>
  a !== undefined && b !== undefined && Math.abs(a.rps - b.rps) <= 0.1 * Math.max(a.rps, b.rps);

/** One run: a single-worker and a two-worker consumer gateway, warmed up, then measured in alternating windows. */
export async function benchGatewayWorkers(partial: Partial<WorkersBenchOptions> = {}): Promise<WorkersBenchResult> {
  const options = { ...DEFAULT_WORKERS_BENCH, ...partial };
  if (options.pairs < 3) throw new Error(`pairs must be at least 3, got ${options.pairs}`);
  const log = options.log ?? (() => undefined);
  const loadAverageStart = loadavg();
  const { dir, cleanup } = await tempDir('bench-workers');
  let upstream: { port: number; close: () => Promise<void> } | undefined;
  let sim: ChildProcess | undefined;
  const gateways: RunningGateway[] = [];
  const loads: Load[] = [];
  try {
    await writeFile(join(dir, 'upstream-token'), 'bench-workers-token');
    let upstreamPort: number;
    if (options.upstream === 'sim') {
      upstreamPort = await freePort();
      // Engine steps that take no time: the benchmark measures the gateway, not a model of a GPU.
      const instant = ['--step-overhead-ms', '0', '--prefill-ms-per-token', '0', '--decode-ms-per-seq', '0'];
      sim = spawn(
        process.execPath,
        [
          join(ROOT, 'daemons/sim/main.ts'),
          '--name',
          'sim',
          '--models',
          'm1',
          '--token-file',
          join(dir, 'upstream-token'),
          '--port',
          String(upstreamPort),
          ...instant,
        ],
        {
          cwd: ROOT,
          env: { ...process.env, LOG_LEVEL: 'warn' },
          stdio: 'ignore',
        },
      );
      const port = upstreamPort;
      await waitFor(
        'sim',
        async () =>
          (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200 ? true : undefined,
        30_000,
      );
    } else {
      upstream = await startMinimalUpstream();
      upstreamPort = upstream.port;
    }
    const overlay = join(dir, 'overlay.json');
    await writeOverlay(
      overlay,
      payload([
        {
          ...candidate('m1', 'local', 'up'),
          credential: { strategy: 'bearer_token', secretRef: { name: 'tok', namespace: 'grid-system', key: 'token' } },
        },
      ]),
    );
    const base = consumerConfig({
      overlayPath: overlay,
      credentials: [{ name: 'tok', namespace: 'grid-system', key: 'token', file: join(dir, 'upstream-token') }],
      clusters: [{ name: 'up', endpoints: [`127.0.0.1:${upstreamPort}`] }],
    });
    for (const workers of [1, 2]) gateways.push(await startGateway(dir, base, workers));
    const idle = options.idleMs > 0 ? await idleCpu(gateways, options.idleMs) : undefined;
    if (idle !== undefined)
      log(`  idle: 1 worker ${idle.one.toFixed(2)} ms CPU/s, 2 workers ${idle.two.toFixed(2)} ms CPU/s`);
    for (const g of gateways) loads.push(startLoad(g.port, options.concurrency));
    const [one, two] = gateways as [RunningGateway, RunningGateway];
    const [loadOne, loadTwo] = loads as [Load, Load];
    const window = async (g: RunningGateway, load: Load, label: string): Promise<Window> => {
      const w = await runWindow(load, options.windowMs, g.proc.pid!, sim?.pid);
      log(
        `  ${label} workers=${g.workers}: ${w.rps.toFixed(0)} req/s, ${w.gatewayCpuUs.toFixed(0)} us CPU/req, gateway ${w.gatewayCores.toFixed(2)} cores, load generator ${w.loadGenCores.toFixed(2)} cores, failed ${w.failed}, load average ${w.loadAverage.toFixed(1)}`,
      );
      return w;
    };

    const warmOne: Window[] = [];
    const warmTwo: Window[] = [];
    let agreed = false;
    while (warmOne.length < options.maxWarmupWindows) {
      warmOne.push(await window(one, loadOne, `warm-up ${warmOne.length + 1}`));
      warmTwo.push(await window(two, loadTwo, `warm-up ${warmTwo.length + 1}`));
      if (within10(warmOne.at(-1), warmOne.at(-2)) && within10(warmTwo.at(-1), warmTwo.at(-2))) {
        agreed = true;
        break;
      }
    }
    const pairs: Pair[] = [];
    for (let i = 1; i <= options.pairs; i++) {
      const a = await window(one, loadOne, `pair ${i}`);
      const b = await window(two, loadTwo, `pair ${i}`);
      pairs.push({
        one: a,
        two: b,
        throughputRatio: b.rps / a.rps,
        cpuPerRequestRatio: b.gatewayCpuUs / a.gatewayCpuUs,
        ceiling: ratioCeiling(a, cpus().length),
      });
    }
    const all = [...warmOne, ...warmTwo, ...pairs.flatMap((p) => [p.one, p.two])];
    return {
      options,
      cpus: cpus().length,
      node: process.version,
      loadAverageStart,
      loadAverageEnd: loadavg(),
      idle,
      warmup: { one: warmOne.length, two: warmTwo.length, agreed },
      pairs,
      throughputRatio: median(pairs.map((p) => p.throughputRatio)),
      cpuPerRequestRatio: median(pairs.map((p) => p.cpuPerRequestRatio)),
      ceiling: median(pairs.map((p) => p.ceiling)),
      failed: all.reduce((sum, w) => sum + w.failed, 0),
    };
  } finally {
    await Promise.all(loads.map((l) => l.stop()));
    const codes = await Promise.all(gateways.map((g) => stopProcess(g.proc)));
    await upstream?.close();
    if (sim !== undefined) await stopProcess(sim);
    await cleanup();
    const bad = codes.findIndex((c) => c !== 0);
    // biome-ignore lint/correctness/noUnsafeFinally: exit codes are known only once stopped; a gateway that fails SIGTERM fails the run
    if (bad >= 0) throw new Error(`gateway --workers ${gateways[bad]!.workers} exited ${codes[bad]} on SIGTERM`);
  }
}

export function formatWorkersReport(result: WorkersBenchResult): string {
  const { options } = result;
  const pad = (s: string, n: number): string => s.padEnd(n);
  const f0 = (n: number): string => n.toFixed(0);
  const lines = [
    `gateway workers benchmark: consumer gateway --workers 1 vs 2 in alternating ${options.windowMs} ms windows, ${options.concurrency} connections closed loop, ` +
      `${options.upstream} upstream, node ${result.node}, ${result.cpus} CPUs, load average at start ${result.loadAverageStart.map((l) => l.toFixed(2)).join(' ')}`,
    ...(result.idle === undefined
      ? []
      : [
          `idle before the load (${options.idleMs} ms, no connections): 1 worker ${result.idle.one.toFixed(2)} ms CPU per second, 2 workers ${result.idle.two.toFixed(2)} ms CPU per second`,
        ]),
    `warm-up: ${result.warmup.one} windows each${result.warmup.agreed ? ' (two consecutive within 10 %)' : `, NEVER two consecutive within 10 % (gave up after ${options.maxWarmupWindows})`}`,
    '',
    `${pad('pair', 6)}${pad('1 worker req/s', 16)}${pad('2 workers req/s', 17)}${pad('ratio', 8)}${pad('CPU us/req 1 / 2', 18)}${pad('gateway cores 1 / 2', 21)}${pad('loadgen cores', 15)}${pad('ceiling', 9)}${pad('load avg', 10)}failed`,
  ];
  result.pairs.forEach((p, i) => {
    lines.push(
      `${pad(String(i + 1), 6)}${pad(f0(p.one.rps), 16)}${pad(f0(p.two.rps), 17)}${pad(p.throughputRatio.toFixed(2), 8)}${pad(`${f0(p.one.gatewayCpuUs)} / ${f0(p.two.gatewayCpuUs)}`, 18)}` +
        `${pad(`${p.one.gatewayCores.toFixed(2)} / ${p.two.gatewayCores.toFixed(2)}`, 21)}${pad(`${p.one.loadGenCores.toFixed(2)} / ${p.two.loadGenCores.toFixed(2)}`, 15)}${pad(p.ceiling.toFixed(2), 9)}` +
        `${pad(((p.one.loadAverage + p.two.loadAverage) / 2).toFixed(1), 10)}${p.one.failed + p.two.failed}`,
    );
  });
  const ratios = result.pairs.map((p) => p.throughputRatio);
  lines.push(
    '',
    `two workers / one worker: throughput ${result.throughputRatio.toFixed(2)}x (median of ${ratios.length} pairs, range ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}), ` +
      `CPU per request ${result.cpuPerRequestRatio.toFixed(2)}x; failed requests ${result.failed} (warm-up included)`,
    `this machine's ceiling on that ratio: ${result.ceiling.toFixed(2)}x (median; ${result.cpus} CPUs / the cores the gateway and the load generator used in the ` +
      `single-worker window), so two workers reached ${((100 * result.throughputRatio) / result.ceiling).toFixed(0)} % of what these cores allow`,
    `load average at the end: ${result.loadAverageEnd.map((l) => l.toFixed(2)).join(' ')}. The load generator and the upstream share the cores with the gateway, ` +
      'so two workers cannot have two whole cores here; with a core per worker the ratio is bounded by 2 / the CPU ratio.',
  );
  const twoWorkerCores = Math.max(...result.pairs.map((p) => p.two.gatewayCores));
  if (autogroupEnabled() && Math.max(result.loadAverageStart[0]!, result.loadAverageEnd[0]!) > result.cpus) {
    lines.push(
      `NOTE: autogroup scheduling is on and the load average exceeded ${result.cpus}: the gateway got one session's fair share of the CPUs ` +
        `(the two-worker gateway used at most ${twoWorkerCores.toFixed(2)} cores in a window), so this run cannot show what a second core gives.`,
    );
  }
  return lines.join('\n');
}

if (import.meta.main) {
  const usage =
    'usage: npm run bench:gateway-workers -- [--window-ms 3000] [--concurrency 32] [--pairs 5] [--upstream minimal|sim] [--idle-ms 10000]';
  const { values, whole, count, fail } = benchArgs('bench:gateway-workers', usage, {
    'window-ms': { type: 'string' },
    concurrency: { type: 'string' },
    pairs: { type: 'string' },
    upstream: { type: 'string' },
    'idle-ms': { type: 'string' },
  });
  const named = values.upstream ?? 'minimal';
  const upstream =
    named === 'minimal' || named === 'sim' ? named : fail(`--upstream must be minimal or sim, got "${named}"`);
  benchGatewayWorkers({
    windowMs: whole('window-ms', values['window-ms'], DEFAULT_WORKERS_BENCH.windowMs),
    concurrency: whole('concurrency', values.concurrency, DEFAULT_WORKERS_BENCH.concurrency),
    pairs: whole('pairs', values.pairs, DEFAULT_WORKERS_BENCH.pairs),
    upstream,
    idleMs: count('idle-ms', values['idle-ms'], DEFAULT_WORKERS_BENCH.idleMs),
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
