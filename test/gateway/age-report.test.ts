// Age reports from a consumer gateway into its site operator (gateway age evidence): real gateway, real
// sim, real ingest listener on a local store. The gateway's process gets its record in GridNetwork
// status.gatewayAgeReports as soon as it serves; rejected ages raise GatewayAgesRejected and the next clean tick
// resolves it; a process with nothing new to say writes no status; an operator outage loses no evidence.
import { hostname } from 'node:os';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import { GatewayAgeIngest } from '../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../daemons/gossip-operator/metrics.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { startSim, type SimServer } from '../../daemons/sim/server.ts';
import type { GatewayAgeReport } from '../../schemas/generated/gridnetworks.ts';
import { call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';
import { testTokenFile } from '../ingest-token.ts';

interface Recorded {
  readonly reports: GatewayAgeReport[];
  readonly condition: { status?: string; reason?: string } | undefined;
  readonly resourceVersion: string | undefined;
}

describe('age reports from a consumer gateway to its site operator', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let sim: SimServer;
  let store: LocalStore;
  let ingest: GatewayAgeIngest;
  let ingestPort: number;
  let gateway: GatewayInstance;
  const key = mintCallerKey('tenant-a');
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

  async function recorded(): Promise<Recorded> {
    const network = (await store.get(GRID_NETWORK, { name: 'grid' })) as {
      metadata: { resourceVersion?: string };
      status?: {
        gatewayAgeReports?: GatewayAgeReport[];
        conditions?: { type: string; status?: string; reason?: string }[];
      };
    };
    return {
      reports: network.status?.gatewayAgeReports ?? [],
      condition: network.status?.conditions?.find((c) => c.type === 'GatewayAgesRejected'),
      resourceVersion: network.metadata.resourceVersion,
    };
  }

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('age-report'));
    store = await openLocalStore({ stateDir: join(dir, 'store'), coalesceMs: 5, rescanIntervalMs: 1_000 });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    await startIngest(0);
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1' });
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
    // A long interval: the test drives every tick with flush(), so each assertion sees exactly the reports it caused.
    chain.filters.splice(2, 0, {
      filter: 'usage_meter',
      report: { url: `http://127.0.0.1:${ingestPort}`, interval_ms: 600_000, token_file: testTokenFile() },
    });
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    await waitFor('overlay', () => gateway.overlay?.current() ?? undefined);
  });

  afterAll(async () => {
    await gateway?.close();
    await ingest?.close();
    await store?.close();
    await sim?.close();
    await cleanup();
  });

  it('records the serving process once, clean, and writes nothing more while it has nothing new to say', async () => {
    const served = await call(`http://127.0.0.1:${gateway.listeners[0]!.port}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key.key}` },
      body: { model: 'm1', messages: [] },
    });
    expect(served.status).toBe(200);
    await gateway.reporter!.flush();
    const first = await recorded();
    expect(first.reports).toHaveLength(1);
    expect(first.reports[0]).toMatchObject({
      replica: hostname().slice(0, 253),
      sequence: 1,
      skewCount: 0,
      reportedRejected: false,
      rejected: false,
    });
    // <start time in ms>-<random hex>: epochs sort by start (schemas/signals/spend-epoch.ts).
    expect(first.reports[0]!.epoch).toMatch(/^\d{13}-[0-9a-f]{16}$/);
    expect(first.condition).toMatchObject({ status: 'False', reason: 'NoUnresolvedRejections' });

    // "Duplicate reports cannot establish recovery or renew freshness": a clean process sends none, so no status write.
    await gateway.reporter!.flush();
    await gateway.reporter!.flush();
    expect((await recorded()).resourceVersion).toBe(first.resourceVersion);
  });

  it('reports rejected ages (GatewayAgesRejected True) and resolves them with the next clean tick', async () => {
    gateway.ages.reject(2);
    await gateway.reporter!.flush();
    const raised = await recorded();
    expect(raised.reports).toHaveLength(1);
    expect(raised.reports[0]).toMatchObject({ sequence: 2, skewCount: 2, reportedRejected: true, rejected: true });
    expect(raised.condition).toMatchObject({ status: 'True', reason: 'GatewayAgesRejected' });

    // "False requires genuine newer clean evidence from every recorded rejecting process."
    await gateway.reporter!.flush();
    const resolved = await recorded();
    expect(resolved.reports[0]).toMatchObject({ sequence: 3, skewCount: 2, reportedRejected: false, rejected: false });
    expect(resolved.condition).toMatchObject({ status: 'False', reason: 'NoUnresolvedRejections' });
  });

  it('keeps a rejection that happened while the operator was away and delivers it when it is back', async () => {
    await ingest.close();
    gateway.ages.reject();
    await gateway.reporter!.flush();
    await startIngest(ingestPort);
    await gateway.reporter!.flush();
    const after = await recorded();
    expect(after.reports[0]).toMatchObject({ skewCount: 3, reportedRejected: true, rejected: true });
    expect(after.reports[0]!.sequence).toBeGreaterThan(3);
    expect(after.condition?.status).toBe('True');
    await gateway.reporter!.flush();
    expect((await recorded()).condition).toMatchObject({ status: 'False' });
  });
});
