/**
 * Routing-core render benchmark: `npm run bench:render`.
 *
 * Builds a grid with N provider candidates (half local InferenceProviders with metrics, half remote CRDT records over
 * eight Active sites in two regions), then times one reconcile's routing for one gateway: evaluateNetwork (eligibility,
 * scoring, stabilized admission) + renderGatewayOverlay (access policy, tiers, ordering, groups, stable_id, JCS +
 * SHA-256 revision) + serializeOverlay (the ConfigMap text). The published overlay is capped at 1024 candidates by
 * the contract, so the 10 000 run of the real pipeline ("contract") publishes 1024; the "uncapped" rows lift the
 * cap (a benchmark-only option) so render and hash really cover all N candidates and the scaling can be read. The
 * uncapped rows time render + hash only: their ConfigMap text (7.4 MB at 10 000) could not exist — the contract caps
 * an overlay at 1024 candidates and a ConfigMap at 1 MiB — and one multi-megabyte string measures V8's large-object
 * space rather than the per-candidate work. Its size is still shown, from one untimed serialization.
 *
 * Each of PROCESSES fresh processes runs ROUNDS rounds; a round renders about ROUND_VOLUME candidates at every size
 * (so garbage collection is paid inside the measurement at every size), all sizes back to back. Prints, per size, the
 * CPU time per render (median over all rounds; process.cpuUsage, so waiting for a CPU is not counted), the median CPU
 * and wall time of single renders, the CPU cost per candidate, and that cost relative to the 1 000-candidate run of
 * the same round (median over rounds). Linearity is judged on the marginal cost per added candidate,
 * (t(n2) - t(n1)) / (n2 - n1), 1 000 -> 10 000 against 100 -> 1 000, computed per round (see ROUNDS for why); the
 * 10-candidate row carries the fixed cost of a render (envelope, policy checks, the hash's set-up) and is shown but
 * not part of the linearity check.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { benchArgs } from './bench-args.ts';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { OVERLAY_SYNC_MAX_OVERLAY_BYTES } from '../../schemas/overlay/validate.ts';
import { evaluateNetwork } from '../../daemons/routing/backends.ts';
import type {
  GatewayReference,
  GridSiteView,
  LocalInferenceProvider,
  NetworkRoutingInput,
  RemoteProviderRecord,
} from '../../daemons/routing/model.ts';
import { renderGatewayOverlay } from '../../daemons/routing/render.ts';
import { siteIndexFor } from '../../daemons/routing/sites.ts';
import { median } from './stats.ts';

const NETWORK = 'bench';
const OWN = 'site-0';
const MODELS_PER_PROVIDER = 10;
const REMOTE_SITES = 8;
const SIZES = [10, 100, 1_000, 10_000];
const T0 = Date.parse('2026-07-29T00:00:00Z');
const GATEWAY: GatewayReference = { name: 'edge', namespace: 'grid-system', siteName: OWN };
const SOURCE = { uid: 'bench-uid', generation: 1, producerVersion: '0.1.0' };

/** Deterministic pseudo-random metrics so runs are comparable (a tiny LCG; no Math.random). */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function buildGrid(candidates: number): NetworkRoutingInput {
  const random = lcg(candidates);
  const sites: GridSiteView[] = [
    { name: OWN, network: NETWORK, phase: 'Pending', region: 'r1', zone: 'z1', labels: { tier: 'gold' } },
  ];
  for (let s = 1; s <= REMOTE_SITES; s += 1) {
    sites.push({
      name: `${NETWORK}-site-${s}`,
      network: NETWORK,
      phase: 'Active',
      region: s % 2 === 0 ? 'r1' : 'r2',
      zone: `z${s % 3}`,
      labels: { tier: 'gold' },
    });
  }
  const inferenceProviders: LocalInferenceProvider[] = [];
  const remoteRecords: RemoteProviderRecord[] = [];
  let made = 0;
  for (let p = 0; made < candidates; p += 1) {
    const count = Math.min(MODELS_PER_PROVIDER, candidates - made);
    const models = Array.from({ length: count }, (_, m) => `model-${(p * 7 + m) % 400}`);
    const queueDepth = random();
    if (p % 2 === 0) {
      inferenceProviders.push({
        name: `local-${p}`,
        network: NETWORK,
        phase: p % 11 === 0 ? 'Degraded' : 'Available',
        backendKind: 'local',
        models,
        routingCluster: `cluster-local-${p}`,
        credential: { name: `token-${p}`, namespace: 'grid-system', key: 'token' },
        accessLabels: { tier: 'gold' },
        capacityWeight: 1 + (p % 100),
        metrics: {
          configuredSignals: ['queueDepth'],
          queueCapacity: 64,
          sample: { generation: 1, observedAtMs: T0, healthy: true, queueDepth: queueDepth * 64 },
        },
      });
    } else {
      const site = `site-${1 + (p % REMOTE_SITES)}`;
      remoteRecords.push({
        network: NETWORK,
        site,
        provider: `remote-${p}`,
        routingCluster: `gateway-${site}-${p}`,
        backendKind: 'remote',
        phase: 'Available',
        models,
        metrics: { generation: 1, observedAtMs: T0, healthy: true, queueDepth, kvCacheUtilization: random() },
        capacityWeight: 1 + (p % 100),
        memberState: p % 13 === 0 ? 'suspect' : 'alive',
        memberAgeSeconds: p % 13 === 0 ? 5 : 0,
      });
    }
    made += count;
  }
  return {
    network: NETWORK,
    ownSite: OWN,
    policy: {
      routingPolicy: 'geographyFirst',
      scoringStrategy: 'queueDepth',
      admission: {
        enterThreshold: 0.85,
        exitThreshold: 0.7,
        failureThreshold: 2,
        successThreshold: 3,
        minimumStateDurationSeconds: 10,
        recoveryHoldDownSeconds: 30,
        missingMetrics: 'existingOnly',
      },
      selectionMode: 'weightedRandom',
      placementStrategy: 'static',
      staleCandidateTtlSeconds: 3600,
      signalTransport: 'gossip',
    },
    sites,
    inferenceProviders,
    toolProviders: [],
    remoteRecords,
  };
}

interface Run {
  readonly inputCandidates: number;
  readonly published: number;
  readonly bytes: number;
  readonly revision: string;
}

/** `withText`: also serialize the ConfigMap text (pretty JSON), as the operator does; bytes is its size (NaN without). */
function renderOnce(input: NetworkRoutingInput, candidateLimit: number | undefined, withText: boolean): Run {
  const evaluation = evaluateNetwork(input, T0, new Map());
  const result = renderGatewayOverlay({
    network: input.network,
    gateway: GATEWAY,
    policy: input.policy,
    sites: siteIndexFor(input),
    backends: evaluation.backends,
    source: SOURCE,
    nowMs: T0,
    ...(candidateLimit === undefined ? {} : { candidateLimit }),
  });
  if (!result.ok) throw new Error(`render failed: ${result.error.message}`);
  const bytes = withText ? Buffer.byteLength(serializeOverlay(result.value.envelope)) : Number.NaN;
  return {
    inputCandidates: evaluation.backends.length,
    published: result.value.payload.candidates.length,
    bytes,
    revision: result.value.revision,
  };
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * Rounds per process, and candidates rendered per size in one round (1 000 renders of 10, 2 of 10 000: at least
 * MIN_RUNS_PER_ROUND, so the 10 000 row renders twice the volume). Every size renders about the same volume, so the garbage collection a render causes is paid inside the measurement at every
 * size (the best single run would hide it for small overlays and not for large ones).
 *
 * Why rounds, and why ratios are taken within a round: this machine's speed drifts by up to 2x over seconds (a fixed
 * arithmetic loop measured 14-26 ms of CPU per slice in one run, 20-21 ms in the next and 14-19 ms in a third; CPU time does not help
 * when the core itself is slowed by its neighbours). Sizes measured a few seconds apart therefore compare the
 * machine, not the code. Each round visits every size within about a second, alternating direction, and the scaling
 * ratios are computed per round and then the median taken, so a slow stretch scales numerator and denominator alike.
 */
const ROUNDS = 30;
const ROUND_VOLUME = 10_000;
const MIN_RUNS_PER_ROUND = 2;

interface Subject {
  readonly mode: 'contract' | 'uncapped';
  readonly size: number;
  readonly input: NetworkRoutingInput;
  readonly limit: number | undefined;
  readonly first: Run;
  /** CPU ms per render, one mean per round (garbage collection included). */
  readonly roundMeans: number[];
  readonly cpu: number[];
  readonly wall: number[];
}

function subject(size: number, mode: Subject['mode']): Subject {
  const input = buildGrid(size);
  const limit = mode === 'uncapped' ? Number.MAX_SAFE_INTEGER : undefined;
  // The first render always writes the ConfigMap text, for the bytes column; the measured ones only in contract mode.
  const first = renderOnce(input, limit, true);
  for (let i = 0; i < 3; i += 1) renderOnce(input, limit, mode === 'contract');
  return { mode, size, input, limit, first, roundMeans: [], cpu: [], wall: [] };
}

/** One round of one size; the same state must keep its revision. */
function round(s: Subject): void {
  const runs = Math.max(MIN_RUNS_PER_ROUND, Math.ceil(ROUND_VOLUME / s.size));
  const start = cpuMs();
  for (let i = 0; i < runs; i += 1) {
    const c = cpuMs();
    const t = performance.now();
    const again = renderOnce(s.input, s.limit, s.mode === 'contract');
    s.wall.push(performance.now() - t);
    s.cpu.push(cpuMs() - c);
    if (again.revision !== s.first.revision) throw new Error('re-render of identical state changed the revision');
  }
  s.roundMeans.push((cpuMs() - start) / runs);
}

function measureAll(): Subject[] {
  const subjects = (['contract', 'uncapped'] as const).flatMap((mode) => SIZES.map((size) => subject(size, mode)));
  const backwards = [...subjects].reverse();
  for (let r = 0; r < ROUNDS; r += 1) for (const s of r % 2 === 0 ? subjects : backwards) round(s);
  return subjects;
}

/**
 * Fresh child processes, whose rounds are pooled: a process also settles into one of a few JIT and heap states for
 * its lifetime, which repeating inside it cannot average out.
 */
const PROCESSES = 3;
const CHILD = 'AGN_RENDER_BENCH_CHILD';

interface ChildRow {
  readonly mode: Subject['mode'];
  readonly candidates: number;
  readonly published: number;
  readonly bytes: number;
  readonly roundMeans: readonly number[];
  readonly cpuMedianMs: number;
  readonly wallMedianMs: number;
}

function quartiles(values: readonly number[]): { q1: number; median: number; q3: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => {
    const position = (sorted.length - 1) * q;
    const low = Math.floor(position);
    const high = Math.ceil(position);
    return (sorted[low] as number) + ((sorted[high] as number) - (sorted[low] as number)) * (position - low);
  };
  return { q1: at(0.25), median: at(0.5), q3: at(0.75) };
}

/**
 * `--sites S`: one gateway's overlay in a grid of S Active sites, each running one remote provider of
 * MODELS_PER_SITE models, plus the own site's LOCAL_PROVIDERS local providers: what the 1024-candidate cap does and
 * what a consumer receives. Prints one table row per S; CPU per render is the median of SITE_RENDERS renders.
 */
const MODELS_PER_SITE = 2;
const LOCAL_PROVIDERS = 10;
const SITE_RENDERS = 20;

function buildSiteGrid(siteCount: number): NetworkRoutingInput {
  const base = buildGrid(LOCAL_PROVIDERS * MODELS_PER_PROVIDER * 2);
  const random = lcg(siteCount);
  const sites: GridSiteView[] = [base.sites[0] as GridSiteView];
  const remoteRecords: RemoteProviderRecord[] = [];
  for (let s = 1; s <= siteCount; s += 1) {
    sites.push({
      name: `${NETWORK}-site-${s}`,
      network: NETWORK,
      phase: 'Active',
      region: `r${s % 4}`,
      zone: `z${s % 3}`,
      labels: { tier: 'gold' },
    });
    remoteRecords.push({
      network: NETWORK,
      site: `site-${s}`,
      provider: `remote-${s}`,
      routingCluster: `gateway-site-${s}`,
      backendKind: 'remote',
      phase: 'Available',
      models: Array.from({ length: MODELS_PER_SITE }, (_, m) => `model-${(s * 3 + m) % 40}`),
      metrics: { generation: 1, observedAtMs: T0, healthy: true, queueDepth: random(), kvCacheUtilization: random() },
      capacityWeight: 1 + (s % 100),
      memberState: 'alive',
      memberAgeSeconds: 0,
    });
  }
  return { ...base, sites, remoteRecords };
}

function siteReport(siteCounts: readonly number[]): void {
  console.log(
    `overlay for one gateway in a grid of S sites: each remote site ${MODELS_PER_SITE} models of one provider, the own site ${base()} local candidates; ${SITE_RENDERS} renders each`,
  );
  console.log(
    'sites | candidates in | published | sites published | remote sites cut | overlay bytes | vs overlay-sync limit (1 MiB) | cpu median ms',
  );
  for (const siteCount of siteCounts) {
    const input = buildSiteGrid(siteCount);
    const evaluation = evaluateNetwork(input, T0, new Map());
    const result = renderGatewayOverlay({
      network: input.network,
      gateway: GATEWAY,
      policy: input.policy,
      sites: siteIndexFor(input),
      backends: evaluation.backends,
      source: SOURCE,
      nowMs: T0,
    });
    if (!result.ok) throw new Error(`render failed: ${result.error.message}`);
    const candidates = result.value.payload.candidates as unknown as readonly Record<string, unknown>[];
    const sitesPublished = new Set(candidates.map((c) => String(c.site ?? c.site_id ?? ''))).size;
    const remoteSitesIn = new Set(input.remoteRecords.map((r) => r.site)).size;
    const remoteSitesOut = new Set(candidates.map((c) => String(c.site ?? c.site_id ?? '')).filter((x) => x !== OWN))
      .size;
    const bytes = Buffer.byteLength(serializeOverlay(result.value.envelope));
    const cpu: number[] = [];
    for (let i = 0; i < SITE_RENDERS; i += 1) {
      const c = cpuMs();
      renderOnce(input, undefined, true);
      cpu.push(cpuMs() - c);
    }
    console.log(
      [
        String(siteCount).padStart(5),
        String(evaluation.backends.length).padStart(13),
        String(candidates.length).padStart(9),
        String(sitesPublished).padStart(15),
        String(remoteSitesIn - remoteSitesOut).padStart(16),
        String(bytes).padStart(13),
        `${((100 * bytes) / OVERLAY_SYNC_MAX_OVERLAY_BYTES).toFixed(0)} %`.padStart(29),
        median(cpu).toFixed(1).padStart(13),
      ].join(' | '),
    );
  }
  function base(): number {
    return buildGrid(LOCAL_PROVIDERS * MODELS_PER_PROVIDER * 2).inferenceProviders.reduce(
      (n, p) => n + p.models.length,
      0,
    );
  }
}

const cli =
  process.env[CHILD] === '1'
    ? undefined
    : benchArgs(
        'bench:render',
        'usage: npm run bench:render [-- --sites S [S...]]',
        { sites: { type: 'boolean' } },
        { positionals: true },
      );
if (cli !== undefined && (cli.values.sites === true || cli.positionals.length > 0)) {
  const counts = cli.positionals.map(Number);
  if (cli.values.sites !== true) cli.fail(`site counts come after --sites, got ${cli.positionals.join(' ')}`);
  if (counts.length === 0 || counts.some((n) => !Number.isInteger(n) || n < 1))
    cli.fail(`--sites needs site counts (integers of at least 1), got ${cli.positionals.join(' ') || 'none'}`);
  siteReport(counts);
} else if (process.env[CHILD] === '1') {
  const rows: ChildRow[] = measureAll().map((s) => ({
    mode: s.mode,
    candidates: s.first.inputCandidates,
    published: s.first.published,
    bytes: s.first.bytes,
    roundMeans: s.roundMeans,
    cpuMedianMs: median(s.cpu),
    wallMedianMs: median(s.wall),
  }));
  process.stdout.write(`${JSON.stringify(rows)}\n`);
} else {
  const [load1] = loadavg();
  console.log(
    `routing render benchmark: node ${process.version} ${process.arch}, ${cpus().length} CPUs, load average ${load1?.toFixed(2)} at start`,
  );
  console.log(
    'contract = the real pipeline incl. the ConfigMap text (overlay capped at 1024 candidates); uncapped = render + hash with the cap lifted, to measure scaling (text size shown, not timed)',
  );
  console.log(
    `${PROCESSES} fresh processes x ${ROUNDS} rounds; each round renders about ${ROUND_VOLUME} candidates per size, all sizes back to back; cpu mean = median over all rounds of the CPU time per render (process.cpuUsage, garbage collection included), wall = elapsed per single render`,
  );
  const runs: ChildRow[][] = [];
  for (let p = 0; p < PROCESSES; p += 1) {
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      env: { ...process.env, [CHILD]: '1' },
      encoding: 'utf8',
      maxBuffer: 16 * 1024 * 1024,
    });
    if (child.status !== 0)
      throw new Error(`benchmark process ${p + 1} failed (${child.status}): ${child.stderr.slice(-2000)}`);
    runs.push(JSON.parse(child.stdout.trim().split('\n').pop() ?? '[]') as ChildRow[]);
  }
  const rowOf = (r: readonly ChildRow[], mode: string, candidates: number): ChildRow => {
    const row = r.find((x) => x.mode === mode && x.candidates === candidates);
    if (row === undefined) throw new Error(`no ${mode} row for ${candidates} candidates`);
    return row;
  };
  const rowsOf = (mode: string, candidates: number): ChildRow[] => runs.map((r) => rowOf(r, mode, candidates));
  const cpuAt = (mode: string, candidates: number): number =>
    median(rowsOf(mode, candidates).flatMap((r) => r.roundMeans));
  /** Per round (every process), f of that round's CPU ms per render by size. */
  const perRound = (mode: string, f: (at: (n: number) => number) => number, only?: readonly ChildRow[]): number[] =>
    (only === undefined ? runs : [only]).flatMap((r) =>
      Array.from({ length: ROUNDS }, (_, i) => f((n) => rowOf(r, mode, n).roundMeans[i] as number)),
    );
  console.log(
    'mode     | candidates in | published | overlay bytes | rounds | cpu mean ms | cpu median ms | wall median ms | mean cpu µs/candidate | vs 1 000 (paired)',
  );
  for (const mode of ['contract', 'uncapped'] as const) {
    const first = runs[0] ?? [];
    for (const { candidates, published, bytes } of first.filter((r) => r.mode === mode)) {
      const of = rowsOf(mode, candidates);
      const cpuMeanMs = cpuAt(mode, candidates);
      const perCandidateUs = (cpuMeanMs * 1000) / candidates;
      // Per candidate against the 1 000 run of the same round, then the median over rounds.
      const paired = median(perRound(mode, (at) => at(candidates) / candidates / (at(1_000) / 1_000)));
      console.log(
        [
          mode.padEnd(8),
          String(candidates).padStart(13),
          String(published).padStart(9),
          String(bytes).padStart(13),
          String(of.reduce((n, r) => n + r.roundMeans.length, 0)).padStart(6),
          cpuMeanMs.toFixed(3).padStart(11),
          median(of.map((r) => r.cpuMedianMs))
            .toFixed(3)
            .padStart(13),
          median(of.map((r) => r.wallMedianMs))
            .toFixed(3)
            .padStart(14),
          perCandidateUs.toFixed(2).padStart(21),
          `${(paired * 100).toFixed(0)} %`.padStart(8),
        ].join(' | '),
      );
    }
  }
  // The scaling verdict, on the uncapped rows (the contract rows stop growing at the 1024 cap by design): the marginal
  // cost of an added candidate from 100 to 1 000 against 1 000 to 10 000, per round, median (and quartiles) over rounds.
  const marginal = (at: (n: number) => number): number =>
    (at(10_000) - at(1_000)) / 9_000 / ((at(1_000) - at(100)) / 900);
  const overall = quartiles(perRound('uncapped', marginal));
  const perProcess = runs.map((r) => median(perRound('uncapped', marginal, r)));
  const low = ((cpuAt('uncapped', 1_000) - cpuAt('uncapped', 100)) * 1000) / 900;
  const high = ((cpuAt('uncapped', 10_000) - cpuAt('uncapped', 1_000)) * 1000) / 9_000;
  console.log(
    `marginal cost per added candidate (medians): 100 -> 1 000: ${low.toFixed(2)} µs, 1 000 -> 10 000: ${high.toFixed(2)} µs`,
  );
  console.log(
    `paired per round: ratio ${overall.median.toFixed(2)} (quartiles ${overall.q1.toFixed(2)}-${overall.q3.toFixed(2)}; linear within ±30 %: ${Math.abs(overall.median - 1) <= 0.3 ? 'yes' : 'NO'}); per process: ${perProcess.map((x) => x.toFixed(2)).join(', ')}`,
  );
  console.log(
    `10 000 candidates render and hash in ${cpuAt('uncapped', 10_000).toFixed(1)} ms CPU (median over rounds)`,
  );
}
