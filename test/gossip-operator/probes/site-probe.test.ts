import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type CertificateAuthority,
  type LeafCertificate,
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
} from '../../../daemons/shared/tls.ts';
import { createHash, X509Certificate } from 'node:crypto';
import { legacyPemFingerprint, probeSite } from '../../../daemons/gossip-operator/probes/site-probe.ts';
import { parseHostPort } from '../../../daemons/shared/signals-client.ts';
import { closedPort } from '../../closed-port.ts';

let ca: CertificateAuthority;
let otherCa: CertificateAuthority;
let gatewayCert: LeafCertificate;
let siteClient: LeafCertificate;
const servers: tls.Server[] = [];

beforeAll(async () => {
  ca = await createCertificateAuthority({ commonName: 'grid-ca' });
  otherCa = await createCertificateAuthority({ commonName: 'other-ca' });
  gatewayCert = await createServerCertificate(ca, { commonName: 'west', sans: ['west.grid.internal', '127.0.0.1'] });
  siteClient = await createClientCertificate(ca, { commonName: 'east', organization: 'grid-east' });
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A peer site's gateway: real TLS, requiring a client certificate from the grid CA. */
async function gateway(): Promise<string> {
  const server = tls.createServer(
    { cert: gatewayCert.certPem, key: gatewayCert.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
    (socket) => socket.end(),
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const mutual = (address: string, overrides: Partial<Parameters<typeof probeSite>[0]> = {}) =>
  probeSite({
    address,
    mode: 'Mutual',
    serverName: 'west.grid.internal',
    ca: ca.certPem,
    clientCert: siteClient.certPem,
    clientKey: siteClient.keyPem,
    fingerprints: [gatewayCert.fingerprint],
    timeoutMs: 3000,
    ...overrides,
  });

describe('GridSite gateway probe (seed 001 "GridSite lifecycle")', () => {
  it('verifies the chain, the serverName SAN and the fingerprint pin over mTLS', async () => {
    expect(await mutual(await gateway())).toEqual({ outcome: 'verified', fingerprint: gatewayCert.fingerprint });
  });

  it('accepts either of two pins (rotation) and refuses a leaf that matches neither', async () => {
    const address = await gateway();
    expect((await mutual(address, { fingerprints: ['0'.repeat(64), gatewayCert.fingerprint] })).outcome).toBe(
      'verified',
    );
    expect(await mutual(address, { fingerprints: ['0'.repeat(64)] })).toMatchObject({
      outcome: 'pin_mismatch',
      fingerprint: gatewayCert.fingerprint,
    });
  });

  it('fails identity when the chain leads to another CA or the SAN does not match serverName', async () => {
    const address = await gateway();
    expect((await mutual(address, { ca: otherCa.certPem })).outcome).toBe('identity_failed');
    expect((await mutual(address, { serverName: 'east.grid.internal' })).outcome).toBe('identity_failed');
  });

  it('reports missing trust material without connecting', async () => {
    expect(await mutual('127.0.0.1:1', { fingerprints: [] })).toMatchObject({
      outcome: 'trust_missing',
      detail: expect.stringMatching(/canonical fingerprint pin/),
    });
    expect(await mutual('127.0.0.1:1', { clientKey: undefined })).toMatchObject({
      outcome: 'trust_missing',
      detail: expect.stringMatching(/site client certificate/),
    });
  });

  it('accepts the deprecated trust.certFingerprint as a single pin and refuses a leaf it does not match', async () => {
    const address = await gateway();
    const der = new X509Certificate(gatewayCert.certPem).raw;
    const legacy = legacyPemFingerprint(der);
    expect(legacy).toMatch(/^([0-9a-f]{2}:){31}[0-9a-f]{2}$/);
    expect(await mutual(address, { fingerprints: [], legacyPemFingerprint: legacy })).toEqual({
      outcome: 'verified',
      fingerprint: gatewayCert.fingerprint,
    });
    // The legacy pin is not the canonical DER digest with colons: a pin taken that way is refused, fail closed.
    const derWithColons = gatewayCert.fingerprint.replace(/(..)(?!$)/g, '$1:');
    expect(derWithColons).not.toBe(legacy);
    const wrong = await mutual(address, { fingerprints: [], legacyPemFingerprint: derWithColons });
    expect(wrong).toMatchObject({ outcome: 'pin_mismatch', fingerprint: gatewayCert.fingerprint });
    if (wrong.outcome === 'pin_mismatch') expect(wrong.detail).toContain('trust.certFingerprint');
    // The chain and SAN are still verified before the pin is looked at.
    expect(
      (await mutual(address, { fingerprints: [], legacyPemFingerprint: legacy, ca: otherCa.certPem })).outcome,
    ).toBe('identity_failed');
  });

  it('digests the strict PEM layout openssl and Node write for the legacy pin', () => {
    const pem = new X509Certificate(gatewayCert.certPem).toString();
    const der = new X509Certificate(gatewayCert.certPem).raw;
    expect(legacyPemFingerprint(der)).toBe(
      createHash('sha256')
        .update(pem)
        .digest('hex')
        .replace(/(..)(?!$)/g, '$1:'),
    );
  });

  it('reports a refused connection as unreachable', async () => {
    expect((await mutual(`127.0.0.1:${await closedPort()}`)).outcome).toBe('unreachable');
  });

  it('only checks TCP in Plaintext mode, which is never routing-eligible', async () => {
    const address = await gateway();
    expect(await probeSite({ address, mode: 'Plaintext', fingerprints: [], timeoutMs: 2000 })).toMatchObject({
      outcome: 'plaintext',
      reachable: true,
    });
    expect(
      await probeSite({
        address: `127.0.0.1:${await closedPort()}`,
        mode: 'Plaintext',
        fingerprints: [],
        timeoutMs: 2000,
      }),
    ).toMatchObject({ outcome: 'plaintext', reachable: false });
  });

  it.each([
    ['egress.example.com:8443', { host: 'egress.example.com', port: 8443 }],
    ['[fd00::1]:7946', { host: 'fd00::1', port: 7946 }],
    ['10.0.0.4:30080', { host: '10.0.0.4', port: 30080 }],
    ['no-port', undefined],
    ['host:0', undefined],
    ['host:70000', undefined],
    ['fd00::1:7946', undefined],
  ])('parses the gateway address %s', (address, expected) => {
    expect(parseHostPort(address)).toEqual(expected);
  });
});
