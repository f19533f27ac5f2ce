// The header policy's configuration: `forward_request_headers` replaces the default allowlist of a boundary; a
// consumer applies it to provider-hop clusters only (a direct cluster is the caller's own site); the schema refuses
// names that are not lowercase header tokens; the key is reported as an extension Praxis AI refuses.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../daemons/gateway/config.ts';
import { DEFAULT_FORWARD_REQUEST_HEADERS } from '../../daemons/gateway/filters/header-policy.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { extensionKeyPointers } from '../../schemas/gateway/praxis-rules.ts';
import { thrownMessage } from '../thrown.ts';
import { call, candidate, chatBody, consumerConfig, payload, tempDir, writeOverlay } from './helpers.ts';

const TOKEN = 'header-policy-token-2b7f';
let sim: SimServer;
let gateway: GatewayInstance;
let cleanup: () => Promise<void>;
let base: string;
let overlayPath: string;

function config(): Record<string, any> {
  const doc = consumerConfig({
    overlayPath,
    hops: ['hop'],
    credentials: [{ name: 't', namespace: 'grid-system', key: 'token', value: TOKEN }],
    clusters: [
      { name: 'hop', endpoints: [`127.0.0.1:${sim.port}`] },
      { name: 'direct', endpoints: [`127.0.0.1:${sim.port}`] },
    ],
  }) as Record<string, any>;
  doc['filter_chains'][0].filters[0].forward_request_headers = ['content-type', 'x-tenant'];
  return doc;
}

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('header-policy'));
  overlayPath = join(dir, 'routing-overlay.json');
  sim = await startSim({ name: 'sim', models: ['m-hop', 'm-direct'], token: TOKEN });
  const credential = {
    strategy: 'bearer_token' as const,
    secretRef: { name: 't', namespace: 'grid-system', key: 'token' },
  };
  await writeOverlay(
    overlayPath,
    payload([
      candidate('m-hop', 'east', 'hop', { credential }),
      candidate('m-direct', 'west', 'direct', { credential }),
    ]),
  );
  const logger = createLogger({ name: 'gateway', level: 'warn', destination: { write: () => undefined } });
  gateway = await startGateway(resolveConfig(config(), 'consumer.json'), {
    configDir: dir,
    logger,
    processMetrics: false,
    overlayPollIntervalMs: 0,
  });
  base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
});

afterAll(async () => {
  await gateway?.close();
  await sim?.close();
  await cleanup();
});

describe('forward_request_headers', () => {
  const sent = { 'x-tenant': 'blue', 'user-agent': 'ua/1', cookie: 'a=b', 'x-forwarded-for': '203.0.113.1' };

  it('replaces the default allowlist for provider-hop clusters', async () => {
    expect((await call(`${base}/v1/chat/completions`, { body: chatBody('m-hop'), headers: sent })).status).toBe(200);
    const seen = sim.requests.at(-1)!.headerNames;
    expect(seen).toEqual(
      expect.arrayContaining([
        'content-type',
        'x-tenant',
        'x-gateway-model-name',
        'x-ai-routing-candidate',
        'authorization',
      ]),
    );
    for (const name of ['user-agent', 'cookie', 'x-forwarded-for']) expect(seen, name).not.toContain(name);
  });

  it("leaves a direct (same-site) cluster the caller's headers", async () => {
    expect((await call(`${base}/v1/chat/completions`, { body: chatBody('m-direct'), headers: sent })).status).toBe(200);
    expect(sim.requests.at(-1)!.headerNames).toEqual(expect.arrayContaining(Object.keys(sent)));
  });

  it('is an extension key, with the documented default, and refuses names that are not lowercase header tokens', () => {
    expect(extensionKeyPointers(config())).toEqual(['/filter_chains/0/filters/0/forward_request_headers']);
    expect(DEFAULT_FORWARD_REQUEST_HEADERS).toEqual([
      'accept',
      'accept-encoding',
      'content-type',
      'openai-beta',
      'user-agent',
      'x-request-id',
    ]);
    const bad = config();
    bad['filter_chains'][0].filters[0].forward_request_headers = ['X-Tenant'];
    expect(thrownMessage(() => resolveConfig(bad, 'bad.json'), ConfigError)).toContain(
      '/filter_chains/0/filters/0/forward_request_headers/0',
    );
  });
});
