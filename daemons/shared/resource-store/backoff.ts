// Jittered exponential backoff for watch reconnects (docs/contract.md §4: 1 s -> 30 s). Pure: the random source is
// injected so tests can pin the jitter.

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /** Fraction of the delay that is randomised downwards; 0.2 spreads reconnects over [0.8 d, d]. */
  readonly jitter: number;
}

export const WATCH_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 30_000, jitter: 0.2 };

/**
 * Delay before retry number `attempt` (0-based): min(max, initial * 2^attempt) scaled by a random factor in
 * [1 - jitter, 1]. Jitter only shortens, so the ceiling holds exactly and many clients that lost the same
 * API server do not reconnect in lockstep.
 */
export function backoffDelayMs(policy: BackoffPolicy, attempt: number, random: () => number): number {
  const exponent = Math.min(Math.max(0, Math.floor(attempt)), 30);
  const ceiling = Math.min(policy.maxMs, policy.initialMs * 2 ** exponent);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(ceiling * (1 - policy.jitter * r));
}

/** Stateful helper for a retry loop: `next()` gives the delay and advances; `reset()` after a success. */
export class Backoff {
  readonly #policy: BackoffPolicy;
  readonly #random: () => number;
  #attempt = 0;

  constructor(policy: BackoffPolicy, random: () => number = Math.random) {
    this.#policy = policy;
    this.#random = random;
  }

  next(): number {
    const delay = backoffDelayMs(this.#policy, this.#attempt, this.#random);
    this.#attempt += 1;
    return delay;
  }

  reset(): void {
    this.#attempt = 0;
  }

  get attempt(): number {
    return this.#attempt;
  }
}

/** Resolves after `ms`, or early (without rejecting) when the signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
