import type { Clock, TimerHandle } from '../../daemons/gossip-operator/swim/clock.ts';

/** A manual clock: timers fire only inside advance(), in deadline order. */
export class FakeClock implements Clock {
  #now: number;
  #timers: { at: number; fn: () => void; id: number; cancelled: boolean }[] = [];
  #id = 0;

  constructor(startMs = 1_700_000_000_000) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  schedule(delayMs: number, fn: () => void): TimerHandle {
    const t = { at: this.#now + Math.max(0, delayMs), fn, id: this.#id++, cancelled: false };
    this.#timers.push(t);
    return {
      cancel: () => {
        t.cancelled = true;
      },
    };
  }

  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => !t.cancelled && t.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = due.at;
      due.fn();
    }
    this.#now = end;
  }

  /**
   * An event-loop stall: time jumps by `ms` with nothing running, then every timer that fell due runs late, in
   * deadline order, all seeing the late `now()` (as Node runs expired timers on waking). Timers they schedule
   * count from that late time.
   */
  stall(ms: number): void {
    this.#now += ms;
    for (;;) {
      const due = this.#timers
        .filter((t) => !t.cancelled && t.at <= this.#now)
        .sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      due.fn();
    }
  }
}
