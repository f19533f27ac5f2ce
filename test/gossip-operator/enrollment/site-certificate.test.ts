// The signer's certificate core without the endpoint: which CSR keys it accepts, and what the issued
// certificate's lifetime is bounded by.
import 'reflect-metadata';
import { generateKeyPairSync, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import {
  CsrError,
  issueSiteCertificate,
  loadGridCa,
  verifyCsr,
} from '../../../daemons/gossip-operator/enrollment/site-certificate.ts';
import { spkiSha256 } from '../../../schemas/enrollment/protocol.ts';
import { createCertificateAuthority } from '../../../daemons/shared/tls.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

async function csr(
  algorithm: { name: string; namedCurve?: string },
  signing: { name: string; hash?: string },
): Promise<{ pem: string; spki: Buffer }> {
  const keys = (await webcrypto.subtle.generateKey(algorithm as never, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=x',
    keys,
    signingAlgorithm: signing,
  });
  return { pem: request.toString('pem'), spki: Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey)) };
}

describe('site certificate issuing', () => {
  it('accepts EC P-256, P-384 and Ed25519 CSRs and binds the SPKI digest', async () => {
    for (const [algorithm, signing] of [
      [
        { name: 'ECDSA', namedCurve: 'P-256' },
        { name: 'ECDSA', hash: 'SHA-256' },
      ],
      [
        { name: 'ECDSA', namedCurve: 'P-384' },
        { name: 'ECDSA', hash: 'SHA-384' },
      ],
      [{ name: 'Ed25519' }, { name: 'Ed25519' }],
    ] as const) {
      const { pem, spki } = await csr(algorithm, signing);
      const verified = await verifyCsr(pem);
      expect(verified.publicKeySHA256).toBe(spkiSha256(spki));
    }
  });

  it('refuses RSA keys under 2048 bits and CSRs that are not one PEM request', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const keys = {
      privateKey: await webcrypto.subtle.importKey(
        'pkcs8',
        privateKey.export({ type: 'pkcs8', format: 'der' }),
        { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        false,
        ['sign'],
      ),
      publicKey: await webcrypto.subtle.importKey(
        'spki',
        publicKey.export({ type: 'spki', format: 'der' }),
        { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        true,
        ['verify'],
      ),
    };
    const weak = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=x',
      keys,
      signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    });
    await expect(verifyCsr(weak.toString('pem'))).rejects.toThrow('shorter than 2048 bits');
    const good = (await csr({ name: 'ECDSA', namedCurve: 'P-256' }, { name: 'ECDSA', hash: 'SHA-256' })).pem;
    await expect(verifyCsr(`${good}\n${good}`)).rejects.toBeInstanceOf(CsrError);
    await expect(verifyCsr(good.replace('CERTIFICATE REQUEST', 'CERTIFICATE'))).rejects.toThrow(
      'one PEM "CERTIFICATE REQUEST" block',
    );
    await expect(
      verifyCsr('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n'),
    ).rejects.toThrow('not a parseable PKCS#10');
  });

  it('caps the lifetime at the CA expiry and refuses to issue from a CA about to expire', async () => {
    const ca = await createCertificateAuthority({ validDays: 2 });
    const grid = await loadGridCa(ca.certPem, ca.keyPem, { cert: 'ca.crt', key: 'ca.key' });
    const request = await verifyCsr(
      (await csr({ name: 'ECDSA', namedCurve: 'P-256' }, { name: 'ECDSA', hash: 'SHA-256' })).pem,
    );
    const now = Date.now();
    const issued = await issueSiteCertificate(grid, request, 'east2', 90 * 86_400_000, now);
    const cert = new X509Certificate(issued.certPem);
    expect(Date.parse(cert.validTo)).toBeLessThanOrEqual(grid.notAfterMs);
    expect(Date.parse(cert.validFrom)).toBeLessThanOrEqual(now);
    const serials = new Set([
      issued.serialNumber,
      (await issueSiteCertificate(grid, request, 'east2', 3_600_000 * 2, now)).serialNumber,
    ]);
    expect(serials.size).toBe(2);
    await expect(
      issueSiteCertificate(grid, request, 'east2', 90 * 86_400_000, grid.notAfterMs - 60_000),
    ).rejects.toThrow('expires within the hour');
  });
});
