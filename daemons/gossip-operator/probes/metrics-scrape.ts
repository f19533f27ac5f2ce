/**
 * The operator-side Prometheus scrape of an InferenceProvider (spec.metricsConfig, with the stale-metrics grace
 * period of staleMetricsSeconds): fetch, read the signals of signalNames and the engine preset (signal-readings.ts),
 * and decide what a failure means.
 *
 * The last good sample is data the caller keeps between reconciles (per provider, per process) and passes back in;
 * this module keeps no state of its own.
 */
import type { MetricsEngine } from '../../../schemas/engines/presets.ts';
import type { ScrapedSignal } from '../../../schemas/generated/inferenceproviders.ts';
import { type ProbeFailure, type ProbeTls, probeHttp } from './http-probe.ts';
import { parsePrometheusText, signalValue } from './prometheus-text.ts';
import type { BearerResult } from './scraper-token.ts';
import { type CounterMemories, planSignals, readSignals, type SignalNames } from './signal-readings.ts';

/** The signals a provider can publish; names follow the CRDT metrics snapshot of docs/contract.md §5. */
export interface BackendMetrics {
  readonly queue_depth?: number;
  readonly kv_cache_utilization?: number;
  readonly latency_p99_ms?: number;
  readonly prefix_cache_hit_ratio?: number;
  readonly error_rate?: number;
  /** The EPP pool series the gateways conclude a site's in-flight from (poolSeries below), relayed as is. */
  readonly running_per_endpoint?: number;
  readonly waiting_per_endpoint?: number;
  readonly flow_control_held?: number;
  readonly ready_endpoints?: number;
  /** false excludes the provider from routing (docs/contract.md §2.5: metrics with healthy=false are excluded). */
  readonly healthy: boolean;
}

export interface MetricsScrapeConfig {
  readonly url: URL;
  readonly timeoutMs: number;
  /** Explicit metric names; each overrides the engine preset for its signal. */
  readonly signalNames: SignalNames;
  /** metricsConfig.engine: the preset that fills the signals signalNames leaves unset. */
  readonly engine?: MetricsEngine;
  /** Only series whose `name` label equals the pool (llm-d EPP pools publish one series per pool). */
  readonly poolName?: string;
  /**
   * An absolute queue size is divided by this and clamped to [0,1] (docs/contract.md §2.5): a named
   * queue metric, or the preset's waiting count in place of waiting + running.
   */
  readonly queueCapacity?: number;
  /** Set when spec.tls or metricsConfig.tls is configured: failures then fail closed instead of scoring neutral. */
  readonly tls?: ProbeTls;
  /**
   * metricsConfig.auth: fetches the bearer token, called only after the endpoint passed the credential checks so a
   * refused endpoint never causes a TokenRequest. The token goes only to `url` (probes never follow redirects).
   */
  readonly bearer?: () => Promise<BearerResult>;
  /** With a bearer token, http:// is refused unless this is set. */
  readonly allowPlaintext?: boolean;
  readonly staleMetricsSeconds?: number;
}

export interface CachedSample {
  readonly metrics: BackendMetrics;
  readonly scrapedAtMs: number;
  /** The signals it holds and the series they came from. */
  readonly signals: readonly ScrapedSignal[];
  /** Counter totals of the preset's counter readings: the baseline of the next scrape's increments. */
  readonly counters?: CounterMemories;
}

/** Label values of grid_provider_scrape_total{result}. */
export type ScrapeResult =
  | 'success'
  | 'no_series'
  | 'http_status'
  | 'invalid_response'
  | 'config'
  | 'auth'
  | ProbeFailure;

export interface ScrapeOutcome {
  readonly result: ScrapeResult;
  /** What scoring should use; undefined means "no live metrics": every signal neutral (no evidence either way). */
  readonly metrics: BackendMetrics | undefined;
  /** The cache to keep for the next scrape. */
  readonly cache: CachedSample | undefined;
  /** True when the metrics came from the cache within staleMetricsSeconds. */
  readonly stale: boolean;
  /** The signals in `metrics` and where they were read (empty when there are none). */
  readonly signals: readonly ScrapedSignal[];
  readonly detail?: string;
}

const MAX_METRICS_BYTES = 4 * 1024 * 1024;

/**
 * The llm-d EPP series read whatever signalNames says (the reference's site-selection inputs): the gateways read
 * them raw and conclude in-flight themselves. Earlier names win; a page without them leaves the signal missing.
 */
export const POOL_SERIES = {
  running_per_endpoint: ['llm_d_epp_average_running_requests'],
  waiting_per_endpoint: ['llm_d_epp_average_queue_size', 'inference_pool_per_pod_queue_size'],
  flow_control_held: ['llm_d_epp_flow_control_queue_size'],
  ready_endpoints: ['llm_d_epp_ready_endpoints'],
} as const;

export async function scrapeMetrics(
  config: MetricsScrapeConfig,
  cache: CachedSample | undefined,
  nowMs: number,
): Promise<ScrapeOutcome> {
  const headers: Record<string, string> = { accept: 'text/plain; version=0.0.4' };
  if (config.bearer !== undefined) {
    const refusal = refuseUnsafeCredential(config);
    if (refusal !== undefined) return failed(config, cache, nowMs, 'config', refusal);
    const bearer = await config.bearer();
    if (!bearer.ok) return failed(config, cache, nowMs, 'auth', bearer.detail);
    headers['authorization'] = `Bearer ${bearer.token}`;
  }
  const response = await probeHttp({
    url: config.url,
    headers,
    timeoutMs: config.timeoutMs,
    maxBytes: MAX_METRICS_BYTES,
    ...(config.tls ? { tls: config.tls } : {}),
  });
  if (!response.ok) return failed(config, cache, nowMs, response.failure, response.detail);
  if (response.status < 200 || response.status > 299) {
    return failed(config, cache, nowMs, 'http_status', `metrics endpoint answered HTTP ${response.status}`);
  }
  const samples = parsePrometheusText(response.body.toString('utf8'));
  const match: Record<string, string> = config.poolName === undefined ? {} : { name: config.poolName };
  const read = (name: string) => signalValue(samples, name, match);
  const signals = readSignals(samples, planSignals(config.signalNames, config.engine), {
    match,
    ...(config.queueCapacity !== undefined ? { queueCapacity: config.queueCapacity } : {}),
    ...(cache?.counters !== undefined ? { counters: cache.counters } : {}),
  });
  const metrics = omitUndefined({
    queue_depth: signals.values.queueDepth,
    kv_cache_utilization: signals.values.kvCacheUtilization,
    latency_p99_ms: signals.values.latencyP99Ms,
    prefix_cache_hit_ratio: signals.values.prefixCacheHitRatio,
    error_rate: signals.values.errorRate,
    ...Object.fromEntries(
      Object.entries(POOL_SERIES).map(([key, names]) => [
        key,
        mapDefined(
          names.map(read).find((v) => v !== undefined),
          (v) => Math.max(0, v),
        ),
      ]),
    ),
    healthy: true,
  });
  const found = Object.keys(metrics).length > 1;
  const counters = Object.keys(signals.counters).length > 0 ? { counters: signals.counters } : {};
  // A page without any configured series still proves the endpoint answers; the missing signals stay missing.
  return {
    result: found ? 'success' : 'no_series',
    metrics,
    cache: { metrics, scrapedAtMs: nowMs, signals: signals.scraped, ...counters },
    stale: false,
    signals: signals.scraped,
  };
}

/**
 * A failed scrape uses the cached sample within staleMetricsSeconds; after that, TLS-configured metrics fail closed
 * (healthy=false) while plaintext ones fall back to neutral scoring, the reference's compatibility behaviour.
 */
function failed(
  config: MetricsScrapeConfig,
  cache: CachedSample | undefined,
  nowMs: number,
  result: ScrapeResult,
  detail: string,
): ScrapeOutcome {
  const graceMs = (config.staleMetricsSeconds ?? 0) * 1000;
  if (cache !== undefined && graceMs > 0 && nowMs - cache.scrapedAtMs <= graceMs) {
    return { result, metrics: cache.metrics, cache, stale: true, signals: cache.signals, detail };
  }
  const metrics = config.tls !== undefined ? { healthy: false } : undefined;
  return { result, metrics, cache, stale: false, signals: [], detail };
}

/** A credential goes only to a host proven by a configured CA, or over plaintext the user explicitly allowed. */
function refuseUnsafeCredential(config: MetricsScrapeConfig): string | undefined {
  if (config.url.protocol === 'https:' && config.tls?.ca === undefined) {
    return 'metrics auth over https needs spec.tls or metricsConfig.tls with a CA; system roots are not trusted with a credential';
  }
  if (config.url.protocol === 'http:' && config.allowPlaintext !== true) {
    return 'metrics auth over http:// is refused unless metricsConfig.allowPlaintext is set';
  }
  if (config.url.protocol !== 'https:' && config.url.protocol !== 'http:')
    return `metrics auth needs an http(s) endpoint, not ${config.url.protocol}`;
  return undefined;
}

function mapDefined(value: number | undefined, map: (v: number) => number): number | undefined {
  return value === undefined ? undefined : map(value);
}

function omitUndefined<T extends Record<string, unknown>>(record: T): T {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as T;
}
