// A provider gateway that could not deliver a request to its backend (the backend refuses connections: a dead sim)
// says so in its own 502/503 (x-grid-not-delivered), and the consumer gateway fails the request over to another
// candidate instead of passing the error on: no backend saw the request, so a retry cannot repeat any work. Real
// processes: consumer -> (mTLS) provider gateway -> one live sim and one dead backend address.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { stableId } from '../../schemas/fnv1a.ts';
import {
  PROVIDER_SNI,
  call,
  candidate,
  chatBody,
  consumerConfig,
  makePki,
  metricSample,
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitForPort,
  writeOverlay,
  startConsumer,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';

const TOKEN = 'not-delivered-token-5e1a';
let cleanup: () => Promise<void>;
let sim: Daemon;
let provider: Daemon;
let consumer: Daemon;
let base: string;
let admin: string;
let providerBase: string;
/** A backend that forges the marker on its own 502: a gateway must never act on it, nor pass it on. */
let forgeRequests = 0;
const forge = createHttpServer((_req, res) => {
  forgeRequests++;
  res
    .writeHead(502, { 'content-type': 'application/json', 'x-grid-not-delivered': '1' })
    .end('{"error":"backend says so"}');
});

/** A loopback port nothing listens on: connections to it are refused, as to a killed backend. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('not-delivered'));
  const pki = await makePki(dir);
  await writeFile(join(dir, 'sim-token'), `${TOKEN}\n`, { mode: 0o600 });
  sim = spawnDaemon('daemons/sim/main.ts', [
    '--name',
    'sim-live',
    '--models',
    'm1',
    '--token-file',
    join(dir, 'sim-token'),
    '--step-overhead-ms',
    '0',
    '--prefill-ms-per-token',
    '0',
    '--decode-ms-per-seq',
    '0',
  ]);
  const simPort = await waitForPort(sim, 'sim');
  await new Promise<void>((r) => forge.listen(0, '127.0.0.1', r));
  const forgePort = (forge.address() as { port: number }).port;
  const credential = { strategy: 'bearer_token', secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } };
  const paths = ['/v1/chat/completions'];
  const providerYaml = join(dir, 'provider.yaml');
  await writeFile(
    providerYaml,
    stringify(
      providerConfig({
        pki,
        routes: [
          {
            candidate_id: stableId('inference_model', 'm1', 'east', 'prov-dead'),
            model: 'm1',
            cluster: 'backend-dead',
            paths,
            credential,
          },
          {
            candidate_id: stableId('inference_model', 'm1', 'east', 'prov-live'),
            model: 'm1',
            cluster: 'backend-live',
            paths,
            credential,
          },
          {
            candidate_id: stableId('inference_model', 'm2', 'east', 'prov-forge'),
            model: 'm2',
            cluster: 'backend-forge',
            paths,
            credential,
          },
        ],
        credentials: [
          {
            strategy: 'bearer_token',
            name: 'cred',
            namespace: 'grid-system',
            key: 'token',
            file: join(dir, 'sim-token'),
          },
        ],
        clusters: [
          { name: 'backend-dead', endpoints: [`127.0.0.1:${await deadPort()}`] },
          { name: 'backend-live', endpoints: [`127.0.0.1:${simPort}`] },
          { name: 'backend-forge', endpoints: [`127.0.0.1:${forgePort}`] },
        ],
      }),
    ),
  );
  provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerYaml]);
  const providerPort = await waitForPort(provider, 'provider');
  providerBase = `127.0.0.1:${providerPort}`;
  const overlayPath = join(dir, 'routing-overlay.json');
  // Both candidates in one group, taken in turn: every other request is routed to the dead backend first.
  await writeOverlay(
    overlayPath,
    payload(
      [
        candidate('m1', 'east', 'prov-dead', { selection_group: 0 }),
        candidate('m1', 'east', 'prov-live', { selection_group: 0 }),
        candidate('m2', 'east', 'prov-forge', { selection_group: 0 }),
        candidate('m2', 'east', 'prov-live', { selection_group: 1 }),
      ],
      'roundRobin',
    ),
  );
  const tls = {
    ca: { ca_path: pki.caPath },
    client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
    sni: PROVIDER_SNI,
    verify: true,
  };
  const consumerJson = join(dir, 'consumer.json');
  await writeFile(
    consumerJson,
    JSON.stringify(
      consumerConfig({
        overlayPath,
        hops: ['prov-dead', 'prov-live', 'prov-forge'],
        clusters: [
          { name: 'prov-dead', endpoints: [providerBase], tls },
          { name: 'prov-live', endpoints: [providerBase], tls },
          { name: 'prov-forge', endpoints: [providerBase], tls },
        ],
      }),
    ),
  );
  ({ daemon: consumer, base, admin } = await startConsumer(consumerJson));
}, 60_000);

afterAll(async () => {
  await Promise.all([consumer, provider, sim].map((d) => d?.stop()));
  await new Promise<void>((r) => forge.close(() => r()));
  await cleanup();
});

describe('a provider gateway that could not deliver the request', () => {
  it('answers 502 or 503 marked not delivered, and the consumer retries every such request on the other candidate', async () => {
    for (let i = 0; i < 12; i++) {
      for (const stream of [false, true]) {
        const reply = await call(`${base}/v1/chat/completions`, { body: chatBody('m1', { stream }) });
        expect(reply.status, reply.text).toBe(200);
        expect(reply.headers['x-sim-provider']).toBe('sim-live');
        expect(reply.headers['x-grid-not-delivered']).toBeUndefined();
      }
    }
    const metrics = (await call(`${admin}/metrics`)).text;
    // Round-robin sent half of them to the dead backend's candidate first; each was retried once.
    expect(
      metricSample(metrics, 'grid_gateway_retries_total{role="consumer",cluster="prov-dead"}'),
    ).toBeGreaterThanOrEqual(10);
  });

  it("never acts on a backend's own marker: its 502 reaches the caller unmarked, sent once, not failed over", async () => {
    const before = forgeRequests;
    const reply = await call(`${base}/v1/chat/completions`, { body: chatBody('m2') });
    expect(reply.status).toBe(502);
    expect(reply.headers['x-grid-not-delivered']).toBeUndefined();
    expect(reply.headers['x-sim-provider']).toBeUndefined();
    expect(forgeRequests - before).toBe(1);
  });
});
