import { describe, expect, test } from 'vitest';
import { remainingSuspicionMs, Suspicion, suspicionTimeoutMs } from '../../daemons/gossip-operator/swim/suspicion.ts';
import { FakeClock } from './fake-clock.ts';

describe('suspicionTimeoutMs (Lifeguard formula)', () => {
  // max - (max - min) * log(c + 1) / log(k + 1), floored at min; k < 1 keeps the conservative max.
  test.each([
    { c: 0, k: 3, min: 10_000, max: 30_000, want: 30_000 },
    { c: 1, k: 3, min: 10_000, max: 30_000, want: 20_000 },
    { c: 2, k: 3, min: 10_000, max: 30_000, want: 14_150 },
    { c: 3, k: 3, min: 10_000, max: 30_000, want: 10_000 },
    { c: 9, k: 3, min: 10_000, max: 30_000, want: 10_000 },
    { c: 0, k: 0, min: 10_000, max: 30_000, want: 30_000 },
    { c: 5, k: 0, min: 10_000, max: 30_000, want: 30_000 },
    { c: 1, k: 1, min: 2_000, max: 6_000, want: 2_000 },
  ])('c=$c k=$k -> $want ms', ({ c, k, min, max, want }) => {
    expect(suspicionTimeoutMs(c, k, min, max)).toBe(want);
  });

  test('remaining time subtracts elapsed and may go negative (fire now)', () => {
    expect(remainingSuspicionMs(1, 3, 5_000, 10_000, 30_000)).toBe(15_000);
    expect(remainingSuspicionMs(3, 3, 12_000, 10_000, 30_000)).toBe(-2_000);
  });
});

describe('Suspicion timer', () => {
  test('fires at max without confirmations', () => {
    const clock = new FakeClock();
    let fired = 0;
    new Suspicion(clock, 'a', 3, 10_000, 30_000, () => fired++);
    clock.advance(29_999);
    expect(fired).toBe(0);
    clock.advance(1);
    expect(fired).toBe(1);
  });

  test('independent confirmations shrink the deadline; repeats and the first accuser do not count', () => {
    const clock = new FakeClock();
    let fired = 0;
    const s = new Suspicion(clock, 'a', 3, 10_000, 30_000, () => fired++);
    clock.advance(5_000);
    expect(s.confirm('a')).toBe(false);
    expect(s.confirm('b')).toBe(true);
    expect(s.confirm('b')).toBe(false);
    expect(s.confirmations).toBe(1);
    clock.advance(14_999); // deadline is now 20 s after start
    expect(fired).toBe(0);
    clock.advance(1);
    expect(fired).toBe(1);
  });

  test('a confirmation past the new deadline fires immediately; cancel stops it', () => {
    const clock = new FakeClock();
    let fired = 0;
    const s = new Suspicion(clock, 'a', 1, 1_000, 9_000, () => fired++);
    clock.advance(2_000);
    s.confirm('b');
    clock.advance(0);
    expect(fired).toBe(1);
    const t = new Suspicion(clock, 'a', 1, 1_000, 9_000, () => fired++);
    t.cancel();
    clock.advance(10_000);
    expect(fired).toBe(1);
  });
});
