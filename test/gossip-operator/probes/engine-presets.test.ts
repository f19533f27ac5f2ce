// Each engine preset (schemas/engines/engine-presets.json) scraped over real HTTP from that engine's exposition
// text (test/fixtures/engines/, see its README for where each came from), with the exact normalised values;
// overrides, queueCapacity, counter increments across scrapes, and pages missing the preset's series.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CachedSample,
  type MetricsScrapeConfig,
  scrapeMetrics,
} from '../../../daemons/gossip-operator/probes/metrics-scrape.ts';
import { parsePrometheusText } from '../../../daemons/gossip-operator/probes/prometheus-text.ts';
import { planSignals, readSignals } from '../../../daemons/gossip-operator/probes/signal-readings.ts';
import { closedPort } from '../../closed-port.ts';
import { REPO_ROOT } from '../../fixtures-path.ts';
import { type TestServer, startServer } from './servers.ts';

const page = (name: string) => readFileSync(join(REPO_ROOT, 'test/fixtures/engines', name), 'utf8');
const without = (text: string, ...fragments: string[]) =>
  text
    .split('\n')
    .filter((line) => !fragments.some((f) => line.includes(f)))
    .join('\n');

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A real metrics endpoint whose page the test can change between scrapes. */
async function engine(initial: string) {
  const state = { page: initial };
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(state.page);
  });
  servers.push(server);
  return {
    state,
    config: (extra: Partial<MetricsScrapeConfig>): MetricsScrapeConfig => ({
      url: new URL(`${server.url}/metrics`),
      timeoutMs: 2000,
      signalNames: {},
      ...extra,
    }),
  };
}

const scrape = async (text: string, extra: Partial<MetricsScrapeConfig>, cache?: CachedSample) => {
  const e = await engine(text);
  return scrapeMetrics(e.config(extra), cache, 1000);
};

describe("engine presets on each engine's own metrics", () => {
  it('vllm: waiting / (waiting + running), kv_cache_usage_perc, prefix-cache hits over queries', async () => {
    const outcome = await scrape(page('vllm.prom'), { engine: 'vllm' });
    // 3 waiting, 9 running; KV 0.4375; 1024 of 4096 queried prompt tokens hit the cache.
    expect(outcome.result).toBe('success');
    expect(outcome.metrics).toEqual({
      queue_depth: 0.25,
      kv_cache_utilization: 0.4375,
      prefix_cache_hit_ratio: 0.25,
      healthy: true,
    });
    expect(outcome.signals).toEqual([
      { signal: 'queueDepth', engine: 'vllm', metrics: ['vllm:num_requests_waiting', 'vllm:num_requests_running'] },
      { signal: 'kvCacheUtilization', engine: 'vllm', metrics: ['vllm:kv_cache_usage_perc'] },
      {
        signal: 'prefixCacheHitRatio',
        engine: 'vllm',
        metrics: ['vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total'],
      },
    ]);
  });

  it('vllm with two data-parallel engines: counts summed, the KV fraction averaged', async () => {
    const outcome = await scrape(page('vllm-dp2.prom'), { engine: 'vllm' });
    // (6 + 2) waiting / (8 + 10 + 14) = 0.25; KV (0.5 + 0.75) / 2; hits (1000 + 24) / queries (3000 + 1096).
    expect(outcome.metrics).toEqual({
      queue_depth: 0.25,
      kv_cache_utilization: 0.625,
      prefix_cache_hit_ratio: 0.25,
      healthy: true,
    });
    // Against a capacity, the waiting requests of both engines count: 8 / 16.
    expect((await scrape(page('vllm-dp2.prom'), { engine: 'vllm', queueCapacity: 16 })).metrics?.queue_depth).toBe(0.5);
  });

  it('vllm before 0.9: the gpu_ names are the fallback', async () => {
    const old = without(page('vllm.prom'), 'vllm:kv_cache_usage_perc', 'vllm:prefix_cache_');
    const outcome = await scrape(old, { engine: 'vllm' });
    expect(outcome.metrics).toEqual({
      queue_depth: 0.25,
      kv_cache_utilization: 0.4375,
      prefix_cache_hit_ratio: 0.25,
      healthy: true,
    });
    expect(outcome.signals.slice(1)).toEqual([
      { signal: 'kvCacheUtilization', engine: 'vllm', metrics: ['vllm:gpu_cache_usage_perc'] },
      {
        signal: 'prefixCacheHitRatio',
        engine: 'vllm',
        metrics: ['vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_queries_total'],
      },
    ]);
  });

  it('sglang: num_queue_reqs / (num_queue_reqs + num_running_reqs), token_usage, cache_hit_rate', async () => {
    const outcome = await scrape(page('sglang.prom'), { engine: 'sglang' });
    // 6 queued, 10 running; token_usage 0.625; cache_hit_rate 0.125.
    expect(outcome.metrics).toEqual({
      queue_depth: 0.375,
      kv_cache_utilization: 0.625,
      prefix_cache_hit_ratio: 0.125,
      healthy: true,
    });
    expect(outcome.signals).toEqual([
      { signal: 'queueDepth', engine: 'sglang', metrics: ['sglang:num_queue_reqs', 'sglang:num_running_reqs'] },
      { signal: 'kvCacheUtilization', engine: 'sglang', metrics: ['sglang:token_usage'] },
      { signal: 'prefixCacheHitRatio', engine: 'sglang', metrics: ['sglang:cache_hit_rate'] },
    ]);
  });

  it('tgi: tgi_queue_size / (tgi_queue_size + tgi_batch_current_size), and no KV-cache or prefix signal', async () => {
    const outcome = await scrape(page('tgi.prom'), { engine: 'tgi' });
    expect(outcome.metrics).toEqual({ queue_depth: 0.625, healthy: true });
    expect(outcome.signals).toEqual([
      { signal: 'queueDepth', engine: 'tgi', metrics: ['tgi_queue_size', 'tgi_batch_current_size'] },
    ]);
    expect(Object.keys(planSignals({}, 'tgi'))).toEqual(['queueDepth']);
  });

  it('triton-trtllm: label-selected series, waiting / (waiting + scheduled) and used / max KV blocks', async () => {
    const outcome = await scrape(page('triton-trtllm.prom'), { engine: 'triton-trtllm' });
    // 4 waiting, 16 scheduled (the other request_type series, active 20 and max 256, are not summed in);
    // 1536 of 6144 KV-cache blocks used.
    expect(outcome.metrics).toEqual({ queue_depth: 0.2, kv_cache_utilization: 0.25, healthy: true });
    expect(outcome.signals).toEqual([
      {
        signal: 'queueDepth',
        engine: 'triton-trtllm',
        metrics: [
          'nv_trt_llm_request_metrics{request_type="waiting"}',
          'nv_trt_llm_request_metrics{request_type="scheduled"}',
        ],
      },
      {
        signal: 'kvCacheUtilization',
        engine: 'triton-trtllm',
        metrics: [
          'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used"}',
          'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"}',
        ],
      },
    ]);
  });

  it('triton-trtllm without used/max blocks reads the fraction; an old backend without request_type="waiting" has no queue', async () => {
    const text = without(page('triton-trtllm.prom'), 'kv_cache_block_type="used"', 'request_type="waiting"');
    const outcome = await scrape(text, { engine: 'triton-trtllm' });
    expect(outcome.metrics).toEqual({ kv_cache_utilization: 0.25, healthy: true });
    expect(outcome.signals).toEqual([
      {
        signal: 'kvCacheUtilization',
        engine: 'triton-trtllm',
        metrics: ['nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}'],
      },
    ]);
  });
});

describe('overrides', () => {
  it('signalNames.queueDepth replaces the preset for the queue only', async () => {
    const outcome = await scrape(`${page('vllm.prom')}# TYPE my_queue gauge\nmy_queue 0.9\n`, {
      engine: 'vllm',
      signalNames: { queueDepth: 'my_queue' },
    });
    expect(outcome.metrics).toEqual({
      queue_depth: 0.9,
      kv_cache_utilization: 0.4375,
      prefix_cache_hit_ratio: 0.25,
      healthy: true,
    });
    expect(outcome.signals[0]).toEqual({ signal: 'queueDepth', metrics: ['my_queue'] });
  });

  it('an override naming a metric the page lacks leaves that signal missing; the preset does not step in', async () => {
    const outcome = await scrape(page('vllm.prom'), { engine: 'vllm', signalNames: { queueDepth: 'my_queue' } });
    expect(outcome.metrics?.queue_depth).toBeUndefined();
    expect(outcome.metrics?.kv_cache_utilization).toBe(0.4375);
  });

  it('an engine that bypassed the CRD enum fills nothing and breaks nothing; signalNames still apply', () => {
    expect(planSignals({}, 'llamacpp' as never)).toEqual({});
    expect(planSignals({ kvCacheUtilization: 'kv' }, 'llamacpp' as never)).toEqual({
      kvCacheUtilization: { from: 'signalNames', metric: 'kv' },
    });
  });

  it("queueCapacity wins over the preset's denominator: waiting / queueCapacity, clamped", async () => {
    const vllm = await scrape(page('vllm.prom'), { engine: 'vllm', queueCapacity: 4 });
    expect(vllm.metrics?.queue_depth).toBe(0.75);
    expect(vllm.signals[0]).toEqual({ signal: 'queueDepth', engine: 'vllm', metrics: ['vllm:num_requests_waiting'] });
    expect(
      (await scrape(page('triton-trtllm.prom'), { engine: 'triton-trtllm', queueCapacity: 16 })).metrics?.queue_depth,
    ).toBe(0.25);
    expect((await scrape(page('tgi.prom'), { engine: 'tgi', queueCapacity: 2 })).metrics?.queue_depth).toBe(1);
  });
});

describe('prefix-cache counters across scrapes', () => {
  const counters = (queries: number, hits: number) =>
    [
      '# TYPE vllm:prefix_cache_queries_total counter',
      `vllm:prefix_cache_queries_total{engine="0",model_name="m"} ${queries}.0`,
      '# TYPE vllm:prefix_cache_hits_total counter',
      `vllm:prefix_cache_hits_total{engine="0",model_name="m"} ${hits}.0`,
      '',
    ].join('\n');

  it('uses the increments since the last good scrape, keeps the ratio over an idle interval, and restarts on a reset', async () => {
    const e = await engine(counters(4096, 1024));
    const cfg = e.config({ engine: 'vllm' });
    const first = await scrapeMetrics(cfg, undefined, 1000);
    // No baseline yet: the totals.
    expect(first.metrics?.prefix_cache_hit_ratio).toBe(0.25);
    e.state.page = counters(5120, 1792);
    const second = await scrapeMetrics(cfg, first.cache, 2000);
    // 768 hits of 1024 new queries.
    expect(second.metrics?.prefix_cache_hit_ratio).toBe(0.75);
    const idle = await scrapeMetrics(cfg, second.cache, 3000);
    expect(idle.metrics?.prefix_cache_hit_ratio).toBe(0.75);
    // The engine restarted: counters went backwards, so its new totals are the increase.
    e.state.page = counters(512, 64);
    const restarted = await scrapeMetrics(cfg, idle.cache, 4000);
    expect(restarted.metrics?.prefix_cache_hit_ratio).toBe(0.125);
  });

  it('has no ratio before the first query, and finds one as soon as queries arrive', async () => {
    const e = await engine(counters(0, 0));
    const cfg = e.config({ engine: 'vllm' });
    const first = await scrapeMetrics(cfg, undefined, 1000);
    expect(first.metrics?.prefix_cache_hit_ratio).toBeUndefined();
    expect(first.signals).toEqual([]);
    e.state.page = counters(200, 50);
    expect((await scrapeMetrics(cfg, first.cache, 2000)).metrics?.prefix_cache_hit_ratio).toBe(0.25);
  });

  it('a failed scrape keeps the last good baseline', async () => {
    const e = await engine(counters(1000, 500));
    const cfg = e.config({ engine: 'vllm', staleMetricsSeconds: 60 });
    const first = await scrapeMetrics(cfg, undefined, 1000);
    const failed = await scrapeMetrics(
      { ...cfg, url: new URL(`http://127.0.0.1:${await closedPort()}/metrics`) },
      first.cache,
      2000,
    );
    expect(failed).toMatchObject({ stale: true, cache: first.cache });
    e.state.page = counters(2000, 600);
    expect((await scrapeMetrics(cfg, failed.cache, 3000)).metrics?.prefix_cache_hit_ratio).toBe(0.1);
  });
});

describe("pages without the preset's series", () => {
  it("another engine's page: no_series, every preset signal missing", async () => {
    const outcome = await scrape(page('tgi.prom'), { engine: 'vllm' });
    expect(outcome).toMatchObject({ result: 'no_series', metrics: { healthy: true }, signals: [] });
    expect(Object.keys(outcome.metrics ?? {})).toEqual(['healthy']);
  });

  it('a queue with its waiting count but no running count is missing, not NaN', async () => {
    const outcome = await scrape(without(page('vllm.prom'), 'vllm:num_requests_running'), { engine: 'vllm' });
    expect(outcome.metrics?.queue_depth).toBeUndefined();
    expect(outcome.metrics?.kv_cache_utilization).toBe(0.4375);
  });

  it('an idle engine has an empty queue; a zero block total or non-finite samples give no value, never NaN or Infinity', () => {
    const plan = planSignals({}, 'triton-trtllm');
    const idle = readSignals(
      parsePrometheusText(
        'nv_trt_llm_request_metrics{request_type="waiting"} 0\nnv_trt_llm_request_metrics{request_type="scheduled"} 0\n',
      ),
      plan,
    );
    expect(idle.values).toEqual({ queueDepth: 0 });
    const noBlocks = readSignals(
      parsePrometheusText(
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used"} 0\nnv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"} 0\n',
      ),
      plan,
    );
    expect(noBlocks.values).toEqual({});
    const garbage = readSignals(
      parsePrometheusText(
        'vllm:num_requests_waiting NaN\nvllm:num_requests_running +Inf\nvllm:kv_cache_usage_perc 1e309\n',
      ),
      planSignals({}, 'vllm'),
    );
    expect(garbage).toEqual({ values: {}, scraped: [], counters: {} });
    const huge = readSignals(
      parsePrometheusText(
        'vllm:num_requests_waiting 1e308\nvllm:num_requests_waiting{engine="1"} 1e308\nvllm:num_requests_running 1\n',
      ),
      planSignals({}, 'vllm'),
    );
    expect(huge.values).toEqual({});
  });
});
