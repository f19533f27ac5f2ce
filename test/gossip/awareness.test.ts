import { expect, test } from 'vitest';
import { applyAwarenessDelta, Awareness, scaleByAwareness } from '../../daemons/gossip-operator/swim/awareness.ts';

test.each([
  { score: 0, delta: 1, max: 8, want: 1 },
  { score: 0, delta: -1, max: 8, want: 0 },
  { score: 6, delta: 3, max: 8, want: 7 },
  { score: 7, delta: -2, max: 8, want: 5 },
  { score: 3, delta: 0, max: 8, want: 3 },
])('score $score + $delta (max $max) -> $want', ({ score, delta, max, want }) => {
  expect(applyAwarenessDelta(score, delta, max)).toBe(want);
});

test.each([
  { score: 0, timeout: 3_000, want: 3_000 },
  { score: 1, timeout: 3_000, want: 6_000 },
  { score: 7, timeout: 500, want: 4_000 },
])('score $score scales $timeout ms to $want ms', ({ score, timeout, want }) => {
  expect(scaleByAwareness(timeout, score)).toBe(want);
});

test('Awareness clamps a burst of failures and recovers with successes', () => {
  const a = new Awareness(4);
  for (let i = 0; i < 10; i++) a.applyDelta(1);
  expect(a.score).toBe(3);
  expect(a.scale(100)).toBe(400);
  a.applyDelta(-1);
  a.applyDelta(-1);
  expect(a.scale(100)).toBe(200);
});
