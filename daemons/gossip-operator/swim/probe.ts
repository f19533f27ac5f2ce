// The failure detector's probe round (SWIM §3 with Lifeguard's nacks): direct ping, then ping-req through k
// members, then suspicion. Acks are matched by sequence number and by sender (the member probed, or a helper asked
// to probe it), with the receive timestamp taken at receipt.
import { shuffled, type Clock, type RandomSource, type TimerHandle } from './clock.ts';
import type { Member, MemberSource } from './member-table.ts';

interface PendingAck {
  /** Members whose ack or nack counts for this entry; grows when a probe asks helpers. */
  readonly senders: Set<string>;
  readonly onAck: (receivedAtMs: number) => void;
  readonly onNack: (() => void) | undefined;
  readonly timer: TimerHandle | undefined;
}

/**
 * Outstanding acks by sequence number. Each entry expires on its own timer, or (timeoutMs undefined) lives until
 * its owner forgets it, so the table stays bounded either way.
 */
export class AckTable {
  readonly #pending = new Map<number, PendingAck>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  expect(
    seq: number,
    senders: Set<string>,
    timeoutMs: number | undefined,
    onAck: (receivedAtMs: number) => void,
    onNack?: () => void,
    onTimeout?: () => void,
  ): void {
    const timer =
      timeoutMs === undefined
        ? undefined
        : this.#clock.schedule(timeoutMs, () => {
            this.#pending.delete(seq);
            onTimeout?.();
          });
    this.#pending.set(seq, { senders, onAck, onNack, timer });
  }

  /**
   * 'unknown' for a late, duplicate or forged sequence number; 'unexpected' when `from` is not a member this
   * entry asked (an ack from anyone else proves nothing about the target, and the entry stays open).
   */
  ack(seq: number, from: string, receivedAtMs: number): 'acked' | 'unknown' | 'unexpected' {
    const p = this.#pending.get(seq);
    if (!p) return 'unknown';
    if (!p.senders.has(from)) return 'unexpected';
    this.#pending.delete(seq);
    p.timer?.cancel();
    p.onAck(receivedAtMs);
    return 'acked';
  }

  nack(seq: number, from: string): 'nacked' | 'unknown' | 'unexpected' {
    const p = this.#pending.get(seq);
    if (!p) return 'unknown';
    if (!p.senders.has(from)) return 'unexpected';
    p.onNack?.();
    return 'nacked';
  }

  /** Drops an entry without calling back. False when it is gone already (acked, expired, or cleared at shutdown). */
  forget(seq: number): boolean {
    const p = this.#pending.get(seq);
    if (!p) return false;
    p.timer?.cancel();
    return this.#pending.delete(seq);
  }

  clear(): void {
    for (const p of this.#pending.values()) p.timer?.cancel();
    this.#pending.clear();
  }

  get size(): number {
    return this.#pending.size;
  }
}

/**
 * Round-robin probe order over a shuffled member list (SWIM's "randomized round-robin"): every member is probed
 * once per round, bounding detection time to N probe periods in the worst case.
 */
export class ProbeTargets {
  #order: string[] = [];
  #index = 0;
  #arrivals = -1;
  readonly #random: RandomSource;

  constructor(random: RandomSource) {
    this.#random = random;
  }

  /** The next member to probe; O(1) per call except when members arrived or a round ends (O(N) then). */
  next(members: MemberSource, selfName: string): Member | undefined {
    const probeable = (m: Member | undefined): m is Member =>
      m !== undefined && m.name !== selfName && (m.state === 'alive' || m.state === 'suspect');
    // A member learned during a round joins the rest of this round at a random place (as in memberlist), so it is
    // probed within the round and not only after the next reshuffle: at N members that is up to N probe periods
    // later, which in the simulation is multi-second detection of a member that joined last.
    // Arrivals are rare, so the set of names in the order is built only then (held for good, it would double the
    // probe order's memory).
    if (members.arrivals !== this.#arrivals) {
      this.#arrivals = members.arrivals;
      const inOrder = new Set(this.#order);
      for (const m of members.all()) {
        if (inOrder.has(m.name) || !probeable(m)) continue;
        const at = this.#index + Math.floor(this.#random() * (this.#order.length - this.#index + 1));
        this.#order.splice(at, 0, m.name);
        inOrder.add(m.name);
      }
    }
    for (let tries = 0; tries <= this.#order.length + 1; tries++) {
      if (this.#index >= this.#order.length) {
        const live: string[] = [];
        for (const m of members.all()) if (probeable(m)) live.push(m.name);
        if (live.length === 0) return undefined;
        this.#order = shuffled(live, this.#random);
        this.#index = 0;
      }
      const m = members.get(this.#order[this.#index++] as string);
      if (probeable(m)) return m;
    }
    return undefined;
  }
}

/** What the probe round needs from the membership; kept narrow so the round can be read on its own. */
export interface ProbeHost {
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly selfName: string;
  readonly acks: AckTable;
  nextSeq(): number;
  /** Probe timeout and interval, already scaled by local health. */
  probeTimeoutMs(): number;
  probeIntervalMs(): number;
  indirectChecks(): number;
  /** Up to `count` distinct random members for which `eligible` holds (MemberTable.sample). */
  sampleMembers(count: number, eligible: (m: Member) => boolean): Member[];
  /** A suspect message about the target to piggyback on its ping (Lifeguard "buddy system"), if it is suspect. */
  pingTo(target: Member, seq: number): void;
  pingReqTo(via: Member, target: Member, seq: number): void;
  awarenessDelta(delta: number): void;
  suspect(target: Member): void;
}

/**
 * One probe of `target`; resolves when the round is settled (acked, suspected, or stopped by shutdown).
 *
 * Phases: a direct ping; after probeTimeoutMs without an ack, ping-req through k members; then the indirect
 * window (probeIntervalMs - probeTimeoutMs, both scaled by local health) measured from when the ping-reqs were
 * actually sent. If our own event loop stalled past both deadlines, the ping-reqs still get their whole window
 * instead of being sent and judged in the same instant: a stall of the prober is no evidence against the target.
 * A direct ack is accepted at any time until the verdict.
 */
export function probeMember(host: ProbeHost, target: Member): Promise<'acked' | 'suspected' | 'stopped'> {
  return new Promise((resolve) => {
    const seq = host.nextSeq();
    const timeoutMs = host.probeTimeoutMs();
    const indirectWindowMs = Math.max(1, host.probeIntervalMs() - timeoutMs);
    let settled = false;
    let expectedNacks = 0;
    let nacks = 0;
    let indirect: TimerHandle | undefined;
    let verdict: TimerHandle | undefined;
    const succeed = (): void => {
      if (settled) return;
      settled = true;
      indirect?.cancel();
      verdict?.cancel();
      host.awarenessDelta(-1);
      resolve('acked');
    };
    const fail = (): void => {
      if (settled) return;
      settled = true;
      // The entry only disappears unanswered when the member shut down (AckTable.clear): no verdict then.
      if (!host.acks.forget(seq)) {
        resolve('stopped');
        return;
      }
      // Lifeguard: nacks we were promised but never got point at our own network or load, not at the target.
      // With no member able to nack, the failed probe itself is the (weaker) evidence, as in memberlist.
      host.awarenessDelta(expectedNacks > 0 ? expectedNacks - nacks : 1);
      host.suspect(target);
      resolve('suspected');
    };
    // No expiry of its own: the entry lives until the verdict, however late our own timers run. Only the target
    // (directly) and the helpers asked below (forwarding) may answer it.
    const senders = new Set([target.name]);
    host.acks.expect(seq, senders, undefined, succeed, () => nacks++);
    host.pingTo(target, seq);
    indirect = host.clock.schedule(timeoutMs, () => {
      if (settled) return;
      const helpers = host.sampleMembers(
        host.indirectChecks(),
        (m) => m.name !== target.name && m.name !== host.selfName && m.state === 'alive',
      );
      expectedNacks = helpers.length;
      for (const via of helpers) {
        senders.add(via.name);
        host.pingReqTo(via, target, seq);
      }
      verdict = host.clock.schedule(indirectWindowMs, fail);
    });
  });
}

/**
 * How long a relay waits for the target before it nacks a ping-req. The nack must reach the requester inside its
 * indirect window (probeInterval - probeTimeout at full health), or every failed probe would charge the requester
 * for nacks that could never have arrived in time. 80 % of the shorter of the two leaves the return trip room.
 * A nack does not end the relay's wait: a later ack is still forwarded.
 */
export function nackTimeoutMs(probeTimeoutMs: number, probeIntervalMs: number): number {
  return Math.max(1, Math.floor(0.8 * Math.min(probeTimeoutMs, probeIntervalMs - probeTimeoutMs)));
}
