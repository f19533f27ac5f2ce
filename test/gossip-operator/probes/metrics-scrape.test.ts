import { afterEach, describe, expect, it } from 'vitest';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import { type MetricsScrapeConfig, scrapeMetrics } from '../../../daemons/gossip-operator/probes/metrics-scrape.ts';
import { closedPort } from '../../closed-port.ts';
import { type TestServer, startServer } from './servers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function metricsServer(page: () => string, status = 200) {
  const server = await startServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain' });
    res.end(page());
  });
  servers.push(server);
  return server;
}

const signals = { queueDepth: 'queue', kvCacheUtilization: 'kv' };
const config = (url: string, extra: Partial<MetricsScrapeConfig> = {}): MetricsScrapeConfig => ({
  url: new URL(`${url}/metrics`),
  timeoutMs: 2000,
  signalNames: signals,
  ...extra,
});

describe('InferenceProvider metrics scrape (seed 001 "Metrics configuration", seed 004 "Stale metrics grace period")', () => {
  it('reads the configured signals and clamps them to [0,1]', async () => {
    const server = await metricsServer(() => 'queue 0.3\nkv 1.7\n');
    const outcome = await scrapeMetrics(config(server.url), undefined, 1000);
    expect(outcome).toMatchObject({
      result: 'success',
      metrics: { queue_depth: 0.3, kv_cache_utilization: 1, healthy: true },
      stale: false,
    });
    const signals = [
      { signal: 'queueDepth', metrics: ['queue'] },
      { signal: 'kvCacheUtilization', metrics: ['kv'] },
    ];
    expect(outcome.signals).toEqual(signals);
    expect(outcome.cache).toEqual({ metrics: outcome.metrics, scrapedAtMs: 1000, signals });
  });

  it('divides an absolute queue size by queueCapacity ("AGN divides the raw value by that capacity and clamps")', async () => {
    const server = await metricsServer(() => 'queue 12\n');
    expect((await scrapeMetrics(config(server.url, { queueCapacity: 16 }), undefined, 0)).metrics?.queue_depth).toBe(
      0.75,
    );
    expect((await scrapeMetrics(config(server.url, { queueCapacity: 4 }), undefined, 0)).metrics?.queue_depth).toBe(1);
  });

  it('filters series by poolName', async () => {
    const server = await metricsServer(() => 'queue{name="a"} 0.1\nqueue{name="b"} 0.8\n');
    expect((await scrapeMetrics(config(server.url, { poolName: 'b' }), undefined, 0)).metrics?.queue_depth).toBe(0.8);
  });

  it('relays the EPP pool series as is, whatever signalNames says, scoped to the pool (reference site-selection.md "Inputs")', async () => {
    const page = [
      'llm_d_epp_average_running_requests{name="a"} 3',
      'llm_d_epp_average_running_requests{name="b"} 9',
      'inference_pool_per_pod_queue_size{name="a"} 1.5',
      'llm_d_epp_flow_control_queue_size{name="a"} 4',
      'llm_d_epp_ready_endpoints{name="a"} 2',
    ].join('\n');
    const server = await metricsServer(() => `${page}\n`);
    const outcome = await scrapeMetrics(config(server.url, { poolName: 'a', signalNames: {} }), undefined, 0);
    // The fallback name carries waiting when llm_d_epp_average_queue_size is absent; nothing is clamped to [0,1].
    expect(outcome).toMatchObject({
      result: 'success',
      metrics: {
        running_per_endpoint: 3,
        waiting_per_endpoint: 1.5,
        flow_control_held: 4,
        ready_endpoints: 2,
        healthy: true,
      },
    });
    const preferred = await metricsServer(
      () => 'llm_d_epp_average_queue_size 0.5\ninference_pool_per_pod_queue_size 7\nllm_d_epp_ready_endpoints 0\n',
    );
    const both = await scrapeMetrics(config(preferred.url, { signalNames: {} }), undefined, 0);
    expect(both.metrics).toEqual({ waiting_per_endpoint: 0.5, ready_endpoints: 0, healthy: true });
  });

  it('reports no_series when the page lacks every configured signal, leaving the signals missing', async () => {
    const server = await metricsServer(() => 'something_else 1\n');
    const outcome = await scrapeMetrics(config(server.url), undefined, 0);
    expect(outcome.result).toBe('no_series');
    expect(outcome.metrics).toEqual({ healthy: true });
  });

  it('falls back to neutral scoring on a plaintext failure ("plaintext configuration retains the neutral-scoring compatibility behavior")', async () => {
    const server = await metricsServer(() => 'oops', 500);
    const outcome = await scrapeMetrics(config(server.url), undefined, 0);
    expect(outcome).toMatchObject({ result: 'http_status', metrics: undefined, stale: false });
    const port = await closedPort();
    expect(await scrapeMetrics(config(`http://127.0.0.1:${port}`), undefined, 0)).toMatchObject({
      result: 'unreachable',
      metrics: undefined,
    });
  });

  it('reuses the last sample within staleMetricsSeconds, not after', async () => {
    const port = await closedPort();
    const cache = {
      metrics: { queue_depth: 0.2, healthy: true },
      scrapedAtMs: 10_000,
      signals: [{ signal: 'queueDepth' as const, metrics: ['queue'] }],
    };
    const cfg = config(`http://127.0.0.1:${port}`, { staleMetricsSeconds: 30 });
    // The reused sample keeps saying where its signals came from.
    expect(await scrapeMetrics(cfg, cache, 40_000)).toMatchObject({
      metrics: cache.metrics,
      stale: true,
      signals: cache.signals,
    });
    expect(await scrapeMetrics(cfg, cache, 40_001)).toMatchObject({ metrics: undefined, stale: false, signals: [] });
  });

  it('fails closed (healthy=false) when TLS is configured and no usable sample remains', async () => {
    const ca = await createCertificateAuthority();
    const otherCa = await createCertificateAuthority();
    const leaf = await createServerCertificate(ca, { commonName: 'metrics', sans: ['127.0.0.1'] });
    const server = await startServer((_q, res) => res.end('queue 0.5\n'), { cert: leaf.certPem, key: leaf.keyPem });
    servers.push(server);
    const good = await scrapeMetrics(config(server.url, { tls: { ca: ca.certPem } }), undefined, 0);
    expect(good).toMatchObject({ result: 'success', metrics: { queue_depth: 0.5, healthy: true } });
    const wrongCa = await scrapeMetrics(config(server.url, { tls: { ca: otherCa.certPem } }), undefined, 0);
    expect(wrongCa).toMatchObject({ result: 'tls', metrics: { healthy: false } });
  });

  it('sends a bearer token only where a CA proves the host or plaintext is explicitly allowed', async () => {
    const server = await metricsServer(() => 'queue 0.1\n');
    let asked = 0;
    const bearer = async () => {
      asked += 1;
      return { ok: true as const, token: 'tok-123' };
    };
    const refused = await scrapeMetrics(config(server.url, { bearer }), undefined, 0);
    expect(refused).toMatchObject({ result: 'config' });
    expect(refused.detail).not.toContain('tok-123');
    expect(server.requests).toHaveLength(0);
    const httpsNoCa = await scrapeMetrics(config('https://127.0.0.1:1', { bearer }), undefined, 0);
    expect(httpsNoCa.result).toBe('config');
    expect(httpsNoCa.detail).toContain('system roots are not trusted');
    // A refused endpoint never costs a TokenRequest.
    expect(asked).toBe(0);
    const allowed = await scrapeMetrics(config(server.url, { bearer, allowPlaintext: true }), undefined, 0);
    expect(allowed.result).toBe('success');
    expect(server.requests[0]?.headers.authorization).toBe('Bearer tok-123');
  });

  it('gives up on a server that never answers within the timeout', async () => {
    const server = await startServer(() => {
      /* never responds */
    });
    servers.push(server);
    const started = Date.now();
    const outcome = await scrapeMetrics(config(server.url, { timeoutMs: 300 }), undefined, 0);
    expect(outcome.result).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
