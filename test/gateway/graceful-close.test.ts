// A consumer gateway closed under load (what SIGTERM does): readiness goes false at once, every request whose
// connection the gateway had accepted gets its complete answer (including one whose connection was accepted just
// before the listener closed and whose request arrives after), new connections are refused, and close() resolves
// once the in-flight requests are done.
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { startSim, type SimServer } from '../../daemons/sim/server.ts';
import { candidate, consumerConfig, payload, tempDir, writeOverlay } from './helpers.ts';

const TOKEN = 'graceful-close-token-5d1e';
let sim: SimServer;
let gateway: GatewayInstance;
let port: number;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('graceful-close'));
  // Every answer takes 400 ms, so requests are in flight when close() starts.
  sim = await startSim({ name: 'sim-slow', models: ['m1'], token: TOKEN, latencyMs: 400 });
  const overlayPath = join(dir, 'routing-overlay.json');
  await writeOverlay(
    overlayPath,
    payload([
      {
        ...candidate('m1', 'a', 'ca'),
        credential: { strategy: 'bearer_token', secretRef: { name: 'tok', namespace: 'grid-system', key: 'token' } },
      },
    ]),
  );
  const config = consumerConfig({
    overlayPath,
    credentials: [{ name: 'tok', namespace: 'grid-system', key: 'token', value: TOKEN }],
    clusters: [{ name: 'ca', endpoints: [`127.0.0.1:${sim.port}`] }],
  });
  gateway = await startGateway(resolveConfig(config, dir), {
    configDir: dir,
    logger: createLogger({ name: 'gateway', level: 'silent' }),
  });
  port = gateway.listeners[0]?.port ?? 0;
});

afterAll(async () => {
  await gateway.close();
  await sim.close();
  await cleanup();
});

const BODY = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });

function chat(): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(BODY);
  });
}

describe('gateway close under load', () => {
  it('answers every accepted request, refuses new connections, and reports not ready at once', async () => {
    expect(await chat()).toBe(200);
    const inFlight = Array.from({ length: 8 }, () => chat());
    // A connection accepted before close() whose request is written only after the listener has closed.
    const late = connect({ host: '127.0.0.1', port });
    await new Promise((resolve) => late.once('connect', resolve));
    await new Promise((r) => setTimeout(r, 100));

    const started = Date.now();
    const closed = gateway.close();
    expect(gateway.isReady()).toBe(false);
    await new Promise((r) => setTimeout(r, 50));
    let lateAnswer = '';
    late.setEncoding('utf8').on('data', (chunk: string) => (lateAnswer += chunk));
    const lateDone = new Promise((resolve) => late.once('close', resolve));
    late.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`,
    );

    await expect(chat()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(await Promise.all(inFlight)).toEqual(Array(8).fill(200));
    await lateDone;
    expect(lateAnswer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(lateAnswer.toLowerCase()).toContain('connection: close');
    await closed;
    // Bounded by the in-flight work (400 ms answers), not by the 2 s shutdown deadline.
    expect(Date.now() - started).toBeLessThan(1900);
  });

  it('with a drain delay, keeps accepting while already not ready, then refuses', async () => {
    const dir = await tempDir('graceful-close-delay');
    const overlayPath = join(dir.dir, 'routing-overlay.json');
    await writeOverlay(
      overlayPath,
      payload([
        {
          ...candidate('m1', 'a', 'ca'),
          credential: { strategy: 'bearer_token', secretRef: { name: 'tok', namespace: 'grid-system', key: 'token' } },
        },
      ]),
    );
    const config = consumerConfig({
      overlayPath,
      credentials: [{ name: 'tok', namespace: 'grid-system', key: 'token', value: TOKEN }],
      clusters: [{ name: 'ca', endpoints: [`127.0.0.1:${sim.port}`] }],
    });
    const delayed = await startGateway(resolveConfig(config, dir.dir), {
      configDir: dir.dir,
      logger: createLogger({ name: 'gateway', level: 'silent' }),
      drainDelayMs: 600,
    });
    const saved = port;
    port = delayed.listeners[0]?.port ?? 0;
    try {
      const closed = delayed.close();
      expect(delayed.isReady()).toBe(false);
      expect(await chat()).toBe(200);
      await closed;
      await expect(chat()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      port = saved;
      await dir.cleanup();
    }
  });
});
