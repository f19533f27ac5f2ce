// The routing decision (docs/contract.md §3.1), pure over a snapshot: the first viable selection group, then the
// overlay's mode inside it, with optional session affinity. Randomness, the clock and endpoint health come in as
// arguments, so every rule is table-tested without sockets or sleeps. With local_load (an extension) the gateway's own
// in-flight requests steer the pick inside the group; without it every mode is exactly as docs/contract.md §3.1 states.
import type { CandidateKind, SelectionMode } from '../../../schemas/overlay/types.ts';
import type { AffinityTable } from './affinity.ts';
import type { LoadPath } from './candidate-load.ts';
import type { RoutingCandidate, RoutingSnapshot } from './snapshot.ts';

export interface SelectionRequest {
  readonly kind: CandidateKind;
  readonly name: string;
  /** Session key from the affinity header or cookie; only consulted when an affinity table is given. */
  readonly sessionKey?: string | undefined;
}

export interface SelectionDeps {
  /** Uniform in [0, 1). */
  random(): number;
  nowMs(): number;
  /** True when the gateway cannot use this candidate right now (unknown cluster, every endpoint backing off). */
  isExcluded(candidate: RoutingCandidate): boolean;
  affinity?: AffinityTable;
  /**
   * local_load: the requests this gateway has dispatched to a candidate and not finished (candidate-load.ts). Given,
   * random and weightedRandom take the lighter of two draws and roundRobin skips a candidate that is clearly behind;
   * absent, the modes are exactly as docs/contract.md §3.1 states.
   */
  load?: { inFlight(candidate: RoutingCandidate): number };
}

export type SelectionOutcome =
  | {
      readonly kind: 'selected';
      readonly candidate: RoutingCandidate;
      /** Other viable candidates of the same group in retry order (at most one is ever tried). */
      readonly alternates: readonly RoutingCandidate[];
      readonly affinity: 'bound' | 'new' | 'none';
      /** The local_load arm that made the pick; undefined without local_load, for deterministic and bound sessions. */
      readonly path: LoadPath | undefined;
    }
  /** The overlay has no candidate for this capability: 404. */
  | { readonly kind: 'no_candidate' }
  /** The capability is known but every candidate is excluded or closed to new sessions: 503. */
  | { readonly kind: 'all_excluded' };

/**
 * roundRobin with local_load leaves the cursor's candidate only for one with at least this many fewer in flight.
 * Round-robin over candidates that finish at the same pace keeps their own in-flight within one of each other (each
 * turn adds one to the next in order, so the one just served leads by one); a gap of two is the least that says one
 * candidate is finishing slower than its turns come round, so the rotation is kept whenever it is not failing.
 */
export const ROUND_ROBIN_SKIP_GAP = 2;

/** The alternates of a group with one viable member: shared, as nothing writes to an outcome's alternates. */
const NO_ALTERNATES: readonly RoutingCandidate[] = Object.freeze([]);

const admissionOf = (c: RoutingCandidate): string => c.candidate.admission_state ?? 'new_and_existing';

/** Open to new requests: admission new_and_existing and not excluded. */
function viableForNew(c: RoutingCandidate, deps: SelectionDeps): boolean {
  return admissionOf(c) === 'new_and_existing' && !deps.isExcluded(c);
}

/** A bound session may stay on an existing_only candidate: only exclusion (or admission none) moves it. */
function viableForBound(c: RoutingCandidate, deps: SelectionDeps): boolean {
  const admission = admissionOf(c);
  return (admission === 'new_and_existing' || admission === 'existing_only') && !deps.isExcluded(c);
}

const weightOf = (c: RoutingCandidate): number => Math.max(0, c.candidate.traffic_weight ?? 1);

/**
 * Whether `b` carries fewer own in-flight requests than `a` for its share of the mode: in flight over traffic_weight
 * under weightedRandom (cross-multiplied, so a weight of 0 divides nothing), raw counts under random (uniform shares).
 */
function lighter(
  b: RoutingCandidate,
  a: RoutingCandidate,
  mode: SelectionMode,
  load: NonNullable<SelectionDeps['load']>,
): boolean {
  if (mode !== 'weightedRandom') return load.inFlight(b) < load.inFlight(a);
  return load.inFlight(b) * weightOf(a) < load.inFlight(a) * weightOf(b);
}

/**
 * roundRobin under local_load: the cursor's member, unless another has at least ROUND_ROBIN_SKIP_GAP fewer in flight;
 * then the least loaded, ties to the next in rotation order after the cursor's.
 */
function skipIndex(
  members: readonly RoutingCandidate[],
  cursorIndex: number,
  load: NonNullable<SelectionDeps['load']>,
): number {
  const cursorLoad = load.inFlight(members[cursorIndex]!);
  if (cursorLoad < ROUND_ROBIN_SKIP_GAP) return cursorIndex;
  let best = cursorIndex;
  let bestLoad = cursorLoad;
  for (let step = 1; step < members.length; step++) {
    const i = (cursorIndex + step) % members.length;
    const l = load.inFlight(members[i]!);
    if (l < bestLoad) {
      best = i;
      bestLoad = l;
    }
  }
  return cursorLoad - bestLoad >= ROUND_ROBIN_SKIP_GAP ? best : cursorIndex;
}

function pickIndex(
  mode: SelectionMode,
  members: readonly RoutingCandidate[],
  cursorKey: string,
  snapshot: RoutingSnapshot,
  deps: SelectionDeps,
): number {
  switch (mode) {
    case 'deterministic':
      return 0;
    case 'roundRobin': {
      const cursor = snapshot.cursors.get(cursorKey) ?? 0;
      snapshot.cursors.set(cursorKey, (cursor + 1) % Number.MAX_SAFE_INTEGER);
      return cursor % members.length;
    }
    case 'random':
      return Math.min(members.length - 1, Math.floor(deps.random() * members.length));
    case 'weightedRandom': {
      // Summed and walked in member order with no weights array: the same arithmetic, so the same picks.
      let total = 0;
      for (let i = 0; i < members.length; i++) total += weightOf(members[i]!);
      if (total <= 0) return 0;
      let point = deps.random() * total;
      for (let i = 0; i < members.length; i++) {
        point -= weightOf(members[i]!);
        if (point < 0) return i;
      }
      return members.length - 1;
    }
    default:
      return 0;
  }
}

export function selectCandidate(
  snapshot: RoutingSnapshot,
  request: SelectionRequest,
  deps: SelectionDeps,
): SelectionOutcome {
  const routes = snapshot.routesFor(request.kind, request.name);
  if (routes === undefined || routes.groups.length === 0) return { kind: 'no_candidate' };
  const capKey = routes.key;
  const sessionKey = deps.affinity !== undefined ? request.sessionKey : undefined;
  const affinityKey = sessionKey === undefined ? undefined : `${capKey}\u0000${sessionKey}`;

  if (affinityKey !== undefined && deps.affinity !== undefined) {
    const boundId = deps.affinity.lookup(affinityKey, deps.nowMs());
    if (boundId !== undefined) {
      for (const group of routes.groups) {
        const bound = group.find((c) => c.stableId === boundId);
        if (bound !== undefined && viableForBound(bound, deps)) {
          const alternates = group.filter((c) => c !== bound && viableForNew(c, deps));
          return { kind: 'selected', candidate: bound, alternates, affinity: 'bound', path: undefined };
        }
      }
    }
  }

  for (let g = 0; g < routes.groups.length; g++) {
    const group = routes.groups[g]!;
    // The whole group when every member is viable (the usual case): no filtered copy per request.
    const members = group.every((c) => viableForNew(c, deps)) ? group : group.filter((c) => viableForNew(c, deps));
    if (members.length === 0) continue;
    const mode = snapshot.mode;
    const load = deps.load;
    let index: number;
    let path: LoadPath | undefined;
    if (load === undefined || mode === 'deterministic') {
      // deterministic stays first with local_load too: the operator ranked the group for one destination, and moving
      // load off it is admission (existing_only), which the operator owns.
      index = pickIndex(mode, members, routes.cursorKeys[g]!, snapshot, deps);
    } else if (mode === 'roundRobin') {
      // The cursor advances as without local_load, so the rotation goes on from where it was.
      const cursorIndex = pickIndex(mode, members, routes.cursorKeys[g]!, snapshot, deps);
      index = skipIndex(members, cursorIndex, load);
      path = index === cursorIndex ? 'cursor' : 'skipped';
    } else {
      // Power of two choices: two independent draws by the mode's weights, the lighter taken, ties to the first.
      const first = pickIndex(mode, members, routes.cursorKeys[g]!, snapshot, deps);
      const second = pickIndex(mode, members, routes.cursorKeys[g]!, snapshot, deps);
      const takeSecond = second !== first && lighter(members[second]!, members[first]!, mode, load);
      index = takeSecond ? second : first;
      path = takeSecond ? 'second_draw' : 'first_draw';
    }
    const candidate = members[index] ?? members[0]!;
    // Retry order: the members after the chosen one, wrapping around, so a retry moves on like the mode would.
    const alternates = members.length === 1 ? NO_ALTERNATES : [...members.slice(index + 1), ...members.slice(0, index)];
    if (affinityKey !== undefined && deps.affinity !== undefined)
      deps.affinity.bind(affinityKey, candidate.stableId, deps.nowMs());
    return { kind: 'selected', candidate, alternates, affinity: affinityKey === undefined ? 'none' : 'new', path };
  }
  return { kind: 'all_excluded' };
}
