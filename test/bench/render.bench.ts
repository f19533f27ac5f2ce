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
 * Prints, per size, the median and best CPU time of repeated renders (process.cpuUsage, so time spent waiting for a
 * CPU on a busy machine is not counted), the median wall time, and the best CPU cost per candidate relative to the
 * 1 000-candidate run (the best run is the one least disturbed by other processes' cache and GC pressure).
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
  /** CPU time (user + system) of this process per render: what the render costs, whatever else the machine runs. */
  readonly cpuMinMs: number;
  readonly cpuMedianMs: number;
  /** Wall-clock time per render: includes waiting for a CPU on a loaded machine. */
  readonly wallMedianMs: number;
  readonly iterations: number;
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Repeats the render for about BUDGET_MS of CPU (at least 5 times) after a warm-up; the same state must keep its revision. */
function measure(size: number, mode: Measurement['mode']): Measurement {
  const input = buildGrid(size);
  const limit = mode === 'uncapped' ? Number.MAX_SAFE_INTEGER : undefined;
  let run = renderOnce(input, limit);
  for (let i = 0; i < 3; i += 1) run = renderOnce(input, limit);
  const cpu: number[] = [];
  const wall: number[] = [];
  let spent = 0;
  while (cpu.length < 5 || (spent < BUDGET_MS && cpu.length < 2_000)) {
    const c = cpuMs();
    const t = performance.now();
    const again = renderOnce(input, limit);
    wall.push(performance.now() - t);
    cpu.push(cpuMs() - c);
    spent += cpu[cpu.length - 1] as number;
    if (again.revision !== run.revision) throw new Error('re-render of identical state changed the revision');
  }
  return { mode, run, cpuMinMs: Math.min(...cpu), cpuMedianMs: median(cpu), wallMedianMs: median(wall), iterations: cpu.length };
}

const BUDGET_MS = 1_500;
const [load1] = loadavg();
console.log(`routing render benchmark: node ${process.version} ${process.arch}, ${cpus().length} CPUs, load average ${load1?.toFixed(2)} at start`);
console.log('contract = the real pipeline (overlay capped at 1024 candidates); uncapped = same pipeline with the cap lifted, to measure scaling');
console.log('times are CPU time of this process per render (immune to other processes), wall = elapsed time incl. waiting for a CPU');
console.log('mode     | candidates in | published | overlay bytes | runs | cpu median ms | cpu min ms | wall median ms | min cpu µs/candidate | vs 1 000');
const rows: Measurement[] = [];
for (const mode of ['contract', 'uncapped'] as const) {
  for (const size of SIZES) rows.push(measure(size, mode));
}
for (const mode of ['contract', 'uncapped'] as const) {
  const ofMode = rows.filter((r) => r.mode === mode);
  const reference = ofMode.find((r) => r.run.inputCandidates === 1_000);
  const referenceUs = reference === undefined ? Number.NaN : (reference.cpuMinMs * 1000) / reference.run.inputCandidates;
  for (const { run, cpuMinMs, cpuMedianMs, wallMedianMs, iterations } of ofMode) {
    const perCandidateUs = (cpuMinMs * 1000) / run.inputCandidates;
    console.log(
      [
        mode.padEnd(8),
        String(run.inputCandidates).padStart(13),
        String(run.published).padStart(9),
        String(run.bytes).padStart(13),
        String(iterations).padStart(4),
        cpuMedianMs.toFixed(3).padStart(13),
        cpuMinMs.toFixed(3).padStart(10),
        wallMedianMs.toFixed(3).padStart(14),
        perCandidateUs.toFixed(2).padStart(20),
        `${((perCandidateUs / referenceUs) * 100).toFixed(0)} %`.padStart(8),
      ].join(' | '),
    );
  }
}
