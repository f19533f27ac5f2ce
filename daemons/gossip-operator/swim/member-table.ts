// The membership rules of SWIM with incarnation numbers, as pure transitions over a table. Each apply* returns
// what happened; membership.ts performs the effects (broadcasts, suspicion timers, events). Keeping the rules
// here, apart from timers and sockets, lets the table test pin every case.
import type { AliveMessage, DeadMessage, SuspectMessage } from '../../../schemas/generated/gossip-swim-packet.ts';
import { shuffled, type RandomSource } from './clock.ts';

export type MemberState = 'alive' | 'suspect' | 'dead' | 'left';

export interface Member {
  readonly name: string;
  addr: string;
  incarnation: number;
  state: MemberState;
  /** Clock time of the last state transition (alive/suspect/dead/left); member age is measured from it. */
  stateChangedAtMs: number;
}

export type AliveOutcome = 'ignored' | 'added' | 'updated' | 'refute' | 'members_full' | 'address_conflict';
export type SuspectOutcome = 'ignored' | 'suspected' | 'confirm' | 'refute';
export type DeadOutcome = 'ignored' | 'dead' | 'left' | 'refute';

const isLive = (state: MemberState): boolean => state === 'alive' || state === 'suspect';

/** A member with its place in the table's array (for O(1) random picks and removal), kept on the member itself
 * rather than in a second map: a simulated 5,000-member grid holds 25 million entries. */
type Slotted = Member & { slot: number };

/** What the probe order needs of the table (probe.ts): a lookup, the members, and a count of arrivals. */
export interface MemberSource {
  /** Grows whenever a member is added or comes back to life, so a reader can tell it has members to take in. */
  readonly arrivals: number;
  get(name: string): Member | undefined;
  all(): Iterable<Member>;
}

export class MemberTable implements MemberSource {
  readonly self: Member;
  readonly #members = new Map<string, Member>();
  // The same members in an array (order irrelevant, removal by swapping with the last) for O(1) random picks, and
  // the live count kept on every transition: at 1,000 members, scanning the table for these on every packet and
  // every gossip round is most of an idle member's CPU in the simulation's profile.
  readonly #list: Slotted[] = [];
  readonly #maxMembers: number;
  readonly #gone = new Set<Member>();
  #live = 0;
  #arrivals = 0;
  /** Set while leaving, so a "dead" about ourselves is not refuted. */
  leaving = false;

  constructor(name: string, addr: string, incarnation: number, nowMs: number, maxMembers: number) {
    this.self = this.#insert({ name, addr, incarnation, state: 'alive', stateChangedAtMs: nowMs });
    this.#maxMembers = maxMembers;
  }

  get(name: string): Member | undefined {
    return this.#members.get(name);
  }

  all(): IterableIterator<Member> {
    return this.#members.values();
  }

  get size(): number {
    return this.#members.size;
  }

  get arrivals(): number {
    return this.#arrivals;
  }

  /** Members dead or left, not yet forgotten. */
  gone(): IterableIterator<Member> {
    return this.#gone.values();
  }

  /** Members that are alive or suspect, self included: N for the log(N) scalings. */
  liveCount(): number {
    return this.#live;
  }

  /**
   * Up to `count` distinct members for which `eligible` holds, uniformly at random. Random picks from the whole
   * table while eligible members are plenty; a full scan when the table is small or the picks come up short.
   */
  sample(count: number, random: RandomSource, eligible: (m: Member) => boolean): Member[] {
    const list = this.#list;
    if (count <= 0) return [];
    if (list.length > 16 * count) {
      const out: Member[] = [];
      for (let tries = 0; tries < 8 * count && out.length < count; tries++) {
        const m = list[Math.floor(random() * list.length)] as Member;
        if (!out.includes(m) && eligible(m)) out.push(m);
      }
      if (out.length === count) return out;
    }
    return shuffled(list.filter(eligible), random).slice(0, count);
  }

  forget(name: string): boolean {
    const m = this.#members.get(name);
    if (!m || m === this.self) return false;
    if (isLive(m.state)) this.#live--;
    this.#gone.delete(m);
    this.#members.delete(name);
    const i = (m as Slotted).slot;
    const last = this.#list.pop() as Slotted;
    if (last !== m) {
      this.#list[i] = last;
      last.slot = i;
    }
    return true;
  }

  #insert(member: Member): Member {
    const m: Slotted = Object.assign(member, { slot: this.#list.length });
    this.#members.set(m.name, m);
    this.#list.push(m);
    this.#live++;
    this.#arrivals++;
    return m;
  }

  /** The one place a known member changes state, so the live count and arrivals stay right. */
  #transition(m: Member, state: MemberState, nowMs: number): void {
    if (m.state === state) return;
    const was = isLive(m.state);
    if (was && !isLive(state)) {
      this.#live--;
      this.#gone.add(m);
    }
    if (!was && isLive(state)) {
      this.#live++;
      this.#arrivals++;
      this.#gone.delete(m);
    }
    m.state = state;
    m.stateChangedAtMs = nowMs;
  }

  /**
   * Raise our incarnation above `atLeast` (refutation); returns the new incarnation. Saturates at 2^53 - 1, the
   * schema's bound (a key holder accusing us at that incarnation cannot push us past what peers accept).
   */
  refute(atLeast: number): number {
    this.self.incarnation = Math.min(Number.MAX_SAFE_INTEGER, Math.max(this.self.incarnation, atLeast) + 1);
    return this.self.incarnation;
  }

  applyAlive(a: AliveMessage, nowMs: number): AliveOutcome {
    if (a.name === this.self.name) {
      // Someone speaks of us with a newer incarnation (our previous life) or another address: re-assert.
      if (a.inc > this.self.incarnation || (a.addr !== this.self.addr && a.inc >= this.self.incarnation))
        return 'refute';
      return 'ignored';
    }
    const m = this.#members.get(a.name);
    if (!m) {
      if (this.#members.size >= this.#maxMembers) return 'members_full';
      this.#insert({ name: a.name, addr: a.addr, incarnation: a.inc, state: 'alive', stateChangedAtMs: nowMs });
      return 'added';
    }
    if (m.addr !== a.addr) {
      // A dead or departed site may come back on a new address; a live one may not be hijacked.
      if (m.state === 'alive' || m.state === 'suspect') return 'address_conflict';
      m.addr = a.addr;
      m.incarnation = a.inc;
      this.#transition(m, 'alive', nowMs);
      return 'updated';
    }
    if (a.inc <= m.incarnation) return 'ignored';
    m.incarnation = a.inc;
    this.#transition(m, 'alive', nowMs);
    return 'updated';
  }

  applySuspect(s: SuspectMessage, nowMs: number): SuspectOutcome {
    if (s.name === this.self.name) {
      if (s.inc < this.self.incarnation || this.leaving) return 'ignored';
      return 'refute';
    }
    const m = this.#members.get(s.name);
    if (!m || s.inc < m.incarnation || m.state === 'dead' || m.state === 'left') return 'ignored';
    if (m.state === 'suspect') return s.inc === m.incarnation ? 'confirm' : this.#suspect(m, s.inc, nowMs);
    return this.#suspect(m, s.inc, nowMs);
  }

  #suspect(m: Member, inc: number, nowMs: number): SuspectOutcome {
    m.incarnation = inc;
    this.#transition(m, 'suspect', nowMs);
    return 'suspected';
  }

  applyDead(d: DeadMessage, nowMs: number): DeadOutcome {
    if (d.name === this.self.name) {
      if (this.leaving || d.inc < this.self.incarnation) return 'ignored';
      return 'refute';
    }
    const m = this.#members.get(d.name);
    if (!m || d.inc < m.incarnation || m.state === 'dead' || m.state === 'left') return 'ignored';
    m.incarnation = d.inc;
    this.#transition(m, d.by === d.name ? 'left' : 'dead', nowMs);
    return m.state as DeadOutcome;
  }
}
