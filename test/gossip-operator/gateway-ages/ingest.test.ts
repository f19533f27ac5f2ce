// The gateway age ingest listener over real HTTP into a local store: what a gateway sees (status codes) and what
// an operator reads (GridNetwork status.gatewayAgeReports, gatewayAgeReportOverflow, GatewayAgesRejected).
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import {
  GATEWAY_AGES_FIELD_MANAGER,
  GatewayAgeIngest,
  RETRY_AFTER_SECONDS,
} from '../../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { gatedStore } from '../gated-store.ts';
import { capturingLogger, tempDir, waitFor } from '../helpers.ts';
import { ingestAuth, testTokenFile } from '../../ingest-token.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

function post(
  port: number,
  body: string,
  path = '/v1/gateway-age-reports',
  method = 'POST',
): Promise<{ status: number; body: Json }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method, headers: { 'content-type': 'application/json', ...ingestAuth() } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function postWithHeaders(
  port: number,
  body: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/gateway-age-reports',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...ingestAuth() },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const report = (epoch: string, sequence: number, rejected: boolean, skewCount = rejected ? sequence : 0) =>
  JSON.stringify({ epoch, replica: `gw-${epoch.slice(0, 4)}`, sequence, skewCount, rejected });

describe('gateway age ingest', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(options: { network?: boolean } = {}): Promise<{
    store: LocalStore;
    stateDir: string;
    metrics: OperatorMetrics;
    mono: { ms: number };
    start: () => Promise<GatewayAgeIngest>;
  }> {
    const dirs = await tempDir('gateway-ages');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    if (options.network !== false) {
      await store.apply(
        GRID_NETWORK,
        { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
        { fieldManager: 'test' },
      );
    }
    const metrics = new OperatorMetrics();
    const mono = { ms: 1_000 };
    const ingests: GatewayAgeIngest[] = [];
    cleanups.push(async () => {
      for (const i of ingests) await i.close();
      await store.close();
      await dirs.remove();
    });
    return {
      store,
      stateDir: dirs.path,
      metrics,
      mono,
      start: async () => {
        const ingest = new GatewayAgeIngest({
          address: '127.0.0.1:0',
          tokenFile: testTokenFile(),
          store,
          logger: capturingLogger().logger,
          metrics,
          monotonic: () => mono.ms,
        });
        await ingest.start();
        ingests.push(ingest);
        return ingest;
      },
    };
  }

  const status = async (store: LocalStore): Promise<Json> =>
    ((await store.get(GRID_NETWORK, { name: 'grid' })) as Json).status;
  const condition = async (store: LocalStore): Promise<Json> =>
    (await status(store))?.conditions?.find((c: Json) => c.type === 'GatewayAgesRejected');

  it('records a rejecting process, clears it only with newer clean evidence from that process, under its own field manager', async () => {
    const { store, start, mono } = await setup();
    const ingest = await start();
    expect(await post(ingest.port, report('aaaaaaaa01', 1, true))).toEqual({
      status: 202,
      body: { outcome: 'recorded', condition: 'True' },
    });
    expect(await condition(store)).toMatchObject({
      status: 'True',
      reason: 'GatewayAgesRejected',
      observedGeneration: 1,
    });
    expect((await status(store)).gatewayAgeReports).toEqual([
      {
        epoch: 'aaaaaaaa01',
        replica: 'gw-aaaa',
        sequence: 1,
        skewCount: 1,
        reportedRejected: true,
        rejected: true,
        receivedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/) as unknown,
      },
    ]);
    const network = (await store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    expect(network.metadata.managedFields.map((m: Json) => m.manager)).toContain(GATEWAY_AGES_FIELD_MANAGER);
    mono.ms += 1_000;
    // Another process's clean report never clears it; a duplicate of the old one neither.
    expect((await post(ingest.port, report('bbbbbbbb02', 9, false))).status).toBe(202);
    expect(await post(ingest.port, report('aaaaaaaa01', 1, false, 1))).toEqual({
      status: 200,
      body: { outcome: 'duplicate', condition: 'True' },
    });
    expect((await condition(store)).status).toBe('True');
    expect(await post(ingest.port, report('aaaaaaaa01', 2, false, 1))).toEqual({
      status: 202,
      body: { outcome: 'recorded', condition: 'False' },
    });
    expect(await condition(store)).toMatchObject({ status: 'False', reason: 'NoUnresolvedRejections' });
    expect((await status(store)).gatewayAgeReports.map((r: Json) => [r.epoch, r.rejected, r.reportedRejected])).toEqual(
      [
        ['aaaaaaaa01', false, false],
        ['bbbbbbbb02', false, false],
      ],
    );
  });

  it('after a restart a persisted rejected epoch is Unknown until that epoch sends a strictly newer sequence', async () => {
    const { store, start, mono } = await setup();
    const first = await start();
    await post(first.port, report('cccccccc03', 5, true));
    await first.close();
    const second = await start();
    mono.ms = 10; // a new process: its monotonic clock restarted
    expect(await post(second.port, report('dddddddd04', 1, false))).toMatchObject({ body: { condition: 'Unknown' } });
    expect(await condition(store)).toMatchObject({ status: 'Unknown', reason: 'EvidencePredatesRestart' });
    expect(await post(second.port, report('cccccccc03', 5, true))).toMatchObject({
      status: 200,
      body: { outcome: 'duplicate', condition: 'Unknown' },
    });
    expect(await post(second.port, report('cccccccc03', 6, true))).toMatchObject({
      status: 202,
      body: { condition: 'True' },
    });
  });

  it('an explicitly removed entry is forgotten and the next report recomputes the condition', async () => {
    const { store, start } = await setup();
    const ingest = await start();
    await post(ingest.port, report('eeeeeeee05', 1, true));
    await store.patchStatus(GRID_NETWORK, { name: 'grid' }, { gatewayAgeReports: [] }, { fieldManager: 'kubectl' });
    expect((await condition(store)).status).toBe('True');
    expect(await post(ingest.port, report('ffffffff06', 1, false))).toMatchObject({ body: { condition: 'False' } });
    expect((await status(store)).gatewayAgeReports.map((r: Json) => r.epoch)).toEqual(['ffffffff06']);
  });

  it('a status writer racing the report (between its read and its patch) loses nothing: PeerTimeValid stays, a removed entry stays removed', async () => {
    const { store, metrics } = await setup();
    const first = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger: capturingLogger().logger,
      metrics,
      monotonic: () => 1_000,
    });
    await first.submit(JSON.parse(report('aaaaaaaa01', 1, true)));
    await first.submit(JSON.parse(report('bbbbbbbb02', 1, true)));
    const held = gatedStore(store);
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store: held.store,
      logger: capturingLogger().logger,
      metrics,
      monotonic: () => 2_000,
    });
    const pending = ingest.submit(JSON.parse(report('cccccccc03', 1, false)));
    await held.gate.reached;
    // The peer poller writes PeerTimeValid and an administrator, having verified process aaaaaaaa01 retired,
    // removes its entry: both after the ingest read the status it is about to patch.
    const now = (await store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      {
        conditions: [
          ...now.status.conditions,
          {
            type: 'PeerTimeValid',
            status: 'False',
            reason: 'PeerTimeRejected',
            message: 'x',
            lastTransitionTime: '2026-01-01T00:00:00Z',
          },
        ],
      },
      { fieldManager: 'grid-operator-peer-signals' },
    );
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { gatewayAgeReports: now.status.gatewayAgeReports.filter((r: Json) => r.epoch !== 'aaaaaaaa01') },
      { fieldManager: 'kubectl' },
    );
    held.gate.release();
    expect(await pending).toMatchObject({ status: 202, body: { outcome: 'recorded' } });
    const after = await status(store);
    expect(after.gatewayAgeReports.map((r: Json) => r.epoch)).toEqual(['bbbbbbbb02', 'cccccccc03']);
    expect(after.conditions.map((c: Json) => c.type).sort()).toEqual(['GatewayAgesRejected', 'PeerTimeValid']);
    expect(held.gets()).toBeGreaterThanOrEqual(2);
  });

  it('answers 503 with Retry-After while more reports than the bound wait on the API, and takes reports again after', async () => {
    const { store, metrics } = await setup();
    const held = gatedStore(store, (kind) => kind.kind === 'GridNetwork');
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store: held.store,
      logger: capturingLogger().logger,
      metrics,
      monotonic: () => 1_000,
      maxQueuedReports: 2,
    });
    await ingest.start();
    try {
      // The first report is stuck in its status write (a slow API server); the second waits behind it.
      const first = post(ingest.port, report('aaaaaaaa01', 1, true));
      await held.gate.reached;
      const second = post(ingest.port, report('bbbbbbbb02', 1, false));
      await waitFor('two reports pending', () => (ingest.pending === 2 ? true : undefined));
      const refused = await postWithHeaders(ingest.port, report('cccccccc03', 1, false));
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toBe(String(RETRY_AFTER_SECONDS));
      expect(JSON.parse(refused.body)).toEqual({ error: 'more than 2 reports waiting to be recorded; retry later' });
      expect(await metrics.registry.metrics()).toMatch(/grid_gateway_age_reports_total\{outcome="busy"\} 1/);
      held.gate.release();
      expect((await first).status).toBe(202);
      expect((await second).status).toBe(202);
      await waitFor('nothing pending', () => (ingest.pending === 0 ? true : undefined));
      expect((await post(ingest.port, report('cccccccc03', 1, false))).status).toBe(202);
      expect((await status(store)).gatewayAgeReports.map((r: Json) => r.epoch)).toEqual([
        'aaaaaaaa01',
        'bbbbbbbb02',
        'cccccccc03',
      ]);
    } finally {
      held.gate.release();
      await ingest.close();
    }
  });

  it('refuses a new identity when all 128 records are unresolved, persists overflow, and still takes recovery', async () => {
    const { store, start, metrics } = await setup();
    const ingest = await start();
    const epochs = Array.from({ length: 128 }, (_, i) => `epoch-${String(i).padStart(4, '0')}`);
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      {
        gatewayAgeReports: epochs.map((epoch) => ({
          epoch,
          replica: 'gw',
          sequence: 1,
          skewCount: 1,
          reportedRejected: true,
          rejected: true,
          receivedAt: '2026-01-01T00:00:00Z',
        })),
      },
      { fieldManager: 'test' },
    );
    expect(await post(ingest.port, report('newcomer01', 1, false))).toEqual({
      status: 429,
      body: { outcome: 'capacity', condition: 'Unknown' },
    });
    expect((await status(store)).gatewayAgeReportOverflow).toBe(true);
    expect((await status(store)).gatewayAgeReports).toHaveLength(128);
    expect((await post(ingest.port, report('epoch-0007', 2, false, 1))).status).toBe(202);
    expect((await status(store)).gatewayAgeReports.find((r: Json) => r.epoch === 'epoch-0007').rejected).toBe(false);
    expect(await metrics.registry.metrics()).toMatch(/grid_gateway_age_reports_total\{outcome="capacity"\} 1/);
  });

  it.each([
    ['not JSON', '{', 400, 'not JSON'],
    [
      'a missing field',
      JSON.stringify({ epoch: 'abcdefgh', replica: 'r', sequence: 1, rejected: true }),
      400,
      'skewCount',
    ],
    ['a short epoch', report('abc', 1, true), 400, 'epoch'],
    [
      'a negative sequence',
      JSON.stringify({ epoch: 'abcdefgh12', replica: 'r', sequence: -1, skewCount: 0, rejected: false }),
      400,
      'sequence',
    ],
    [
      'a body over 4 KiB',
      JSON.stringify({ epoch: 'abcdefgh12', replica: 'x'.repeat(5000), sequence: 1, skewCount: 0, rejected: false }),
      413,
      '4096',
    ],
  ])('answers %s with a clear error and writes nothing', async (_name, body, code, message) => {
    const { store, start } = await setup();
    const ingest = await start();
    const answer = await post(ingest.port, body);
    expect(answer.status).toBe(code);
    expect(answer.body.error).toContain(message);
    expect(await status(store)).toBeUndefined();
  });

  it('refuses a cumulative skew count that goes backwards, other paths and methods, and reports without a GridNetwork', async () => {
    const { start } = await setup();
    const ingest = await start();
    await post(ingest.port, report('gggggggg07', 1, true, 5));
    expect(await post(ingest.port, report('gggggggg07', 2, false, 4))).toMatchObject({
      status: 409,
      body: { outcome: 'skew_count_decreased' },
    });
    expect((await post(ingest.port, '{}', '/other')).status).toBe(404);
    expect((await post(ingest.port, '', '/v1/gateway-age-reports', 'GET')).status).toBe(405);
    const empty = await setup({ network: false });
    const lone = await empty.start();
    expect(await post(lone.port, report('hhhhhhhh08', 1, true))).toMatchObject({ status: 503 });
  });
});
