// Time and randomness are injected so the pure parts can be driven by tests and the protocol can be
// replayed with a seeded random source. Production uses `systemClock` and `Math.random`.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Wall clock in milliseconds since the epoch (stamped on packets and revisions). */
  now(): number;
  /** Run `fn` once after `delayMs`; the handle cancels it. Timers must not keep the process alive. */
  schedule(delayMs: number, fn: () => void): TimerHandle;
}

/** A source of uniform numbers in [0, 1), and the seeded one tests and replays use. */
export { type RandomSource, seededRandom } from '../../shared/seeded-random.ts';
import type { RandomSource } from '../../shared/seeded-random.ts';

/**
 * Timers run `fn` from a setImmediate queued by the timeout, not from the timeout itself. After an event-loop
 * stall (GC pause, CPU starvation, cgroup throttling) Node runs every expired timer before it reads the sockets,
 * so a deadline would otherwise be judged without the acks and refutations that reached us in time and are
 * still waiting in the kernel buffer. The immediate runs after the poll phase, which reads them first.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  schedule(delayMs, fn) {
    let immediate: NodeJS.Immediate | undefined;
    const t = setTimeout(
      () => {
        immediate = setImmediate(fn);
        immediate.unref();
      },
      Math.max(0, delayMs),
    );
    t.unref();
    return {
      cancel: () => {
        clearTimeout(t);
        if (immediate) clearImmediate(immediate);
      },
    };
  },
};

/** Fisher-Yates shuffle with the injected random source (returns a new array). */
export function shuffled<T>(items: readonly T[], random: RandomSource): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const tmp = out[i] as T;
    out[i] = out[j] as T;
    out[j] = tmp;
  }
  return out;
}
