// Qualification: on the local grid from dist/, a provider whose backend fails its health checks is excluded and returns
// when healthy. The test declares a short probe (healthCheck interval 1s, failureThreshold 2) by rewriting east's
// InferenceProvider the way an operator edits it with kubectl, turns the sim's /health to 503 through its admin
// endpoint (the process keeps running and serving), and watches status, grid_provider_ready, the overlay every consumer
// accepted, and where requests land. Time-boxed. The same grid shows the consumer gateways' age reports filling the
// operator's gatewayAgeReports.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GRID_NETWORK,
  INFERENCE_PROVIDER,
  metricSum,
  readOverlays,
  type OverlayCandidate,
} from '../../daemons/local-grid/grid-status.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { attribution, chatCompletion, waitFor } from '../../daemons/local-grid/traffic.ts';

const MODEL = 'sim-model-v1';
const PROVIDER = 'east-llm-a';
const INTERVAL_MS = 1_000;
const FAILURE_THRESHOLD = 2;
const runDir = mkdtempSync(join(tmpdir(), 'agn-readiness-'));
let grid: LocalGrid;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const consumers = () => grid.byRole('consumer-gateway', 'east');

async function provider(): Promise<Json> {
  return grid.site('east').store.get(INFERENCE_PROVIDER, { name: PROVIDER });
}

async function readyGauge(): Promise<number | undefined> {
  const operator = grid.byRole('operator', 'east')[0]!;
  const text = await (
    await fetch(`http://${operator.adminAddress}/metrics`, { signal: AbortSignal.timeout(3000) })
  ).text();
  return metricSum(text, 'grid_provider_ready', `grid_provider="${PROVIDER}"`);
}

/** The east overlay's candidates for the model, once every running consumer serves that revision. */
async function acceptedCandidates(): Promise<readonly OverlayCandidate[] | undefined> {
  const overlay = (await readOverlays(grid)).find((o) => o.site === 'east');
  if (overlay === undefined) return undefined;
  for (const c of consumers()) {
    if (grid.running(c.name) === undefined) continue;
    const status = (await (
      await fetch(`http://${c.adminAddress}/status`, { signal: AbortSignal.timeout(3000) })
    ).json()) as Record<string, unknown>;
    if (status['accepted_revision'] !== overlay.revision) return undefined;
  }
  return overlay.candidates.filter((c) => c.kind === 'inference_model' && c.name === MODEL);
}

/** The test's declaration: east-llm-a probed every second, withdrawn after two failed probes. */
function declareShortProbe(): void {
  const file = join(grid.site('east').manifestsDir, 'east.yaml');
  const docs = parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS() as Json);
  const target = docs.find((d) => d?.kind === 'InferenceProvider' && d.metadata?.name === PROVIDER);
  if (target === undefined) throw new Error(`${file} declares no InferenceProvider ${PROVIDER}`);
  target.spec.healthCheck = {
    ...target.spec.healthCheck,
    interval: `${INTERVAL_MS / 1000}s`,
    failureThreshold: FAILURE_THRESHOLD,
  };
  writeFileSync(file, docs.map((d) => stringifyYaml(d)).join('---\n'));
}

beforeAll(async () => {
  grid = await startLocalGrid({ distDir: join(REPO_ROOT, 'dist'), stateDir: join(runDir, 'state'), profile: 'fast' });
  await waitFor(
    'the first routed chat completion',
    async () => {
      const result = await chatCompletion(consumers()[0]!.listenAddress!, MODEL, 10_000, grid.demoKey());
      return result.status === 200 && result.provider !== undefined ? result : undefined;
    },
    60_000,
    200,
  );
  declareShortProbe();
  await waitFor(
    `${PROVIDER} with the declared probe, Available and routed`,
    async () => {
      const p = await provider();
      const routed = (await acceptedCandidates())?.some((c) => c.cluster === PROVIDER);
      return p?.spec?.healthCheck?.failureThreshold === FAILURE_THRESHOLD && p?.status?.phase === 'Available' && routed
        ? true
        : undefined;
    },
    30_000,
    200,
  );
}, 120_000);

afterAll(async () => {
  await grid?.stop();
  rmSync(runDir, { recursive: true, force: true });
}, 60_000);

describe('local grid: provider readiness and gateway age reports', () => {
  it('withdraws east-llm-a within its probe budget, routes to east-llm-b meanwhile, and restores it', async () => {
    const t0 = Date.now();
    await grid.setSimState(PROVIDER, { healthy: false });
    // "If the operator cannot reach a backend's endpoint, the InferenceProvider stays Unavailable and the
    // overlay excludes it."
    const down: Json = await waitFor(
      `${PROVIDER} Unavailable`,
      async () => {
        const p = await provider();
        return p?.status?.phase === 'Unavailable' ? p : undefined;
      },
      20_000,
      100,
    );
    const unavailableMs = Date.now() - t0;
    expect(down.status.reason).toBe('HealthCheckFailed');
    expect(down.status.message).toContain(`failureThreshold ${FAILURE_THRESHOLD}`);
    expect(down.status.conditions.find((c: Json) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'HealthCheckFailed',
    });
    // Two failed probes one interval apart cannot both land sooner than one interval after the fault.
    expect(unavailableMs).toBeGreaterThanOrEqual(INTERVAL_MS * (FAILURE_THRESHOLD - 1) - 100);

    const without = await waitFor(
      `${PROVIDER} out of the overlay every consumer serves`,
      async () => {
        const candidates = await acceptedCandidates();
        return candidates !== undefined && !candidates.some((c) => c.cluster === PROVIDER) ? candidates : undefined;
      },
      20_000,
      100,
    );
    const excludedMs = Date.now() - t0;
    expect(without.map((c) => c.cluster)).toContain('east-llm-b');
    // Budget: failureThreshold probes at the interval, one 2 s GridNetwork refresh, delivery. Measured, not assumed.
    expect(excludedMs).toBeLessThan(15_000);
    expect(
      await waitFor('grid_provider_ready 0', async () => ((await readyGauge()) === 0 ? true : undefined), 10_000, 200),
    ).toBe(true);
    const during = await attribution(consumers()[0]!.listenAddress!, MODEL, 16, grid.demoKey());
    expect(during.get(PROVIDER) ?? 0).toBe(0);
    expect(during.get('east-llm-b') ?? 0).toBeGreaterThan(0);

    const t1 = Date.now();
    await grid.setSimState(PROVIDER, { healthy: true });
    await waitFor(
      `${PROVIDER} back in the overlay every consumer serves`,
      async () => {
        const candidates = await acceptedCandidates();
        const a = candidates?.find((c) => c.cluster === PROVIDER);
        return a?.admission_state === 'new_and_existing' && a.fresh ? true : undefined;
      },
      20_000,
      100,
    );
    const restoredMs = Date.now() - t1;
    expect(restoredMs).toBeLessThan(15_000);
    const back: Json = await provider();
    expect([back.status.phase, back.status.conditions.find((c: Json) => c.type === 'Ready')?.status]).toEqual([
      'Available',
      'True',
    ]);
    expect(
      await waitFor('grid_provider_ready 1', async () => ((await readyGauge()) === 1 ? true : undefined), 10_000, 200),
    ).toBe(true);
    const after = await attribution(consumers()[0]!.listenAddress!, MODEL, 24, grid.demoKey());
    expect(after.get(PROVIDER) ?? 0).toBeGreaterThan(0);
    process.stdout.write(
      `provider readiness: Unavailable after ${unavailableMs} ms, out of every consumer's overlay after ${excludedMs} ms, back after ${restoredMs} ms\n`,
    );
  }, 90_000);

  it("fills the operator's gatewayAgeReports from the serving consumer gateways (one clean record per process)", async () => {
    const network: Json = await waitFor(
      'an age record per east consumer gateway',
      async () => {
        const n: Json = (await grid.site('east').store.list(GRID_NETWORK)).items[0];
        return (n?.status?.gatewayAgeReports ?? []).length >= consumers().length ? n : undefined;
      },
      20_000,
      200,
    );
    const records = network.status.gatewayAgeReports as Json[];
    expect(new Set(records.map((r) => r.epoch)).size).toBe(records.length);
    for (const r of records) expect(r).toMatchObject({ skewCount: 0, reportedRejected: false, rejected: false });
    expect(network.status.conditions.find((c: Json) => c.type === 'GatewayAgesRejected')).toMatchObject({
      status: 'False',
    });
  }, 30_000);
});
