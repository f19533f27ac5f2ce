// Bridges SWIM and the CRDT view: implements the membership's StateDelegate. Records travel two ways:
// piggybacked broadcasts (re-broadcast by every member that merged something new, so news spreads epidemically
// with SWIM's retransmit bound) and the periodic TCP push-pull of all records (what makes large states and
// healed partitions converge). Payloads are versioned; a payload of an unknown major is dropped and counted.
import type { KeyObject } from 'node:crypto';
import type { StateDelegate } from '../swim/delegate.ts';
import type { Membership } from '../swim/membership.ts';
import { systemClock, type Clock, type TimerHandle } from '../swim/clock.ts';
import type { SignedStateRecord } from './records.ts';
import type { SignerResolver, StateStore } from './state-store.ts';

/** Delegate payload major version. 1: {v, rec} broadcasts and {v, records} push-pull state. */
export const STATE_PAYLOAD_MAJOR = 1;

export interface RecordBroadcast {
  readonly v: number;
  readonly rec: SignedStateRecord;
}

export interface RecordBatch {
  readonly v: number;
  readonly records: readonly SignedStateRecord[];
}

/** Resolver that also knows this site's own public key. */
export function withOwnKey(localSite: string, ownPublicKey: KeyObject, resolve: SignerResolver): SignerResolver {
  return (site) => (site === localSite ? ownPublicKey : resolve(site));
}

export class GossipState implements StateDelegate {
  readonly store: StateStore;
  #membership: Membership | undefined;
  #sweepTimer: TimerHandle | undefined;

  constructor(store: StateStore) {
    this.store = store;
  }

  /**
   * Connects to a membership: departures start the spend TTL, returns cancel it, and a sweep expires spend
   * slots every `sweepIntervalMs`.
   */
  attach(membership: Membership, clock: Clock = systemClock, sweepIntervalMs = 60_000): void {
    this.#membership = membership;
    membership.on('leave', (m) => this.store.markDeparted(m.name));
    membership.on('join', (m) => this.store.markPresent(m.name));
    const sweep = (): void => {
      this.store.sweep();
      this.#sweepTimer = clock.schedule(sweepIntervalMs, sweep);
    };
    this.#sweepTimer = clock.schedule(sweepIntervalMs, sweep);
  }

  detach(): void {
    this.#sweepTimer?.cancel();
    this.#membership = undefined;
  }

  /** For LocalPublisher.broadcast. A record too large for one packet goes out by push-pull at once instead. */
  broadcast = (key: string, rec: SignedStateRecord): boolean => {
    const payload: RecordBroadcast = { v: STATE_PAYLOAD_MAJOR, rec };
    const m = this.#membership;
    if (!m) return false;
    if (m.broadcast(key, payload)) return true;
    void m.syncNow();
    return false;
  };

  notifyMessage(data: unknown, from: string): void {
    if (!isPayload(data) || !('rec' in data)) {
      this.store.drops.drop('bad_payload', `broadcast from ${from} is not a v${STATE_PAYLOAD_MAJOR} record broadcast`);
      return;
    }
    if (this.store.apply(data.rec, from) === 'merged') {
      const rec = data.rec as SignedStateRecord;
      this.broadcast(recordKey(rec), rec);
    }
  }

  localState(): RecordBatch {
    return { v: STATE_PAYLOAD_MAJOR, records: this.store.signedRecords() };
  }

  mergeRemoteState(state: unknown, _join: boolean, from: string): void {
    if (!isPayload(state) || !('records' in state) || !Array.isArray(state.records)) {
      this.store.drops.drop('bad_payload', `push-pull state from ${from} is not a v${STATE_PAYLOAD_MAJOR} record batch`);
      return;
    }
    const limit = this.store.limits.maxOrigins * this.store.limits.maxRecordsPerOrigin;
    for (const rec of (state.records as unknown[]).slice(0, limit)) {
      // Push-pull already reaches everyone eventually; re-broadcasting here would turn each exchange into a storm.
      this.store.apply(rec, from);
    }
  }
}

function isPayload(data: unknown): data is { v: number; rec?: unknown; records?: unknown } {
  return typeof data === 'object' && data !== null && (data as { v?: unknown }).v === STATE_PAYLOAD_MAJOR;
}

function recordKey(rec: SignedStateRecord): string {
  try {
    return String((JSON.parse(rec.body) as { key?: unknown }).key);
  } catch {
    return rec.signer;
  }
}
