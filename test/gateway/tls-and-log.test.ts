// The shared certificate generator and logger the gateway relies on: generated certificates complete a real
// mutual-TLS handshake with SNI and carry the identity peer_identity_trust matches; the logger never writes a secret.
import { X509Certificate, createHash } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:tls';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { createLogger, errorFields, redactText } from '../../daemons/shared/log.ts';
import {
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  pemFingerprint,
} from '../../daemons/shared/tls.ts';

describe('tls', () => {
  it('issues certificates that complete an mTLS handshake with SNI and expose the client identity', async () => {
    const ca = await createCertificateAuthority({ commonName: 'test ca' });
    const server = await createServerCertificate(ca, {
      commonName: 'provider',
      sans: ['provider.grid.internal', '127.0.0.1'],
    });
    const client = await createClientCertificate(ca, { commonName: 'edge', organization: 'agn-edge' });
    expect(server.fingerprint).toBe(createHash('sha256').update(new X509Certificate(server.certPem).raw).digest('hex'));
    expect(pemFingerprint(client.certPem)).toBe(client.fingerprint);

    const tlsServer = createServer(
      { cert: server.certPem, key: server.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
      (socket) => {
        const peer = socket.getPeerCertificate();
        socket.end(
          JSON.stringify({
            o: peer.subject.O,
            serial: peer.serialNumber,
            digest: createHash('sha256').update(peer.raw).digest('hex'),
          }),
        );
      },
    );
    tlsServer.listen(0, '127.0.0.1');
    await once(tlsServer, 'listening');
    try {
      const socket: TLSSocket = connect({
        port: (tlsServer.address() as AddressInfo).port,
        host: '127.0.0.1',
        servername: 'provider.grid.internal',
        ca: ca.certPem,
        cert: client.certPem,
        key: client.keyPem,
      });
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      await once(socket, 'end');
      const seen = JSON.parse(text) as { o: string; serial: string; digest: string };
      expect(seen.o).toBe('agn-edge');
      expect(seen.digest).toBe(client.fingerprint);
      expect(seen.serial.toLowerCase()).toBe(client.serialNumber);
    } finally {
      tlsServer.close();
    }
  });

  it('names the SANs a client may verify: another host name fails verification', async () => {
    const ca = await createCertificateAuthority();
    const server = await createServerCertificate(ca, { commonName: 'p', sans: ['right.example'] });
    const tlsServer = createServer({ cert: server.certPem, key: server.keyPem }, (s) => s.end());
    tlsServer.listen(0, '127.0.0.1');
    await once(tlsServer, 'listening');
    try {
      const socket = connect({
        port: (tlsServer.address() as AddressInfo).port,
        host: '127.0.0.1',
        servername: 'wrong.example',
        ca: ca.certPem,
      });
      const [error] = (await once(socket, 'error')) as [NodeJS.ErrnoException];
      expect(error.code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
    } finally {
      tlsServer.close();
    }
  });
});

describe('log', () => {
  it('redacts secret-bearing keys and bearer tokens in text', () => {
    const lines: string[] = [];
    const logger = createLogger({ name: 't', destination: { write: (l: string) => void lines.push(l) } });
    logger.info(
      { headers: { authorization: 'Bearer s3cret-a' }, token: 's3cret-b', credential: { value: 's3cret-c' } },
      'hello',
    );
    logger.warn({ error: errorFields(new Error('upstream said: Authorization: Bearer s3cret-d')) }, 'failed');
    const out = lines.join('');
    expect(out).not.toMatch(/s3cret/);
    expect(out).toContain('[redacted]');
    expect(redactText('-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----')).toBe('[redacted]');
  });
});
