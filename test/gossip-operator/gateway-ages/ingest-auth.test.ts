// The gateway ingest's bearer token, over real HTTP: the operator's listener refuses a missing or wrong token with
// 401 before reading the body and records nothing, accepts the right one, follows a kubelet-style rotation of its
// token file (the `..data` symlink swap) within seconds and without a restart, and counts refusals by reason; a real
// consumer gateway sends the token from its own projected file and follows its rotation too. No token byte appears
// in a log line, a metric or an answer.
import { request } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mintCallerKey } from '../../../schemas/gateway/caller-keys.ts';
import { resolveConfig } from '../../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../../daemons/gateway/server.ts';
import { GatewayAgeIngest } from '../../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { siteSpendNano } from '../../../daemons/gossip-operator/tenant-spend/ledger.ts';
import { createLogger } from '../../../daemons/shared/log.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { startSim, type SimServer } from '../../../daemons/sim/server.ts';
import type { GridNetworkStatus } from '../../../schemas/generated/gridnetworks.ts';
import { call, candidate, consumerConfig, payload, writeOverlay } from '../../gateway/helpers.ts';
import { projectedToken } from '../../ingest-token.ts';
import { tempDir, waitFor } from '../helpers.ts';

const TOKEN = 'site-ingest-token-7b1f04e2c9d3a6';
const ROTATED = 'site-ingest-token-rotated-5e8a2d91';
const SPEND = (epoch: string, sequence: number, usd: number) =>
  JSON.stringify({ epoch, replica: 'gw-0', sequence, spend_usd: { 'tenant-a': usd } });
const AGE = JSON.stringify({ epoch: 'eeeeeeee01', replica: 'gw-0', sequence: 1, skewCount: 0, rejected: false });

function send(
  port: number,
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('gateway ingest bearer token', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function operator(): Promise<{
    store: LocalStore;
    ingest: GatewayAgeIngest;
    metrics: OperatorMetrics;
    logs: string[];
    token: ReturnType<typeof projectedToken>;
    dir: string;
  }> {
    const { path: dir, remove } = await tempDir('ingest-auth');
    const store = await openLocalStore({ stateDir: join(dir, 'state'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    const token = projectedToken(join(dir, 'operator-token'), TOKEN);
    const logs: string[] = [];
    const logger = createLogger({
      name: 'operator',
      level: 'debug',
      destination: { write: (line: string) => void logs.push(line) },
    });
    const metrics = new OperatorMetrics();
    const ingest = new GatewayAgeIngest({ address: '127.0.0.1:0', tokenFile: token.file, store, logger, metrics });
    await ingest.start();
    cleanups.push(async () => {
      await ingest.close();
      await store.close();
      await remove();
    });
    return { store, ingest, metrics, logs, token, dir };
  }

  const status = async (store: LocalStore): Promise<GridNetworkStatus> =>
    ((await store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus }).status ?? {};

  it('refuses a missing or wrong token with 401 on every path and records nothing; the right token is recorded', async () => {
    const { store, ingest, metrics, logs } = await operator();
    const epoch = '1700000000000-00000000000000a1';
    const attempts: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { authorization: `Basic ${Buffer.from(`gw:${TOKEN}`).toString('base64')}` },
      { authorization: TOKEN },
      { authorization: 'Bearer ' },
    ];
    const answers: { status: number; headers: Record<string, unknown>; text: string }[] = [];
    for (const headers of attempts) {
      answers.push(await send(ingest.port, '/v1/gateway-spend-reports', SPEND(epoch, 1, 5), headers));
      answers.push(await send(ingest.port, '/v1/gateway-age-reports', AGE, headers));
      answers.push(await send(ingest.port, '/v1/tenant-budgets', undefined, headers));
    }
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([401]));
    expect(answers[0]!.headers['www-authenticate']).toBe('Bearer');
    expect(JSON.parse(answers[0]!.text)).toEqual({
      error:
        'no ingest token: send Authorization: Bearer with the token of Secret grid-ingest-token (key token) of this site',
    });
    const after = await status(store);
    expect(after.gatewaySpendReports).toBeUndefined();
    expect(after.gatewayAgeReports).toBeUndefined();

    expect((await send(ingest.port, '/v1/gateway-spend-reports', SPEND(epoch, 1, 5), bearer(TOKEN))).status).toBe(202);
    expect(
      (await send(ingest.port, '/v1/gateway-age-reports', AGE, { authorization: `bearer  ${TOKEN}` })).status,
    ).toBe(202);
    expect((await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(TOKEN))).status).toBe(200);
    expect(siteSpendNano(await status(store))).toEqual({ 'tenant-a': 5_000_000_000 });

    const text = await metrics.registry.metrics();
    expect(text).toContain('grid_gateway_ingest_refused_total{reason="missing"} 12');
    expect(text).toContain('grid_gateway_ingest_refused_total{reason="wrong"} 6');
    expect(text).toContain('grid_gateway_spend_reports_total{outcome="recorded"} 1');
    for (const where of [text, logs.join(''), answers.map((a) => a.text).join('')])
      expect(where).not.toContain(TOKEN.slice(0, 12));
  });

  it('follows a rotation of its token file (the kubelet swap of ..data): the old token is refused, the new one accepted, without a restart', async () => {
    const { ingest, token, logs } = await operator();
    expect((await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(TOKEN))).status).toBe(200);
    const t0 = Date.now();
    token.rotate(ROTATED);
    await waitFor(
      'the rotated token to be accepted',
      async () =>
        (await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(ROTATED))).status === 200 ? true : undefined,
      8_000,
    );
    expect(Date.now() - t0).toBeLessThan(8_000);
    expect((await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(TOKEN))).status).toBe(401);
    // A broken replacement keeps the last good token, and says which file, not what it held.
    token.rotate('short');
    await waitFor(
      'the bad file to be noticed',
      () => (logs.some((l) => l.includes('is shorter than 16 characters')) ? true : undefined),
      8_000,
    );
    expect((await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(ROTATED))).status).toBe(200);
    for (const secret of [TOKEN, ROTATED, 'short'])
      expect(logs.join('')).not.toContain(secret === 'short' ? '"short"' : secret);
  });

  it('answers 503 while its token file cannot be read, and serves once it appears', async () => {
    const { path: dir, remove } = await tempDir('ingest-auth-late');
    cleanups.push(remove);
    const store = await openLocalStore({ stateDir: join(dir, 'state'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    const logs: string[] = [];
    const logger = createLogger({
      name: 'operator',
      level: 'info',
      destination: { write: (line: string) => void logs.push(line) },
    });
    const file = join(dir, 'late', 'token');
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: file,
      store,
      logger,
      metrics: new OperatorMetrics(),
    });
    await ingest.start();
    cleanups.push(async () => {
      await ingest.close();
      await store.close();
    });
    expect((await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(TOKEN))).status).toBe(503);
    expect(logs.join('')).toContain(`ingest token (--ingest-token-file) file ${file} cannot be read (ENOENT)`);
    projectedToken(join(dir, 'late'), TOKEN);
    await waitFor(
      'the token file to be read',
      async () =>
        (await send(ingest.port, '/v1/tenant-budgets', undefined, bearer(TOKEN))).status === 503 ? undefined : true,
      10_000,
    );
  });
});

describe('a consumer gateway sends the ingest token from its file', () => {
  let sim: SimServer | undefined;
  let gateway: GatewayInstance | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await gateway?.close();
    await sim?.close();
    await cleanup?.();
  });

  it('reports with its token, is refused while the tokens differ, follows its own rotation, and sends a final report at close', async () => {
    const { path: dir, remove } = await tempDir('ingest-auth-gateway');
    const store = await openLocalStore({ stateDir: join(dir, 'state'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    const operatorToken = projectedToken(join(dir, 'operator-token'), TOKEN);
    const gatewayToken = projectedToken(join(dir, 'gateway-token'), TOKEN);
    const opLogs: string[] = [];
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: operatorToken.file,
      store,
      logger: createLogger({ name: 'op', level: 'info', destination: { write: (l: string) => void opLogs.push(l) } }),
      metrics: new OperatorMetrics(),
    });
    await ingest.start();
    cleanup = async () => {
      await ingest.close();
      await store.close();
      await remove();
    };
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1' });
    const key = mintCallerKey('tenant-a');
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ keys: [key.entry] }));
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
    const config = consumerConfig({
      overlayPath,
      credentials: [{ name: 't', namespace: 'n', key: 'k', value: 'tok-1' }],
      clusters: [{ name: 'west-sim', endpoints: [`127.0.0.1:${sim.port}`] }],
    });
    const chain = (config['filter_chains'] as { filters: unknown[] }[])[0]!;
    chain.filters.unshift({ filter: 'caller_auth', keys_file: 'keys.json' });
    // Relative to the config's directory, like keys_file.
    chain.filters.splice(2, 0, {
      filter: 'usage_meter',
      prices: [{ cluster: 'west-sim', per_million_input_tokens: 1_000_000, per_million_output_tokens: 1_000_000 }],
      report: { url: `http://127.0.0.1:${ingest.port}`, interval_ms: 600_000, token_file: 'gateway-token/token' },
    });
    const gwLogs: string[] = [];
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger: createLogger({ name: 'gw', level: 'info', destination: { write: (l: string) => void gwLogs.push(l) } }),
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    const instance = gateway;
    await waitFor('overlay', () => instance.overlay?.current() ?? undefined);
    const chat = async () =>
      expect(
        (
          await call(`http://127.0.0.1:${instance.listeners[0]!.port}/v1/chat/completions`, {
            headers: { authorization: `Bearer ${key.key}` },
            body: { model: 'm1', messages: [] },
          })
        ).status,
      ).toBe(200);
    const spent = async () =>
      siteSpendNano(((await store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus }).status)[
        'tenant-a'
      ] ?? 0;

    await chat();
    await instance.reporter!.flush();
    const first = await spent();
    expect(first).toBeGreaterThan(0);

    // The operator's Secret rotated first: the gateway's reports are refused (and say so) until its own file follows.
    operatorToken.rotate(ROTATED);
    await waitFor(
      'the operator to refuse the old token',
      async () => {
        await chat();
        await instance.reporter!.flush();
        return gwLogs.some((l) => l.includes('operator refused the ingest token (401)')) ? true : undefined;
      },
      8_000,
    );
    const refused = await spent();
    gatewayToken.rotate(ROTATED);
    await waitFor(
      'the gateway to send the rotated token',
      async () => {
        await instance.reporter!.flush();
        return (await spent()) > refused ? true : undefined;
      },
      8_000,
    );

    // Close drains and then reports once more, final: the operator retires the epoch into the baseline at once.
    const total = await spent();
    await instance.close();
    gateway = undefined;
    const after = ((await store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus }).status ?? {};
    expect(after.gatewaySpendReports).toEqual([]);
    expect(after.gatewaySpendRetired?.epochs?.map((e) => e.reason)).toEqual(['final']);
    expect(siteSpendNano(after)['tenant-a']).toBe(total);
    for (const secret of [TOKEN, ROTATED]) expect([...gwLogs, ...opLogs].join('')).not.toContain(secret);
  });
});
