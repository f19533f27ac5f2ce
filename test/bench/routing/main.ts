// Routing-quality benchmark: the bench grid (three sites, seven sims of unequal speed and cache, real gateways and
// operators on loopback) under each routing policy, replaying the same seeded Poisson trace of multi-turn chats and
// single long/short prompts at fractions of the fleet's capacity; then a kill case under the grid's policy.
//   npm run bench:routing [-- --policy NAME]... [--loads 0.5,0.8,1] [--window-s 18] [--warm-s 4] [--seed 1]
//     [--timeout-s 20] [--no-kill] [--kill-only] [--keep]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../bench-args.ts';
import { BACKENDS, POLICIES, type Policy, policyNamed } from './policies.ts';
import {
  backendCapacity,
  fleetCapacity,
  formatRatios,
  formatShares,
  formatTable,
  movedAfterMs,
  percentile,
  ratiosToRoundRobin,
  summarize,
  templateTokens,
  type WindowSummary,
} from './report.ts';
import {
  type BenchGrid,
  type FleetCounters,
  counterDelta,
  fleetCounters,
  gatewayRetries,
  replay,
  startBenchGrid,
} from './run.ts';
import { DEFAULT_SHAPE, buildTrace, meanRequest, reusableShare } from './workload.ts';

const USAGE =
  'usage: npm run bench:routing -- [--policy random|round-robin|least-in-flight|grid|grid+session]... [--loads 0.5,0.8,1] ' +
  '[--window-s 18] [--warm-s 4] [--seed 1] [--timeout-s 20] [--no-kill] [--kill-only] [--keep]';

const { values, positive, whole, fail } = benchArgs('bench:routing', USAGE, {
  policy: { type: 'string', multiple: true },
  loads: { type: 'string' },
  'window-s': { type: 'string' },
  'warm-s': { type: 'string' },
  seed: { type: 'string' },
  'timeout-s': { type: 'string' },
  'no-kill': { type: 'boolean' },
  'kill-only': { type: 'boolean' },
  keep: { type: 'boolean' },
});
const policies: Policy[] = (values.policy ?? POLICIES.map((p) => p.name)).map(
  (name) => policyNamed(name) ?? fail(`--policy "${name}" is not one of ${POLICIES.map((p) => p.name).join(', ')}`),
);
const loads = (values.loads ?? '0.5,0.8,1').split(',').map((s) => positive('loads', s.trim(), 1));
const windowMs = positive('window-s', values['window-s'], 18) * 1000;
const warmMs = positive('warm-s', values['warm-s'], 4) * 1000;
if (warmMs >= windowMs) fail(`--warm-s must be shorter than --window-s`);
const seed = whole('seed', values.seed, 1);
const timeoutMs = positive('timeout-s', values['timeout-s'], 20) * 1000;
const kill = values['no-kill'] !== true;
const main = values['kill-only'] !== true;
if (!kill && !main) fail('--no-kill and --kill-only leave nothing to run');

const benchStarted = performance.now();
const elapsed = (): string => `${((performance.now() - benchStarted) / 1000).toFixed(0)} s`;
const log = (line: string): void => void process.stdout.write(`${line}\n`);
const runDir = mkdtempSync(join(tmpdir(), 'agn-bench-routing-'));

// Capacity, from the sims' parameters (daemons/sim/README.md "Timing") and the trace's mean request: what each backend
// serves with its batch full when the shared system prompts are cached and nothing else is (the most that routing
// without any notion of prefixes can count on, since every backend soon holds the few system prompts). A chat turn's
// template adds a few tokens per message, about three messages a request over the trace's mix.
const shapeOf = (s: number) => ({ ...DEFAULT_SHAPE, seed: s });
const mean = meanRequest(shapeOf(seed));
const promptTokens = mean.unsharedPromptTokens + templateTokens(3);
const capacity = fleetCapacity(BACKENDS, promptTokens, mean.outputTokens);
log(
  `bench:routing: ${BACKENDS.length} sims on 3 sites; mean request ${(mean.promptTokens + templateTokens(3)).toFixed(0)} prompt tokens (${promptTokens.toFixed(0)} besides the shared system prompt), ${mean.outputTokens.toFixed(1)} output tokens`,
);
log(
  `capacity with the system prompts cached: ${BACKENDS.map((b) => `${b.name} ${backendCapacity(b, promptTokens, mean.outputTokens).toFixed(2)}`).join(', ')} = ${capacity.toFixed(1)} requests/s`,
);
log(
  `loads ${loads.map((l) => `${Math.round(l * 100)} %`).join(', ')} of it; windows of ${windowMs / 1000} s, first ${warmMs / 1000} s discarded; request timeout ${timeoutMs / 1000} s`,
);

/** The grid running now, stopped on Ctrl-C or SIGTERM so no daemon outlives the bench. */
let running: BenchGrid | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`bench:routing: ${signal}, stopping the grid`);
    void (running?.grid.stop() ?? Promise.resolve()).finally(() => {
      if (values.keep !== true) rmSync(runDir, { recursive: true, force: true });
      process.exit(130);
    });
  });
}

async function withGrid<T>(policy: Policy, name: string, body: (bench: BenchGrid) => Promise<T>): Promise<T> {
  const bench = await startBenchGrid(policy, join(runDir, name));
  running = bench;
  log(`[${elapsed()}] ${policy.name}: grid started in ${(bench.startMs / 1000).toFixed(1)} s`);
  try {
    return await body(bench);
  } finally {
    await bench.grid.stop();
    running = undefined;
  }
}

/** Per load level, the share of prompt words its trace repeats from earlier requests: the prefix-cache hit rate's ceiling. */
const reuse = new Map<number, number>();

async function runPolicy(policy: Policy, index: number): Promise<WindowSummary[]> {
  return withGrid(policy, `p${index}`, async (bench) => {
    const rows: WindowSummary[] = [];
    for (const [li, load] of loads.entries()) {
      const rate = load * capacity;
      // A seed per load level: its own system prompts, so a level does not reuse the caches the one before filled.
      const trace = buildTrace({ ...shapeOf(seed * 100 + li), rate, durationMs: windowMs });
      reuse.set(load, reusableShare(trace));
      let atWarm: Record<string, FleetCounters> = {};
      let atEnd: Record<string, FleetCounters> = {};
      const { outcomes, lateP99Ms } = await replay(bench, trace, {
        sessionAffinity: policy.sessionAffinity,
        timeoutMs,
        at: [
          { atMs: warmMs, run: async () => void (atWarm = await fleetCounters(bench.grid)) },
          { atMs: windowMs, run: async () => void (atEnd = await fleetCounters(bench.grid)) },
        ],
      });
      const row = summarize(policy.name, load, rate, outcomes, warmMs, counterDelta(atWarm, atEnd), windowMs - warmMs);
      rows.push(row);
      log(
        `[${elapsed()}] ${policy.name} at ${Math.round(load * 100)} %: ${trace.length} requests, TTFT p99 ${Math.round(row.ttftP99)} ms, prefix hit ${(row.prefixHitRate * 100).toFixed(1)} %, ${row.failed} failed, sent late p99 ${lateP99Ms.toFixed(1)} ms`,
      );
    }
    return rows;
  });
}

/** The kill case under the grid's policy: one backend dies, later a whole site. */
async function runKill(): Promise<void> {
  const policy = policyNamed('grid')!;
  const backend = 'south-medium';
  const site = 'west';
  const backendAtMs = 6_000;
  const siteAtMs = 16_000;
  const durationMs = 26_000;
  // The fast profile's SWIM probe period (daemons/local-grid/runner.ts).
  const probeMs = 1_000;
  await withGrid(policy, 'kill', async (bench) => {
    const trace = buildTrace({ ...shapeOf(seed * 100 + 99), rate: 0.8 * capacity, durationMs, nonStreamingShare: 0.5 });
    const retryTimes: number[] = [];
    let lastRetries = await gatewayRetries(bench);
    const firstRetries = lastRetries;
    const t0 = performance.now();
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await new Promise((r) => setTimeout(r, 100));
        const now = await gatewayRetries(bench).catch(() => lastRetries);
        if (now > lastRetries) retryTimes.push(performance.now() - t0);
        lastRetries = now;
      }
    })();
    const siteProcesses = bench.grid.processes.filter((p) => p.site === site).map((p) => p.name);
    const { outcomes } = await replay(bench, trace, {
      sessionAffinity: false,
      timeoutMs,
      at: [
        { atMs: backendAtMs, run: () => bench.grid.killProcess(bench.grid.sim(backend).name) },
        {
          atMs: siteAtMs,
          run: async () => void (await Promise.all(siteProcesses.map((n) => bench.grid.killProcess(n)))),
        },
      ],
    });
    polling = false;
    await poller;
    /**
     * Failures of requests sent in [from, to) that ended before `to` (a later kill's are its own), and of those sent
     * before `from` that were still in flight at it.
     */
    const phase = (from: number, to: number) => {
      const sent = outcomes.filter((o) => o.sentAtMs >= from && o.sentAtMs < to);
      const failed = sent.filter((o) => !o.ok && o.endedAtMs < to);
      const caught = outcomes.filter((o) => !o.ok && o.sentAtMs < from && o.endedAtMs >= from);
      return {
        requests: sent.length,
        failedStreaming: failed.filter((o) => o.stream).length,
        failedNonStreaming: failed.filter((o) => !o.stream).length,
        caughtStreaming: caught.filter((o) => o.stream).length,
        caughtNonStreaming: caught.filter((o) => !o.stream).length,
        retryPolls: retryTimes.filter((t) => t >= from && t < to).length,
        movedMs: movedAfterMs(
          outcomes.filter((o) => o.endedAtMs < to),
          retryTimes,
          from,
          to,
        ),
        failedAt: failed.map((o) => (o.sentAtMs / 1000).toFixed(1)),
        errors: [...new Set(failed.map((o) => `${o.status} ${(o.error ?? '').slice(0, 100)}`))].slice(0, 4),
        e2eP99: percentile(
          sent.filter((o) => o.ok).map((o) => o.e2eMs!),
          99,
        ),
      };
    };
    const before = phase(0, backendAtMs);
    const one = phase(backendAtMs, siteAtMs);
    const whole = phase(siteAtMs, Number.POSITIVE_INFINITY);
    const totalRetries = lastRetries - firstRetries;
    const servedAfter = (names: readonly string[], from: number) =>
      outcomes.filter((o) => o.ok && o.sentAtMs > from + 1000 && o.backend !== undefined && names.includes(o.backend))
        .length;
    log('');
    log(
      `kill case (policy grid, ${(0.8 * capacity).toFixed(1)} requests/s, half non-streaming, ${durationMs / 1000} s): sim ${backend} killed at ${backendAtMs / 1000} s, site ${site} (${siteProcesses.length} processes) at ${siteAtMs / 1000} s; probe period ${probeMs} ms (SWIM and the providers' health checks)`,
    );
    log(
      '| phase (by send time) | requests | failed non-streaming | failed streaming | in flight at the kill and failed (non-streaming / streaming) | 100 ms polls with retries | traffic moved after | e2e p99 ms |',
    );
    log('|---|---|---|---|---|---|---|---|');
    for (const [name, p] of [
      ['before the kills', before],
      [`${backend} dead`, one],
      [`site ${site} dead`, whole],
    ] as const) {
      const first = name === 'before the kills';
      log(
        `| ${name} | ${p.requests} | ${p.failedNonStreaming} | ${p.failedStreaming} | ${first ? '-' : `${p.caughtNonStreaming} / ${p.caughtStreaming}`} | ${p.retryPolls} | ${first ? '-' : `${p.movedMs.toFixed(0)} ms`} | ${Math.round(p.e2eP99)} |`,
      );
    }
    log(
      `consumer gateway retries in all: ${totalRetries}; answers from ${backend} sent more than 1 s after its kill: ${servedAfter([backend], backendAtMs)}; from site ${site}: ${servedAfter(
        BACKENDS.filter((b) => b.site === site).map((b) => b.name),
        siteAtMs,
      )}`,
    );
    for (const [name, p] of [
      [`${backend} dead`, one],
      [`site ${site} dead`, whole],
    ] as const) {
      if (p.failedAt.length > 0) log(`  ${name}: failures sent at ${p.failedAt.join(', ')} s`);
      for (const e of p.errors) log(`  ${name} failure: ${e}`);
    }
    log(
      `targets: 0 failed non-streaming requests when a backend dies: ${one.failedNonStreaming === 0 ? 'met' : `not met (${one.failedNonStreaming})`}; traffic off a dead site within 2 probe periods (${2 * probeMs} ms): ${whole.movedMs <= 2 * probeMs ? 'met' : 'not met'} (${whole.movedMs.toFixed(0)} ms)`,
    );
  });
}

try {
  const rows: WindowSummary[] = [];
  if (main) {
    for (const [i, policy] of policies.entries()) rows.push(...(await runPolicy(policy, i)));
    rows.sort(
      (a, b) =>
        a.load - b.load ||
        policies.findIndex((p) => p.name === a.policy) - policies.findIndex((p) => p.name === b.policy),
    );
    log('');
    log(formatTable(rows));
    log('');
    log(formatRatios(ratiosToRoundRobin(rows)));
    log('');
    log(
      `prefix reuse the traces allow (prompt words an earlier request carried as a prefix, the ceiling of any hit rate): ${[...reuse].map(([l, r]) => `${Math.round(l * 100)} %: ${(r * 100).toFixed(1)} %`).join(', ')}`,
    );
    log('');
    log('answers per backend:');
    log(
      formatShares(
        rows,
        BACKENDS.map((b) => b.name),
      ),
    );
    log('');
    for (const p of policies) log(`${p.name}: ${p.description}`);
    const at80 = (name: string) => rows.find((r) => r.policy === name && Math.abs(r.load - 0.8) < 1e-9);
    const rr = at80('round-robin');
    for (const name of ['grid', 'grid+session']) {
      const g = at80(name);
      if (g === undefined || rr === undefined) continue;
      log(
        `targets at 80 %, ${name}: TTFT p99 ${(g.ttftP99 / rr.ttftP99).toFixed(2)}x round-robin's (<= 0.5x: ${g.ttftP99 <= 0.5 * rr.ttftP99 ? 'met' : 'not met'}), throughput ${(g.tokensPerSecond / rr.tokensPerSecond).toFixed(2)}x (>= 1x: ${g.tokensPerSecond >= rr.tokensPerSecond ? 'met' : 'not met'}), prefix hit ${(g.prefixHitRate / rr.prefixHitRate).toFixed(2)}x (>= 2x: ${g.prefixHitRate >= 2 * rr.prefixHitRate ? 'met' : 'not met'})`,
      );
    }
  }
  if (kill) await runKill();
  log('');
  log(`bench:routing done in ${elapsed()}`);
} finally {
  if (values.keep === true) log(`kept ${runDir}`);
  else rmSync(runDir, { recursive: true, force: true });
}
