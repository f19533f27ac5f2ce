// The membership rules of SWIM with incarnation numbers, as pure transitions over a table. Each apply* returns
// what happened; membership.ts performs the effects (broadcasts, suspicion timers, events). Keeping the rules
// here, apart from timers and sockets, lets the table test pin every case.
import type { AliveMessage, DeadMessage, SuspectMessage } from '../../../schemas/generated/gossip-swim-packet.ts';

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

export class MemberTable {
  readonly self: Member;
  readonly #members = new Map<string, Member>();
  readonly #maxMembers: number;
  /** Set while leaving, so a "dead" about ourselves is not refuted. */
  leaving = false;

  constructor(name: string, addr: string, incarnation: number, nowMs: number, maxMembers: number) {
    this.self = { name, addr, incarnation, state: 'alive', stateChangedAtMs: nowMs };
    this.#members.set(name, this.self);
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

  /** Members that are alive or suspect, self included: N for the log(N) scalings. */
  liveCount(): number {
    let n = 0;
    for (const m of this.#members.values()) if (m.state === 'alive' || m.state === 'suspect') n++;
    return n;
  }

  forget(name: string): boolean {
    if (name === this.self.name) return false;
    return this.#members.delete(name);
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
      if (a.inc > this.self.incarnation || (a.addr !== this.self.addr && a.inc >= this.self.incarnation)) return 'refute';
      return 'ignored';
    }
    const m = this.#members.get(a.name);
    if (!m) {
      if (this.#members.size >= this.#maxMembers) return 'members_full';
      this.#members.set(a.name, { name: a.name, addr: a.addr, incarnation: a.inc, state: 'alive', stateChangedAtMs: nowMs });
      return 'added';
    }
    if (m.addr !== a.addr) {
      // A dead or departed site may come back on a new address; a live one may not be hijacked.
      if (m.state === 'alive' || m.state === 'suspect') return 'address_conflict';
      m.addr = a.addr;
      m.incarnation = a.inc;
      m.state = 'alive';
      m.stateChangedAtMs = nowMs;
      return 'updated';
    }
    if (a.inc <= m.incarnation) return 'ignored';
    m.incarnation = a.inc;
    if (m.state !== 'alive') {
      m.state = 'alive';
      m.stateChangedAtMs = nowMs;
    }
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
    if (m.state !== 'suspect') {
      m.state = 'suspect';
      m.stateChangedAtMs = nowMs;
    }
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
    m.state = d.by === d.name ? 'left' : 'dead';
    m.stateChangedAtMs = nowMs;
    return m.state;
  }
}
