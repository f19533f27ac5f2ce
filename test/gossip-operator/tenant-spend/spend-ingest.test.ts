// Tenant spend from gateway reports through the ingest listener over real HTTP into a local store (the pure ledger
// has its own tests beside this file): across an operator restart a report replayed after the restart counts nothing
// twice and a report lost before it is covered by the next cumulative one; and across more gateway processes than
// the ledger keeps live, every process's spend is still counted.
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayAgeIngest } from '../../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { siteSpend, siteSpendNano } from '../../../daemons/gossip-operator/tenant-spend/ledger.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { GridNetworkStatus } from '../../../schemas/generated/gridnetworks.ts';
import { capturingLogger, tempDir } from '../helpers.ts';
import { ingestAuth, testTokenFile } from '../../ingest-token.ts';

const EPOCH_A = 'a'.repeat(32);
const EPOCH_B = 'b'.repeat(32);
const report = (epoch: string, sequence: number, spend_usd: Record<string, number>) => ({
  epoch,
  replica: 'gw-0',
  sequence,
  spend_usd,
});

function post(port: number, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/gateway-spend-reports',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...ingestAuth() },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }),
        );
      },
    );
    req.on('error', reject);
    req.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
}

describe('spend ingest across an operator restart', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function operator(
    stateDir: string,
  ): Promise<{ store: LocalStore; ingest: GatewayAgeIngest; stop: () => Promise<void> }> {
    const store = await openLocalStore({ stateDir, coalesceMs: 5, rescanIntervalMs: 1_000 });
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger: capturingLogger().logger,
      metrics: new OperatorMetrics(),
    });
    await ingest.start();
    const stop = async () => {
      await ingest.close();
      await store.close();
    };
    return { store, ingest, stop };
  }

  it('answers by outcome, persists in GridNetwork status, and neither loses nor doubles across a restart', async () => {
    const dirs = await tempDir('spend');
    cleanups.push(() => dirs.remove());
    const first = await operator(dirs.path);
    await first.store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    expect(await post(first.ingest.port, report(EPOCH_A, 1, { 'tenant-a': 0.01 }))).toEqual({
      status: 202,
      body: { outcome: 'recorded' },
    });
    expect(await post(first.ingest.port, report(EPOCH_A, 2, { 'tenant-a': 0.03, 'tenant-b': 0.1 }))).toEqual({
      status: 202,
      body: { outcome: 'recorded' },
    });
    expect((await post(first.ingest.port, report(EPOCH_A, 2, { 'tenant-a': 0.03, 'tenant-b': 0.1 }))).status).toBe(200);
    expect((await post(first.ingest.port, report(EPOCH_A, 3, { 'tenant-a': 0.02, 'tenant-b': 0.1 }))).status).toBe(409);
    expect((await post(first.ingest.port, { epoch: 'short', sequence: 1, spend_usd: {} })).status).toBe(400);
    expect((await post(first.ingest.port, report(EPOCH_B, 1, { 'bad tenant': 1 }))).status).toBe(400);
    expect((await post(first.ingest.port, '{')).status).toBe(400);
    await first.stop();

    // The restarted operator reads the records back: the gateway's retry of sequence 2 is a duplicate, its report
    // 3 was lost while the operator was down, and report 4 (cumulative) carries that spend anyway.
    const second = await operator(dirs.path);
    cleanups.push(second.stop);
    expect((await post(second.ingest.port, report(EPOCH_A, 2, { 'tenant-a': 0.03, 'tenant-b': 0.1 }))).status).toBe(
      200,
    );
    expect((await post(second.ingest.port, report(EPOCH_A, 4, { 'tenant-a': 0.07, 'tenant-b': 0.1 }))).status).toBe(
      202,
    );
    expect((await post(second.ingest.port, report(EPOCH_B, 1, { 'tenant-a': 0.005 }))).status).toBe(202);
    const network = (await second.store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus };
    expect(siteSpend(network.status)).toEqual({ 'tenant-a': 0.075, 'tenant-b': 0.1 });
  });

  it('counts every process of 150 rollouts of a 2-replica consumer (300 epochs, more than the ledger keeps live)', async () => {
    const dirs = await tempDir('spend-rollouts');
    cleanups.push(() => dirs.remove());
    const op = await operator(dirs.path);
    cleanups.push(op.stop);
    await op.store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    const statuses = new Set<number>();
    for (let i = 0; i < 300; i++) {
      // A time-prefixed epoch per process; each spends one cent and is replaced without a final report.
      const epoch = `${String(1_700_000_000_000 + i * 1000).padStart(13, '0')}-${i.toString(16).padStart(16, '0')}`;
      statuses.add((await post(op.ingest.port, report(epoch, 1, { 'tenant-a': 0.01 }))).status);
    }
    expect([...statuses]).toEqual([202]);
    const network = (await op.store.get(GRID_NETWORK, { name: 'grid' })) as { status?: GridNetworkStatus };
    expect(siteSpendNano(network.status)).toEqual({ 'tenant-a': 3_000_000_000 });
  });

  it('answers 503 when there is no GridNetwork to record into', async () => {
    const dirs = await tempDir('spend-none');
    cleanups.push(() => dirs.remove());
    const op = await operator(dirs.path);
    cleanups.push(op.stop);
    expect((await post(op.ingest.port, report(EPOCH_A, 1, {}))).status).toBe(503);
  });
});
