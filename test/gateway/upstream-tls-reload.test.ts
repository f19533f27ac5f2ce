// A consumer gateway process whose upstream client certificate is renewed under it, in a projected volume laid out and
// updated as the kubelet does (`tls/ca.crt`, `tls/tls.crt`, `tls/tls.key`), against a real mTLS upstream in the test
// that records the client certificate of every request: after the swap the next request arrives on a new connection
// with the new certificate (no signal, no restart), a streamed response in flight across the swap finishes whole on
// its old connection, and a truncated certificate is refused (counted, logged naming the file) while the certificate in
// force stays, until the next good pair is taken.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
} from '../../daemons/shared/tls.ts';
import type { CertificateAuthority, LeafCertificate } from '../../daemons/shared/tls.ts';
import { KubeletVolume, type VolumePayload } from '../kubelet-volume.ts';
import {
  EDGE_ORG,
  PROVIDER_SNI,
  call,
  candidate,
  chatBody,
  consumerConfig,
  metricSample,
  payload as overlayPayload,
  tempDir,
  waitFor,
  writeOverlay,
  startConsumer,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';

const BOUND_MS = 3_000;

let dir: string;
let cleanup: () => Promise<void>;
let ca: CertificateAuthority;
let upstream: Server;
/** The client certificate fingerprint of each request the upstream received, in order. */
const seen: string[] = [];
let consumer: Daemon;
let base: string;
let admin: string;
let volume: KubeletVolume;
let files: Record<string, string>;
let edge: LeafCertificate;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('upstream-tls-reload'));
  ca = await createCertificateAuthority({ commonName: 'agn test ca', organization: 'agn' });
  const serving = await createServerCertificate(ca, { commonName: 'provider', sans: [PROVIDER_SNI] });
  upstream = createServer(
    { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      seen.push((req.socket as TLSSocket).getPeerCertificate().fingerprint256.replaceAll(':', '').toLowerCase());
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        if ((JSON.parse(body) as { stream?: boolean }).stream === true) {
          // A streamed answer that spans the renewal: ten chunks over about a second.
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          let sent = 0;
          const timer = setInterval(() => {
            res.write(`data: {"n":${sent}}\n\n`);
            if (++sent === 10) {
              clearInterval(timer);
              res.end('data: [DONE]\n\n');
            }
          }, 100);
          return;
        }
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
    },
  );
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  edge = await createClientCertificate(ca, { commonName: 'edge', organization: EDGE_ORG });
  files = { 'tls/ca.crt': ca.certPem, 'tls/tls.crt': edge.certPem, 'tls/tls.key': edge.keyPem };
  volume = await KubeletVolume.create(join(dir, 'praxis'), files);
  const overlayPath = join(dir, 'overlay.json');
  await writeOverlay(overlayPath, overlayPayload([candidate('m1', 'west', 'prov')]));
  const config = consumerConfig({
    overlayPath,
    clusters: [
      {
        name: 'prov',
        endpoints: [`127.0.0.1:${(upstream.address() as AddressInfo).port}`],
        tls: {
          ca: { ca_path: volume.path('tls/ca.crt') },
          client_cert: { cert_path: volume.path('tls/tls.crt'), key_path: volume.path('tls/tls.key') },
          sni: PROVIDER_SNI,
          verify: true,
        },
      },
    ],
  });
  const configPath = join(dir, 'consumer.json');
  await writeFile(configPath, JSON.stringify(config));
  ({ daemon: consumer, base, admin } = await startConsumer(configPath, { AGN_GATEWAY_WARMUP_REQUESTS: '0' }));
}, 40_000);

afterAll(async () => {
  await consumer.stop();
  await new Promise<void>((r) => upstream.close(() => r()));
  upstream.closeAllConnections();
  expect(consumer.stdout() + consumer.stderr()).not.toContain('PRIVATE KEY');
  await cleanup();
});

async function chat(): Promise<{ status: number; fingerprint: string | undefined }> {
  const reply = await call(`${base}/v1/chat/completions`, { body: chatBody('m1') });
  return { status: reply.status, fingerprint: seen.at(-1) };
}

async function update(change: VolumePayload): Promise<void> {
  files = { ...files, ...change } as Record<string, string>;
  await volume.update(files);
}

async function rejected(): Promise<number> {
  return (
    metricSample(
      (await call(`${admin}/metrics`)).text,
      'grid_gateway_file_reloads_total{file_kind="upstream_tls",outcome="rejected"}',
    ) ?? 0
  );
}

describe('upstream client certificate followed on disk', () => {
  it('connects with the renewed certificate after the Secret update, while a response in flight finishes on the old connection', async () => {
    expect(await chat()).toEqual({ status: 200, fingerprint: edge.fingerprint });
    const streaming = call(`${base}/v1/chat/completions`, { body: chatBody('m1', { stream: true }) });
    await waitFor('the stream under way', () => (seen.length >= 2 ? true : undefined));
    const renewed = await createClientCertificate(ca, { commonName: 'edge', organization: EDGE_ORG });
    await update({ 'tls/tls.crt': renewed.certPem, 'tls/tls.key': renewed.keyPem });
    await waitFor(
      'the renewed client certificate at the upstream',
      async () => ((await chat()).fingerprint === renewed.fingerprint ? true : undefined),
      BOUND_MS,
    );
    const streamed = await streaming;
    expect(streamed.status).toBe(200);
    expect(streamed.text.match(/^data: \{"n":\d\}$/gm)).toHaveLength(10);
    expect(streamed.text.endsWith('data: [DONE]\n\n')).toBe(true);
    edge = renewed;
  });

  it('keeps the certificate in force when the new one is truncated, then takes the next good pair', async () => {
    const before = await rejected();
    const next = await createClientCertificate(ca, { commonName: 'edge', organization: EDGE_ORG });
    await update({ 'tls/tls.crt': next.certPem.slice(0, next.certPem.length - 40), 'tls/tls.key': next.keyPem });
    await waitFor(
      'the truncated certificate counted',
      async () => ((await rejected()) === before + 1 ? true : undefined),
      BOUND_MS,
    );
    expect(await chat()).toEqual({ status: 200, fingerprint: edge.fingerprint });
    const warning = consumer.lines.find((l) => l['msg'] === 'upstream_tls unusable; the previous one stays in force');
    expect(warning?.['problem']).toBe(
      `cluster "prov" tls.client_cert.cert_path ${volume.path('tls/tls.crt')}: a PEM certificate is truncated (BEGIN without END)`,
    );
    await update({ 'tls/tls.crt': next.certPem });
    await waitFor(
      'the good pair at the upstream',
      async () => ((await chat()).fingerprint === next.fingerprint ? true : undefined),
      BOUND_MS,
    );
  });
});
