// Engine presets in a running operator on the local store: providers that name only metricsConfig.engine are
// scraped from a real HTTP server serving each engine's exposition text (test/fixtures/engines/), and get their
// queue and KV-cache signals in status and in the overlay's score_breakdown; an explicit signalNames entry
// overrides one signal and leaves the others to the preset; an engine without a KV-cache metric (TGI) leaves that
// signal NotConfigured, while a page missing the preset's metrics leaves it missing (and missingMetrics applies);
// an engine the CRD does not list is refused in status.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';
import { startServer, type TestServer } from './probes/servers.ts';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const fixture = (name: string) => readFile(join(REPO_ROOT, 'test/fixtures/engines', name), 'utf8');

describe('operator: metricsConfig.engine presets', () => {
  let engines: TestServer;
  let op: LocalOperator;
  let dirs: { path: string; remove: () => Promise<void> };
  const state = () => join(dirs.path, 'state');

  beforeAll(async () => {
    const vllm = await fixture('vllm.prom');
    const pages: Record<string, string> = {
      '/vllm/metrics': vllm,
      // An exporter-side normalised queue gauge next to vLLM's own series (a "destination-normalized" queue signal).
      '/vllm-own-queue/metrics': `${vllm}# TYPE my_queue gauge\nmy_queue 0.625\n`,
      '/tgi/metrics': await fixture('tgi.prom'),
      // A page that answers but carries none of the vLLM preset's series (e.g. the wrong port: a sidecar's metrics).
      '/blank/metrics': vllm
        .split('\n')
        .filter((line) => !line.includes('vllm:'))
        .join('\n'),
    };
    engines = await startServer((req, res) => {
      const page = pages[req.url ?? ''];
      res.writeHead(page === undefined ? 404 : 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(page ?? '');
    });
    dirs = await tempDir('engine-presets');
    const manifests = join(dirs.path, 'manifests');
    await renderFixture('engine-presets/grid.yaml', { ENGINES_URL: engines.url }, manifests);
    op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state() } }), {
      stateDir: state(),
      manifestsDir: manifests,
    });
  });

  afterAll(async () => {
    await op?.stop();
    await engines?.close();
    await dirs?.remove();
  });

  const provider = (name: string, ready: (p: Json) => boolean) =>
    waitFor(`${name} status`, async () => {
      const p: Json = await grid(state(), 'InferenceProvider', name);
      return p?.status?.conditions?.some((c: Json) => c.type === 'Ready') && ready(p) ? p : undefined;
    });
  const readyOf = (p: Json) => p.status.conditions.find((c: Json) => c.type === 'Ready');
  const candidate = (cluster: string) =>
    waitFor(`${cluster} in the overlay`, async () => {
      const cm: Json = await configMap(state(), 'grid-system', 'grid-overlay-grid-edge');
      const found =
        cm === undefined
          ? undefined
          : (JSON.parse(cm.data['routing-overlay.json']).overlay.candidates as Json[]).find(
              (c) => c.cluster === cluster,
            );
      return found?.score_breakdown !== undefined && found.score_breakdown.kv_cache !== undefined ? found : undefined;
    });

  it('fills queue, KV-cache and prefix-cache signals from engine: vllm alone', async () => {
    const p = await provider(
      'vllm-pool',
      (x) => readyOf(x).reason === 'MetricsScraped' && x.status.scrapedSignals !== undefined,
    );
    expect(p.status.phase).toBe('Available');
    expect(p.status.scrapedSignals).toEqual([
      { signal: 'queueDepth', engine: 'vllm', metrics: ['vllm:num_requests_waiting', 'vllm:num_requests_running'] },
      { signal: 'kvCacheUtilization', engine: 'vllm', metrics: ['vllm:kv_cache_usage_perc'] },
      {
        signal: 'prefixCacheHitRatio',
        engine: 'vllm',
        metrics: ['vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total'],
      },
    ]);
    expect(readyOf(p).message).toBe('the last scrape returned queueDepth, kvCacheUtilization, prefixCacheHitRatio');
    // waiting 3 / (3 waiting + 9 running) = 0.25; kv_cache_usage_perc 0.4375; hits 1024 / queries 4096 = 0.25.
    const c = await candidate('vllm-pool');
    expect(c.score_breakdown).toMatchObject({ queue_depth: 0.75, kv_cache: 0.5625, prefix_cache: 0.25 });
    expect(c.admission_state).toBe('new_and_existing');
  });

  it('lets signalNames.queueDepth override the preset for the queue only', async () => {
    const p = await provider(
      'vllm-own-queue',
      (x) => readyOf(x).reason === 'MetricsScraped' && x.status.scrapedSignals !== undefined,
    );
    expect(p.status.scrapedSignals.slice(0, 2)).toEqual([
      { signal: 'queueDepth', metrics: ['my_queue'] },
      { signal: 'kvCacheUtilization', engine: 'vllm', metrics: ['vllm:kv_cache_usage_perc'] },
    ]);
    const c = await candidate('vllm-own-queue');
    expect(c.score_breakdown).toMatchObject({ queue_depth: 0.375, kv_cache: 0.5625 });
  });

  it('leaves a signal the engine does not export NotConfigured (TGI has no KV-cache metric)', async () => {
    const p = await provider(
      'tgi-pool',
      (x) => readyOf(x).reason === 'MetricsScraped' && x.status.scrapedSignals !== undefined,
    );
    // tgi_queue_size 5 / (5 queued + 3 in the batch) = 0.625.
    expect(p.status.scrapedSignals).toEqual([
      { signal: 'queueDepth', engine: 'tgi', metrics: ['tgi_queue_size', 'tgi_batch_current_size'] },
    ]);
    const c = await candidate('tgi-pool');
    expect(c.score_breakdown).toMatchObject({ queue_depth: 0.375, kv_cache: 0.5 });
    // kvCachePressure with no KV-cache signal configured: the missing-metrics policy does not apply.
    expect(c.admission_state).toBe('new_and_existing');
  });

  it('treats a page without the preset series as missing signals: missingMetrics applies, nothing crashes', async () => {
    const p = await provider('vllm-blank', (x) => readyOf(x).reason === 'MetricsNoSeries');
    expect(p.status.phase).toBe('Available');
    expect(p.status.scrapedSignals).toBeUndefined();
    const c = await candidate('vllm-blank');
    expect(c.score_breakdown).toMatchObject({ queue_depth: 0.5, kv_cache: 0.5 });
    expect(c.admission_state).toBe('existing_only');
  });

  it('refuses an engine the CRD does not list in status, and routes the others as before', async () => {
    const p = await provider('bad-engine', (x) => x.status.phase === 'Unavailable');
    expect(p.status.reason).toBe('ProviderConfigInvalid');
    expect(p.status.message).toBe(
      'spec.metricsConfig.engine: must be one of "vllm", "sglang", "tgi", "triton-trtllm" (got "llamacpp")',
    );
    expect(readyOf(p).status).toBe('False');
    await candidate('vllm-pool');
    // What the operator wrote is what an API server would accept (CRD schema and CEL rules, status included); the
    // one spec problem is the refused provider's own.
    expect(await schemaProblems(state())).toEqual([
      'InferenceProvider/bad-engine.json spec.metricsConfig.engine: must be one of "vllm", "sglang", "tgi", "triton-trtllm" (got "llamacpp")',
    ]);
  });
});
