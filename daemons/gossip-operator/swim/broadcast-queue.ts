// Piggybacked dissemination (SWIM §4): every outgoing packet carries as many queued broadcasts as fit.
// Each broadcast is sent at most `retransmitLimit(N)` times; a newer broadcast with the same key (the member
// name, or a state record key) replaces the older one, so stale news never outlives fresh news.
import type { WireMessage, WireVersion } from './wire.ts';

interface QueuedBroadcast {
  readonly key: string;
  /** The message, encoded once per wire version on first use. */
  readonly message: WireMessage;
  readonly id: number;
  transmits: number;
}

export type EnqueueResult = 'queued' | 'too_large' | 'evicted_other';

export class BroadcastQueue {
  readonly #items = new Map<string, QueuedBroadcast>();
  readonly #maxItems: number;
  readonly #maxItemBytes: number;
  #nextId = 0;

  /** `maxItemBytes`: largest message that can ever fit one packet in every wire version; larger ones are refused. */
  constructor(maxItems: number, maxItemBytes: number) {
    this.#maxItems = maxItems;
    this.#maxItemBytes = maxItemBytes;
  }

  get size(): number {
    return this.#items.size;
  }

  enqueue(key: string, message: WireMessage): EnqueueResult {
    if (message.maxBytes > this.#maxItemBytes) return 'too_large';
    this.#items.delete(key);
    let result: EnqueueResult = 'queued';
    if (this.#items.size >= this.#maxItems) {
      let worst: QueuedBroadcast | undefined;
      for (const item of this.#items.values()) {
        if (
          worst === undefined ||
          item.transmits > worst.transmits ||
          (item.transmits === worst.transmits && item.id < worst.id)
        )
          worst = item;
      }
      if (worst) this.#items.delete(worst.key);
      result = 'evicted_other';
    }
    this.#items.set(key, { key, message, id: this.#nextId++, transmits: 0 });
    return result;
  }

  /** Drop any queued broadcast under `key` (e.g. a member forgotten). */
  remove(key: string): void {
    this.#items.delete(key);
  }

  /**
   * Takes broadcasts, least-transmitted and newest first, while they fit in `budgetBytes` of a packet of wire
   * `version`. Items that reach `limit` transmits leave the queue.
   */
  take(budgetBytes: number, version: WireVersion, limit: number): WireMessage[] {
    if (this.#items.size === 0 || budgetBytes <= 0) return [];
    const ordered = [...this.#items.values()].sort((a, b) => a.transmits - b.transmits || b.id - a.id);
    const out: WireMessage[] = [];
    let used = 0;
    for (const item of ordered) {
      const cost = item.message.cost(version);
      if (used + cost > budgetBytes) continue;
      used += cost;
      out.push(item.message);
      item.transmits++;
      if (item.transmits >= limit) this.#items.delete(item.key);
    }
    return out;
  }
}
