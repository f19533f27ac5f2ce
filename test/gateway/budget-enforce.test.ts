// budget_enforce: per-key minute windows and OpenAI's x-ratelimit-* headers (pure, with a clock), and at a real
// consumer gateway whose budgets come from a real operator ingest listener: an over-budget tenant gets 429
// insufficient_quota once the next poll lands while another tenant is served, a stream already running finishes,
// and a key over its request limit gets 429 rate_limit_exceeded with Retry-After.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { ConfigError, resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { KeyQuota, resetText } from '../../daemons/gateway/usage/key-quota.ts';
import { GatewayAgeIngest } from '../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../daemons/gossip-operator/metrics.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';
import { testTokenFile } from '../ingest-token.ts';

describe('key quota', () => {
  it('counts requests per key in one-minute windows and answers OpenAI headers', () => {
    const clock = { ms: 0 };
    const quota = new KeyQuota(() => clock.ms);
    const limits = { requestsPerMinute: 2 };
    expect(quota.admit('k1', limits)).toEqual({
      ok: true,
      headers: {
        'x-ratelimit-limit-requests': '2',
        'x-ratelimit-remaining-requests': '1',
        'x-ratelimit-reset-requests': '1m0s',
      },
    });
    clock.ms = 15_500;
    expect(quota.admit('k1', limits).headers['x-ratelimit-remaining-requests']).toBe('0');
    expect(quota.admit('k1', limits)).toMatchObject({
      ok: false,
      kind: 'requests',
      retryAfterSeconds: 45,
      headers: { 'x-ratelimit-reset-requests': '45s' },
    });
    expect(quota.admit('k2', limits).ok).toBe(true);
    clock.ms = 60_000;
    expect(quota.admit('k1', limits).ok).toBe(true);
  });

  it('refuses a key whose answered tokens used up its minute', () => {
    const clock = { ms: 0 };
    const quota = new KeyQuota(() => clock.ms);
    expect(quota.admit('k', { tokensPerMinute: 100 }).ok).toBe(true);
    quota.consumeTokens('k', 60);
    expect(quota.admit('k', { tokensPerMinute: 100 }).headers['x-ratelimit-remaining-tokens']).toBe('40');
    quota.consumeTokens('k', 60);
    expect(quota.admit('k', { tokensPerMinute: 100 })).toMatchObject({
      ok: false,
      kind: 'tokens',
      headers: { 'x-ratelimit-remaining-tokens': '0' },
    });
    expect([resetText(250), resetText(1_000), resetText(61_000)]).toEqual(['250ms', '1s', '1m1s']);
  });
});

describe('budget_enforce at a consumer gateway', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let sim: SimServer;
  let store: LocalStore;
  let ingest: GatewayAgeIngest;
  let gateway: GatewayInstance;
  let base: string;
  const a = mintCallerKey('tenant-a');
  const b = mintCallerKey('tenant-b');
  const c = mintCallerKey('tenant-c');
  const logger = createLogger({ name: 'test', level: 'warn', destination: { write: () => undefined } });
  let config: Record<string, unknown>;

  const budgets = (ratios: Record<string, number>) =>
    store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      {
        budgetStatus: Object.entries(ratios).map(([tenantId, spendRatio]) => ({
          tenantId,
          capUsd: 10,
          spendUsd: spendRatio * 10,
          spendRatio,
        })),
      },
      { fieldManager: 'test' },
    );
  const chat = (key: string) =>
    call(`${base}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
      body: { model: 'm1', messages: [] },
    });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('budget'));
    store = await openLocalStore({ stateDir: join(dir, 'store'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    await budgets({ 'tenant-a': 0.2, 'tenant-b': 0.2, 'tenant-c': 0.2 });
    ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger,
      metrics: new OperatorMetrics(),
    });
    await ingest.start();
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1' });
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ keys: [a.entry, b.entry, c.entry] }));
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(
      overlayPath,
      payload([
        {
          ...candidate('m1', 'west', 'west-sim'),
          credential: { strategy: 'bearer_token', secretRef: { name: 't', namespace: 'n', key: 'k' } },
        },
      ]),
    );
    config = consumerConfig({
      overlayPath,
      credentials: [{ name: 't', namespace: 'n', key: 'k', value: 'tok-1' }],
      clusters: [{ name: 'west-sim', endpoints: [`127.0.0.1:${sim.port}`] }],
    });
    const chain = (config['filter_chains'] as { filters: unknown[] }[])[0]!;
    chain.filters.unshift(
      { filter: 'caller_auth', keys_file: 'keys.json' },
      { filter: 'budget_enforce', requests_per_minute: 4 },
    );
    chain.filters.splice(3, 0, {
      filter: 'usage_meter',
      report: { url: `http://127.0.0.1:${ingest.port}`, interval_ms: 100, token_file: testTokenFile() },
    });
    gateway = await startGateway(resolveConfig(structuredClone(config), 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
    await waitFor('overlay', () => gateway.overlay?.current() ?? undefined);
    await gateway.reporter!.flush();
  });

  afterAll(async () => {
    await gateway?.close();
    await ingest?.close();
    await store?.close();
    await sim?.close();
    await cleanup();
  });

  it('refuses budget_enforce without caller_auth right before it or without a reporting usage_meter', () => {
    const chain = (config['filter_chains'] as { filters: { filter: string }[] }[])[0]!.filters;
    const without = (name: string) => ({
      ...config,
      filter_chains: [{ name: 'main', filters: chain.filter((f) => f.filter !== name) }],
    });
    expect(() => resolveConfig(without('caller_auth'), 'c.json')).toThrow(ConfigError);
    expect(() => resolveConfig(without('usage_meter'), 'c.json')).toThrow(
      /budget_enforce needs usage_meter with report/,
    );
  });

  it('serves tenants under budget with x-ratelimit headers, and limits a key to its requests per minute', async () => {
    const first = await chat(b.key);
    expect(first.status).toBe(200);
    expect(first.headers['x-ratelimit-limit-requests']).toBe('4');
    expect(first.headers['x-ratelimit-remaining-requests']).toBe('3');
    for (let i = 0; i < 3; i++) expect((await chat(b.key)).status).toBe(200);
    const limited = await chat(b.key);
    expect(limited.status).toBe(429);
    expect(limited.json().error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.headers['x-ratelimit-remaining-requests']).toBe('0');
    expect((await chat(a.key)).status).toBe(200);
  });

  it('answers 429 insufficient_quota to a tenant at its cap after the next poll; others and running streams go on', async () => {
    sim.state.completion_tokens = 20;
    sim.state.tokens_per_second = 40;
    const stream = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm1', messages: [], stream: true }),
    });
    expect(stream.statusCode).toBe(200);
    await budgets({ 'tenant-a': 0.2, 'tenant-b': 0.2, 'tenant-c': 1 });
    await gateway.reporter!.flush();
    const refused = await chat(c.key);
    expect(refused.status).toBe(429);
    expect(refused.json()).toEqual({
      error: {
        message: expect.stringMatching(/exceeded your current quota/),
        type: 'insufficient_quota',
        code: 'insufficient_quota',
      },
    });
    expect(refused.headers['x-request-id']).toMatch(/^[0-9a-f]{32}$/);
    expect((await chat(a.key)).status).toBe(200);
    const text = await stream.body.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect((text.match(/tok\d+/g) ?? []).length).toBe(20);
    sim.state.tokens_per_second = 0;
  });
});
