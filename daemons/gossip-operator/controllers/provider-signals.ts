/**
 * The signals loop's memory (for the stale-metrics grace period, staleMetricsSeconds): per provider, the last
 * successful sample (per process, cleared on restart), the scrape generation (a sample counts once in admission) and
 * the latest outcome, which the InferenceProvider controller turns into the Ready condition.
 */
import type { InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { ScrapedSignal } from '../../../schemas/generated/inferenceproviders.ts';
import { joinUrl } from '../probes/http-probe.ts';
import { scrapeMetrics, type CachedSample, type ScrapeOutcome, type ScrapeResult } from '../probes/metrics-scrape.ts';
import type { BearerResult } from '../probes/scraper-token.ts';
import { planSignals } from '../probes/signal-readings.ts';
import type { LocalMetrics, MetricSignal, MetricsSample } from '../../routing/model.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import type { OperatorMetrics } from '../metrics.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { parseDurationMs } from '../../../schemas/durations.ts';

export interface SignalState {
  readonly result: ScrapeResult;
  readonly sample: MetricsSample | undefined;
  readonly stale: boolean;
  readonly detail?: string;
  /** True when a TLS-configured provider fails closed (Ready False, excluded from routing). */
  readonly failedClosed: boolean;
  /** The signals the sample holds and the series each came from (status.scrapedSignals). */
  readonly signals: readonly ScrapedSignal[];
  /** Signals signalNames or the engine preset configures, whether or not the page had them. */
  readonly configured: readonly string[];
}

interface Entry {
  cache: CachedSample | undefined;
  generation: number;
  last: SignalState | undefined;
}

export class ProviderSignals {
  readonly #entries = new Map<string, Entry>();
  /** The scraper ServiceAccount token for metricsConfig.auth; absent, such scrapes fail with result `auth`. */
  readonly #bearer: (() => Promise<BearerResult>) | undefined;

  constructor(bearer?: () => Promise<BearerResult>) {
    this.#bearer = bearer;
  }

  latest(provider: string): SignalState | undefined {
    return this.#entries.get(provider)?.last;
  }

  /** Every provider's latest sample, for the peer signals endpoint. */
  samples(): { provider: string; sample: MetricsSample }[] {
    const out: { provider: string; sample: MetricsSample }[] = [];
    for (const [provider, entry] of this.#entries)
      if (entry.last?.sample !== undefined) out.push({ provider, sample: entry.last.sample });
    return out;
  }

  forget(provider: string): void {
    this.#entries.delete(provider);
  }

  /**
   * Scrapes one provider (when spec.metricsConfig is set) and returns what routing reads. Returns whether the
   * outcome class changed, so the caller can ask the provider controller to update Ready.
   */
  async scrape(
    store: ResourceStore,
    metrics: OperatorMetrics,
    provider: InferenceProviderResource,
    nowMs: number,
  ): Promise<{ local: LocalMetrics | undefined; changed: boolean }> {
    const name = provider.metadata.name;
    const config = provider.spec.metricsConfig;
    if (config === undefined) {
      const had = this.#entries.has(name);
      this.#entries.delete(name);
      return { local: undefined, changed: had };
    }
    const entry = this.#entries.get(name) ?? { cache: undefined, generation: 0, last: undefined };
    this.#entries.set(name, entry);
    const signalNames = config.signalNames ?? {};
    // A signal is configured when signalNames names it or the engine preset reads it; admission treats the others
    // as NotConfigured, so an engine without a KV-cache metric never fails closed on kvCachePressure.
    const plan = planSignals(signalNames, config.engine);
    const configured = Object.keys(plan);
    const configuredSignals = (['queueDepth', 'kvCacheUtilization'] as const).filter(
      (s): s is MetricSignal => plan[s] !== undefined,
    );

    const tlsSpec = config.tls ?? provider.spec.tls;
    const tls = await resolveEndpointTls(store, tlsSpec, 'MetricsTls');
    let outcome: ScrapeOutcome;
    if (!tls.ok) {
      // Unresolvable TLS material never falls back to an unverified scrape: fail closed like a TLS scrape failure.
      outcome = {
        result: 'tls',
        metrics: { healthy: false },
        cache: entry.cache,
        stale: false,
        signals: [],
        detail: tls.message,
      };
    } else {
      let url: URL;
      try {
        url = joinUrl(config.endpoint ?? provider.spec.endpoint, config.path ?? '/metrics');
      } catch {
        url = new URL('invalid:');
      }
      const timeoutMs = config.timeout !== undefined ? (parseDurationMs(config.timeout) ?? 2000) : 2000;
      outcome =
        url.protocol === 'invalid:'
          ? {
              result: 'config',
              metrics: undefined,
              cache: entry.cache,
              stale: false,
              signals: [],
              detail: 'metrics endpoint is not a valid URL',
            }
          : await scrapeMetrics(
              {
                url,
                timeoutMs,
                signalNames,
                ...(config.engine !== undefined ? { engine: config.engine } : {}),
                ...(config.poolName !== undefined ? { poolName: config.poolName } : {}),
                ...(config.queueCapacity !== undefined ? { queueCapacity: config.queueCapacity } : {}),
                ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
                ...(config.staleMetricsSeconds !== undefined
                  ? { staleMetricsSeconds: config.staleMetricsSeconds }
                  : {}),
                ...(config.auth !== undefined
                  ? { bearer: this.#bearer ?? noScraperToken, allowPlaintext: config.auth.allowPlaintext === true }
                  : {}),
              },
              entry.cache,
              nowMs,
            );
    }
    metrics.providerScrapes.inc({ grid_provider: name, result: outcome.result });
    if (outcome.result === 'success') metrics.providerLastScrapeSuccess.set({ grid_provider: name }, nowMs / 1000);
    entry.cache = outcome.cache;
    if (!outcome.stale && outcome.cache !== undefined && outcome.cache.scrapedAtMs === nowMs) entry.generation += 1;
    const m = outcome.metrics;
    const sample: MetricsSample | undefined =
      m === undefined
        ? undefined
        : {
            generation: entry.generation,
            observedAtMs: outcome.stale ? (outcome.cache?.scrapedAtMs ?? nowMs) : nowMs,
            healthy: m.healthy,
            ...(m.queue_depth !== undefined ? { queueDepth: m.queue_depth } : {}),
            ...(m.kv_cache_utilization !== undefined ? { kvCacheUtilization: m.kv_cache_utilization } : {}),
            ...(m.prefix_cache_hit_ratio !== undefined ? { prefixCacheHitRatio: m.prefix_cache_hit_ratio } : {}),
            ...(m.latency_p99_ms !== undefined ? { latencyP99Ms: m.latency_p99_ms } : {}),
            ...(m.error_rate !== undefined ? { errorRate: m.error_rate } : {}),
            ...(m.running_per_endpoint !== undefined ? { runningPerEndpoint: m.running_per_endpoint } : {}),
            ...(m.waiting_per_endpoint !== undefined ? { waitingPerEndpoint: m.waiting_per_endpoint } : {}),
            ...(m.flow_control_held !== undefined ? { flowControlHeld: m.flow_control_held } : {}),
            ...(m.ready_endpoints !== undefined ? { readyEndpoints: m.ready_endpoints } : {}),
          };
    const next: SignalState = {
      result: outcome.result,
      sample,
      stale: outcome.stale,
      ...(outcome.detail !== undefined ? { detail: outcome.detail } : {}),
      failedClosed: m !== undefined && !m.healthy,
      signals: outcome.signals,
      configured,
    };
    // Status shows the outcome class and where each signal came from, not the values: those change every scrape.
    const changed =
      entry.last === undefined ||
      entry.last.result !== next.result ||
      entry.last.failedClosed !== next.failedClosed ||
      entry.last.stale !== next.stale ||
      JSON.stringify(entry.last.signals) !== JSON.stringify(next.signals) ||
      JSON.stringify(entry.last.configured) !== JSON.stringify(next.configured);
    entry.last = next;
    // The scrape already divided by queueCapacity; routing must not divide again, so it gets no capacity here.
    return { local: { configuredSignals, ...(sample !== undefined ? { sample } : {}) }, changed };
  }
}

async function noScraperToken(): Promise<BearerResult> {
  return {
    ok: false,
    detail: 'metricsConfig.auth serviceAccountToken: this operator has no scraper ServiceAccount configured',
  };
}
