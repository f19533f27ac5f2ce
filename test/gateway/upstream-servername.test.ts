// An upstream cluster addressed by a DNS name whose certificate names only tls.sni (a Kubernetes Service name in
// front of a gateway whose certificate carries its public name): every request must be verified against tls.sni.
// undici otherwise derives the server name from the host header (the endpoint's DNS name), reconnects with it and
// the certificate check fails for some requests (random 502s).
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { createCertificateAuthority, createServerCertificate } from '../../daemons/shared/tls.ts';
import { call, candidate, chatBody, consumerConfig, payload, tempDir, writeOverlay } from './helpers.ts';
import { writeFile } from 'node:fs/promises';

const SNI = 'gateway.east.grid.example.com';
let upstream: Server;
let gateway: GatewayInstance;
let base: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('servername'));
  const ca = await createCertificateAuthority({ commonName: 'servername test ca' });
  // Deliberately not "localhost": the endpoint's own name must never be what the certificate is checked against.
  const leaf = await createServerCertificate(ca, { commonName: 'upstream', sans: [SNI] });
  await writeFile(join(dir, 'ca.crt'), ca.certPem);
  upstream = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
    req.resume();
    req.on('end', () => res.end(JSON.stringify({ servername: (req.socket as { servername?: string }).servername })));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const port = (upstream.address() as AddressInfo).port;
  const overlayPath = join(dir, 'routing-overlay.json');
  await writeOverlay(overlayPath, payload([candidate('m1', 'a', 'up')]));
  const config = consumerConfig({
    overlayPath,
    clusters: [
      {
        name: 'up',
        endpoints: [`localhost:${port}`],
        tls: { ca: { ca_path: join(dir, 'ca.crt') }, sni: SNI, verify: true },
      },
    ],
  });
  gateway = await startGateway(resolveConfig(config, dir), {
    configDir: dir,
    logger: createLogger({ name: 'gateway', level: 'silent' }),
  });
  base = `http://127.0.0.1:${gateway.listeners[0]?.port ?? 0}`;
});

afterAll(async () => {
  await gateway.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
  await cleanup();
});

describe('upstream TLS server name', () => {
  it('verifies every request, sequential and concurrent, against tls.sni, never the endpoint host name', async () => {
    const replies = [];
    for (let i = 0; i < 5; i++) replies.push(await call(`${base}/v1/chat/completions`, { body: chatBody('m1') }));
    replies.push(
      ...(await Promise.all(
        Array.from({ length: 20 }, () => call(`${base}/v1/chat/completions`, { body: chatBody('m1') })),
      )),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(25).fill(200));
    expect(new Set(replies.map((r) => r.json().servername))).toEqual(new Set([SNI]));
  });
});
