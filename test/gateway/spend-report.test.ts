// Spend from a consumer gateway into its site operator: real gateway, real sim, real ingest listener on a local
// store. The operator's recorded site spend equals (to the cent and beyond) the priced usage the test computes from
// the responses it received, streaming included; restarting the operator mid-run and restarting the gateway lose
// and double nothing.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { GatewayAgeIngest } from '../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../daemons/gossip-operator/metrics.ts';
import { siteSpend } from '../../daemons/gossip-operator/tenant-spend/ledger.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import type { GridNetworkStatus } from '../../schemas/generated/gridnetworks.ts';
import { call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';
import { testTokenFile } from '../ingest-token.ts';

const PRICE = { per_million_input_tokens: 2_500, per_million_output_tokens: 10_000 };
const usd = (input: number, output: number): number =>
  (input * PRICE.per_million_input_tokens + output * PRICE.per_million_output_tokens) / 1e6;

describe('spend reports from a consumer gateway to its site operator', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let sim: SimServer;
  let store: LocalStore;
  let ingest: GatewayAgeIngest;
  let ingestPort: number;
  let config: Record<string, unknown>;
  const gateways: GatewayInstance[] = [];
  const a = mintCallerKey('tenant-a');
  const b = mintCallerKey('tenant-b');
  const expected: Record<string, number> = {};
  const logger = createLogger({ name: 'test', level: 'warn', destination: { write: () => undefined } });

  async function startIngest(port: number): Promise<void> {
    ingest = new GatewayAgeIngest({
      address: `127.0.0.1:${port}`,
      tokenFile: testTokenFile(),
      store,
      logger,
      metrics: new OperatorMetrics(),
    });
    await ingest.start();
    ingestPort = ingest.port;
  }

  async function startConsumer(): Promise<GatewayInstance> {
    const gateway = await startGateway(resolveConfig(structuredClone(config), 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    gateways.push(gateway);
    await waitFor('overlay', () => gateway.overlay?.current() ?? undefined);
    return gateway;
  }

  async function recorded(): Promise<Record<string, number>> {
    const network = (await store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus };
    return siteSpend(network.status);
  }

  async function traffic(gateway: GatewayInstance, key: string, tenant: string): Promise<void> {
    const base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
    const plain = await call(`${base}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
      body: { model: 'm1', messages: [] },
    });
    expect(plain.status).toBe(200);
    expected[tenant] =
      (expected[tenant] ?? 0) + usd(plain.json().usage.prompt_tokens, plain.json().usage.completion_tokens);
    const streamed = await call(`${base}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
      body: { model: 'm1', messages: [], stream: true, stream_options: { include_usage: true } },
    });
    const usage = JSON.parse(
      streamed.text
        .split('\n\n')
        .find((e) => e.includes('"usage"'))!
        .slice(6),
    ).usage;
    expected[tenant] += usd(usage.prompt_tokens, usage.completion_tokens);
  }

  const cents = (value: number | undefined): number => Math.round((value ?? 0) * 100);

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('spend-report'));
    store = await openLocalStore({ stateDir: join(dir, 'store'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    await startIngest(0);
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1' });
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ keys: [a.entry, b.entry] }));
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
    chain.filters.unshift({ filter: 'caller_auth', keys_file: 'keys.json' });
    chain.filters.splice(2, 0, {
      filter: 'usage_meter',
      prices: [{ cluster: 'west-sim', ...PRICE }],
      report: { url: `http://127.0.0.1:${ingestPort}`, interval_ms: 100, token_file: testTokenFile() },
    });
  });

  afterAll(async () => {
    for (const g of gateways) await g.close();
    await ingest?.close();
    await store?.close();
    await sim?.close();
    await cleanup();
  });

  it('records each tenant’s spend equal to the priced usage of the responses, through an operator restart', async () => {
    sim.state.completion_tokens = 7;
    const gateway = await startConsumer();
    await traffic(gateway, a.key, 'tenant-a');
    await traffic(gateway, b.key, 'tenant-b');
    await gateway.reporter!.flush();
    expect(await recorded()).toEqual({
      'tenant-a': expect.closeTo(expected['tenant-a']!, 9),
      'tenant-b': expect.closeTo(expected['tenant-b']!, 9),
    });

    // The operator goes away mid-run: traffic continues, reports fail, then the operator comes back on its port.
    await ingest.close();
    await traffic(gateway, a.key, 'tenant-a');
    await gateway.reporter!.flush();
    await startIngest(ingestPort);
    await gateway.reporter!.flush();
    // A report replayed after the restart (the same cumulative sequence) is a duplicate, not more spend.
    await traffic(gateway, b.key, 'tenant-b');
    await gateway.reporter!.flush();
    await gateway.reporter!.flush();
    const after = await recorded();
    expect(after['tenant-a']).toBeCloseTo(expected['tenant-a']!, 9);
    expect(after['tenant-b']).toBeCloseTo(expected['tenant-b']!, 9);
    expect(cents(after['tenant-a'])).toBe(cents(expected['tenant-a']));
  });

  it('a restarted gateway is a new epoch: its spend adds to what the old process reported', async () => {
    await gateways[0]!.close();
    // Its drain ended with a final report: the operator retired the epoch into the baseline, spend unchanged.
    const closed = ((await store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus }).status;
    expect(closed?.gatewaySpendReports).toEqual([]);
    expect(closed?.gatewaySpendRetired?.epochs?.map((e) => e.reason)).toEqual(['final']);
    expect(siteSpend(closed)['tenant-a']).toBeCloseTo(expected['tenant-a']!, 9);
    const second = await startConsumer();
    await traffic(second, a.key, 'tenant-a');
    await second.reporter!.flush();
    const now = await recorded();
    expect(now['tenant-a']).toBeCloseTo(expected['tenant-a']!, 9);
    expect(now['tenant-b']).toBeCloseTo(expected['tenant-b']!, 9);
  });
});
