// Warm-up before readiness: a gateway started with warmupRequests sends them through its own request path over
// loopback before it reports ready; none of them reaches a configured upstream or the gateway's request metrics,
// and the first real request is served as usual. The gateway program refuses a bad AGN_GATEWAY_WARMUP_REQUESTS.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { call, candidate, chatBody, consumerConfig, payload, spawnDaemon, tempDir, writeOverlay } from './helpers.ts';

describe('warm-up before ready', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let sim: SimServer;
  let gateway: GatewayInstance;
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    name: 'test',
    level: 'info',
    destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('warmup'));
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1' });
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
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
      warmupRequests: 400,
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await sim?.close();
    await cleanup();
  });

  it('is ready once started, after every warm-up request succeeded, none of them at a configured upstream', async () => {
    expect(gateway.isReady()).toBe(true);
    expect(lines.find((l) => l['msg'] === 'request path warmed up')).toMatchObject({ requests: 400, failed: 0 });
    expect(sim.requests).toEqual([]);
    const text = await gateway.metrics.registry.metrics();
    expect(text).not.toMatch(/grid_gateway_requests_total\{/);
    expect(text).not.toContain('warmup');
  });

  it('serves and counts the first real request as usual', async () => {
    const reply = await call(`http://127.0.0.1:${gateway.listeners[0]!.port}/v1/chat/completions`, {
      body: chatBody('m1'),
    });
    expect(reply.status).toBe(200);
    expect(sim.requests).toHaveLength(1);
    expect(await gateway.metrics.registry.metrics()).toMatch(
      /grid_gateway_requests_total\{role="consumer",model="m1",cluster="west-sim",status="200"\} 1/,
    );
  });
});

describe('AGN_GATEWAY_WARMUP_REQUESTS', () => {
  it.each(['-1', 'many', '1.5'])(
    'refuses %s with one line on stderr and exit 2, before reading the config',
    async (value) => {
      const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', '/nonexistent/gateway.json'], {
        AGN_GATEWAY_WARMUP_REQUESTS: value,
      });
      // 'close' comes after the exit and after stderr is read to its end.
      const code = await new Promise<number | null>((resolve) =>
        daemon.proc.once('close', (c: number | null) => resolve(c)),
      );
      expect(code).toBe(2);
      expect(daemon.stderr()).toBe(
        `gateway: AGN_GATEWAY_WARMUP_REQUESTS must be a non-negative integer, got "${value}" (usage: node daemons/gateway/main.ts --config FILE [--workers N])\n`,
      );
    },
  );
});
