/**
 * Metrics normalisation and the provider-level scoring strategies (docs/contract.md §2.5, "Scores").
 */
import type { MetricsSample, ProviderCost, ScoringStrategy, SelectionTier } from './model.ts';

/** Score of a signal with no value: no evidence either way. */
export const NEUTRAL_SCORE = 0.5;

/** Signals in [0,1] after normalisation; undefined where the sample had no finite value. */
export interface NormalizedSignals {
  readonly healthy: boolean;
  readonly queueDepth: number | undefined;
  readonly kvCacheUtilization: number | undefined;
  readonly prefixCacheHitRatio: number | undefined;
  /** p99 request latency in ms (finite, not negative). */
  readonly latencyP99Ms: number | undefined;
  /** Failed over all requests, in [0,1]. */
  readonly errorRate: number | undefined;
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
  return value < 0 ? 0 : Math.min(value, 1);
}

/** A ratio signal: non-finite values are absent (no evidence, not an extreme), others are clamped to [0,1]. */
export function normalizeRatio(value: number | undefined): number | undefined {
  if (value === undefined || !Number.isFinite(value)) return undefined;
  return clampUnit(value);
}

/**
 * Queue depth: with metricsConfig.queueCapacity the raw queue size is divided by it, then clamped to [0,1]
 * (docs/contract.md §2.5). A capacity that is not a positive finite number is ignored, so malformed data that slipped
 * past the CRD cannot divide by zero.
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
  latencyP99Ms: undefined,
  errorRate: undefined,
};

export function normalizeSample(sample: MetricsSample | undefined, queueCapacity?: number): NormalizedSignals {
  if (sample === undefined) return NO_SIGNALS;
  return {
    healthy: sample.healthy !== false,
    queueDepth: normalizeQueueDepth(sample.queueDepth, queueCapacity),
    kvCacheUtilization: normalizeRatio(sample.kvCacheUtilization),
    prefixCacheHitRatio: normalizeRatio(sample.prefixCacheHitRatio),
    latencyP99Ms:
      sample.latencyP99Ms !== undefined && Number.isFinite(sample.latencyP99Ms) && sample.latencyP99Ms >= 0
        ? sample.latencyP99Ms
        : undefined,
    errorRate: normalizeRatio(sample.errorRate),
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
 * Latency and cost have no normalisation contract from the destination, so each is read against a reference: a p99
 * of LATENCY_REFERENCE_MS, or a price of COST_REFERENCE_USD per million tokens (input plus output), scores exactly
 * the neutral 0.5; faster or cheaper scores above it (1 at zero), slower or dearer below it, never reaching 0.
 */
export const LATENCY_REFERENCE_MS = 1000;
export const COST_REFERENCE_USD = 10;
/**
 * How far latency moves the total away from the strategy's signal: it adds LATENCY_WEIGHT × (its score − 0.5), so at
 * most ±0.1. The strategy's signal (a whole unit) stays what orders providers; latency breaks near-ties.
 */
export const LATENCY_WEIGHT = 0.2;
/** The total loses ERROR_RATE_WEIGHT × the failed share: a pool failing every request loses half a unit. */
export const ERROR_RATE_WEIGHT = 0.5;

/** score_breakdown.latency: neutral without a measured p99 (no evidence either way), never 0. */
export function latencyScore(latencyP99Ms: number | undefined): number {
  if (latencyP99Ms === undefined) return NEUTRAL_SCORE;
  return roundScore(LATENCY_REFERENCE_MS / (LATENCY_REFERENCE_MS + latencyP99Ms));
}

/** score_breakdown.cost: neutral without a declared spec.cost; a declared cost of 0 (self-hosted, free) scores 1. */
export function costScore(cost: ProviderCost | undefined): number {
  if (cost === undefined) return NEUTRAL_SCORE;
  const price = cost.perMillionInputTokens + cost.perMillionOutputTokens;
  if (!Number.isFinite(price) || price < 0) return NEUTRAL_SCORE;
  return roundScore(COST_REFERENCE_USD / (COST_REFERENCE_USD + price));
}

/**
 * The strategy's score and the breakdown of every signal. noMetrics gives every candidate the same score, 0
 * (docs/contract.md §2.5), so "it gives all admitted candidates the same dynamic score"; queueDepth prefers the
 * shortest normalised queue, kvCachePressure the most free KV cache, and both also read the measured latency and error
 * rate. A missing signal changes nothing: latency sits at the neutral 0.5 (which adds 0), and a missing error rate is
 * "no evidence of failure", which subtracts 0. The declared cost is published in the breakdown only: the static order
 * between pools and API providers is the backend category's (ordering.ts), and docs/contract.md §2.5 keeps the totals
 * of a strategy comparable across sites, where remote records carry no cost.
 */
export function scoreSignals(strategy: ScoringStrategy, signals: NormalizedSignals, cost?: ProviderCost): BaseScore {
  const queue = roundScore(signals.queueDepth === undefined ? NEUTRAL_SCORE : 1 - signals.queueDepth);
  const kv = roundScore(signals.kvCacheUtilization === undefined ? NEUTRAL_SCORE : 1 - signals.kvCacheUtilization);
  const prefix = roundScore(signals.prefixCacheHitRatio ?? NEUTRAL_SCORE);
  const latency = latencyScore(signals.latencyP99Ms);
  let total = 0;
  if (strategy === 'queueDepth' || strategy === 'kvCachePressure') {
    total =
      (strategy === 'queueDepth' ? queue : kv) +
      LATENCY_WEIGHT * (latency - NEUTRAL_SCORE) -
      ERROR_RATE_WEIGHT * (signals.errorRate ?? 0);
  }
  return {
    total: roundScore(total),
    queue_depth: queue,
    kv_cache: kv,
    prefix_cache: prefix,
    latency,
    cost: costScore(cost),
  };
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
