// The open-loop pacer of `bench:gateway`: it must wake the load generator at each send time, never before it, and
// sleep in between instead of holding a core.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Pacer } from './pacer.ts';

let pacer: Pacer;
beforeAll(async () => {
  pacer = await Pacer.start();
});
afterAll(async () => {
  await pacer.close();
});

const now = (): bigint => process.hrtime.bigint();

describe('Pacer', () => {
  it('resolves at each send time, never before it', async () => {
    const lateness: number[] = [];
    const t0 = now();
    for (let i = 1; i <= 50; i++) {
      const at = t0 + BigInt(i) * 2_000_000n;
      await pacer.until(at);
      const late = Number(now() - at) / 1e6;
      expect(late).toBeGreaterThanOrEqual(0);
      lateness.push(late);
    }
    lateness.sort((a, b) => a - b);
    // Tens of microseconds on an idle machine; a loaded CI machine gets a whole millisecond of room.
    expect(lateness[25]).toBeLessThan(1);
  });

  it('sleeps while it waits: a 300 ms wait costs this process far less than 300 ms of CPU', async () => {
    const before = process.cpuUsage();
    await pacer.until(now() + 300_000_000n);
    const used = process.cpuUsage(before);
    // Spinning would use about 300 ms; a sleeping wait uses well under a tenth of it.
    expect((used.user + used.system) / 1000).toBeLessThan(30);
  });

  it('resolves at once for a send time already past', async () => {
    const start = now();
    await pacer.until(start - 5_000_000n);
    expect(Number(now() - start) / 1e6).toBeLessThan(5);
  });

  it('refuses a second wait while one is pending', async () => {
    const first = pacer.until(now() + 20_000_000n);
    expect(() => pacer.until(now() + 10_000_000n)).toThrow(/a wait is already pending/);
    await first;
  });
});
