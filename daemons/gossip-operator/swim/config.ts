// SWIM timing and bounds. Every field carries its unit in its name; each comment says what it controls, how it
// scales with the member count N, and what raising it costs. Defaults live in `wanProfile()` (the reference
// values of docs/contract.md §5) and `loopbackProfile()` (derived from it by one time scale); `spec.swim` of a
// GridNetwork is merged over a profile by `applySwimSpec`, which validates once, at the edge.
import { checkDuration, type DurationRule } from '../../../schemas/durations.ts';

export interface SwimConfig {
  /** Member name: the site name. One SWIM member per site, never per pod. */
  readonly name: string;
  /** Period of the failure detector: one member is probed per period. Raising it halves probe traffic and doubles
   * detection time. Scaled up by the local health multiplier (awareness) while this node is unhealthy. */
  readonly probeIntervalMs: number;
  /** How long a direct ping waits for its ack before indirect probes start (the "probe RTT"). Must be below
   * probeIntervalMs; set it above the worst normal round trip (99th percentile) between sites. */
  readonly probeTimeoutMs: number;
  /** k: members asked to ping the target on our behalf when the direct ping fails (`spec.swim.gossipNodes`,
   * documented in the GridNetwork CRD as the indirect probe fanout). More means fewer false suspicions under
   * loss, at k * 4 packets per failed probe. Also the number of independent confirmations that shrink a
   * suspicion to its minimum (Lifeguard). */
  readonly indirectChecks: number;
  /** Suspect -> dead with no independent confirmation (`spec.swim.suspicionTimeout`). With c confirmations out of
   * k = min(indirectChecks, N - 2) the timeout shrinks as max - (max - min) * log(c + 1) / log(k + 1), where
   * min = suspicionTimeoutMs / suspicionShrinkDivisor. Longer means fewer false deaths, slower failover. */
  readonly suspicionTimeoutMs: number;
  /** min = suspicionTimeoutMs / this. 3 keeps the fully confirmed timeout at 10 s in the WAN profile. */
  readonly suspicionShrinkDivisor: number;
  /** Upper bound on any suspicion, whatever spec.swim asks for: a suspect is settled (dead) after this. */
  readonly suspectRetentionMs: number;
  /** Gossip round period: queued broadcasts go to gossipFanout random members. Only rounds with something to
   * say send a packet, so an idle mesh costs nothing here. */
  readonly gossipIntervalMs: number;
  /** Members per gossip round. Dissemination takes about log_fanout(N) rounds. */
  readonly gossipFanout: number;
  /** Each broadcast is sent retransmitMult * ceil(log10(N + 1)) times (at least ceil(ln(N + 1)) + 7: see
   * retransmitLimit), so it reaches all N members with high probability while its cost grows only with log N. */
  readonly retransmitMult: number;
  /** Broadcasts held at once; beyond it the most-sent one is dropped (counted as queue_full). */
  readonly maxQueuedBroadcasts: number;
  /** Full-state TCP push-pull with one random member, so large states and healed partitions converge. Scaled
   * by ceil(log2(N) - log2(32)) + 1 above 32 members (memberlist's pushPullScale) to keep TCP load flat. */
  readonly pushPullIntervalMs: number;
  /** Deadline for one push-pull exchange (connect, send, receive). */
  readonly pushPullTimeoutMs: number;
  /** Seeds that are not currently alive members are announced to (push-pull) this often, so a partition
   * that isolated a whole side heals through its seeds. */
  readonly announceIntervalMs: number;
  /** Until the first successful join, seeds are retried this often ("re-announce until joined"). */
  readonly joinRetryIntervalMs: number;
  /** Bound on one DNS lookup of a seed host name; a slow resolver must not stall joining other seeds. */
  readonly dnsTimeoutMs: number;
  /** Dead and left members are forgotten after this (reference: 300 s), freeing their slot in maxMembers. */
  readonly deadMemberTtlMs: number;
  /** Dead members still receive gossip for this long, so a falsely declared member learns it and refutes. */
  readonly gossipToTheDeadMs: number;
  /** Ceiling of the local health multiplier: probe interval and timeout are multiplied by (score + 1) with score
   * in [0, awarenessMaxMultiplier - 1]. Higher tolerates a slower local node, at slower detection while unhealthy. */
  readonly awarenessMaxMultiplier: number;
  /** Members tracked at once (including dead ones not yet forgotten). New members beyond it are dropped. */
  readonly maxMembers: number;
  /** Largest UDP datagram sent or accepted, including the 33-byte frame overhead. 1400 stays under common WAN MTUs. */
  readonly maxPacketBytes: number;
  /** Largest push-pull (TCP) message, framed. Bounds memory per exchange; accepted only after the stream's
   * opening frame authenticated. */
  readonly maxMessageBytes: number;
  /** Largest opening frame of an inbound push-pull stream: what an unauthenticated peer can make us buffer per
   * stream (the frame declares the request's length and is decrypted before the request is read). */
  readonly maxOpeningBytes: number;
  /** Unauthenticated inbound streams held at once (bytes held: this * maxOpeningBytes). A new connection beyond it
   * evicts the oldest, so idle connections cannot lock a real peer out: a peer sends its opening frame at once. */
  readonly maxPendingStreams: number;
  /** Authenticated push-pull streams served at once (memory: this * maxMessageBytes). Beyond it a stream is closed
   * after its opening frame; the peer retries on its next push-pull round. Well above the N-independent inbound
   * rate (one push-pull per interval per member, fanout on syncNow). */
  readonly maxInboundStreams: number;
  /** Packets whose sender timestamp is further than this from our clock are dropped; nonces are remembered this
   * long. Must exceed the clock skew between sites. */
  readonly replayWindowMs: number;
  /** Bound on the remembered nonces (oldest evicted first). */
  readonly replayCacheMaxEntries: number;
}

export type SwimTiming = Omit<SwimConfig, 'name'>;

/** docs/contract.md §5 reference profile (WAN). */
export function wanProfile(): SwimTiming {
  return {
    probeIntervalMs: 5_000,
    probeTimeoutMs: 3_000,
    indirectChecks: 3,
    suspicionTimeoutMs: 30_000,
    suspicionShrinkDivisor: 3,
    suspectRetentionMs: 120_000,
    gossipIntervalMs: 500,
    gossipFanout: 4,
    retransmitMult: 4,
    maxQueuedBroadcasts: 4_096,
    pushPullIntervalMs: 30_000,
    pushPullTimeoutMs: 10_000,
    announceIntervalMs: 60_000,
    joinRetryIntervalMs: 5_000,
    dnsTimeoutMs: 2_000,
    deadMemberTtlMs: 300_000,
    gossipToTheDeadMs: 30_000, // one suspicion timeout: the window in which a refutation is useful
    awarenessMaxMultiplier: 8,
    maxMembers: 1_024,
    maxPacketBytes: 1_400,
    maxMessageBytes: 4 * 1024 * 1024,
    maxOpeningBytes: 1_024,
    maxPendingStreams: 16,
    maxInboundStreams: 16,
    replayWindowMs: 300_000,
    replayCacheMaxEntries: 100_000,
  };
}

const TIME_FIELDS = [
  'probeIntervalMs',
  'probeTimeoutMs',
  'suspicionTimeoutMs',
  'suspectRetentionMs',
  'gossipIntervalMs',
  'pushPullIntervalMs',
  'pushPullTimeoutMs',
  'announceIntervalMs',
  'joinRetryIntervalMs',
  'deadMemberTtlMs',
  'gossipToTheDeadMs',
] as const;

/**
 * Loopback profile for tests, the local grid runner and benchmarks: the WAN profile with every protocol timer
 * divided by `speedup` (default 25: 200 ms probes, 1.2 s suspicion). Bounds, DNS and replay window stay as they are.
 */
export function loopbackProfile(speedup = 25): SwimTiming {
  const wan = wanProfile();
  const out: Record<string, number> = { ...wan };
  for (const f of TIME_FIELDS) out[f] = Math.max(1, Math.round(wan[f] / speedup));
  return out as unknown as SwimTiming;
}

/** The `spec.swim` block of a GridNetwork. Durations as schemas/durations.ts parses them ("5s", "1500ms"). */
export interface GridNetworkSwimSpec {
  readonly probeInterval?: string;
  readonly suspicionTimeout?: string;
  readonly gossipNodes?: number;
}

export class SwimConfigError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field}: ${message}`);
    this.name = 'SwimConfigError';
    this.field = field;
  }
}

/** `spec.swim.probeInterval` and `suspicionTimeout`: the CRD pattern `^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$`, i.e. >= 1 s. */
export const SWIM_PROBE_INTERVAL_RULE: DurationRule = { units: ['s', 'ms'], minMs: 1_000, example: '5s' };
export const SWIM_SUSPICION_TIMEOUT_RULE: DurationRule = { units: ['s', 'ms'], minMs: 1_000, example: '30s' };

function swimDuration(field: string, text: string, rule: DurationRule): number {
  const checked = checkDuration(field, text, rule);
  if (!checked.ok) throw new SwimConfigError(field, checked.problem);
  return checked.ms;
}

/**
 * Merges `spec.swim` over a profile and validates the result. Errors name the field and the bad value. Deriving:
 * a new probe interval keeps the profile's timeout-to-interval ratio so probeTimeoutMs stays below it.
 */
export function applySwimSpec(name: string, base: SwimTiming, spec: GridNetworkSwimSpec | undefined): SwimConfig {
  const out: { -readonly [K in keyof SwimConfig]: SwimConfig[K] } = { ...base, name };
  if (spec?.probeInterval !== undefined) {
    const ms = swimDuration('spec.swim.probeInterval', spec.probeInterval, SWIM_PROBE_INTERVAL_RULE);
    out.probeTimeoutMs = Math.max(1, Math.round((base.probeTimeoutMs / base.probeIntervalMs) * ms));
    out.probeIntervalMs = ms;
  }
  if (spec?.suspicionTimeout !== undefined) {
    out.suspicionTimeoutMs = swimDuration(
      'spec.swim.suspicionTimeout',
      spec.suspicionTimeout,
      SWIM_SUSPICION_TIMEOUT_RULE,
    );
  }
  if (spec?.gossipNodes !== undefined) {
    if (!Number.isInteger(spec.gossipNodes) || spec.gossipNodes < 1 || spec.gossipNodes > 16) {
      throw new SwimConfigError('spec.swim.gossipNodes', `${String(spec.gossipNodes)} must be an integer from 1 to 16`);
    }
    out.indirectChecks = spec.gossipNodes;
  }
  validateSwimConfig(out);
  return out;
}

export function validateSwimConfig(c: SwimConfig): void {
  if (!c.name || c.name.length > 253) throw new SwimConfigError('name', 'must be a site name of 1-253 characters');
  for (const [field, value] of Object.entries(c)) {
    if (field === 'name') continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new SwimConfigError(field, `${String(value)} must be a positive number`);
    }
  }
  if (c.probeTimeoutMs >= c.probeIntervalMs) {
    throw new SwimConfigError(
      'probeTimeoutMs',
      `${c.probeTimeoutMs} must be below probeIntervalMs (${c.probeIntervalMs}), or probes overlap`,
    );
  }
  if (c.suspicionShrinkDivisor < 1)
    throw new SwimConfigError('suspicionShrinkDivisor', `${c.suspicionShrinkDivisor} must be at least 1`);
  if (c.maxPacketBytes < 512 || c.maxPacketBytes > 65_000) {
    throw new SwimConfigError('maxPacketBytes', `${c.maxPacketBytes} must be from 512 to 65000`);
  }
  if (c.maxMessageBytes < c.maxPacketBytes)
    throw new SwimConfigError('maxMessageBytes', 'must be at least maxPacketBytes');
  // An opening frame carries the header (name up to 253, address up to 300 characters) and one short message.
  if (c.maxOpeningBytes < 768 || c.maxOpeningBytes > c.maxPacketBytes) {
    throw new SwimConfigError(
      'maxOpeningBytes',
      `${c.maxOpeningBytes} must be from 768 to maxPacketBytes (${c.maxPacketBytes})`,
    );
  }
}

/** Missed copies the retransmit floor allows: e^-7 ≈ 0.09 % chance that some member misses a broadcast. */
const RETRANSMIT_FLOOR_MARGIN = 7;

/**
 * Retransmit limit of one broadcast: retransmitMult * ceil(log10(N + 1)) (memberlist's), but at least
 * ceil(ln(N + 1)) + 7. Each of N members sends a broadcast L times to random members, so one member misses every
 * copy with probability about e^-L and some member with about N * e^-L; that member then learns the news only
 * from a push-pull, seconds later. memberlist's formula alone leaves that at 15 % per broadcast at N = 8 and 2 %
 * at N = 64, which in the simulation (npm run bench:gossip-sim) is a join known by all after 4.5 s instead of 0.3 s;
 * the floor keeps it below 0.1 % at every N, at the cost of more packets only while there is news.
 */
export function retransmitLimit(retransmitMult: number, memberCount: number): number {
  const n = Math.max(0, memberCount) + 1;
  return Math.max(retransmitMult * Math.ceil(Math.log10(n)), Math.ceil(Math.log(n)) + RETRANSMIT_FLOOR_MARGIN);
}

/** Push-pull interval scaled for N (memberlist pushPullScale): flat up to 32 members, then +1x per doubling. */
export function pushPullIntervalFor(intervalMs: number, memberCount: number): number {
  if (memberCount <= 32) return intervalMs;
  const mult = Math.ceil(Math.log2(memberCount) - Math.log2(32)) + 1;
  return intervalMs * mult;
}
