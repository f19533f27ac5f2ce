// Applies membership news (alive / suspect / dead) to the member table and performs what each outcome implies:
// re-gossip it, start or settle a Lifeguard suspicion, refute an accusation about ourselves, and tell listeners.
// The rules themselves are in member-table.ts; this is their effects, kept apart from sockets and timers of the
// protocol loops.
import type { AliveMessage, DeadMessage, SuspectMessage } from '../../../schemas/generated/gossip-swim-packet.ts';
import type { Awareness } from './awareness.ts';
import type { BroadcastQueue } from './broadcast-queue.ts';
import type { Clock } from './clock.ts';
import type { SwimConfig } from './config.ts';
import type { DropCounter } from './drop-counter.ts';
import type { MemberTable } from './member-table.ts';
import type { SwimDropReason } from './reasons.ts';
import { Suspicion } from './suspicion.ts';
import { WireMessage } from './wire.ts';

export type MembershipMessage = AliveMessage | SuspectMessage | DeadMessage;
export type MemberEvent = 'join' | 'update' | 'leave';

export interface UpdateContext {
  readonly config: SwimConfig;
  readonly clock: Clock;
  readonly table: MemberTable;
  readonly broadcasts: BroadcastQueue;
  readonly awareness: Awareness;
  readonly drops: DropCounter<SwimDropReason>;
  readonly notify: (event: MemberEvent, name: string) => void;
  readonly running: () => boolean;
}

export class MembershipUpdates {
  readonly #c: UpdateContext;
  readonly #suspicions = new Map<string, Suspicion>();

  constructor(context: UpdateContext) {
    this.#c = context;
  }

  apply(m: MembershipMessage): void {
    const { table, clock, drops, config, notify } = this.#c;
    const now = clock.now();
    const rebroadcast = (): void => {
      this.#c.broadcasts.enqueue(`m:${m.name}`, new WireMessage(m));
    };
    if (m.k === 'alive') {
      const before = table.get(m.name)?.state;
      const outcome = table.applyAlive(m, now);
      if (outcome === 'refute') this.#refute(m.inc, false);
      else if (outcome === 'members_full')
        drops.drop('members_full', `alive ${m.name}: ${config.maxMembers} members already tracked`);
      else if (outcome === 'address_conflict')
        drops.drop('address_conflict', `alive ${m.name} from ${m.addr} while it is live elsewhere`);
      else if (outcome === 'added' || outcome === 'updated') {
        this.#cancel(m.name);
        rebroadcast();
        notify(outcome === 'added' || before === 'dead' || before === 'left' ? 'join' : 'update', m.name);
      }
      return;
    }
    if (m.k === 'suspect') {
      const outcome = table.applySuspect(m, now);
      if (outcome === 'refute') this.#refute(m.inc, true);
      else if (outcome === 'confirm') {
        // Lifeguard: a new independent accuser shortens the timeout and is passed on so others count it too.
        if (this.#suspicions.get(m.name)?.confirm(m.by)) rebroadcast();
      } else if (outcome === 'suspected') {
        this.#suspect(m.name, m.by);
        rebroadcast();
        notify('update', m.name);
      }
      return;
    }
    const outcome = table.applyDead(m, now);
    if (outcome === 'refute') this.#refute(m.inc, true);
    else if (outcome === 'dead' || outcome === 'left') {
      this.#cancel(m.name);
      rebroadcast();
      notify('leave', m.name);
    }
  }

  /** Cancels every suspicion timer (shutdown). */
  clear(): void {
    for (const s of this.#suspicions.values()) s.cancel();
    this.#suspicions.clear();
  }

  #refute(accusedInc: number, accused: boolean): void {
    const { table } = this.#c;
    const inc = table.refute(accusedInc);
    // Being accused while alive means others cannot hear us in time: our own health is suspect (Lifeguard).
    if (accused) this.#c.awareness.applyDelta(1);
    const self = table.self;
    this.#c.broadcasts.enqueue(
      `m:${self.name}`,
      new WireMessage({ k: 'alive', name: self.name, addr: self.addr, inc }),
    );
  }

  #suspect(name: string, accuser: string): void {
    const { config, table, clock } = this.#c;
    this.#cancel(name);
    const max = Math.min(config.suspicionTimeoutMs, config.suspectRetentionMs);
    const min = Math.max(1, Math.floor(max / config.suspicionShrinkDivisor));
    // k: confirmations we can expect at most; the accuser and the suspect itself cannot confirm.
    const expected = Math.max(0, Math.min(config.indirectChecks, table.liveCount() - 2));
    const s = new Suspicion(clock, accuser, expected, min, max, () => {
      this.#suspicions.delete(name);
      const m = table.get(name);
      if (this.#c.running() && m && m.state === 'suspect')
        this.apply({ k: 'dead', name, inc: m.incarnation, by: table.self.name });
    });
    this.#suspicions.set(name, s);
  }

  #cancel(name: string): void {
    this.#suspicions.get(name)?.cancel();
    this.#suspicions.delete(name);
  }
}
