// End to end with real processes: client -> consumer gateway -> (mTLS) provider gateway -> sim backend, each
// started as `node daemons/.../main.ts` with certificates generated here. Proves the request and credential
// flows (docs/contract.md §3.1, §3.2) and hot reload under load, and that the programs fail fast on a bad config.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
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
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
  startConsumer,
  writeRaw,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';

const TOKEN = 'e2e-backend-token-91c2';
const CLUSTER = 'prov-east';

let dir: string;
let cleanup: () => Promise<void>;
let sim: Daemon;
let provider: Daemon;
let consumer: Daemon;
let base: string;
let admin: string;
let overlayPath: string;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('e2e'));
  const pki = await makePki(dir);
  await writeFile(join(dir, 'sim-token'), `${TOKEN}\n`, { mode: 0o600 });
  // Steps cost nothing but the 2.5 ms floor of 400 tokens a second: the load test below needs answers in tens of ms.
  sim = spawnDaemon('daemons/sim/main.ts', [
    '--name',
    'sim-east',
    '--models',
    'm1',
    '--token-file',
    join(dir, 'sim-token'),
    '--tokens-per-second',
    '400',
    '--step-overhead-ms',
    '0',
    '--prefill-ms-per-token',
    '0',
    '--decode-ms-per-seq',
    '0',
  ]);
  const simPort = await waitForPort(sim, 'sim');

  const candidateId = stableId('inference_model', 'm1', 'east', CLUSTER);
  const providerYaml = join(dir, 'provider.yaml');
  await writeFile(
    providerYaml,
    stringify(
      providerConfig({
        pki,
        routes: [
          {
            candidate_id: candidateId,
            model: 'm1',
            cluster: 'backend',
            paths: ['/v1/chat/completions', '/v1/responses'],
            credential: {
              strategy: 'bearer_token',
              secretRef: { name: 'cred-east', namespace: 'grid-system', key: 'token' },
            },
          },
        ],
        credentials: [
          {
            strategy: 'bearer_token',
            name: 'cred-east',
            namespace: 'grid-system',
            key: 'token',
            file: join(dir, 'sim-token'),
          },
        ],
        clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${simPort}`] }],
      }),
    ),
  );
  provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerYaml]);
  const providerPort = await waitForPort(provider, 'provider');

  overlayPath = join(dir, 'routing-overlay.json');
  await writeOverlay(overlayPath, payload([candidate('m1', 'east', CLUSTER, { selection_group: 0 })]));
  const consumerJson = join(dir, 'consumer.json');
  await writeFile(
    consumerJson,
    JSON.stringify(
      consumerConfig({
        overlayPath,
        hops: [CLUSTER],
        clusters: [
          {
            name: CLUSTER,
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
  ({ daemon: consumer, base, admin } = await startConsumer(consumerJson));
}, 60_000);

afterAll(async () => {
  const codes = await Promise.all([consumer, provider, sim].map((d) => d?.stop()));
  // SIGTERM drains and exits cleanly.
  expect(codes).toEqual([0, 0, 0]);
  await cleanup();
});

describe('request flow through consumer and provider', () => {
  it('serves a chat completion, plain and streaming', async () => {
    const plain = await call(`${base}/v1/chat/completions`, { body: chatBody('m1') });
    expect(plain.status).toBe(200);
    expect(plain.headers['x-sim-provider']).toBe('sim-east');
    expect(plain.json().choices[0].message.content).toContain('tok0');
    const stream = await call(`${base}/v1/chat/completions`, { body: chatBody('m1', { stream: true }) });
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.text.match(/^data: /gm)?.length).toBe(19);
    expect(stream.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('serves the Responses API, plain and streaming', async () => {
    const plain = await call(`${base}/v1/responses`, { body: { model: 'm1', input: 'hello' } });
    expect(plain.status).toBe(200);
    expect(plain.json().status).toBe('completed');
    const stream = await call(`${base}/v1/responses`, { body: { model: 'm1', input: 'hello', stream: true } });
    expect(stream.status).toBe(200);
    expect(stream.text.split('event: response.output_text.delta').length - 1).toBe(16);
    expect(stream.text).toContain('event: response.completed');
  });

  it('the credential reaches the sim but never the consumer, a response or a log line', async () => {
    // The sim answers 200 only with the right bearer token: the provider injected it.
    expect(
      (
        await call(`${base}/v1/chat/completions`, {
          body: chatBody('m1'),
          headers: { authorization: 'Bearer client-key' },
        })
      ).status,
    ).toBe(200);
    expect(consumer.stdout() + consumer.stderr()).not.toContain(TOKEN);
    expect(provider.stdout() + provider.stderr()).not.toContain(TOKEN);
    const models = await call(`${base}/v1/models`);
    expect(models.json().data).toEqual([{ id: 'm1', object: 'model', created: 0, owned_by: 'agn' }]);
  });
});

describe('hot reload under load', () => {
  it('swaps revisions while requests run, with zero failed requests, and keeps serving through an invalid file', async () => {
    const revisions = [
      payload([candidate('m1', 'east', CLUSTER, { selection_group: 0, score: 0.9 })]),
      payload([candidate('m1', 'east', CLUSTER, { selection_group: 0, score: 0.4 })]),
    ];
    const statuses: number[] = [];
    let running = true;
    let inFlight = 0;
    const worker = async (): Promise<void> => {
      while (running) {
        inFlight++;
        const reply = await call(`${base}/v1/chat/completions`, {
          body: chatBody('m1', { stream: statuses.length % 2 === 0 }),
        });
        inFlight--;
        statuses.push(reply.status);
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    const accepted: string[] = [];
    /** Requests in flight when each revision was accepted: every swap happens under load. */
    const inFlightAt: number[] = [];
    for (let i = 0; i < 6; i++) {
      const revision = await writeOverlay(overlayPath, revisions[i % 2]!);
      accepted.push(revision);
      await waitFor(`revision ${revision}`, async () =>
        (await call(`${admin}/metrics`)).text.includes(`revision="${revision}",format="envelope"`),
      );
      inFlightAt.push(inFlight);
      if (i === 2) {
        await writeRaw(overlayPath, '{"schema_version":"1.0.0"}');
        await waitFor('rejection', async () =>
          /outcome="rejected",reason="malformed"} [1-9]/.test((await call(`${admin}/metrics`)).text),
        );
        const metrics = (await call(`${admin}/metrics`)).text;
        expect(metrics).toContain(
          `grid_gateway_overlay_accepted_revision_info{revision="${revision}",format="envelope"} 1`,
        );
      }
    }
    running = false;
    await Promise.all(workers);
    // Requests were in flight at every swap and all of them answered 200 (a count, not a rate: how many fit between
    // two swaps depends on the machine's load).
    expect(
      inFlightAt.every((n) => n > 0),
      `in flight at each swap: ${inFlightAt.join(', ')}`,
    ).toBe(true);
    expect(statuses.length).toBeGreaterThanOrEqual(4);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const reloadLog = consumer.lines.filter((l) => l['msg'] === 'overlay accepted').map((l) => l['revision']);
    expect(reloadLog).toEqual(expect.arrayContaining(accepted));
  });
});

describe('startup checks', () => {
  it('exits 1 naming an unknown key and its path', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(
      bad,
      stringify({
        ...consumerConfig({ overlayPath, clusters: [{ name: 'c', endpoints: ['127.0.0.1:1'] }] }),
        listners: [],
      }),
    );
    const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', bad]);
    expect(await daemon.stop('SIGCONT')).toBe(1);
    expect(daemon.stderr()).toContain('unknown key "listners" at /');
  });

  it('exits 1 when a provider listener does not require client certificates', async () => {
    const doc = JSON.parse(
      JSON.stringify(
        providerConfig({
          pki: await makePki(dir),
          routes: [{ candidate_id: 'x', model: 'm', cluster: 'b', paths: ['/v1/chat/completions'] }],
          credentials: [],
          clusters: [{ name: 'b', endpoints: ['127.0.0.1:1'] }],
        }),
      ),
    );
    doc.listeners[0].tls.client_cert_mode = 'none';
    const bad = join(dir, 'bad-provider.json');
    await writeFile(bad, JSON.stringify(doc));
    const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', bad]);
    expect(await daemon.stop('SIGCONT')).toBe(1);
    expect(daemon.stderr()).toContain('must set tls.client_cert_mode: require');
  });
});
