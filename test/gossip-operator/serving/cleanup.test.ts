// Which serving ConfigMaps the operator deletes when a gateway stops being served (gridServing off, gateway removed):
// only one recorded in servingConfigStatus, at exactly the recorded namespace and name, carrying every serving label
// the operator puts on it for that network and gateway. A look-alike (same name without the labels, the labels of
// another gateway or network, an overlay ConfigMap, a similar name) survives; a served gateway's ConfigMap is never
// a candidate.
import { describe, expect, it } from 'vitest';
import type { ServingConfigStatus } from '../../../schemas/generated/gridnetworks.ts';
import { servingConfigMapName } from '../../../schemas/serving/serving-config.ts';
import {
  notOwned,
  planServingCleanup,
  servingLabels,
  staleServing,
  type StoredConfigMap,
} from '../../../daemons/gossip-operator/serving/cleanup.ts';

const NET = 'production';
const NS = 'praxis-system';
const record = (
  gatewayName: string,
  namespace = NS,
  configMapName = servingConfigMapName(NET, gatewayName),
): ServingConfigStatus => ({ gatewayName, namespace, configMapName, phase: 'Distributed' });
const stored = (name: string, labels: Record<string, string> | undefined, namespace = NS): StoredConfigMap => ({
  metadata: { name, namespace, ...(labels === undefined ? {} : { labels }) },
});
const ours = (gateway: string, namespace = NS) =>
  stored(servingConfigMapName(NET, gateway), servingLabels(NET, gateway), namespace);
/** The publisher's order: the stale records of what is recorded and served now, then the plan over what is stored. */
const planFor = (
  served: ReadonlySet<string>,
  recorded: readonly ServingConfigStatus[],
  existing: readonly StoredConfigMap[],
) => planServingCleanup(NET, staleServing(NET, served, recorded), existing);

describe('serving ConfigMap cleanup plan', () => {
  it('deletes the recorded ConfigMap of a gateway whose gridServing was turned off or that was removed', () => {
    const recorded = [record('edge'), record('gone-gw'), record('kept')];
    const plan = planFor(new Set([`${NS}/kept`]), recorded, [ours('edge'), ours('gone-gw'), ours('kept')]);
    expect(plan.deletions.map((d) => d.configMapName)).toEqual([
      'grid-serving-production-edge',
      'grid-serving-production-gone-gw',
    ]);
    expect(plan.foreign).toEqual([]);
    expect(plan.gone).toEqual([]);
  });

  it("never plans to delete a served gateway's ConfigMap, recorded or not", () => {
    const plan = planFor(new Set([`${NS}/edge`]), [record('edge')], [ours('edge')]);
    expect(plan).toEqual({ deletions: [], foreign: [], gone: [] });
  });

  it.each([
    [
      'no labels at all (a user made it)',
      undefined,
      /managed-by=grid-operator.*network=production.*gateway=edge.*component=serving/,
    ],
    [
      'managed by someone else',
      { ...servingLabels(NET, 'edge'), 'app.kubernetes.io/managed-by': 'helm' },
      /managed-by=grid-operator$/,
    ],
    ['the labels of another gateway', servingLabels(NET, 'other'), /gateway=edge$/],
    ['the labels of another network', servingLabels('staging', 'edge'), /network=production$/],
    [
      "an overlay ConfigMap's labels (no serving component)",
      {
        'app.kubernetes.io/managed-by': 'grid-operator',
        'grid.praxis.fast/network': NET,
        'grid.praxis.fast/gateway': 'edge',
      },
      /component=serving$/,
    ],
  ])('leaves a ConfigMap at the recorded name with %s, and says why', (_, labels, why) => {
    const plan = planFor(new Set(), [record('edge')], [stored('grid-serving-production-edge', labels)]);
    expect(plan.deletions).toEqual([]);
    expect(plan.foreign).toHaveLength(1);
    expect(plan.foreign[0]!.record.configMapName).toBe('grid-serving-production-edge');
    expect(plan.foreign[0]!.why).toMatch(why);
  });

  it("a foreign ConfigMap with a similar name, even with the operator's labels, is never a deletion", () => {
    const similar = [
      stored('grid-serving-production-edge-backup', servingLabels(NET, 'edge')),
      stored('grid-serving-production-edg', servingLabels(NET, 'edge')),
      stored('grid-serving-production-edge', servingLabels(NET, 'edge'), 'other-namespace'),
      stored('grid-overlay-production-edge', servingLabels(NET, 'edge')),
    ];
    const plan = planFor(new Set(), [record('edge')], similar);
    expect(plan.deletions).toEqual([]);
    // Nothing is stored at the recorded name: only its status entry goes.
    expect(plan.gone).toEqual([{ gatewayName: 'edge', namespace: NS, configMapName: 'grid-serving-production-edge' }]);
    // With the real one beside them, only the real one is deleted.
    const withReal = planFor(new Set(), [record('edge')], [...similar, ours('edge')]);
    expect(withReal.deletions).toEqual([
      { gatewayName: 'edge', namespace: NS, configMapName: 'grid-serving-production-edge' },
    ]);
  });

  it('a record is matched in its own namespace: the same gateway name elsewhere is another gateway', () => {
    const plan = planFor(
      new Set([`team-b/edge`]),
      [record('edge'), record('edge', 'team-b')],
      [ours('edge'), ours('edge', 'team-b')],
    );
    expect(plan.deletions).toEqual([
      { gatewayName: 'edge', namespace: NS, configMapName: 'grid-serving-production-edge' },
    ]);
  });

  it('stale records: not served any more, or recorded under a name the network would not give the gateway now', () => {
    const recorded = [
      record('served'),
      record('served-renamed', NS, 'grid-serving-old-served-renamed'),
      record('stopped'),
      { ...record('no-name'), configMapName: '' },
    ];
    expect(
      staleServing(NET, new Set([`${NS}/served`, `${NS}/served-renamed`]), recorded).map((r) => r.configMapName),
    ).toEqual(['grid-serving-old-served-renamed', 'grid-serving-production-stopped']);
  });

  it('ownership needs every serving label', () => {
    expect(notOwned(ours('edge'), NET, 'edge')).toBeUndefined();
    expect(notOwned(ours('edge'), NET, 'other')).toMatch(/gateway=other/);
  });
});
