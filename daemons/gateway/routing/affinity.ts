// Session affinity bindings (docs/contract.md §3.1): session key -> candidate identity, with an absolute TTL from the
// moment of binding and a hard cap on the number of bindings. The clock is passed in, so tests need no sleeping.

export const MAX_AFFINITY_ENTRIES = 10_000;
export const MAX_AFFINITY_TTL_SECONDS = 86_400;
export const DEFAULT_AFFINITY_TTL_SECONDS = 3_600;
/** Longer session keys are ignored rather than stored: they would let one client grow memory per request. */
export const MAX_SESSION_KEY_BYTES = 256;

interface Binding {
  readonly stableId: string;
  readonly expiresAtMs: number;
}

export class AffinityTable {
  readonly ttlMs: number;
  readonly maxEntries: number;
  readonly #bindings = new Map<string, Binding>();

  constructor(ttlSeconds = DEFAULT_AFFINITY_TTL_SECONDS, maxEntries = MAX_AFFINITY_ENTRIES) {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_AFFINITY_TTL_SECONDS) {
      throw new RangeError(`session affinity ttl_secs must be 1..${MAX_AFFINITY_TTL_SECONDS}, got ${ttlSeconds}`);
    }
    if (!Number.isInteger(maxEntries) || maxEntries < 1 || maxEntries > MAX_AFFINITY_ENTRIES) {
      throw new RangeError(`session affinity max_entries must be 1..${MAX_AFFINITY_ENTRIES}, got ${maxEntries}`);
    }
    this.ttlMs = ttlSeconds * 1000;
    this.maxEntries = maxEntries;
  }

  get size(): number {
    return this.#bindings.size;
  }

  /** The bound candidate identity, or undefined when unbound or expired (an expired binding is dropped). */
  lookup(key: string, nowMs: number): string | undefined {
    const binding = this.#bindings.get(key);
    if (binding === undefined) return undefined;
    if (binding.expiresAtMs <= nowMs) {
      this.#bindings.delete(key);
      return undefined;
    }
    return binding.stableId;
  }

  /** Binds (or rebinds after failover) with a fresh absolute TTL; evicts expired, then oldest, bindings at the cap. */
  bind(key: string, stableId: string, nowMs: number): void {
    this.#bindings.delete(key);
    if (this.#bindings.size >= this.maxEntries) {
      for (const [k, b] of this.#bindings) if (b.expiresAtMs <= nowMs) this.#bindings.delete(k);
      while (this.#bindings.size >= this.maxEntries) {
        const oldest = this.#bindings.keys().next();
        if (oldest.done === true) break;
        this.#bindings.delete(oldest.value);
      }
    }
    this.#bindings.set(key, { stableId, expiresAtMs: nowMs + this.ttlMs });
  }
}
