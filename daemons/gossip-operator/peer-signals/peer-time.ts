/**
 * The PeerTimeValid state machine, pure: the poller feeds it one round of answers and asks it for the condition.
 * Rules:
 * - "True means no polled peer has a rejected timestamp; False means at least one does."
 * - "A peer that does not answer keeps its standing, a peer that leaves membership is dropped, and one clean
 *   answer restores its validity."
 * - "The operator conservatively preserves an existing False condition after restarting until every currently
 *   polled peer has answered or left membership."
 * - "Unavailable secure polling is not a clean round and does not establish recovery."
 * - "The condition is written only when its status, its message or the generation changes."
 */

export const PEER_TIME_VALID = 'PeerTimeValid';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface PeerTimeCondition {
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
}

/** What one peer did in one round. `rejectedRows` counts rows refused for skew. */
export type PeerAnswer = { readonly kind: 'answered'; readonly rejectedRows: number } | { readonly kind: 'no_answer' };

export interface PeerTimeState {
  /** Peers with a standing: true = its last answer had a rejected age. */
  readonly standing: ReadonlyMap<string, boolean>;
  /** Peers that answered since this process started (restart preservation). */
  readonly answered: ReadonlySet<string>;
  /** The False condition found in status at start, preserved until every polled peer answered or left. */
  readonly preserved: PeerTimeCondition | undefined;
  /** Whether any round so far polled with TLS material: before that no True can be claimed. */
  readonly securePolled: boolean;
}

/** The state at process start, from the condition already in status (if any). */
export function initialPeerTimeState(stored: PeerTimeCondition | undefined): PeerTimeState {
  return {
    standing: new Map(),
    answered: new Set(),
    preserved:
      stored?.status === 'False' ? { status: 'False', reason: stored.reason, message: stored.message } : undefined,
    securePolled: false,
  };
}

export interface PeerRound {
  /** Every current SWIM member peer (own site excluded) at the round's start. */
  readonly members: readonly string[];
  /** Answers by peer; a member missing here did not answer. */
  readonly answers: ReadonlyMap<string, PeerAnswer>;
  /** False when this site has no TLS material to poll with: every peer counts as not answering. */
  readonly secure: boolean;
}

/** Applies one round's observations. */
export function observeRound(state: PeerTimeState, round: PeerRound): PeerTimeState {
  const members = new Set(round.members);
  const standing = new Map<string, boolean>();
  for (const [peer, rejected] of state.standing) if (members.has(peer)) standing.set(peer, rejected);
  const answered = new Set([...state.answered].filter((peer) => members.has(peer)));
  if (round.secure) {
    for (const peer of members) {
      const answer = round.answers.get(peer);
      if (answer?.kind !== 'answered') continue;
      standing.set(peer, answer.rejectedRows > 0);
      answered.add(peer);
    }
  }
  const preserved =
    state.preserved !== undefined && round.secure && [...members].every((peer) => answered.has(peer))
      ? undefined
      : state.preserved;
  return { standing, answered, preserved, securePolled: state.securePolled || round.secure };
}

function list(peers: readonly string[]): string {
  const shown = peers.slice(0, 8).join(', ');
  return peers.length > 8 ? `${shown} and ${peers.length - 8} more` : shown;
}

/**
 * The condition the state calls for; undefined means "leave whatever status holds" (no secure round yet and no
 * rejection known, so neither True nor False is established).
 */
export function peerTimeCondition(state: PeerTimeState): PeerTimeCondition | undefined {
  const rejected = [...state.standing]
    .filter(([, r]) => r)
    .map(([peer]) => peer)
    .sort();
  if (rejected.length > 0) {
    return {
      status: 'False',
      reason: 'PeerAgeRejected',
      message: `signal rows with a negative or implausible age from peer ${list(rejected)}: that peer's clock or age stamping is wrong; its other rows stay in use`,
    };
  }
  if (state.preserved !== undefined) return state.preserved;
  if (!state.securePolled) return undefined;
  return { status: 'True', reason: 'PeerAgesValid', message: 'no polled peer has a rejected signal age' };
}

/** Whether a write is due: only a changed status, message or generation (each write starts a reconcile). */
export function conditionWriteDue(
  stored: { status: string; message: string; observedGeneration?: number } | undefined,
  desired: PeerTimeCondition,
  generation: number,
): boolean {
  return (
    stored === undefined ||
    stored.status !== desired.status ||
    stored.message !== desired.message ||
    stored.observedGeneration !== generation
  );
}
