/**
 * Candidate ordering, de-duplication, ranking and selection groups (docs/contract.md §2.5). Input is already scored and
 * admitted; output is the final overlay order.
 */
import { stableIdHash } from '../../schemas/fnv1a.ts';
import type { RoutingBackend } from './backends.ts';
import type { RoutingPolicy, SelectionTier } from './model.ts';

/** At most this many candidates per overlay (docs/contract.md §2.4 step 7): gateways reject longer lists. */
export const MAX_OVERLAY_CANDIDATES = 1024;

export interface TieredBackend {
  readonly backend: RoutingBackend;
  readonly tier: SelectionTier;
}

const TIER_RANK: Readonly<Record<SelectionTier, number>> = {
  same_site: 0,
  same_zone: 1,
  same_region: 2,
  cross_region: 3,
  unknown: 4,
};

/**
 * UTF-8 byte order (= code point order) without encoding: UTF-16 code units already agree except that surrogates
 * (U+D800–DFFF, the supplementary planes) sort below U+E000–FFFF, so both ranges are moved to restore code point order.
 */
export function compareByteOrder(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i += 1) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800) x = x < 0xe000 ? x + 0x2000 : x - 0x800;
      if (y >= 0xd800) y = y < 0xe000 ? y + 0x2000 : y - 0x800;
      return x - y;
    }
  }
  return a.length - b.length;
}

/** The deterministic tie-break (site, name, cluster), then kind so the order is total. */
function tieBreak(a: RoutingBackend, b: RoutingBackend): number {
  return (
    compareByteOrder(a.site, b.site) ||
    compareByteOrder(a.name, b.name) ||
    compareByteOrder(a.cluster, b.cluster) ||
    compareByteOrder(a.kind, b.kind)
  );
}

/**
 * The leading sort keys of an item packed into one number, smaller first, and the key compared after the score:
 * geographyFirst: admission, tier, fresh (true first), self-hosted before external, score descending, tie-break.
 * scoreFirst: admission, fresh, self-hosted before external, score descending, tier, tie-break.
 * Admission always leads, so a healthy cross-region provider precedes an overloaded same-region one under both. An
 * API provider or cloud-managed service follows the self-hosted pools of its tier ("API providers are used as
 * fallback"), after freshness: a healthy API beats a degraded pool of the same tier.
 */
function leadKey(policy: RoutingPolicy, { backend, tier }: TieredBackend): number {
  const admission = backend.admission === 'new_and_existing' ? 0 : 1;
  const fresh = backend.fresh ? 0 : 1;
  const external = backend.external ? 1 : 0;
  const lead = policy === 'scoreFirst' ? admission * 2 + fresh : (admission * 8 + TIER_RANK[tier]) * 2 + fresh;
  return lead * 2 + external;
}

function afterKey(policy: RoutingPolicy, { tier }: TieredBackend): number {
  return policy === 'scoreFirst' ? TIER_RANK[tier] : 0;
}

/**
 * The overlay order of `items` as indexes. Each item's keys are worked out once into flat arrays and the sort
 * compares those: a sort compares O(n log n) times, and reading admission, tier, freshness and score through each
 * backend on every comparison makes a large overlay's sort cost grow well past n log n (the backends of 10 000
 * candidates are spread over more memory than the CPU caches hold). Array sort is stable, so items equal in every
 * key (repeats of one identity from providers in the same state) keep their input order.
 */
function sortedIndexes(policy: RoutingPolicy, items: readonly TieredBackend[]): number[] {
  const n = items.length;
  const lead = new Int32Array(n);
  const after = new Int32Array(n);
  const score = new Float64Array(n);
  const order: number[] = [];
  for (let i = 0; i < n; i++) {
    const item = items[i] as TieredBackend;
    lead[i] = leadKey(policy, item);
    after[i] = afterKey(policy, item);
    score[i] = item.backend.score.total;
    order.push(i);
  }
  return order.sort(
    (i, j) =>
      (lead[i] as number) - (lead[j] as number) ||
      (score[j] as number) - (score[i] as number) ||
      (after[i] as number) - (after[j] as number) ||
      tieBreak((items[i] as TieredBackend).backend, (items[j] as TieredBackend).backend),
  );
}

export interface OrderedCandidates {
  /** Final order; index = rank. */
  readonly ordered: readonly TieredBackend[];
  /** stableIdHash of each ordered candidate, index = rank (worked out for de-duplication, so not again). */
  readonly stableIds: readonly number[];
  readonly duplicates: readonly TieredBackend[];
  readonly overLimit: readonly TieredBackend[];
}

function sameIdentity(a: RoutingBackend, b: RoutingBackend): boolean {
  return a.kind === b.kind && a.name === b.name && a.site === b.site && a.cluster === b.cluster;
}

/**
 * Sorts, drops duplicates of (kind, name, site, cluster) keeping the best-placed one, and caps the list. Equal keys
 * need not be adjacent (two providers can publish the same capability through one cluster with different states), so
 * every repeat is dropped, not only adjacent ones: gateways reject any duplicate.
 */
export function orderCandidates(
  policy: RoutingPolicy,
  items: readonly TieredBackend[],
  limit: number = MAX_OVERLAY_CANDIDATES,
): OrderedCandidates {
  // Repeats are found by the stable_id number, which every candidate needs anyway, confirmed field by field: a
  // joined (kind, name, site, cluster) string per candidate was garbage to build and hash. Two different identities
  // with one number (FNV-1a collides rarely, but can) fall back to exact keys.
  const firstById = new Map<number, RoutingBackend>();
  let collided: Set<string> | undefined;
  const ordered: TieredBackend[] = [];
  const stableIds: number[] = [];
  const duplicates: TieredBackend[] = [];
  const overLimit: TieredBackend[] = [];
  for (const index of sortedIndexes(policy, items)) {
    const item = items[index] as TieredBackend;
    const { backend } = item;
    const id = stableIdHash(backend.kind, backend.name, backend.site, backend.cluster);
    // 30 bits keep the key a small integer, which a Map stores without allocating a number per entry.
    const key = id & 0x3fffffff;
    const first = firstById.get(key);
    let repeat = false;
    if (first === undefined) {
      firstById.set(key, backend);
    } else if (sameIdentity(first, backend)) {
      repeat = true;
    } else {
      collided ??= new Set();
      const exact = `${backend.kind}\u0000${backend.name}\u0000${backend.site}\u0000${backend.cluster}`;
      repeat = collided.has(exact);
      collided.add(exact);
    }
    if (repeat) {
      duplicates.push(item);
      continue;
    }
    if (ordered.length < limit) {
      ordered.push(item);
      stableIds.push(id);
    } else {
      overLimit.push(item);
    }
  }
  return { ordered, stableIds, duplicates, overLimit };
}

/**
 * selection_group per (kind, name) in final order: a new group starts when admission, tier, fresh or external
 * changes (scoreFirst: admission, fresh or external). Score never splits a group. Because these fields lead the sort
 * key, each group is contiguous within its capability and group numbers only grow. External providers in a group of
 * their own are what makes them a fallback: a picker spreading traffic inside the first group never reaches them.
 */
export function assignSelectionGroups(policy: RoutingPolicy, ordered: readonly TieredBackend[]): number[] {
  // kind -> name -> the capability's last candidate so far: nested maps look the existing strings up, where a joined
  // key would be a new string to build and hash for every candidate. The record is updated in place.
  const last = new Map<
    string,
    Map<string, { group: number; admission: string; tier: SelectionTier; fresh: boolean; external: boolean }>
  >();
  const groups: number[] = [];
  for (const { backend, tier } of ordered) {
    let byName = last.get(backend.kind);
    if (byName === undefined) {
      byName = new Map();
      last.set(backend.kind, byName);
    }
    const previous = byName.get(backend.name);
    if (previous === undefined) {
      byName.set(backend.name, {
        group: 0,
        admission: backend.admission,
        tier,
        fresh: backend.fresh,
        external: backend.external,
      });
      groups.push(0);
      continue;
    }
    const split =
      previous.admission !== backend.admission ||
      previous.fresh !== backend.fresh ||
      previous.external !== backend.external ||
      (policy === 'geographyFirst' && previous.tier !== tier);
    if (split) previous.group += 1;
    previous.admission = backend.admission;
    previous.tier = tier;
    previous.fresh = backend.fresh;
    previous.external = backend.external;
    groups.push(previous.group);
  }
  return groups;
}
