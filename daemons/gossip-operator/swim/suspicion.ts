import type { Clock, TimerHandle } from './clock.ts';

/**
 * Lifeguard suspicion timeout after `confirmations` independent accusers out of `expected` (k):
 * max - (max - min) * log(c + 1) / log(k + 1), never below min. With k < 1 no confirmation can arrive, so
 * the conservative max applies. Pure: the table test pins it.
 */
export function suspicionTimeoutMs(confirmations: number, expected: number, minMs: number, maxMs: number): number {
  if (expected < 1) return maxMs;
  const frac = Math.log(Math.min(confirmations, expected) + 1) / Math.log(expected + 1);
  const raw = Math.floor(maxMs - frac * (maxMs - minMs));
  return Math.max(minMs, raw);
}

/** Remaining time of a suspicion started `elapsedMs` ago (may be <= 0: fire now). */
export function remainingSuspicionMs(
  confirmations: number,
  expected: number,
  elapsedMs: number,
  minMs: number,
  maxMs: number,
): number {
  return suspicionTimeoutMs(confirmations, expected, minMs, maxMs) - elapsedMs;
}

/**
 * One timer per suspect member. Each distinct accuser (other than the first, whose accusation started it)
 * counts once as a confirmation and re-arms the timer to the shrunken deadline.
 */
export class Suspicion {
  readonly startedAtMs: number;
  readonly #clock: Clock;
  readonly #expected: number;
  readonly #minMs: number;
  readonly #maxMs: number;
  readonly #accusers = new Set<string>();
  readonly #onTimeout: () => void;
  #timer: TimerHandle;
  #fired = false;

  constructor(
    clock: Clock,
    firstAccuser: string,
    expected: number,
    minMs: number,
    maxMs: number,
    onTimeout: () => void,
  ) {
    this.#clock = clock;
    this.startedAtMs = clock.now();
    this.#expected = expected;
    this.#minMs = minMs;
    this.#maxMs = maxMs;
    this.#onTimeout = onTimeout;
    this.#accusers.add(firstAccuser);
    this.#timer = clock.schedule(suspicionTimeoutMs(0, expected, minMs, maxMs), () => this.#fire());
  }

  get confirmations(): number {
    return this.#accusers.size - 1;
  }

  /** Returns true when `accuser` is new and the deadline moved. */
  confirm(accuser: string): boolean {
    if (this.#fired || this.#accusers.has(accuser) || this.confirmations >= this.#expected) return false;
    this.#accusers.add(accuser);
    this.#timer.cancel();
    const remaining = remainingSuspicionMs(
      this.confirmations,
      this.#expected,
      this.#clock.now() - this.startedAtMs,
      this.#minMs,
      this.#maxMs,
    );
    this.#timer = this.#clock.schedule(Math.max(0, remaining), () => this.#fire());
    return true;
  }

  cancel(): void {
    this.#fired = true;
    this.#timer.cancel();
  }

  #fire(): void {
    if (this.#fired) return;
    this.#fired = true;
    this.#onTimeout();
  }
}
