// Readiness in a running operator on the local store, against a real HTTP backend: an external API provider
// (providerKind External, backendKind OpenAI) is routed (after the self-hosted pool), a kind nothing routes is refused
// in status, and a pool whose health check fails leaves routing after healthCheck.failureThreshold probes, one per
// healthCheck.interval, and returns on the first passing probe. grid_provider_ready follows.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  healthVerdict,
  recordProbe,
  type HealthRecord,
} from '../../daemons/gossip-operator/controllers/provider-health.ts';
import type { HealthOutcome } from '../../daemons/gossip-operator/probes/health-probe.ts';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startBackend,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type Backend,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const FAIL: HealthOutcome = {
  healthy: false,
  result: 'http_status',
  sentCredential: false,
  detail: 'health check answered HTTP 503',
};
const PASS: HealthOutcome = { healthy: true, result: 'healthy', sentCredential: false, detail: 'HTTP 200' };

describe('provider health across probes (pure)', () => {
  // "If the operator cannot reach a backend's endpoint, the InferenceProvider stays Unavailable and the
  // overlay excludes it"; the CRD's healthCheck.failureThreshold (default 1) is how many probes in a row that takes.
  it.each([
    { probes: [FAIL], threshold: 1, phase: 'Unavailable', reason: 'HealthCheckFailed' },
    { probes: [FAIL], threshold: 3, phase: 'Available', reason: 'HealthCheckFailing' },
    { probes: [FAIL, FAIL], threshold: 3, phase: 'Available', reason: 'HealthCheckFailing' },
    { probes: [FAIL, FAIL, FAIL], threshold: 3, phase: 'Unavailable', reason: 'HealthCheckFailed' },
    { probes: [FAIL, FAIL, PASS], threshold: 3, phase: 'Available', reason: '' },
    { probes: [FAIL, FAIL, FAIL, PASS], threshold: 3, phase: 'Available', reason: '' },
    { probes: [FAIL, PASS, FAIL], threshold: 2, phase: 'Available', reason: 'HealthCheckFailing' },
  ])(
    '$probes.length probes ending $probes.-1.result, failureThreshold $threshold → $phase $reason',
    ({ probes, threshold, phase, reason }) => {
      let record: HealthRecord | undefined;
      for (const [i, outcome] of probes.entries()) record = recordProbe(record, outcome, i * 1000, 1);
      expect(healthVerdict(record!, threshold)).toMatchObject({ phase, reason });
    },
  );

  it('names the probe result, the count and the threshold', () => {
    const record = recordProbe(recordProbe(undefined, FAIL, 0, 1), FAIL, 1000, 1);
    expect(healthVerdict(record, 2).message).toBe(
      'health check http_status: health check answered HTTP 503 (2 consecutive failed probes, failureThreshold 2); excluded from routing until a probe passes',
    );
  });
});

describe('operator: provider readiness and fallback', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(): Promise<{ backend: Backend; op: LocalOperator; state: string }> {
    const backend = await startBackend();
    cleanups.push(() => backend.close());
    const dirs = await tempDir('provider-readiness');
    cleanups.push(() => dirs.remove());
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    await renderFixture('provider-readiness/grid.yaml', { BACKEND_URL: backend.url }, manifests);
    const op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state } }), {
      stateDir: state,
      manifestsDir: manifests,
    });
    cleanups.push(() => op.stop());
    return { backend, op, state };
  }

  const overlayClusters = async (state: string): Promise<Json[] | undefined> => {
    const cm: Json = await configMap(state, 'grid-system', 'grid-overlay-grid-edge');
    return cm === undefined ? undefined : JSON.parse(cm.data['routing-overlay.json']).overlay.candidates;
  };
  const readyGauge = async (op: LocalOperator, provider: string): Promise<number | undefined> => {
    const metric = await op.operator.metrics.registry.getSingleMetric('grid_provider_ready')?.get();
    return metric?.values.find((v) => v.labels['grid_provider'] === provider && v.labels['grid_site'] === 'site-a')
      ?.value;
  };
  const readyOf = (p: Json) => p?.status?.conditions?.find((c: Json) => c.type === 'Ready');

  it("routes seed 000's External/OpenAI example behind the self-hosted pool and refuses an unknown kind in status", async () => {
    const { op, state } = await setup();
    const candidates = await waitFor('pool and the External/OpenAI provider in the overlay', async () => {
      const c = await overlayClusters(state);
      return c !== undefined && c.length === 2 ? c : undefined;
    });
    // "API providers are used as fallback or explicit lower-priority routes".
    expect(candidates.map((c: Json) => [c.cluster, c.selection_group])).toEqual([
      ['pool', 0],
      ['openai-east1-provider', 1],
    ]);
    const external: Json = await grid(state, 'InferenceProvider', 'openai-east1-provider');
    expect([external.status.phase, readyOf(external)?.status]).toEqual(['Available', 'True']);

    // Refused, never dropped quietly: status says Unavailable, Ready False, and why.
    const refused: Json = await waitFor('mainframe refused', async () => {
      const p: Json = await grid(state, 'InferenceProvider', 'mainframe');
      return p?.status?.phase === 'Unavailable' ? p : undefined;
    });
    expect(refused.status.reason).toBe('UnrecognizedBackendKind');
    expect(refused.status.message).toContain('spec.backendKind "mainframe"');
    expect(readyOf(refused)).toMatchObject({ status: 'False', reason: 'UnrecognizedBackendKind' });
    expect(
      await waitFor('grid_provider_ready 0 for mainframe', async () =>
        (await readyGauge(op, 'mainframe')) === 0 ? true : undefined,
      ),
    ).toBe(true);
    expect(await readyGauge(op, 'openai-east1-provider')).toBe(1);
    expect(await schemaProblems(state)).toEqual([]);
  });

  it('withdraws a pool after failureThreshold failed probes at its interval and restores it on the first passing probe', async () => {
    const { backend, op, state } = await setup();
    await waitFor('pool routed and ready', async () =>
      (await overlayClusters(state))?.some((c: Json) => c.cluster === 'pool') && (await readyGauge(op, 'pool')) === 1
        ? true
        : undefined,
    );

    const t0 = Date.now();
    backend.healthStatus = 503;
    // First failed probe: still Available and routed, the reason counting toward the threshold.
    const failing: Json = await waitFor('pool HealthCheckFailing', async () => {
      const p: Json = await grid(state, 'InferenceProvider', 'pool');
      return p?.status?.reason === 'HealthCheckFailing' ? p : undefined;
    });
    expect(failing.status.phase).toBe('Available');
    expect(failing.status.message).toContain('1 of 2 consecutive failed probes');
    expect((await overlayClusters(state))?.map((c: Json) => c.cluster)).toContain('pool');

    const withdrawn: Json = await waitFor('pool Unavailable', async () => {
      const p: Json = await grid(state, 'InferenceProvider', 'pool');
      return p?.status?.phase === 'Unavailable' ? p : undefined;
    });
    const withdrawnMs = Date.now() - t0;
    // Two probes one interval (1 s) apart: never at the first failure, and within a few intervals.
    expect(withdrawnMs).toBeGreaterThanOrEqual(900);
    expect(withdrawnMs).toBeLessThan(6_000);
    expect(withdrawn.status.reason).toBe('HealthCheckFailed');
    expect(readyOf(withdrawn)).toMatchObject({ status: 'False', reason: 'HealthCheckFailed' });
    const without = await waitFor('overlay without pool', async () => {
      const c = await overlayClusters(state);
      return c !== undefined && !c.some((x: Json) => x.cluster === 'pool') ? c : undefined;
    });
    // The API provider is now the route ("If no self-hosted candidate is available for a model, the
    // API-provider candidate can become the selected route").
    expect(without.map((c: Json) => [c.cluster, c.selection_group, c.admission_state])).toEqual([
      ['openai-east1-provider', 0, 'new_and_existing'],
    ]);
    expect(
      await waitFor('grid_provider_ready 0 for pool', async () =>
        (await readyGauge(op, 'pool')) === 0 ? true : undefined,
      ),
    ).toBe(true);

    const t1 = Date.now();
    backend.healthStatus = 200;
    const restored = await waitFor('pool routed again', async () => {
      const c = await overlayClusters(state);
      return c?.[0]?.cluster === 'pool' ? c : undefined;
    });
    expect(Date.now() - t1).toBeLessThan(4_000);
    expect(restored.map((c: Json) => c.cluster)).toEqual(['pool', 'openai-east1-provider']);
    const back: Json = await grid(state, 'InferenceProvider', 'pool');
    expect([back.status.phase, back.status.reason, readyOf(back)?.status]).toEqual(['Available', '', 'True']);
    expect(
      await waitFor('grid_provider_ready 1 for pool', async () =>
        (await readyGauge(op, 'pool')) === 1 ? true : undefined,
      ),
    ).toBe(true);
  });
});
