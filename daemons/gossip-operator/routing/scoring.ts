/**
 * Metrics normalisation and the provider-level scoring strategies (SPEC §2.5 "Scores", seed 004 "Metrics
 * normalization contract" and "Missing-value defaults").
 */
import type { MetricsSample, ScoringStrategy, SelectionTier } from './model.ts';

/** Score of a signal with no value: no evidence either way (seed 004 "Missing-value defaults"). */
export const NEUTRAL_SCORE = 0.5;

/** Signals in [0,1] after normalisation; undefined where the sample had no finite value. */
export interface NormalizedSignals {
  readonly healthy: boolean;
  readonly queueDepth: number | undefined;
  readonly kvCacheUtilization: number | undefined;
  readonly prefixCacheHitRatio: number | undefined;
}

/** The gateway-independent part of a candidate's score_breakdown (locality is added per gateway). */
export interface BaseScore {
  readonly total: number;
  readonly queue_depth: number;
  readonly kv_cache: number;
  readonly prefix_cache: number;
  readonly latency: number;
  readonly cost: number;
}

function clampUnit(value: number): number {
  return value < 0 ? 0 : value > 1 ? 1 : value;
}

/** A ratio signal: non-finite values are absent (seed 004 "NaN and infinity"), others are clamped to [0,1]. */
export function normalizeRatio(value: number | undefined): number | undefined {
  if (value === undefined || !Number.isFinite(value)) return undefined;
  return clampUnit(value);
}

/**
 * Queue depth: with metricsConfig.queueCapacity the raw queue size is divided by it, then clamped to [0,1]
 * (seed 004: "AGN divides the raw value by that capacity and clamps the result"). A capacity that is not a positive
 * finite number is ignored, so malformed data that slipped past the CRD cannot divide by zero.
 */
export function normalizeQueueDepth(raw: number | undefined, queueCapacity: number | undefined): number | undefined {
  if (raw === undefined || !Number.isFinite(raw)) return undefined;
  if (queueCapacity !== undefined && Number.isFinite(queueCapacity) && queueCapacity > 0) {
    return clampUnit(raw / queueCapacity);
  }
  return clampUnit(raw);
}

/** No sample at all: healthy with every signal absent (no evidence of failure). */
export const NO_SIGNALS: NormalizedSignals = {
  healthy: true,
  queueDepth: undefined,
  kvCacheUtilization: undefined,
  prefixCacheHitRatio: undefined,
};

export function normalizeSample(sample: MetricsSample | undefined, queueCapacity?: number): NormalizedSignals {
  if (sample === undefined) return NO_SIGNALS;
  return {
    healthy: sample.healthy !== false,
    queueDepth: normalizeQueueDepth(sample.queueDepth, queueCapacity),
    kvCacheUtilization: normalizeRatio(sample.kvCacheUtilization),
    prefixCacheHitRatio: normalizeRatio(sample.prefixCacheHitRatio),
  };
}

/**
 * Six decimals: enough to order providers, and it keeps float noise (1 - 0.7 = 0.30000000000000004) out of the
 * rendered JSON that operators read.
 */
export function roundScore(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

/**
 * The strategy's score and the breakdown of every signal. noMetrics gives every candidate the same score (0);
 * queueDepth prefers the shortest normalised queue, kvCachePressure the most free KV cache. Latency and cost have no
 * normalisation contract yet, so they are published at the neutral value and never influence the total.
 */
export function scoreSignals(strategy: ScoringStrategy, signals: NormalizedSignals): BaseScore {
  const queue = roundScore(signals.queueDepth === undefined ? NEUTRAL_SCORE : 1 - signals.queueDepth);
  const kv = roundScore(signals.kvCacheUtilization === undefined ? NEUTRAL_SCORE : 1 - signals.kvCacheUtilization);
  const prefix = roundScore(signals.prefixCacheHitRatio ?? NEUTRAL_SCORE);
  const total = strategy === 'queueDepth' ? queue : strategy === 'kvCachePressure' ? kv : 0;
  return { total, queue_depth: queue, kv_cache: kv, prefix_cache: prefix, latency: NEUTRAL_SCORE, cost: NEUTRAL_SCORE };
}

/**
 * score_breakdown.locality: an informational weight of the tier (ordering uses the tier itself, never this number,
 * and it is not part of the total). It falls with the tier's place in the ordering, unknown last.
 */
export const LOCALITY_WEIGHT: Readonly<Record<SelectionTier, number>> = {
  same_site: 1,
  same_zone: 0.75,
  same_region: 0.5,
  cross_region: 0.25,
  unknown: 0,
};
