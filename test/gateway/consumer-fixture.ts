// One consumer gateway in front of three in-process sims, shared by the consumer test files: clusters for
// every scenario (direct, hop, slow, dead, weighted), a consumer-owned credential, tight listener limits, and
// helpers to publish an overlay and wait until the gateway has accepted it.
import { closedPort } from '../closed-port.ts';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { createLogger } from '../../daemons/shared/log.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { INSTANT_TIMING } from '../../daemons/sim/engine/config.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';
import type { Reply } from './helpers.ts';

export const TOKEN = 'sim-secret-token-7f3a9c';
export const CREDENTIAL = {
  strategy: 'bearer_token' as const,
  secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
};
export const withCred = (c: OverlayCandidate): OverlayCandidate => ({ ...c, credential: CREDENTIAL });

export interface ConsumerFixture {
  dir: string;
  overlayPath: string;
  simA: SimServer;
  simB: SimServer;
  simC: SimServer;
  gateway: GatewayInstance;
  base: string;
  logs: string[];
  useOverlay(
    candidates: OverlayCandidate[],
    mode?: 'deterministic' | 'roundRobin' | 'random' | 'weightedRandom',
  ): Promise<string>;
  chat(model: unknown, headers?: Record<string, string>, extra?: Record<string, unknown>): Promise<Reply>;
  metric(line: RegExp): Promise<number>;
}

/** Registers the suite hooks and returns the fixture, filled in by beforeAll. */
export function useConsumerFixture(): ConsumerFixture {
  const f = { logs: [] as string[] } as unknown as ConsumerFixture;
  let cleanup: () => Promise<void>;
  f.useOverlay = async (candidates, mode) => {
    const revision = await writeOverlay(f.overlayPath, payload(candidates, mode));
    await waitFor(`revision ${revision}`, () => f.gateway.overlay?.current()?.revision === revision);
    return revision;
  };
  f.chat = (model, headers = {}, extra = {}) =>
    call(`${f.base}/v1/chat/completions`, {
      body: { model, messages: [{ role: 'user', content: 'hi' }], ...extra },
      headers,
    });
  f.metric = async (line) => {
    const text = (await call(`http://127.0.0.1:${f.gateway.adminPort}/metrics`)).text;
    const found = text.split('\n').find((l) => line.test(l));
    return found === undefined ? 0 : Number(found.split(' ').pop());
  };

  beforeAll(async () => {
    ({ dir: f.dir, cleanup } = await tempDir('consumer'));
    f.overlayPath = join(f.dir, 'routing-overlay.json');
    // Engine steps that take no time: these suites send hundreds of requests and pace a stream only when a test sets
    // tokens_per_second.
    f.simA = await startSim({ name: 'sim-a', models: ['m1', 'm2'], token: TOKEN, engine: INSTANT_TIMING });
    f.simB = await startSim({ name: 'sim-b', models: ['m1', 'm2'], token: TOKEN, engine: INSTANT_TIMING });
    f.simC = await startSim({ name: 'sim-c', models: ['m1'], token: TOKEN, engine: INSTANT_TIMING });
    const dead = await closedPort();
    await writeOverlay(f.overlayPath, payload([withCred(candidate('m1', 'a', 'ca'))]));
    const config = consumerConfig({
      overlayPath: f.overlayPath,
      hops: ['chop'],
      affinity: { enabled: true, header: 'x-session-id', cookie: 'agn_session', ttl_secs: 60 },
      credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', value: TOKEN }],
      listener: { max_body_bytes: 4096, max_header_bytes: 8192, header_timeout_ms: 400, request_timeout_ms: 2000 },
      clusters: [
        { name: 'ca', endpoints: [`127.0.0.1:${f.simA.port}`] },
        { name: 'cb', endpoints: [`127.0.0.1:${f.simB.port}`] },
        { name: 'cslow', endpoints: [`127.0.0.1:${f.simC.port}`], response_timeout_ms: 400 },
        { name: 'chop', endpoints: [`127.0.0.1:${f.simA.port}`] },
        { name: 'cdead', endpoints: [`127.0.0.1:${dead}`], connect_timeout_ms: 500 },
        { name: 'w1', endpoints: [`127.0.0.1:${f.simA.port}`] },
        { name: 'w2', endpoints: [`127.0.0.1:${f.simA.port}`] },
        { name: 'w3', endpoints: [`127.0.0.1:${f.simA.port}`] },
      ],
    });
    const logger = createLogger({
      name: 'gateway',
      level: 'debug',
      destination: { write: (line: string) => void f.logs.push(line) },
    });
    f.gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: f.dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    f.base = `http://127.0.0.1:${f.gateway.listeners[0]!.port}`;
  });

  afterEach(() => {
    for (const sim of [f.simA, f.simB, f.simC]) {
      Object.assign(sim.state, { fault: 'none', latency_ms: 0, tokens_per_second: 0, completion_tokens: 16 });
      sim.requests.length = 0;
    }
  });

  afterAll(async () => {
    await f.gateway?.close();
    await Promise.all([f.simA, f.simB, f.simC].map((s) => s?.close()));
    // The credential never reaches a log line, whatever happened in the suite.
    expect(f.logs.join('')).not.toContain(TOKEN);
    await cleanup();
  });
  return f;
}
