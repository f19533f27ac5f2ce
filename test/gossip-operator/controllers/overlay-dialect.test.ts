// The overlay publisher per consumer dialect, on the real local store with the operator's real metrics: the consumer
// entry's SelectionPolicyHonored condition and grid_overlay_unhonoured_features say what the consumer will not
// honour, and an overlay the consumer's dialect would refuse is never applied (the last revision is kept, and why).
import { afterEach, describe, expect, it } from 'vitest';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { RoutingMapStatus } from '../../../schemas/generated/gridnetworks.ts';
import type { ConsumerDialect } from '../../../schemas/overlay/dialect.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../../schemas/overlay/validate.ts';
import { openLocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import {
  ANNOTATION_REVISION,
  OVERLAY_DATA_KEY,
  publishOverlay,
} from '../../../daemons/gossip-operator/controllers/overlay-publisher.ts';
import { CONFIG_MAP, type ConfigMapObject } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { renderNetwork, type GatewayOverlayResult } from '../../../daemons/routing/index.ts';
import type { GatewayReference, SelectionMode } from '../../../daemons/routing/model.ts';
import { local, network, policy, SOURCE, T0 } from '../../routing/fixtures.ts';
import { capturingLogger, tempDir } from '../helpers.ts';

const NET = 'production';

function gridNetwork(status: RoutingMapStatus[] = []): GridNetworkResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'GridNetwork',
    metadata: { name: NET, generation: 4 },
    spec: {},
    status: { routingMapStatus: status },
  } as GridNetworkResource;
}

function renderFor(gateway: GatewayReference, mode: SelectionMode | undefined): GatewayOverlayResult {
  const input = network({
    policy: policy({
      ...(mode === undefined ? {} : { selectionMode: mode }),
      ...(mode === 'weightedRandom' ? { placementStrategy: 'static' } : {}),
    }),
    inferenceProviders: [local('llm-a', { capacityWeight: 3 }), local('llm-b', { capacityWeight: 1 })],
  });
  const entry = renderNetwork(input, [gateway], SOURCE, T0, new Map()).gateways[0];
  if (entry === undefined) throw new Error('no render');
  return entry;
}

describe('overlay publisher per consumer dialect', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup() {
    const dirs = await tempDir('overlay-dialect');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    const metrics = new OperatorMetrics();
    const { logger, lines } = capturingLogger();
    let now = Date.parse('2026-07-29T00:00:00Z');
    const ctx = { store, metrics, logger, now: () => now } as unknown as OperatorContext;
    const metricValue = async (name: string, labels: Record<string, string>) => {
      const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
      const values = (metric?.values ?? []) as { labels: Record<string, string | number>; value: number }[];
      return values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
    };
    const stored = async (name: string) =>
      (await store.get(CONFIG_MAP, { name, namespace: 'praxis-system' })) as ConfigMapObject | undefined;
    return {
      ctx,
      lines,
      metricValue,
      stored,
      tick: (ms: number) => {
        now += ms;
      },
    };
  }

  const gateway = (dialect?: ConsumerDialect): GatewayReference => ({
    name: 'inference-gw',
    namespace: 'praxis-system',
    siteName: 'east',
    ...(dialect === undefined ? {} : { dialect }),
  });

  it('Praxis AI main under weightedRandom: publishes an overlay it accepts and reports the collapsed weighted split', async () => {
    const { ctx, metricValue, stored, tick } = await setup();
    const gw = gateway('praxis-main');
    const status = await publishOverlay(ctx, gridNetwork(), renderFor(gw, 'weightedRandom'), undefined);
    expect(status).toMatchObject({ phase: 'Distributed', dialect: 'praxis-main', reason: '' });
    expect(status.conditions).toEqual([
      {
        type: 'SelectionPolicyHonored',
        status: 'False',
        reason: 'WeightedSplitCollapsed',
        message: expect.stringMatching(/collapse to the first admitted candidate/),
        observedGeneration: 4,
        lastTransitionTime: '2026-07-29T00:00:00Z',
      },
    ]);
    // The entry is valid against the GridNetwork schema as written to the API server.
    expect(validateCustomResource(gridNetwork([status]))).toEqual([]);
    const gwLabel = 'praxis-system/inference-gw';
    expect(
      await metricValue('grid_overlay_unhonoured_features', {
        network: NET,
        gateway: gwLabel,
        feature: 'weighted_split_collapsed',
      }),
    ).toBe(1);
    expect(
      await metricValue('grid_overlay_unhonoured_features', {
        network: NET,
        gateway: gwLabel,
        feature: 'selection_mode_ignored',
      }),
    ).toBe(0);
    expect(
      await metricValue('grid_overlay_unhonoured_features', {
        network: NET,
        gateway: gwLabel,
        feature: 'weighted_split_as_random',
      }),
    ).toBe(0);
    // What was applied is what Praxis main loads: no selection_policy, no weights, accepted under its rules.
    const cm = await stored(status.configMapName!);
    const text = cm?.data?.[OVERLAY_DATA_KEY] ?? '';
    expect(text).not.toContain('selection_policy');
    expect(text).not.toContain('traffic_weight');
    expect(
      validateOverlay(text, { maxBytes: GATEWAY_MAX_OVERLAY_BYTES, allowLegacy: false, dialect: 'praxis-main' }),
    ).toMatchObject({ ok: true, revision: status.distributedRevision });

    // The policy turns deterministic: honoured, the condition flips (new transition time), the gauge drops to 0.
    tick(60_000);
    const next = await publishOverlay(ctx, gridNetwork([status]), renderFor(gw, 'deterministic'), status);
    expect(next.conditions).toEqual([
      {
        type: 'SelectionPolicyHonored',
        status: 'True',
        reason: 'Honored',
        message: expect.stringMatching(/praxis-main consumer honours/),
        observedGeneration: 4,
        lastTransitionTime: '2026-07-29T00:01:00Z',
      },
    ]);
    expect(
      await metricValue('grid_overlay_unhonoured_features', {
        network: NET,
        gateway: gwLabel,
        feature: 'weighted_split_collapsed',
      }),
    ).toBe(0);
  });

  it('Praxis AI with groups under weightedRandom and main under roundRobin: each reports its own feature', async () => {
    const { ctx } = await setup();
    const groups = await publishOverlay(
      ctx,
      gridNetwork(),
      renderFor(gateway('praxis-groups'), 'weightedRandom'),
      undefined,
    );
    expect(groups.conditions?.[0]).toMatchObject({ status: 'False', reason: 'WeightedSplitAsRandom' });
    const main = await publishOverlay(
      ctx,
      gridNetwork(),
      renderFor({ ...gateway('praxis-main'), name: 'other-gw' }, 'roundRobin'),
      undefined,
    );
    expect(main.conditions?.[0]).toMatchObject({
      status: 'False',
      reason: 'SelectionModeIgnored',
      message: expect.stringMatching(/roundRobin is ignored/),
    });
    // Our own gateway honours every mode: nothing to report.
    const ours = await publishOverlay(
      ctx,
      gridNetwork(),
      renderFor({ ...gateway(), name: 'agn-gw' }, 'weightedRandom'),
      undefined,
    );
    expect(ours).toMatchObject({ phase: 'Distributed', dialect: 'agn' });
    expect(ours.conditions?.[0]).toMatchObject({ status: 'True', reason: 'Honored' });
  });

  it('never applies an overlay its consumer would reject: the last distributed revision is kept and the reason given', async () => {
    const { ctx, lines, metricValue, stored } = await setup();
    const groupsGateway = gateway('praxis-groups');
    const first = await publishOverlay(ctx, gridNetwork(), renderFor(groupsGateway, 'random'), undefined);
    expect(first.phase).toBe('Distributed');
    // An overlay rendered for our gateway (weightedRandom with weights) offered to the groups consumer, as a render
    // that got the dialect wrong would: the publisher's own check with the consumer's rules refuses it.
    const wrong = renderFor(gateway(), 'weightedRandom');
    const held = await publishOverlay(
      ctx,
      gridNetwork([first]),
      { gateway: groupsGateway, result: wrong.result },
      first,
    );
    expect(held).toMatchObject({
      phase: 'Retained',
      reason: 'ConsumerWouldReject',
      distributedRevision: first.distributedRevision,
      renderedRevision: wrong.result.ok ? wrong.result.value.revision : '',
    });
    expect(held.message).toMatch(
      /the praxis-groups consumer would reject revision [0-9a-f]{64} \(invalid_selection_policy: .*unknown variant "weightedRandom"/,
    );
    expect(validateCustomResource(gridNetwork([held]))).toEqual([]);
    // The ConfigMap still carries the first revision.
    expect((await stored(first.configMapName!))?.metadata.annotations?.[ANNOTATION_REVISION]).toBe(
      first.distributedRevision,
    );
    expect(await metricValue('grid_overlay_applies_total', { outcome: 'consumer_would_reject' })).toBe(1);
    expect(lines.some((line) => line.includes('its consumer would reject it'))).toBe(true);

    // On a store where nothing was distributed before, the same refusal is an Error, still with nothing applied.
    const empty = await setup();
    const fresh = await publishOverlay(
      empty.ctx,
      gridNetwork(),
      { gateway: groupsGateway, result: wrong.result },
      undefined,
    );
    expect(fresh).toMatchObject({ phase: 'Error', reason: 'ConsumerWouldReject' });
    expect(fresh.configMapName).toBe(first.configMapName);
    expect(await empty.stored(fresh.configMapName!)).toBeUndefined();
  });
});
