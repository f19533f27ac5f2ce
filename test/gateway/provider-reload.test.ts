// A provider gateway process whose mounted files change under it, laid out and updated as the kubelet does for the
// construct's one projected volume (`/etc/praxis`: `tls/ca.crt`, `tls/tls.crt`, `tls/tls.key`,
// `credentials/<secret>/<key>`): a rotated credential is injected upstream without a restart or signal; a renewed
// listener certificate is presented to new TLS connections (fingerprints compared) while a connection opened before
// keeps working; a second renewal is seen too (the watch follows the swapped directory); a bad replacement (an empty
// token, a key that does not belong to the certificate) keeps what is in force, is logged naming the file and
// counted, and the next good one is taken. No log line carries a token or key bytes.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stableId } from '../../schemas/fnv1a.ts';
import { createServerCertificate } from '../../daemons/shared/tls.ts';
import type { CertificateAuthority, LeafCertificate } from '../../daemons/shared/tls.ts';
import { createCertificateAuthority, createClientCertificate } from '../../daemons/shared/tls.ts';
import { KubeletVolume, type VolumePayload } from '../kubelet-volume.ts';
import {
  EDGE_ORG,
  PROVIDER_SNI,
  call,
  chatBody,
  metricSample,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
} from './helpers.ts';
import type { Daemon, Pki } from './helpers.ts';

const BOUND_MS = 3_000;
const CANDIDATE = stableId('inference_model', 'm1', 'east', 'prov');
const CREDENTIAL = 'credentials/cred-east/token';

let dir: string;
let cleanup: () => Promise<void>;
let backend: Server;
const seenAuthorization: string[] = [];
let ca: CertificateAuthority;
let edge: LeafCertificate;
let provider: Daemon;
let port: number;
let admin: string;
let volume: KubeletVolume;
let payload: Record<string, string>;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('provider-reload'));
  backend = createServer((req, res) => {
    seenAuthorization.push(String(req.headers['authorization']));
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', () => r()));
  ca = await createCertificateAuthority({ commonName: 'agn test ca', organization: 'agn' });
  edge = await createClientCertificate(ca, { commonName: 'edge', organization: EDGE_ORG });
  const serving = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
  payload = {
    'tls/ca.crt': ca.certPem,
    'tls/tls.crt': serving.certPem,
    'tls/tls.key': serving.keyPem,
    [CREDENTIAL]: 'token-one\n',
  };
  volume = await KubeletVolume.create(join(dir, 'praxis'), payload);
  const pki = {
    providerCertPath: volume.path('tls/tls.crt'),
    providerKeyPath: volume.path('tls/tls.key'),
    caPath: volume.path('tls/ca.crt'),
    edge,
  } as unknown as Pki;
  const config = providerConfig({
    pki,
    routes: [
      {
        candidate_id: CANDIDATE,
        model: 'm1',
        cluster: 'backend',
        paths: ['/v1/chat/completions'],
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
        file: volume.path(CREDENTIAL),
      },
    ],
    clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${(backend.address() as AddressInfo).port}`] }],
  });
  const configPath = join(dir, 'provider.json');
  await writeFile(configPath, JSON.stringify(config));
  provider = spawnDaemon('daemons/gateway/main.ts', ['--config', configPath], { AGN_GATEWAY_WARMUP_REQUESTS: '0' });
  port = await waitForPort(provider, 'provider');
  admin = `http://127.0.0.1:${await waitForPort(provider, 'admin')}`;
}, 40_000);

afterAll(async () => {
  await provider.stop();
  await new Promise<void>((r) => backend.close(() => r()));
  const output = provider.stdout() + provider.stderr();
  for (const secret of ['token-one', 'token-two', 'PRIVATE KEY', edge.keyPem.split('\n')[1]!])
    expect(output).not.toContain(secret);
  await cleanup();
});

let counter = 0;
/**
 * One provider hop over mTLS: on a fresh connection (agent: false, so no TLS session to resume), or on `agent`'s one
 * kept-alive connection. Its status and the certificate the connection saw.
 */
function hop(agent?: Agent): Promise<{ status: number; fingerprint: string; socket: TLSSocket }> {
  return new Promise((resolve, reject) => {
    const id = (++counter).toString(16).padStart(32, '0');
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        servername: PROVIDER_SNI,
        ca: ca.certPem,
        cert: edge.certPem,
        key: edge.keyPem,
        agent: agent ?? false,
        headers: {
          'content-type': 'application/json',
          'x-ai-routing-candidate': CANDIDATE,
          'x-ai-routing-request-id': id,
        },
      },
      (res) => {
        const socket = res.socket as TLSSocket;
        const fingerprint = socket.getPeerCertificate().fingerprint256.replaceAll(':', '').toLowerCase();
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint, socket }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(chatBody('m1')));
  });
}

async function update(change: VolumePayload): Promise<void> {
  payload = { ...payload, ...change } as Record<string, string>;
  await volume.update(payload);
}

async function metric(kind: string, outcome: string): Promise<number> {
  return (
    metricSample(
      (await call(`${admin}/metrics`)).text,
      `grid_gateway_file_reloads_total{file_kind="${kind}",outcome="${outcome}"}`,
    ) ?? 0
  );
}

async function within<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  return waitFor(what, probe, BOUND_MS);
}

describe('provider gateway: credential files followed on disk', () => {
  it('injects a rotated credential without a restart or a signal', async () => {
    expect((await hop()).status).toBe(200);
    expect(seenAuthorization.at(-1)).toBe('Bearer token-one');
    await update({ [CREDENTIAL]: 'token-two\n' });
    await within('the rotated token upstream', async () =>
      (await hop()).status === 200 && seenAuthorization.at(-1) === 'Bearer token-two' ? true : undefined,
    );
  });

  it('keeps the previous token when the file turns empty, logs and counts it, then takes the next good one', async () => {
    const before = await metric('credential', 'rejected');
    await update({ [CREDENTIAL]: '  \n' });
    await within('the empty credential counted', async () =>
      (await metric('credential', 'rejected')) === before + 1 ? true : undefined,
    );
    expect((await hop()).status).toBe(200);
    expect(seenAuthorization.at(-1)).toBe('Bearer token-two');
    const warning = provider.lines.find((l) => l['msg'] === 'credential unusable; the previous one stays in force');
    expect(warning?.['problem']).toBe(`${volume.path(CREDENTIAL)}: the token is empty`);
    expect(warning?.['name']).toBe('grid-system/cred-east/token');
    await update({ [CREDENTIAL]: 'token-three' });
    await within('the next good token upstream', async () =>
      (await hop()).status === 200 && seenAuthorization.at(-1) === 'Bearer token-three' ? true : undefined,
    );
  });
});

describe('provider gateway: listener certificate followed on disk', () => {
  it('presents a renewed certificate to new connections, while a connection opened before keeps working', async () => {
    const first = await hop();
    // One connection opened before the renewal and kept alive across it.
    const open = new Agent({ keepAlive: true, maxSockets: 1, maxCachedSessions: 0 });
    const before = await hop(open);
    expect(before.fingerprint).toBe(first.fingerprint);

    const renewed = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
    await update({ 'tls/tls.crt': renewed.certPem, 'tls/tls.key': renewed.keyPem });
    await within('the renewed certificate on a new connection', async () =>
      (await hop()).fingerprint === renewed.fingerprint ? true : undefined,
    );
    // The connection from before the renewal still serves requests, with the certificate it was opened with.
    const after = await hop(open);
    expect([after.status, after.fingerprint, after.socket === before.socket]).toEqual([200, first.fingerprint, true]);
    open.destroy();

    // A second renewal: the watch moved with the swapped directory instead of staying on the deleted one.
    const again = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
    await update({ 'tls/tls.crt': again.certPem, 'tls/tls.key': again.keyPem });
    await within('the second renewal on a new connection', async () =>
      (await hop()).fingerprint === again.fingerprint ? true : undefined,
    );
  });

  it('keeps the certificate in force when the new key does not belong to the new certificate, then takes the next good pair', async () => {
    const current = (await hop()).fingerprint;
    const before = await metric('listener_tls', 'rejected');
    const one = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
    const two = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
    await update({ 'tls/tls.crt': one.certPem, 'tls/tls.key': two.keyPem });
    await within('the mismatched pair counted', async () =>
      (await metric('listener_tls', 'rejected')) === before + 1 ? true : undefined,
    );
    expect(await hop()).toMatchObject({ status: 200, fingerprint: current });
    const warning = provider.lines.find((l) => l['msg'] === 'listener_tls unusable; the previous one stays in force');
    expect(warning?.['problem']).toBe(
      `listener provider tls.certificates[0].key_path ${volume.path('tls/tls.key')}: the private key does not belong to the certificate in listener provider tls.certificates[0].cert_path ${volume.path('tls/tls.crt')}`,
    );
    // A truncated certificate is refused the same way.
    await update({ 'tls/tls.crt': one.certPem.slice(0, 200), 'tls/tls.key': one.keyPem });
    await within('the truncated certificate counted', async () =>
      (await metric('listener_tls', 'rejected')) === before + 2 ? true : undefined,
    );
    expect((await hop()).fingerprint).toBe(current);
    await update({ 'tls/tls.crt': one.certPem, 'tls/tls.key': one.keyPem });
    await within('the good pair on a new connection', async () =>
      (await hop()).fingerprint === one.fingerprint ? true : undefined,
    );
  });
});
