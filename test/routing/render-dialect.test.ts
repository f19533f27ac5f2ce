/**
 * The overlay rendered per consumer dialect (routing/render.ts with schemas/overlay/dialect.ts): for every selection
 * mode and dialect, what is published (selection_policy, traffic weights, schema_version), that the consumer of that
 * dialect accepts it with the renderer's revision, and what is reported as not honoured. Praxis rules cite
 * praxis-proxy/ai filters/src/routing/overlay.rs ("main" = aa2b3feb, "groups" = 08f51242; PR #731 for the modes).
 */
import { describe, expect, it } from 'vitest';
import { CONSUMER_DIALECTS, type ConsumerDialect } from '../../schemas/overlay/dialect.ts';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import type { SelectionMode } from '../../schemas/overlay/types.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import { renderNetwork } from '../../daemons/routing/index.ts';
import type { GatewayReference } from '../../daemons/routing/model.ts';
import { expectGatewayAccepts, GATEWAY, local, network, policy, rendered, SOURCE, T0 } from './fixtures.ts';

/** Two equally good local providers of one model with different capacity weights: one selection group. */
function input(mode: SelectionMode | undefined) {
  return network({
    policy: policy({
      ...(mode === undefined ? {} : { selectionMode: mode }),
      ...(mode === 'weightedRandom' ? { placementStrategy: 'static' } : {}),
    }),
    inferenceProviders: [local('llm-a', { capacityWeight: 3 }), local('llm-b', { capacityWeight: 1 })],
  });
}

interface Row {
  readonly mode: SelectionMode | undefined;
  readonly dialect: ConsumerDialect;
  /** selection_policy.mode published, or undefined for none. */
  readonly published: SelectionMode | undefined;
  readonly weights: boolean;
  readonly unhonoured: readonly string[];
}

const MODES: readonly (SelectionMode | undefined)[] = [
  undefined,
  'deterministic',
  'roundRobin',
  'random',
  'weightedRandom',
];

function expected(mode: SelectionMode | undefined, dialect: ConsumerDialect): Row {
  if (dialect === 'agn') return { mode, dialect, published: mode, weights: mode === 'weightedRandom', unhonoured: [] };
  if (dialect === 'praxis-main') {
    // main has no selection_policy (208-222): never published; anything but first-admitted is not honoured.
    const unhonoured =
      mode === 'weightedRandom'
        ? ['weighted_split_collapsed']
        : mode === 'roundRobin' || mode === 'random'
          ? ['selection_mode_ignored']
          : [];
    return { mode, dialect, published: undefined, weights: false, unhonoured };
  }
  // groups (PR #731): deterministic, roundRobin, random; weightedRandom degrades to random without weights.
  if (mode === 'weightedRandom')
    return { mode, dialect, published: 'random', weights: false, unhonoured: ['weighted_split_as_random'] };
  return { mode, dialect, published: mode, weights: false, unhonoured: [] };
}

const ROWS = MODES.flatMap((mode) => CONSUMER_DIALECTS.map((dialect) => expected(mode, dialect)));

describe('render per consumer dialect', () => {
  it.each(ROWS)('mode $mode for $dialect: publishes $published, weights $weights, not honoured $unhonoured', (row) => {
    const gateway: GatewayReference = { ...GATEWAY, dialect: row.dialect };
    const result = renderNetwork(input(row.mode), [gateway], SOURCE, T0, new Map());
    const overlay = rendered(result.gateways[0]!.result);
    // Accepted by its own consumer (validate.ts with the dialect), with the renderer's revision.
    expectGatewayAccepts(overlay, gateway);
    expect(overlay.dialect).toBe(row.dialect);
    expect(overlay.envelope.schema_version).toBe('1.0.0');
    expect(overlay.payload.selection_policy?.mode).toBe(row.published);
    expect(Object.hasOwn(overlay.payload, 'selection_policy')).toBe(row.published !== undefined);
    expect(overlay.payload.candidates).toHaveLength(2);
    for (const c of overlay.payload.candidates) expect(Object.hasOwn(c, 'traffic_weight')).toBe(row.weights);
    if (row.weights) expect(overlay.payload.candidates.map((c) => c.traffic_weight)).toEqual([3, 1]);
    expect(overlay.unhonoured.map((u) => u.feature)).toEqual(row.unhonoured);
    // The revision is over exactly what is published: the same whichever consumer recomputes it from the bytes.
    const published = JSON.parse(serializeOverlay(overlay.envelope)) as { overlay: Record<string, unknown> };
    expect(overlayRevision(published.overlay, row.dialect)).toBe(overlay.revision);
    if (row.dialect !== 'agn') expect(overlayRevision(published.overlay, 'agn')).toBe(overlay.revision);
  });

  it('publishes to a Praxis consumer nothing it would refuse, under every mode', () => {
    for (const mode of MODES) {
      for (const dialect of ['praxis-main', 'praxis-groups'] as const) {
        const gateway: GatewayReference = { ...GATEWAY, dialect };
        const overlay = rendered(renderNetwork(input(mode), [gateway], SOURCE, T0, new Map()).gateways[0]!.result);
        for (const strict of ['praxis-main', 'praxis-groups'] as const) {
          // A praxis-main overlay has no selection_policy, so the groups consumer accepts it too; a groups overlay
          // carrying a policy is not for main (its digest covers the policy).
          const verdict = validateOverlay(serializeOverlay(overlay.envelope), {
            maxBytes: GATEWAY_MAX_OVERLAY_BYTES,
            allowLegacy: false,
            dialect: strict,
          });
          const shouldAccept = strict === dialect || overlay.payload.selection_policy === undefined;
          expect(verdict.ok, `${mode} rendered for ${dialect}, read by ${strict}`).toBe(shouldAccept);
        }
      }
    }
  });

  it('renders the same candidates for every dialect: only the policy and the weights differ', () => {
    const strip = (dialect: ConsumerDialect) => {
      const overlay = rendered(
        renderNetwork(input('weightedRandom'), [{ ...GATEWAY, dialect }], SOURCE, T0, new Map()).gateways[0]!.result,
      );
      return overlay.payload.candidates.map(({ traffic_weight: _weight, ...rest }) => rest);
    };
    expect(strip('praxis-main')).toEqual(strip('agn'));
    expect(strip('praxis-groups')).toEqual(strip('agn'));
  });
});
