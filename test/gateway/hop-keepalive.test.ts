// The consumer -> provider hop keeps its mTLS connections through a pause in traffic: a real provider gateway (mTLS
// listener, trusted peer) behind a real consumer gateway, both in process, the provider counting TLS handshakes on
// its listener. After an idle gap longer than Node's default 5 s keep-alive (AGN_HOP_IDLE_GAP_MS, 6 s by default; the
// benchmark measures 30 s), the next burst is served over the same connections: no new handshake. The provider
// announces a keep-alive long enough for a 30 s gap on both sides, and a reconnect resumes the TLS session.
import { connect } from 'node:tls';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stableId } from '../../schemas/fnv1a.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import {
  PROVIDER_SNI,
  call,
  candidate,
  chatBody,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  tempDir,
  waitFor,
  writeOverlay,
} from './helpers.ts';
import type { Pki } from './helpers.ts';

const IDLE_GAP_MS = Number(process.env['AGN_HOP_IDLE_GAP_MS'] ?? 6_000);
const BURST = 8;

describe('consumer -> provider hop across an idle gap', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let pki: Pki;
  let sim: SimServer;
  let provider: GatewayInstance;
  let consumer: GatewayInstance;
  let base: string;
  const logger = createLogger({ name: 'test', level: 'warn', destination: { write: () => undefined } });

  const handshakes = async (session: 'new' | 'resumed'): Promise<number> =>
    (await provider.metrics.tlsHandshakes.get()).values
      .filter((v) => v.labels['session'] === session)
      .reduce((sum, v) => sum + v.value, 0);
  const burst = async (): Promise<number[]> =>
    Promise.all(
      Array.from(
        { length: BURST },
        async () => (await call(`${base}/v1/chat/completions`, { body: chatBody('m1') })).status,
      ),
    );

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('hop-keepalive'));
    pki = await makePki(dir);
    // Each answer takes 100 ms, so a burst holds all its requests in flight at once: the pool opens one connection
    // per request of the first burst and never needs more.
    sim = await startSim({ name: 'sim', models: ['m1'], token: 'tok-1', latencyMs: 100 });
    const providerJson = providerConfig({
      pki,
      routes: [
        {
          candidate_id: stableId('inference_model', 'm1', 'east', 'prov'),
          model: 'm1',
          cluster: 'backend',
          paths: ['/v1/chat/completions'],
          credential: { secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } },
        },
      ],
      credentials: [{ name: 'cred', namespace: 'grid-system', key: 'token', value: 'tok-1' }],
      clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${sim.port}`] }],
    });
    provider = await startGateway(resolveConfig(providerJson, 'provider.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
    });
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(overlayPath, payload([candidate('m1', 'east', 'prov')]));
    const consumerJson = consumerConfig({
      overlayPath,
      hops: ['prov'],
      clusters: [
        {
          name: 'prov',
          endpoints: [`127.0.0.1:${provider.listeners[0]!.port}`],
          tls: {
            ca: { ca_path: pki.caPath },
            client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
            sni: PROVIDER_SNI,
          },
        },
      ],
    });
    consumer = await startGateway(resolveConfig(consumerJson, 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    base = `http://127.0.0.1:${consumer.listeners[0]!.port}`;
    await waitFor('overlay', () => consumer.overlay?.current() ?? undefined);
  });

  afterAll(async () => {
    await consumer?.close();
    await provider?.close();
    await sim?.close();
    await cleanup();
  });

  it(
    `serves a burst after ${IDLE_GAP_MS} ms idle over the connections it already had: no TLS handshake`,
    async () => {
      expect(await burst()).toEqual(Array(BURST).fill(200));
      // One handshake per connection: full, or resumed from the session undici cached from the first one.
      const before = { new: await handshakes('new'), resumed: await handshakes('resumed') };
      expect(before.new + before.resumed).toBe(BURST);
      await new Promise((resolve) => setTimeout(resolve, IDLE_GAP_MS));
      expect(await burst()).toEqual(Array(BURST).fill(200));
      expect({ new: await handshakes('new'), resumed: await handshakes('resumed') }).toEqual(before);
    },
    IDLE_GAP_MS + 20_000,
  );

  it('announces a keep-alive that outlasts a 30 s gap on the client side too (undici closes 2 s before the hint)', async () => {
    const agent = new Agent({
      connect: { ca: pki.caPem, cert: pki.edgePem.cert, key: pki.edgePem.key, servername: PROVIDER_SNI },
    });
    try {
      const res = await request(`https://127.0.0.1:${provider.listeners[0]!.port}/v1/models`, { dispatcher: agent });
      await res.body.dump();
      expect(res.statusCode).toBe(200);
      const timeout = /timeout=(\d+)/.exec(String(res.headers['keep-alive']))?.[1];
      expect(Number(timeout) - 2).toBeGreaterThanOrEqual(30);
    } finally {
      await agent.close();
    }
  });

  it('resumes the TLS session when a peer has to reconnect (no full handshake)', async () => {
    const port = provider.listeners[0]!.port;
    const open = (session?: Buffer): Promise<TLSSocket> =>
      new Promise((resolve, reject) => {
        const socket = connect({
          port,
          host: '127.0.0.1',
          servername: PROVIDER_SNI,
          ca: pki.caPem,
          cert: pki.edgePem.cert,
          key: pki.edgePem.key,
          ...(session === undefined ? {} : { session }),
        });
        socket.once('secureConnect', () => resolve(socket));
        socket.once('error', reject);
      });
    const first = await open();
    // TLS 1.3 sends the session ticket after the handshake.
    const ticket = await new Promise<Buffer>((resolve) => first.once('session', resolve));
    first.end();
    const second = await open(ticket);
    expect(second.isSessionReused()).toBe(true);
    second.end();
    await waitFor('resumed handshake counted', async () => ((await handshakes('resumed')) >= 1 ? true : undefined));
  });
});
