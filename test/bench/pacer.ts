// Paces an open-loop load generator without spinning its thread (`bench:gateway --pace sleep`).
//
// The rate case waits for each send time by spinning (setImmediate after setImmediate): precise, but it keeps one of
// the machine's cores busy for the whole case, so the sim and the proxies under test share the rest. A timer is no
// better: Node's timers have a resolution of 1 ms and fire up to a period late. Here a worker thread sleeps until
// each send time on a futex (Atomics.wait takes a fractional millisecond timeout) and posts a message; the caller's
// thread sleeps in its event loop in between, free to read responses. Both threads read CLOCK_MONOTONIC
// (process.hrtime), so the send times are the caller's. Under the rate case's load on a 2-core virtual machine it sends
// 3-10 ms late at the p99 (a halted virtual CPU is woken late), against 0.05-1.5 ms for spinning, so spinning stays
// the default (compare with `npm run bench:gateway -- --case rate --pace spin,sleep`).
import { Worker } from 'node:worker_threads';

const SLEEPER = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
parentPort.on('message', (atNs) => {
  const delayMs = Number(BigInt(atNs) - process.hrtime.bigint()) / 1e6;
  // Nothing ever notifies the cell: the wait always ends at its timeout.
  if (delayMs > 0) Atomics.wait(cell, 0, 0, delayMs);
  parentPort.postMessage(0);
});
`;

export class Pacer {
  private readonly worker = new Worker(SLEEPER, { eval: true });
  private wake: (() => void) | undefined;

  /** A pacer whose thread is running: a wait right after `new Pacer()` would include the thread's start (~40 ms). */
  static async start(): Promise<Pacer> {
    const pacer = new Pacer();
    // Referenced until it runs: an unreferenced thread starting is nothing to wait for, and the process would end here.
    pacer.worker.ref();
    await new Promise<void>((resolve, reject) => {
      pacer.worker.once('online', resolve);
      pacer.worker.once('error', reject);
    });
    pacer.worker.unref();
    return pacer;
  }

  private constructor() {
    this.worker.on('message', () => {
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    });
    // An idle pacer does not keep the process alive.
    this.worker.unref();
  }

  /** Resolves once process.hrtime.bigint() has reached `atNs` (tens of microseconds after it); one wait at a time. */
  until(atNs: bigint): Promise<void> {
    if (this.wake !== undefined) throw new Error('Pacer.until: a wait is already pending');
    if (atNs <= process.hrtime.bigint()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      this.worker.ref();
      this.worker.postMessage(String(atNs));
    }).then(() => {
      this.worker.unref();
    });
  }

  close(): Promise<number> {
    return this.worker.terminate();
  }
}
