/**
 * Signals polled from peers, as routing reads them under signalTransport poll: per (site, provider) the latest
 * valid row as a MetricsSample, or a mark that the provider's last row was refused. Only refused rows become
 * unavailable for provider measurement; a provider the peer did not list keeps its gossiped record untouched.
 */
import type { PeerSignalRow } from '../../../schemas/generated/peer-signals.ts';
import type { MetricsSample, RemoteProviderRecord } from '../../routing/model.ts';

type Entry = { readonly kind: 'sample'; readonly sample: MetricsSample } | { readonly kind: 'refused' };

export class PolledSignals {
  readonly #sites = new Map<string, Map<string, Entry>>();

  /**
   * Replaces what one peer's latest answer said. The observation time is the local wall clock minus the relayed
   * age: the peer's clock is never read. Returns whether anything routing reads changed.
   */
  replaceSite(
    site: string,
    valid: readonly PeerSignalRow[],
    refusedProviders: readonly string[],
    wallNowMs: number,
  ): boolean {
    const before = this.#sites.get(site);
    const next = new Map<string, Entry>();
    for (const row of valid) {
      const s = row.signals;
      next.set(row.provider, {
        kind: 'sample',
        sample: {
          generation: row.generation,
          observedAtMs: wallNowMs - row.age_ms,
          healthy: s.healthy,
          ...(s.queue_depth !== undefined ? { queueDepth: s.queue_depth } : {}),
          ...(s.kv_cache_utilization !== undefined ? { kvCacheUtilization: s.kv_cache_utilization } : {}),
          ...(s.prefix_cache_hit_ratio !== undefined ? { prefixCacheHitRatio: s.prefix_cache_hit_ratio } : {}),
          ...(s.latency_p99_ms !== undefined ? { latencyP99Ms: s.latency_p99_ms } : {}),
          ...(s.error_rate !== undefined ? { errorRate: s.error_rate } : {}),
        },
      });
    }
    for (const provider of refusedProviders) if (!next.has(provider)) next.set(provider, { kind: 'refused' });
    this.#sites.set(site, next);
    return !sameValues(before, next);
  }

  /** A peer that left membership: its polled rows go with it. */
  dropSite(site: string): boolean {
    return this.#sites.delete(site);
  }

  sites(): string[] {
    return [...this.#sites.keys()];
  }

  entry(site: string, provider: string): Entry | undefined {
    return this.#sites.get(site)?.get(provider);
  }

  /** The remote record as routing should see it under poll: polled values, or none for a refused row. */
  apply(record: RemoteProviderRecord): RemoteProviderRecord {
    const entry = this.entry(record.site, record.provider);
    if (entry === undefined) return record;
    const { metrics: _gossiped, ...rest } = record;
    return entry.kind === 'sample' ? { ...rest, metrics: entry.sample } : rest;
  }
}

function sameValues(a: Map<string, Entry> | undefined, b: Map<string, Entry>): boolean {
  if (a === undefined || a.size !== b.size) return false;
  for (const [provider, entry] of b) {
    const other = a.get(provider);
    if (other === undefined || other.kind !== entry.kind) return false;
    if (entry.kind === 'sample' && other.kind === 'sample') {
      // The observation time moves every poll; what changes routing is the values and the generation.
      const { observedAtMs: _x, ...x } = entry.sample;
      const { observedAtMs: _y, ...y } = other.sample;
      if (JSON.stringify(x) !== JSON.stringify(y)) return false;
    }
  }
  return true;
}
