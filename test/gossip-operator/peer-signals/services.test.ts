// The leader's signal services (startSignalServices) on real listeners and a real local store: each listener starts
// on its own (a taken signals port does not take the gateway age ingest down), and once the signals endpoint's
// address is known the GridNetwork is re-queued so the site record is republished with signals_address at once.
import { createServer, type Server } from 'node:net';
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { CONTROLLER_NAMES, type OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import type { OperatorConfig } from '../../../daemons/gossip-operator/config.ts';
import { PolledSignals } from '../../../daemons/gossip-operator/peer-signals/polled-signals.ts';
import { startSignalServices, type SignalServices } from '../../../daemons/gossip-operator/peer-signals/services.ts';
import { capturingLogger, tempDir, testConfig } from '../helpers.ts';
import { ingestAuth, testTokenFile } from '../../ingest-token.ts';

function post(port: number, body: string): Promise<number> {
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
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('signal services', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function context(
    overrides: Partial<OperatorConfig>,
  ): Promise<{ ctx: OperatorContext; lines: string[]; enqueued: string[] }> {
    const dirs = await tempDir('signal-services');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: GRID_NETWORK.apiVersion, kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    const { logger, lines } = capturingLogger();
    const enqueued: string[] = [];
    const ctx = {
      store,
      logger,
      metrics: new OperatorMetrics(),
      config: testConfig({
        site: 'site-a',
        store: { backend: 'local', stateDir: dirs.path },
        peerPollIntervalMs: 60_000,
        ...overrides,
      }),
      now: Date.now,
      signals: { samples: () => [] },
      peerSignals: new PolledSignals(),
      signalsAddress: undefined,
      gossip: undefined,
      enqueue: (controller: string, name: string) => enqueued.push(`${controller}/${name}`),
    } as unknown as OperatorContext;
    return { ctx, lines, enqueued };
  }

  async function start(ctx: OperatorContext): Promise<SignalServices> {
    const services = await startSignalServices(ctx);
    cleanups.push(() => services.stop());
    return services;
  }

  async function takenPort(): Promise<number> {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
    return (server.address() as { port: number }).port;
  }

  it('a signals address already in use is reported by name and address, and the gateway age ingest still starts', async () => {
    const port = await takenPort();
    const { ctx, lines, enqueued } = await context({
      signalsAddress: `127.0.0.1:${port}`,
      gatewayAgeAddress: '127.0.0.1:0',
      ingestTokenFile: testTokenFile(),
    });
    const services = await start(ctx);
    expect(services.signalsBound).toBeUndefined();
    expect(ctx.signalsAddress).toBeUndefined();
    expect(enqueued).toEqual([]);
    const error = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l['service'] === 'peer signals endpoint');
    expect(error).toMatchObject({ address: `127.0.0.1:${port}` });
    expect([50, 'error']).toContain(error?.['level']);
    expect(String(error?.['msg'])).toContain(`127.0.0.1:${port}`);
    expect(JSON.stringify(error)).toContain('EADDRINUSE');
    expect(services.gatewayAgePort).toBeGreaterThan(0);
    expect(
      await post(
        services.gatewayAgePort!,
        JSON.stringify({ epoch: 'aaaaaaaa01', replica: 'gw', sequence: 1, skewCount: 0, rejected: false }),
      ),
    ).toBe(202);
  });

  it('a gateway age address already in use is reported, and the signals endpoint still serves', async () => {
    const port = await takenPort();
    const { ctx, lines } = await context({
      signalsAddress: '127.0.0.1:0',
      gatewayAgeAddress: `127.0.0.1:${port}`,
      ingestTokenFile: testTokenFile(),
    });
    const services = await start(ctx);
    expect(services.gatewayAgePort).toBeUndefined();
    expect(services.signalsBound).toMatch(/^127\.0\.0\.1:\d+$/);
    const error = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l['service'] === 'gateway age ingest');
    expect(error).toMatchObject({ address: `127.0.0.1:${port}` });
  });

  it('once the signals endpoint is bound, sets the advertised address and re-queues the GridNetwork to republish the site record', async () => {
    const { ctx, enqueued } = await context({ signalsAddress: '127.0.0.1:0' });
    const services = await start(ctx);
    expect(ctx.signalsAddress).toBe(services.signalsBound);
    expect(enqueued).toEqual([`${CONTROLLER_NAMES.network}/grid`]);
  });
});
