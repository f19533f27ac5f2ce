// A small grid for the hardening and fuzz suites: an in-process sim (so a test reads which headers reached the
// backend), a provider gateway and a consumer gateway as child processes (`node daemons/gateway/main.ts`, so their
// RSS, open file descriptors and event loop are measured apart from the test's), mTLS between them, and raw
// socket clients for what an HTTP client library would refuse or normalise (dot segments, broken framing).
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { connect as connectTcp } from 'node:net';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { Agent } from 'undici';
import { stableId } from '../../schemas/fnv1a.ts';
import { INSTANT_TIMING } from '../../daemons/sim/engine/config.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import {
  PROVIDER_SNI,
  call,
  candidate,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
} from './helpers.ts';
import type { Daemon, Pki } from './helpers.ts';

export const GRID_TOKEN = 'hardening-provider-token-5d1e8b0c';
export const GRID_CLUSTER = 'prov-east';
export const GRID_CANDIDATE = stableId('inference_model', 'm1', 'east', GRID_CLUSTER);

export interface Grid {
  dir: string;
  pki: Pki;
  sim: SimServer;
  provider: Daemon;
  consumer: Daemon;
  consumerPort: number;
  providerPort: number;
  consumerAdmin: string;
  providerAdmin: string;
  /** undici Agent presenting the edge's client certificate to the provider. */
  edge: Agent;
  /** Headers of a valid provider hop. */
  hop(): Record<string, string>;
  close(): Promise<(number | null)[]>;
}

export interface GridOptions {
  consumerListener?: Record<string, unknown>;
  providerListener?: Record<string, unknown>;
}

export async function startGrid(options: GridOptions = {}): Promise<Grid> {
  const { dir, cleanup } = await tempDir('hardening');
  const pki = await makePki(dir);
  const tokenFile = join(dir, 'sim-token');
  await writeFile(tokenFile, `${GRID_TOKEN}\n`, { mode: 0o600 });
  // Engine steps that take no time: the fuzz and hardening suites measure the gateways, with thousands of requests.
  const sim = await startSim({ name: 'sim-east', models: ['m1'], token: GRID_TOKEN, engine: INSTANT_TIMING });

  const providerDoc = providerConfig({
    pki,
    routes: [
      {
        candidate_id: GRID_CANDIDATE,
        model: 'm1',
        cluster: 'backend',
        paths: ['/v1/chat/completions', '/v1/responses', '/v1/embeddings'],
        credential: {
          strategy: 'bearer_token',
          secretRef: { name: 'cred-east', namespace: 'grid-system', key: 'token' },
        },
      },
    ],
    credentials: [
      { strategy: 'bearer_token', name: 'cred-east', namespace: 'grid-system', key: 'token', file: tokenFile },
    ],
    clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${sim.port}`] }],
  }) as { listeners: Record<string, unknown>[] };
  Object.assign(providerDoc.listeners[0]!, options.providerListener ?? {});
  const providerJson = join(dir, 'provider.json');
  await writeFile(providerJson, JSON.stringify(providerDoc));
  const provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerJson]);
  const providerPort = await waitForPort(provider, 'provider');

  const overlayPath = join(dir, 'routing-overlay.json');
  await writeOverlay(overlayPath, payload([candidate('m1', 'east', GRID_CLUSTER, { selection_group: 0 })]));
  const consumerJson = join(dir, 'consumer.json');
  await writeFile(
    consumerJson,
    JSON.stringify(
      consumerConfig({
        overlayPath,
        hops: [GRID_CLUSTER],
        listener: options.consumerListener ?? {},
        clusters: [
          {
            name: GRID_CLUSTER,
            endpoints: [`127.0.0.1:${providerPort}`],
            tls: {
              ca: { ca_path: pki.caPath },
              client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
              sni: PROVIDER_SNI,
              verify: true,
            },
          },
        ],
      }),
    ),
  );
  const consumer = spawnDaemon('daemons/gateway/main.ts', ['--config', consumerJson]);
  const consumerPort = await waitForPort(consumer, 'edge');
  const consumerAdmin = `http://127.0.0.1:${await waitForPort(consumer, 'admin')}`;
  const providerAdmin = `http://127.0.0.1:${await waitForPort(provider, 'admin')}`;
  await waitFor('consumer ready', async () => (await call(`${consumerAdmin}/readyz`)).status === 200, 20_000);
  const edge = new Agent({
    connect: { ca: pki.caPem, servername: PROVIDER_SNI, cert: pki.edgePem.cert, key: pki.edgePem.key },
  });
  let counter = 0;
  return {
    dir,
    pki,
    sim,
    provider,
    consumer,
    consumerPort,
    providerPort,
    consumerAdmin,
    providerAdmin,
    edge,
    hop: () => ({
      'x-ai-routing-candidate': GRID_CANDIDATE,
      'x-ai-routing-request-id': (++counter).toString(16).padStart(32, '0'),
    }),
    async close() {
      const codes = await Promise.all([consumer.stop(), provider.stop()]);
      await edge.close();
      await sim.close();
      await cleanup();
      return codes;
    },
  };
}

/** Resident set size of a process, from /proc (bytes). */
export function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) * 1024;
}

/** Open file descriptors of a process, from /proc. */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

export interface RawReply {
  /** Everything the server sent before it closed or the wait ended. */
  text: string;
  /** True when the server closed the connection. */
  closed: boolean;
}

/**
 * Sends `bytes` on a fresh connection (TLS with the edge certificate when `tls` is given) and collects the answer
 * until the server closes or `waitMs` passes. The client never closes first (allowHalfOpen).
 */
export function rawExchange(
  port: number,
  bytes: string | Buffer,
  options: { tls?: Pki; waitMs?: number } = {},
): Promise<RawReply> {
  return new Promise((resolve) => {
    const socket =
      options.tls === undefined
        ? connectTcp({ port, host: '127.0.0.1', allowHalfOpen: true })
        : connectTls({
            port,
            host: '127.0.0.1',
            servername: PROVIDER_SNI,
            ca: options.tls.caPem,
            cert: options.tls.edgePem.cert,
            key: options.tls.edgePem.key,
          });
    let text = '';
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed });
    };
    const timer = setTimeout(() => finish(false), options.waitMs ?? 3_000);
    socket.on(options.tls === undefined ? 'connect' : 'secureConnect', () => socket.write(bytes));
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
  });
}

/** Status code of the first response in a raw reply, or 0 when there is none. */
export function rawStatus(reply: RawReply): number {
  const match = /^HTTP\/1\.1 (\d{3})/.exec(reply.text);
  return match === null ? 0 : Number(match[1]);
}
