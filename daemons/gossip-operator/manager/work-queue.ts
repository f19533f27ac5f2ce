/**
 * The controllers' work queue (controller-runtime's rate-limited queue, cut to what we use): a key is queued at most
 * once, a key being processed is never handed to a second worker, a key added while it is processed runs once more
 * afterwards, and failures back off per key (exponential with jitter) until a success forgets them.
 */
import { backoffDelayMs } from '../../shared/resource-store/backoff.ts';

export interface WorkQueueOptions {
  readonly baseBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Injected for tests; [0,1). */
  readonly random?: () => number;
}

export class WorkQueue {
  readonly #ready: string[] = [];
  readonly #queued = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  readonly #failures = new Map<string, number>();
  readonly #waiters: Array<(key: string | undefined) => void> = [];
  readonly #base: number;
  readonly #max: number;
  readonly #random: () => number;
  #shutDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.#base = options.baseBackoffMs ?? 500;
    this.#max = options.maxBackoffMs ?? 60_000;
    this.#random = options.random ?? Math.random;
  }

  get length(): number {
    return this.#ready.length;
  }

  add(key: string): void {
    if (this.#shutDown) return;
    const delayed = this.#delayed.get(key);
    if (delayed !== undefined) {
      clearTimeout(delayed.timer);
      this.#delayed.delete(key);
    }
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) {
      this.#queued.delete(key);
      this.#processing.add(key);
      waiter(key);
      return;
    }
    this.#ready.push(key);
  }

  /** Adds `key` after `delayMs`; an earlier pending delay for the key wins (the sooner run covers the later one). */
  addAfter(key: string, delayMs: number): void {
    if (this.#shutDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const existing = this.#delayed.get(key);
    if (existing !== undefined && existing.at <= at) return;
    if (existing !== undefined) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.#delayed.set(key, { at, timer });
  }

  /** Requeues after this key's next backoff step. Returns the delay used. */
  addRateLimited(key: string): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    // Jitter in the upper half of the step: spread retries without ever retrying sooner than half the step. The
    // shared policy subtracts its jitter, so 1 - random keeps "random 1 = the whole step" for injected randomness.
    const delay = backoffDelayMs(
      { initialMs: this.#base, maxMs: this.#max, jitter: 0.5 },
      failures,
      () => 1 - this.#random(),
    );
    this.addAfter(key, delay);
    return delay;
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** The next key to process, or undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.#shutDown) return Promise.resolve(undefined);
    const key = this.#ready.shift();
    if (key !== undefined) {
      this.#queued.delete(key);
      this.#processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Marks `key` processed; a key added meanwhile is queued again now. */
  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.delete(key)) this.add(key);
  }

  shutDown(): void {
    this.#shutDown = true;
    for (const { timer } of this.#delayed.values()) clearTimeout(timer);
    this.#delayed.clear();
    this.#ready.length = 0;
    this.#queued.clear();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }
}
