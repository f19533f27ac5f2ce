/**
 * Routing-core render benchmark: `npm run bench:render`.
 *
 * Builds a grid with N provider candidates (half local InferenceProviders with metrics, half remote CRDT records over
 * eight Active sites in two regions), then times one reconcile's routing for one gateway: evaluateNetwork (eligibility,
 * scoring, stabilized admission) + renderGatewayOverlay (access policy, tiers, ordering, groups, stable_id, JCS +
 * SHA-256 revision) + serializeOverlay (the ConfigMap text). The published overlay is capped at 1024 candidates by
 * the contract, so the 10 000 run of the real pipeline ("contract") publishes 1024; the "uncapped" rows lift the
 * cap (a benchmark-only option) so render and hash really cover all N candidates and the scaling can be read.
 *
 * Every size renders the same volume of candidates in total (VOLUME: 10 000 renders of 10, 10 of 10 000), so the
 * garbage collection a render causes is paid inside the measurement at every size; the best single run would hide it
 * for small overlays (a 100-candidate render often finishes before any collection) and not for large ones. Prints,
 * per size, the mean and median CPU time per render (process.cpuUsage: time spent waiting for a CPU on a busy machine
 * is not counted), the median wall time and the mean CPU cost per candidate relative to the 1 000-candidate run.
 * Linearity is judged on the marginal cost per added candidate (t(n2) - t(n1)) / (n2 - n1) between 100, 1 000 and
 * 10 000 candidates; the 10-candidate row carries the fixed cost of a render (envelope, policy checks) and is shown
 * but not part of the linearity check.
 */
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { evaluateNetwork } from '../../daemons/gossip-operator/routing/backends.ts';
import type {
  GatewayReference,
  GridSiteView,
  LocalInferenceProvider,
  NetworkRoutingInput,
  RemoteProviderRecord,
} from '../../daemons/gossip-operator/routing/model.ts';
import { renderGatewayOverlay } from '../../daemons/gossip-operator/routing/render.ts';
import { siteIndexFor } from '../../daemons/gossip-operator/routing/sites.ts';

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
  const sites: GridSiteView[] = [{ name: OWN, network: NETWORK, phase: 'Pending', region: 'r1', zone: 'z1', labels: { tier: 'gold' } }];
  for (let s = 1; s <= REMOTE_SITES; s += 1) {
    sites.push({ name: `${NETWORK}-site-${s}`, network: NETWORK, phase: 'Active', region: s % 2 === 0 ? 'r1' : 'r2', zone: `z${s % 3}`, labels: { tier: 'gold' } });
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
        metrics: { configuredSignals: ['queueDepth'], queueCapacity: 64, sample: { generation: 1, observedAtMs: T0, healthy: true, queueDepth: queueDepth * 64 } },
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
        enterThreshold: 0.85, exitThreshold: 0.7, failureThreshold: 2, successThreshold: 3,
        minimumStateDurationSeconds: 10, recoveryHoldDownSeconds: 30, missingMetrics: 'existingOnly',
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

function renderOnce(input: NetworkRoutingInput, candidateLimit?: number): Run {
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
  const text = serializeOverlay(result.value.envelope);
  return { inputCandidates: evaluation.backends.length, published: result.value.payload.candidates.length, bytes: Buffer.byteLength(text), revision: result.value.revision };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

interface Measurement {
  readonly mode: 'contract' | 'uncapped';
  readonly run: Run;
  /** Mean CPU time (user + system) of this process per render, garbage collection included. */
  readonly cpuMeanMs: number;
  readonly cpuMedianMs: number;
  /** Wall-clock time per render: includes waiting for a CPU on a loaded machine. */
  readonly wallMedianMs: number;
  readonly iterations: number;
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Candidates rendered per size in total (at least MIN_RUNS renders); the same state must keep its revision. */
const VOLUME = 100_000;
const MIN_RUNS = 5;

function measure(size: number, mode: Measurement['mode']): Measurement {
  const input = buildGrid(size);
  const limit = mode === 'uncapped' ? Number.MAX_SAFE_INTEGER : undefined;
  let run = renderOnce(input, limit);
  for (let i = 0; i < 3; i += 1) run = renderOnce(input, limit);
  const runs = Math.max(MIN_RUNS, Math.ceil(VOLUME / size));
  const cpu: number[] = [];
  const wall: number[] = [];
  const start = cpuMs();
  for (let i = 0; i < runs; i += 1) {
    const c = cpuMs();
    const t = performance.now();
    const again = renderOnce(input, limit);
    wall.push(performance.now() - t);
    cpu.push(cpuMs() - c);
    if (again.revision !== run.revision) throw new Error('re-render of identical state changed the revision');
  }
  const total = cpuMs() - start;
  return { mode, run, cpuMeanMs: total / runs, cpuMedianMs: median(cpu), wallMedianMs: median(wall), iterations: runs };
}

const [load1] = loadavg();
console.log(`routing render benchmark: node ${process.version} ${process.arch}, ${cpus().length} CPUs, load average ${load1?.toFixed(2)} at start`);
console.log('contract = the real pipeline (overlay capped at 1024 candidates); uncapped = same pipeline with the cap lifted, to measure scaling');
console.log(`every size renders ${VOLUME} candidates in total; times are CPU time of this process per render (immune to other processes), wall = elapsed incl. waiting for a CPU`);
console.log('mode     | candidates in | published | overlay bytes |  runs | cpu mean ms | cpu median ms | wall median ms | mean cpu µs/candidate | vs 1 000');
const rows: Measurement[] = [];
for (const mode of ['contract', 'uncapped'] as const) {
  for (const size of SIZES) rows.push(measure(size, mode));
}
for (const mode of ['contract', 'uncapped'] as const) {
  const ofMode = rows.filter((r) => r.mode === mode);
  const reference = ofMode.find((r) => r.run.inputCandidates === 1_000);
  const referenceUs = reference === undefined ? Number.NaN : (reference.cpuMeanMs * 1000) / reference.run.inputCandidates;
  for (const { run, cpuMeanMs, cpuMedianMs, wallMedianMs, iterations } of ofMode) {
    const perCandidateUs = (cpuMeanMs * 1000) / run.inputCandidates;
    console.log(
      [
        mode.padEnd(8),
        String(run.inputCandidates).padStart(13),
        String(run.published).padStart(9),
        String(run.bytes).padStart(13),
        String(iterations).padStart(5),
        cpuMeanMs.toFixed(3).padStart(11),
        cpuMedianMs.toFixed(3).padStart(13),
        wallMedianMs.toFixed(3).padStart(14),
        perCandidateUs.toFixed(2).padStart(21),
        `${((perCandidateUs / referenceUs) * 100).toFixed(0)} %`.padStart(8),
      ].join(' | '),
    );
  }
}

// The scaling verdict, on the uncapped rows (the contract rows stop growing at the 1024 cap by design).
const uncapped = new Map(rows.filter((r) => r.mode === 'uncapped').map((r) => [r.run.inputCandidates, r.cpuMeanMs]));
const at = (n: number): number => uncapped.get(n) ?? Number.NaN;
const marginalLow = ((at(1_000) - at(100)) * 1000) / 900;
const marginalHigh = ((at(10_000) - at(1_000)) * 1000) / 9_000;
const ratio = marginalHigh / marginalLow;
console.log(`marginal cost per added candidate: 100 -> 1 000: ${marginalLow.toFixed(2)} µs, 1 000 -> 10 000: ${marginalHigh.toFixed(2)} µs (ratio ${ratio.toFixed(2)}; linear within ±30 %: ${Math.abs(ratio - 1) <= 0.3 ? 'yes' : 'NO'})`);
console.log(`10 000 candidates render and hash in ${at(10_000).toFixed(1)} ms CPU (mean of ${Math.max(MIN_RUNS, Math.ceil(VOLUME / 10_000))} renders)`);
