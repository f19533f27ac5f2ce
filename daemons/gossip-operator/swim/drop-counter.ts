import { EventEmitter } from 'node:events';

/** What a drop looks like to a logger or metrics adapter: the reason plus a short, secret-free detail. */
export interface DropEvent<R extends string> {
  readonly reason: R;
  readonly detail: string;
}

/** pino-compatible subset; the operator passes its logger, tests pass nothing or a recorder. */
export interface GossipLogger {
  warn(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

/**
 * Counts drops by reason as plain data (`snapshot()`), emits a `drop` event for each one (the operator maps it
 * onto prom-client counters) and logs each reason once, so a flood of garbage cannot flood the log.
 */
export class DropCounter<R extends string> extends EventEmitter<{ drop: [DropEvent<R>] }> {
  readonly #counts = new Map<R, number>();
  readonly #logged = new Set<R>();
  readonly #component: string;
  readonly #logger: GossipLogger | undefined;

  constructor(component: string, reasons: readonly R[], logger?: GossipLogger) {
    super();
    this.#component = component;
    this.#logger = logger;
    for (const r of reasons) this.#counts.set(r, 0);
  }

  /**
   * `level` debug is for drops the protocol recovers from by design (counted, but nothing for an operator to act
   * on); every other drop is a WARN, once per reason.
   */
  drop(reason: R, detail: string, level: 'warn' | 'debug' = 'warn'): void {
    this.#counts.set(reason, (this.#counts.get(reason) ?? 0) + 1);
    if (!this.#logged.has(reason)) {
      this.#logged.add(reason);
      const fields = { component: this.#component, reason, detail };
      const message = `${this.#component}: dropped input (${reason}); further drops for this reason are only counted`;
      if (level === 'debug') this.#logger?.debug?.(fields, message);
      else this.#logger?.warn(fields, message);
    }
    if (this.listenerCount('drop') > 0) this.emit('drop', { reason, detail });
  }

  count(reason: R): number {
    return this.#counts.get(reason) ?? 0;
  }

  total(): number {
    let sum = 0;
    for (const n of this.#counts.values()) sum += n;
    return sum;
  }

  snapshot(): Record<R, number> {
    return Object.fromEntries(this.#counts) as Record<R, number>;
  }
}
