import { describe, expect, it } from 'vitest';
import { stableId, stableIdHash, stableIdText } from '../../schemas/fnv1a.ts';
import type { RoutingBackend } from '../../daemons/routing/backends.ts';
import type { SelectionTier } from '../../daemons/routing/model.ts';
import {
  assignSelectionGroups,
  compareByteOrder,
  MAX_OVERLAY_CANDIDATES,
  orderCandidates,
  type TieredBackend,
} from '../../daemons/routing/ordering.ts';

function item(
  site: string,
  tier: SelectionTier,
  over: Partial<Omit<RoutingBackend, 'score'>> & { score?: number } = {},
): TieredBackend {
  const { score = 0.5, ...rest } = over;
  return {
    tier,
    backend: {
      kind: 'inference_model',
      name: 'm',
      site,
      cluster: `gw-${site}`,
      fresh: true,
      external: false,
      credential: undefined,
      admission: 'new_and_existing',
      score: { total: score, queue_depth: score, kv_cache: 0.5, prefix_cache: 0.5, latency: 0.5, cost: 0.5 },
      capacityWeight: 1,
      accessLabels: undefined,
      provider: site,
      ...rest,
    },
  };
}

const sites = (list: readonly TieredBackend[]) => list.map((i) => i.backend.site);

describe('compareByteOrder', () => {
  // docs/contract.md §2.5: tie-break "site, name, cluster (byte order)".
  it.each([
    ['a', 'b', -1],
    ['b', 'a', 1],
    ['a', 'a', 0],
    ['a', 'ab', -1],
    ['Z', 'a', -1],
    ['\uffff', '\u{10000}', -1],
    ['\u{1F600}', '\uE000', 1],
    ['é', 'z', 1],
  ])('%s vs %s → sign %i (UTF-8 byte order)', (a, b, sign) => {
    expect(Math.sign(compareByteOrder(a, b))).toBe(sign);
    expect(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)))).toBe(sign);
  });
});

describe('ordering policies', () => {
  it.each(['geographyFirst', 'scoreFirst'] as const)(
    '%s: a healthy cross-region provider ranks before an overloaded same-region one',
    (policy) => {
      // "Both policies ensure that a healthy cross-region provider (new_and_existing) ranks before an
      // overloaded same-region provider (existing_only). Admission state takes priority over locality and score."
      const { ordered } = orderCandidates(policy, [
        item('near', 'same_region', { admission: 'existing_only', score: 0.9 }),
        item('far', 'cross_region', { score: 0.1 }),
      ]);
      expect(sites(ordered)).toEqual(['far', 'near']);
    },
  );

  it('scoreFirst lets a better-scored remote pass a local one when admission and freshness are equal', () => {
    // "scoreFirst additionally allows comparable runtime metrics to move a remote provider ahead of a local
    // provider before either reaches an admission threshold."
    const input = [item('local', 'same_site', { score: 0.4 }), item('remote', 'cross_region', { score: 0.8 })];
    expect(sites(orderCandidates('scoreFirst', input).ordered)).toEqual(['remote', 'local']);
    expect(sites(orderCandidates('geographyFirst', input).ordered)).toEqual(['local', 'remote']);
  });

  it('geographyFirst: admission, tier, fresh, score descending, then site, name, cluster', () => {
    // docs/contract.md §2.5 "geographyFirst: admission, tier, fresh (true first), score desc, then site, name, cluster
    // (byte order)".
    const input = [
      item('g-stale-near', 'same_site', { fresh: false, score: 1 }),
      item('f-region-hi', 'same_region', { score: 0.9 }),
      item('e-region-lo', 'same_region', { score: 0.1 }),
      item('d-zone', 'same_zone', { score: 0 }),
      item('c-unknown', 'unknown', { score: 1 }),
      item('b-tie', 'cross_region', { score: 0.5 }),
      item('a-tie', 'cross_region', { score: 0.5 }),
      item('h-busy-near', 'same_site', { admission: 'existing_only', score: 1 }),
      item('i-near', 'same_site', { score: 0 }),
    ];
    expect(sites(orderCandidates('geographyFirst', input).ordered)).toEqual([
      'i-near',
      'g-stale-near',
      'd-zone',
      'f-region-hi',
      'e-region-lo',
      'a-tie',
      'b-tie',
      'c-unknown',
      'h-busy-near',
    ]);
  });

  it('scoreFirst: admission, fresh, score descending, tier, then site, name, cluster', () => {
    const input = [
      item('a-stale', 'same_site', { fresh: false, score: 1 }),
      item('b-far-hi', 'cross_region', { score: 0.9 }),
      item('c-near-lo', 'same_site', { score: 0.2 }),
      item('d-far-lo', 'cross_region', { score: 0.2 }),
      item('e-busy', 'same_site', { admission: 'existing_only', score: 1 }),
    ];
    expect(sites(orderCandidates('scoreFirst', input).ordered)).toEqual([
      'b-far-hi',
      'c-near-lo',
      'd-far-lo',
      'a-stale',
      'e-busy',
    ]);
  });

  it('breaks full ties by name and then cluster, whatever the input order', () => {
    const a = item('s', 'same_site', { name: 'x', cluster: 'c2' });
    const b = item('s', 'same_site', { name: 'x', cluster: 'c1' });
    const c = item('s', 'same_site', { name: 'w', cluster: 'c9' });
    for (const input of [
      [a, b, c],
      [c, b, a],
      [b, c, a],
    ]) {
      expect(
        orderCandidates('geographyFirst', input).ordered.map((i) => `${i.backend.name}/${i.backend.cluster}`),
      ).toEqual(['w/c9', 'x/c1', 'x/c2']);
    }
  });
});

describe('dedup, rank and cap', () => {
  it('keeps the best-placed copy of a (kind, name, site, cluster), even when copies are not adjacent', () => {
    // docs/contract.md §2.5: "Drop adjacent duplicates; rank = index"; docs/contract.md §2.4 step 7 rejects any
    // duplicate, adjacent or not.
    const best = item('s', 'same_site', { provider: 'p1', score: 0.9 });
    const other = item('t', 'same_site', { score: 0.5 });
    const worse = item('s', 'same_site', { provider: 'p2', admission: 'existing_only' });
    const { ordered, duplicates } = orderCandidates('geographyFirst', [worse, other, best]);
    expect(ordered.map((i) => i.backend.provider)).toEqual(['p1', 't']);
    expect(duplicates.map((i) => i.backend.provider)).toEqual(['p2']);
  });

  it('tells different identities apart when their stable_id numbers collide, and still drops repeats of each', () => {
    // De-duplication looks candidates up by a 30-bit part of the FNV-1a stable_id; find two model names whose
    // identities share it (a birthday search over a few ten thousand names) and check neither hides the other.
    const seenNames = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; pair === undefined; i++) {
      const name = `model-${i}`;
      const key = stableIdHash('inference_model', name, 's', 'gw-s') & 0x3fffffff;
      const earlier = seenNames.get(key);
      if (earlier === undefined) seenNames.set(key, name);
      else pair = [earlier, name];
    }
    const [x, y] = pair;
    const bestX = item('s', 'same_site', { name: x, provider: 'x1', score: 0.9 });
    const bestY = item('s', 'same_site', { name: y, provider: 'y1', score: 0.8 });
    const worseX = item('s', 'same_site', { name: x, provider: 'x2', score: 0.2 });
    const worseY = item('s', 'same_site', { name: y, provider: 'y2', score: 0.1 });
    const { ordered, stableIds, duplicates } = orderCandidates('geographyFirst', [worseY, bestX, worseX, bestY]);
    expect(ordered.map((i) => i.backend.provider)).toEqual(['x1', 'y1']);
    expect(duplicates.map((i) => i.backend.provider)).toEqual(['x2', 'y2']);
    expect(stableIds.map(stableIdText)).toEqual([
      stableId('inference_model', x, 's', 'gw-s'),
      stableId('inference_model', y, 's', 'gw-s'),
    ]);
  });

  it('keeps the same name at the same site under another kind', () => {
    const { ordered } = orderCandidates('geographyFirst', [
      item('s', 'same_site', { kind: 'mcp_tool' }),
      item('s', 'same_site'),
    ]);
    expect(ordered.map((i) => i.backend.kind)).toEqual(['inference_model', 'mcp_tool']);
  });

  it(`caps the overlay at ${MAX_OVERLAY_CANDIDATES} candidates, dropping the lowest-ranked`, () => {
    const input = Array.from({ length: MAX_OVERLAY_CANDIDATES + 5 }, (_, i) =>
      item(`s${String(i).padStart(5, '0')}`, 'unknown'),
    );
    const { ordered, overLimit } = orderCandidates('geographyFirst', input.reverse());
    expect(ordered).toHaveLength(MAX_OVERLAY_CANDIDATES);
    expect(ordered[0]?.backend.site).toBe('s00000');
    expect(overLimit.map((i) => i.backend.site)).toEqual(['s01024', 's01025', 's01026', 's01027', 's01028']);
  });
});

describe('selection groups', () => {
  // docs/contract.md §2.5: "Groups per (kind,name) in final order: a new group starts when admission, tier or fresh
  // changes (scoreFirst: admission or fresh); score never splits a group."
  const input = [
    item('a', 'same_site', { score: 0.9 }),
    item('b', 'same_site', { score: 0.1 }),
    item('c', 'same_region', { score: 0.9 }),
    item('d', 'same_region', { fresh: false }),
    item('e', 'cross_region', { fresh: false }),
    item('f', 'cross_region', { admission: 'existing_only' }),
    item('t', 'same_site', { name: 'other' }),
  ];
  it('geographyFirst splits on admission, tier and fresh, never on score', () => {
    const { ordered } = orderCandidates('geographyFirst', input);
    const groups = assignSelectionGroups('geographyFirst', ordered);
    expect(ordered.map((i, n) => `${i.backend.site}:${groups[n]}`)).toEqual([
      'a:0',
      't:0',
      'b:0',
      'c:1',
      'd:2',
      'e:3',
      'f:4',
    ]);
  });

  it('scoreFirst splits only on admission and fresh', () => {
    const { ordered } = orderCandidates('scoreFirst', input);
    const groups = assignSelectionGroups('scoreFirst', ordered);
    expect(ordered.map((i, n) => `${i.backend.site}:${groups[n]}`)).toEqual([
      'a:0',
      'c:0',
      't:0',
      'b:0',
      'd:1',
      'e:1',
      'f:2',
    ]);
  });
});
