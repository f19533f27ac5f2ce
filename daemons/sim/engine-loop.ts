// Runs the pure engine model in real time: one timer, set for the moment the step in flight ends, completes it and
// starts the next; every arrival, abort and /metrics read first brings the engine up to now. The engine keeps its own
// model time, so a late timer delays when tokens are written, never the latencies the engine reports.
import { type Engine, isRefusal } from './engine/engine.ts';
import type { Admission, EngineRefusal, EngineRequest, StepResult, StepTiming, TokenEvent } from './engine/engine.ts';

/** Steps completed in one turn of the event loop at most: steps that take no time must not starve the sockets. */
const MAX_STEPS_PER_TURN = 64;

export interface EngineLoopOptions {
  /** A monotonic clock in milliseconds. */
  readonly now?: () => number;
  /** The step costs, read before each step (the sim's /admin/state can change them at any time). */
  readonly timing?: () => Partial<StepTiming>;
  /** Every completed step, in order (the metrics record them). */
  readonly onSteps?: (steps: readonly StepResult[]) => void;
}

export class EngineLoop {
  readonly engine: Engine;
  readonly now: () => number;
  readonly #timing: () => Partial<StepTiming>;
  readonly #onSteps: (steps: readonly StepResult[]) => void;
  readonly #listeners = new Map<string, (event: TokenEvent) => void>();
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  #closed = false;

  constructor(engine: Engine, options: EngineLoopOptions = {}) {
    this.engine = engine;
    this.now = options.now ?? (() => performance.now());
    this.#timing = options.timing ?? (() => ({}));
    this.#onSteps = options.onSteps ?? (() => undefined);
  }

  /**
   * Queues a request now; `listener` hears each of its tokens, the last one carrying the finished request. Tokens are
   * delivered from the timer, never before submit returns, so the caller can set up its answer first.
   */
  submit(
    request: Omit<EngineRequest, 'arrivalMs'> & { arrivalMs: number },
    listener: (event: TokenEvent) => void,
  ): Admission | EngineRefusal {
    // One reading of the clock for both, so the request arrives after every step this call completes.
    const now = this.now();
    this.sync(now);
    const admission = this.engine.add(request, now);
    if (!isRefusal(admission)) {
      this.#listeners.set(request.id, listener);
      this.#arm(false);
    }
    return admission;
  }

  /** Drops a request whose client went away (safe from inside a listener: it advances nothing). */
  abort(id: string): void {
    this.#listeners.delete(id);
    if (this.engine.abort(id) && !this.#closed) this.#arm(false);
  }

  /** Brings the engine up to now: completes the steps that have ended, delivers their tokens, sets the timer. */
  sync(now = this.now()): void {
    if (this.#closed) return;
    this.engine.setTiming(this.#timing());
    const steps = this.engine.advanceTo(now, MAX_STEPS_PER_TURN);
    if (steps.length > 0) this.#onSteps(steps);
    for (const step of steps) {
      for (const event of step.tokens) {
        const listener = this.#listeners.get(event.requestId);
        if (event.finish !== undefined) this.#listeners.delete(event.requestId);
        listener?.(event);
      }
    }
    this.#arm(steps.length === MAX_STEPS_PER_TURN);
  }

  /** Stops the timer; requests still in the engine are never answered. */
  close(): void {
    this.#closed = true;
    this.#disarm();
    this.#listeners.clear();
  }

  #arm(busy: boolean): void {
    this.#disarm();
    const next = this.engine.nextEventMs();
    if (next === undefined) return;
    const wait = Math.ceil(next - this.now());
    if (busy || wait <= 0) this.#timer = setImmediate(() => this.sync());
    else this.#timer = setTimeout(() => this.sync(), wait);
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer as NodeJS.Timeout);
    clearImmediate(this.#timer as NodeJS.Immediate);
    this.#timer = undefined;
  }
}
