// The routing decision (SPEC §3.1), pure over a snapshot: the first viable selection group, then the overlay's
// mode inside it, with optional session affinity. Randomness, the clock and endpoint health come in as arguments,
// so every rule is table-tested without sockets or sleeps.
import type { CandidateKind, SelectionMode } from '../../../schemas/overlay/types.ts';
import type { AffinityTable } from './affinity.ts';
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
}

export type SelectionOutcome =
  | {
      readonly kind: 'selected';
      readonly candidate: RoutingCandidate;
      /** Other viable candidates of the same group in retry order (at most one is ever tried). */
      readonly alternates: readonly RoutingCandidate[];
      readonly affinity: 'bound' | 'new' | 'none';
    }
  /** The overlay has no candidate for this capability: 404. */
  | { readonly kind: 'no_candidate' }
  /** The capability is known but every candidate is excluded or closed to new sessions: 503. */
  | { readonly kind: 'all_excluded' };

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
      const weights = members.map((m) => Math.max(0, m.candidate.traffic_weight ?? 1));
      const total = weights.reduce((a, b) => a + b, 0);
      if (total <= 0) return 0;
      let point = deps.random() * total;
      for (let i = 0; i < weights.length; i++) {
        point -= weights[i] ?? 0;
        if (point < 0) return i;
      }
      return weights.length - 1;
    }
    default:
      return 0;
  }
}

export function selectCandidate(snapshot: RoutingSnapshot, request: SelectionRequest, deps: SelectionDeps): SelectionOutcome {
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
          return { kind: 'selected', candidate: bound, alternates, affinity: 'bound' };
        }
      }
    }
  }

  for (let g = 0; g < routes.groups.length; g++) {
    const group = routes.groups[g]!;
    // The whole group when every member is viable (the usual case): no filtered copy per request.
    const members = group.every((c) => viableForNew(c, deps)) ? group : group.filter((c) => viableForNew(c, deps));
    if (members.length === 0) continue;
    const index = pickIndex(snapshot.mode, members, routes.cursorKeys[g]!, snapshot, deps);
    const candidate = members[index] ?? members[0]!;
    // Retry order: the members after the chosen one, wrapping around, so a retry moves on like the mode would.
    const alternates = members.length === 1 ? NO_ALTERNATES : [...members.slice(index + 1), ...members.slice(0, index)];
    if (affinityKey !== undefined && deps.affinity !== undefined) deps.affinity.bind(affinityKey, candidate.stableId, deps.nowMs());
    return { kind: 'selected', candidate, alternates, affinity: affinityKey === undefined ? 'none' : 'new' };
  }
  return { kind: 'all_excluded' };
}
