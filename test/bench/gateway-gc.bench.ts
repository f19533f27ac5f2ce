// The garbage collector on the gateway's request path: the floor proxy (floor-proxy.ts) and the consumer gateway,
// each started with --trace-gc in front of the same sim, at a fixed request rate (open loop) for a few seconds after
// a warm second; every scavenge and mark-compact the process reports in the measured window is parsed. A request
// path that keeps each request's objects across scavenges shows here as long scavenges and an old generation that
// grows between mark-compacts (what a `request.failover` closure made per request does).
//   npm run bench:gateway-gc [-- --rate 1000 --seconds 10]
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pool } from 'undici';
import { benchArgs } from './bench-args.ts';
import {
  ROOT,
  candidate,
  consumerConfig,
  payload,
  spawnDaemon,
  tempDir,
  waitForPort,
  writeOverlay,
} from '../gateway/helpers.ts';

const USAGE = 'usage: npm run bench:gateway-gc -- [--rate 1000] [--seconds 10]';

function options(): { rate: number; seconds: number } {
  const { values, positive: num } = benchArgs('bench:gateway-gc', USAGE, {
    rate: { type: 'string' },
    seconds: { type: 'string' },
  });
  return { rate: num('rate', values.rate, 1000), seconds: num('seconds', values.seconds, 10) };
}

interface GcEvent {
  atMs: number;
  kind: 'scavenge' | 'mark-compact';
  beforeMb: number;
  afterMb: number;
  pauseMs: number;
}

// "[pid:0x…]   1234 ms: Scavenge 44.3 (64.7) -> 31.6 (64.7) MB, pooled: 0 MB, 0.72 / 0.00 ms ..."
const TRACE =
  /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: (Scavenge|Mark-Compact) ([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \//;

/** A daemon started with --trace-gc: its GC events, and its port from the JSON "listening" line. */
function traced(
  script: string,
  args: string[],
  listener: string,
): { proc: ChildProcess; events: GcEvent[]; port: Promise<number> } {
  const proc = spawn(process.execPath, ['--trace-gc', join(ROOT, script), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, LOG_LEVEL: 'info' },
  });
  const events: GcEvent[] = [];
  let pending = '';
  let resolvePort: (port: number) => void = () => undefined;
  const port = new Promise<number>((resolve) => (resolvePort = resolve));
  proc.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const m = TRACE.exec(line);
      if (m !== null) {
        events.push({
          atMs: Number(m[1]),
          kind: m[2] === 'Scavenge' ? 'scavenge' : 'mark-compact',
          beforeMb: Number(m[3]),
          afterMb: Number(m[4]),
          pauseMs: Number(m[5]),
        });
        continue;
      }
      try {
        const parsed = JSON.parse(line) as { msg?: string; listener?: string; port?: number };
        if (parsed.msg === 'listening' && parsed.listener === listener && typeof parsed.port === 'number')
          resolvePort(parsed.port);
      } catch {
        // neither a GC line nor a log line
      }
    }
  });
  return { proc, events, port };
}

const BODY = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello' }] });

/** Open loop at `rate` for `ms`; returns the requests answered 200. */
async function load(port: number, rate: number, ms: number): Promise<number> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 256, pipelining: 1, keepAliveTimeout: 60_000 });
  const pending: Promise<void>[] = [];
  let ok = 0;
  const t0 = performance.now();
  const total = Math.round((rate * ms) / 1000);
  for (let sent = 0; sent < total; ) {
    while (sent < total && t0 + (sent * 1000) / rate <= performance.now()) {
      pending.push(
        pool
          .request({
            path: '/v1/chat/completions',
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: BODY,
          })
          .then(
            async (res) => {
              await res.body.dump();
              if (res.statusCode === 200) ok++;
            },
            () => undefined,
          ),
      );
      sent++;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(pending);
  await pool.close();
  return ok;
}

const quantile = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;

async function main(): Promise<void> {
  const { rate, seconds } = options();
  const { dir, cleanup } = await tempDir('bench-gc');
  const procs: ChildProcess[] = [];
  try {
    const tokenFile = join(dir, 'sim-token');
    await writeFile(tokenFile, 'bench-backend-token');
    // Engine steps that take no time: the benchmark measures the gateway, not a model of a GPU.
    const sim = spawnDaemon('daemons/sim/main.ts', [
      '--name',
      'sim',
      '--models',
      'm1',
      '--token-file',
      tokenFile,
      '--step-overhead-ms',
      '0',
      '--prefill-ms-per-token',
      '0',
      '--decode-ms-per-seq',
      '0',
    ]);
    procs.push(sim.proc);
    const simPort = await waitForPort(sim, 'sim');
    const cred = {
      strategy: 'bearer_token' as const,
      secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
    };
    const overlay = join(dir, 'overlay.json');
    await writeOverlay(overlay, payload([{ ...candidate('m1', 'local', 'sim'), credential: cred }]));
    const config = join(dir, 'consumer.json');
    await writeFile(
      config,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlay,
          credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: tokenFile }],
          clusters: [{ name: 'sim', endpoints: [`127.0.0.1:${simPort}`] }],
        }),
      ),
    );
    const paths = [
      {
        name: 'floor (minimal Node proxy)',
        ...traced(
          'test/bench/floor-proxy.ts',
          ['--upstream', `m1=127.0.0.1:${simPort}`, '--token-file', tokenFile],
          'floor',
        ),
      },
      { name: 'consumer gateway', ...traced('daemons/gateway/main.ts', ['--config', config], 'edge') },
    ];
    procs.push(...paths.map((p) => p.proc));
    process.stdout.write(
      `gateway GC benchmark: node ${process.version}, open loop at ${rate} req/s, 1 s warm, then ${seconds} s measured per path; --trace-gc events in the measured window\n\n`,
    );
    process.stdout.write(
      '| path | requests | failed | scavenges | scavenge pause p50 / max ms | heap used after each scavenge, first -> last MB | mark-compacts | GC pause total ms |\n|---|---|---|---|---|---|---|---|\n',
    );
    for (const path of paths) {
      const port = await path.port;
      await load(port, rate, 1000);
      const from = path.events.length;
      const ok = await load(port, rate, seconds * 1000);
      const window = path.events.slice(from);
      const scavenges = window.filter((e) => e.kind === 'scavenge');
      const pauses = scavenges.map((e) => e.pauseMs).sort((a, b) => a - b);
      const total = window.reduce((sum, e) => sum + e.pauseMs, 0);
      const after = scavenges.map((e) => e.afterMb);
      process.stdout.write(
        `| ${path.name} | ${ok} | ${Math.round(rate * seconds) - ok} | ${scavenges.length} | ${quantile(pauses, 0.5).toFixed(2)} / ${(pauses.at(-1) ?? NaN).toFixed(2)} | ` +
          `${(after[0] ?? NaN).toFixed(1)} -> ${(after.at(-1) ?? NaN).toFixed(1)} | ${window.length - scavenges.length} | ${total.toFixed(1)} |\n`,
      );
    }
  } finally {
    for (const proc of procs) proc.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await cleanup();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:gateway-gc failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
