/**
 * Candidate ordering, de-duplication, ranking and selection groups (SPEC §2.5, seed 004 "Candidate scoring and
 * ordering"). Input is already scored and admitted; output is the final overlay order.
 */
import type { RoutingBackend } from './backends.ts';
import type { RoutingPolicy, SelectionTier } from './model.ts';

/** At most this many candidates per overlay (SPEC §2.4 step 7): gateways reject longer lists. */
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

const admissionRank = (b: RoutingBackend): number => (b.admission === 'new_and_existing' ? 0 : 1);
const freshRank = (b: RoutingBackend): number => (b.fresh ? 0 : 1);

/**
 * geographyFirst: admission, tier, fresh (true first), score descending, tie-break.
 * scoreFirst: admission, fresh, score descending, tier, tie-break.
 * Admission always leads, so a healthy cross-region provider precedes an overloaded same-region one under both.
 */
export function candidateComparator(policy: RoutingPolicy): (a: TieredBackend, b: TieredBackend) => number {
  if (policy === 'scoreFirst') {
    return (a, b) =>
      admissionRank(a.backend) - admissionRank(b.backend) ||
      freshRank(a.backend) - freshRank(b.backend) ||
      b.backend.score.total - a.backend.score.total ||
      TIER_RANK[a.tier] - TIER_RANK[b.tier] ||
      tieBreak(a.backend, b.backend);
  }
  return (a, b) =>
    admissionRank(a.backend) - admissionRank(b.backend) ||
    TIER_RANK[a.tier] - TIER_RANK[b.tier] ||
    freshRank(a.backend) - freshRank(b.backend) ||
    b.backend.score.total - a.backend.score.total ||
    tieBreak(a.backend, b.backend);
}

export interface OrderedCandidates {
  /** Final order; index = rank. */
  readonly ordered: readonly TieredBackend[];
  readonly duplicates: readonly TieredBackend[];
  readonly overLimit: readonly TieredBackend[];
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
  const sorted = [...items].sort(candidateComparator(policy));
  const seen = new Set<string>();
  const ordered: TieredBackend[] = [];
  const duplicates: TieredBackend[] = [];
  const overLimit: TieredBackend[] = [];
  for (const item of sorted) {
    const { kind, name, site, cluster } = item.backend;
    const key = `${kind}\u0000${name}\u0000${site}\u0000${cluster}`;
    if (seen.has(key)) {
      duplicates.push(item);
      continue;
    }
    seen.add(key);
    if (ordered.length < limit) ordered.push(item);
    else overLimit.push(item);
  }
  return { ordered, duplicates, overLimit };
}

/**
 * selection_group per (kind, name) in final order: a new group starts when admission, tier or fresh changes
 * (scoreFirst: admission or fresh). Score never splits a group. Because these fields lead the sort key, each
 * group is contiguous within its capability and group numbers only grow.
 */
export function assignSelectionGroups(policy: RoutingPolicy, ordered: readonly TieredBackend[]): number[] {
  const last = new Map<string, { group: number; admission: string; tier: SelectionTier; fresh: boolean }>();
  const groups: number[] = [];
  for (const { backend, tier } of ordered) {
    const capability = `${backend.kind}\u0000${backend.name}`;
    const previous = last.get(capability);
    let group = 0;
    if (previous !== undefined) {
      const split =
        previous.admission !== backend.admission ||
        previous.fresh !== backend.fresh ||
        (policy === 'geographyFirst' && previous.tier !== tier);
      group = split ? previous.group + 1 : previous.group;
    }
    last.set(capability, { group, admission: backend.admission, tier, fresh: backend.fresh });
    groups.push(group);
  }
  return groups;
}
