// Bridges SWIM and the CRDT view: implements the membership's StateDelegate. Records travel two ways:
// piggybacked broadcasts (re-broadcast by every member that merged something new, so news spreads epidemically
// with SWIM's retransmit bound) and the periodic TCP push-pull of all records (what makes large states and
// healed partitions converge). A record too large for one packet is split into parts (record-parts.ts) that are
// broadcast like records and put back together by receivers. Payloads are versioned; a payload of an unknown
// major is dropped and counted.
import type { KeyObject } from 'node:crypto';
import type { StateDelegate } from '../swim/delegate.ts';
import type { Membership } from '../swim/membership.ts';
import { systemClock, type Clock, type TimerHandle } from '../swim/clock.ts';
import { PartAssembler, splitRecord, type RecordPart } from './record-parts.ts';
import type { SignedStateRecord } from './records.ts';
import type { SignerResolver, StateStore } from './state-store.ts';

/** Delegate payload major version. 1: {v, rec} and {v, part} broadcasts, {v, records} push-pull state. */
export const STATE_PAYLOAD_MAJOR = 1;

export interface RecordBroadcast {
  readonly v: number;
  readonly rec: SignedStateRecord;
}

export interface RecordPartBroadcast {
  readonly v: number;
  readonly part: RecordPart;
}

export interface RecordBatch {
  readonly v: number;
  readonly records: readonly SignedStateRecord[];
}

/** Resolver that also knows this site's own public key. */
export function withOwnKey(localSite: string, ownPublicKey: KeyObject, resolve: SignerResolver): SignerResolver {
  return (site) => (site === localSite ? ownPublicKey : resolve(site));
}

export interface GossipStateOptions {
  /** Sees every record received (broadcast, reassembled or pushed) before it is merged: how signing keys are learnt. */
  readonly learn?: (record: unknown) => void;
}

export class GossipState implements StateDelegate {
  readonly store: StateStore;
  readonly #learn: (record: unknown) => void;
  readonly #parts = new PartAssembler();
  #membership: Membership | undefined;
  #sweepTimer: TimerHandle | undefined;

  constructor(store: StateStore, options: GossipStateOptions = {}) {
    this.store = store;
    this.#learn = options.learn ?? (() => {});
  }

  /**
   * Connects to a membership: departed sites become eviction candidates, returns clear that, and a sweep collects
   * old tombstones every `sweepIntervalMs` (tenant spend is never swept).
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

  /**
   * For LocalPublisher.broadcast. A record too large for one packet is broadcast in parts; one too large for
   * MAX_RECORD_PARTS packets goes out by push-pull at once instead.
   */
  broadcast = (key: string, rec: SignedStateRecord): boolean => {
    const m = this.#membership;
    if (!m) return false;
    const payload: RecordBroadcast = { v: STATE_PAYLOAD_MAJOR, rec };
    const max = m.maxBroadcastBytes;
    const size = (data: unknown): number => Buffer.byteLength(JSON.stringify({ k: 'user', data }));
    if (size(payload) > max) {
      const parts = splitRecord(rec, (part) => size({ v: STATE_PAYLOAD_MAJOR, part }) <= max);
      if (parts !== undefined) {
        // Each part under its own key, so a newer version of the record replaces the older one's parts in the queue.
        for (const part of parts)
          m.broadcast(`${key}#${part.i}`, { v: STATE_PAYLOAD_MAJOR, part } satisfies RecordPartBroadcast);
        return true;
      }
    }
    if (m.broadcast(key, payload)) return true;
    void m.syncNow();
    return false;
  };

  notifyMessage(data: unknown, from: string): void {
    let rec: unknown;
    if (isPayload(data) && 'rec' in data) rec = data.rec;
    else if (isPayload(data) && 'part' in data) {
      const r = this.#parts.add(data.part);
      if (r.kind === 'incomplete') return;
      if (r.kind === 'bad') {
        this.store.drops.drop('bad_payload', `record part from ${from}: ${r.detail}`);
        return;
      }
      rec = r.record;
    } else {
      this.store.drops.drop('bad_payload', `broadcast from ${from} is not a v${STATE_PAYLOAD_MAJOR} record broadcast`);
      return;
    }
    this.#learn(rec);
    if (this.store.apply(rec, from) === 'merged') {
      const merged = rec as SignedStateRecord;
      this.broadcast(recordKey(merged), merged);
    }
  }

  localState(): RecordBatch {
    return { v: STATE_PAYLOAD_MAJOR, records: this.store.signedRecords() };
  }

  mergeRemoteState(state: unknown, _join: boolean, from: string): void {
    if (!isPayload(state) || !('records' in state) || !Array.isArray(state.records)) {
      this.store.drops.drop(
        'bad_payload',
        `push-pull state from ${from} is not a v${STATE_PAYLOAD_MAJOR} record batch`,
      );
      return;
    }
    const limit = this.store.limits.maxOrigins * this.store.limits.maxRecordsPerOrigin;
    for (const rec of (state.records as unknown[]).slice(0, limit)) {
      // Push-pull already reaches everyone eventually; re-broadcasting here would turn each exchange into a storm.
      this.#learn(rec);
      this.store.apply(rec, from);
    }
  }
}

function isPayload(data: unknown): data is { v: number; rec?: unknown; part?: unknown; records?: unknown } {
  return typeof data === 'object' && data !== null && (data as { v?: unknown }).v === STATE_PAYLOAD_MAJOR;
}

function recordKey(rec: SignedStateRecord): string {
  try {
    return String((JSON.parse(rec.body) as { key?: unknown }).key);
  } catch {
    return rec.signer;
  }
}
