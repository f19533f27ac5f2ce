// Seeded generator for the gossip fuzz suites: a run is reproduced by its seed (GOSSIP_FUZZ_SEED=<n> npm test),
// which every suite prints, with its summary, and names in each failure.
import { randomInt } from 'node:crypto';

export function fuzzSeed(): number {
  const fixed = process.env['GOSSIP_FUZZ_SEED'];
  if (fixed !== undefined && /^\d+$/.test(fixed)) return Number(fixed) >>> 0;
  return randomInt(0, 2 ** 32);
}

/** mulberry32: small, fast, and good enough to pick inputs (not for keys or nonces). */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(maxExclusive: number): number {
    return Math.floor(this.next() * maxExclusive);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }

  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }

  /** A value of any JSON type, the kind a hostile peer puts where a field belongs. */
  value(depth = 0): unknown {
    switch (this.int(depth > 2 ? 6 : 8)) {
      case 0:
        return this.int(2 ** 31) - 2 ** 30;
      case 1:
        return this.pick([0, -1, 1.5, 2 ** 53, -(2 ** 60), 1e308, Number.MAX_SAFE_INTEGER]);
      case 2:
        return this.string();
      case 3:
        return this.pick([true, false, null]);
      case 4:
        return 'x'.repeat(this.int(2_000));
      case 5:
        return this.pick(['a', 'target', '', '127.0.0.1:1', '[::1]:1', 'ping', '__proto__', 'constructor']);
      case 6:
        return Array.from({ length: this.int(5) }, () => this.value(depth + 1));
      default:
        return Object.fromEntries(Array.from({ length: this.int(5) }, () => [this.string(), this.value(depth + 1)]));
    }
  }

  string(): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-.:/[]"\\\u0000\u00e9\u20ac\ud83d\ude00\ud800';
    return Array.from({ length: this.int(24) }, () => alphabet[this.int(alphabet.length)]).join('');
  }
}
