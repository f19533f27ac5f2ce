import { describe, expect, it } from 'vitest';
import {
  normalizeQueueDepth,
  normalizeRatio,
  normalizeSample,
  NO_SIGNALS,
  scoreSignals,
} from '../../daemons/routing/scoring.ts';
import { sample } from './fixtures.ts';

describe('normalisation', () => {
  // "set metricsConfig.queueCapacity; AGN divides the raw value by that capacity and clamps the result to
  // [0.0, 1.0]"; "CRDT values are treated as absent when non-finite".
  it.each([
    [0.4, undefined, 0.4],
    [1.7, undefined, 1],
    [-0.2, undefined, 0],
    [12, 48, 0.25],
    [96, 48, 1],
    [12, 0, 1],
    [Number.NaN, 48, undefined],
    [Number.POSITIVE_INFINITY, undefined, undefined],
    [undefined, 48, undefined],
  ])('queue %s with capacity %s → %s', (raw, capacity, expected) => {
    expect(normalizeQueueDepth(raw, capacity)).toBe(expected);
  });

  it.each([
    [0.3, 0.3],
    [2, 1],
    [-1, 0],
    [Number.NaN, undefined],
    [Number.NEGATIVE_INFINITY, undefined],
  ])('ratio %s → %s', (value, expected) => {
    expect(normalizeRatio(value)).toBe(expected);
  });

  it('treats a missing sample as healthy with no values ("no evidence of failure")', () => {
    expect(normalizeSample(undefined)).toEqual(NO_SIGNALS);
    expect(normalizeSample(sample({ healthy: false })).healthy).toBe(false);
  });
});

describe('scoring strategies', () => {
  // docs/contract.md §2.5: "noMetrics → 0 for all; queueDepth → 1 - queue_depth; kvCachePressure →
  // 1 - kv_cache_utilization; missing metrics → neutral 0.5".
  const loaded = normalizeSample(sample({ queueDepth: 0.7, kvCacheUtilization: 0.2, prefixCacheHitRatio: 0.9 }));
  it.each([
    ['noMetrics', loaded, 0],
    ['noMetrics', NO_SIGNALS, 0],
    ['queueDepth', loaded, 0.3],
    ['queueDepth', NO_SIGNALS, 0.5],
    ['kvCachePressure', loaded, 0.8],
    ['kvCachePressure', NO_SIGNALS, 0.5],
  ] as const)('%s → %s', (strategy, signals, total) => {
    expect(scoreSignals(strategy, signals).total).toBe(total);
  });

  it('reports every signal in the breakdown, neutral where absent, without float noise', () => {
    expect(scoreSignals('queueDepth', loaded)).toEqual({
      total: 0.3,
      queue_depth: 0.3,
      kv_cache: 0.8,
      prefix_cache: 0.9,
      latency: 0.5,
      cost: 0.5,
    });
    expect(scoreSignals('kvCachePressure', NO_SIGNALS)).toEqual({
      total: 0.5,
      queue_depth: 0.5,
      kv_cache: 0.5,
      prefix_cache: 0.5,
      latency: 0.5,
      cost: 0.5,
    });
  });
});
