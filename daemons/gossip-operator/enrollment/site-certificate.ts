/**
 * The signer side of enrollment (a redeemed SiteInvite token issues a certificate inline):
 * the grid CA, loaded once from PEM files, signs a site certificate for the public key of a verified PKCS#10 CSR.
 * The joining site's private key never travels; only its CSR does. Names in the CSR are ignored: the certificate
 * names exactly the invited site (CN and DNS SAN), which is what the peer chain check in site-identity.ts requires.
 */
import 'reflect-metadata';
import { createPrivateKey, createPublicKey, type KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { spkiSha256 } from '../../../schemas/enrollment/protocol.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const HOUR_MS = 3_600_000;
/** Backdating absorbs clock skew between the signer and the sites that verify the certificate. */
const BACKDATE_MS = 60_000;

export class CertificateAuthorityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CertificateAuthorityError';
  }
}

/** Why a CSR is refused; the message names the problem, never key bytes. */
export class CsrError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CsrError';
  }
}

export interface GridCa {
  /** PEM of the CA certificate, returned to the joining site as its trust bundle. */
  readonly certPem: string;
  readonly cert: x509.X509Certificate;
  readonly signingKey: webcrypto.CryptoKey;
  readonly signingAlgorithm: { name: string; hash?: string };
  readonly notAfterMs: number;
}

interface AlgorithmPair {
  readonly importAlgorithm: { name: string; namedCurve?: string; hash?: string };
  readonly signingAlgorithm: { name: string; hash?: string };
}

function algorithmFor(key: KeyObject, what: string): AlgorithmPair {
  switch (key.asymmetricKeyType) {
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      const named =
        curve === 'prime256v1'
          ? 'P-256'
          : curve === 'secp384r1'
            ? 'P-384'
            : curve === 'secp521r1'
              ? 'P-521'
              : undefined;
      if (named === undefined)
        throw new CertificateAuthorityError(
          `${what}: EC curve ${curve ?? 'unknown'} is not supported (use P-256, P-384 or P-521)`,
        );
      const hash = named === 'P-256' ? 'SHA-256' : named === 'P-384' ? 'SHA-384' : 'SHA-512';
      return { importAlgorithm: { name: 'ECDSA', namedCurve: named }, signingAlgorithm: { name: 'ECDSA', hash } };
    }
    case 'rsa':
      return {
        importAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
        signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
      };
    case 'ed25519':
      return { importAlgorithm: { name: 'Ed25519' }, signingAlgorithm: { name: 'Ed25519' } };
    default:
      throw new CertificateAuthorityError(
        `${what}: key type ${key.asymmetricKeyType ?? 'unknown'} is not supported (use EC, RSA or Ed25519)`,
      );
  }
}

/**
 * Loads the grid CA from PEM text. Errors name the file (`where`) and the problem; the key text never appears in
 * them, because library messages about key parsing are replaced by a fixed one.
 */
export async function loadGridCa(
  certPem: string,
  keyPem: string,
  where: { cert: string; key: string },
): Promise<GridCa> {
  let cert: x509.X509Certificate;
  let nodeCert: X509Certificate;
  try {
    cert = new x509.X509Certificate(certPem);
    nodeCert = new X509Certificate(certPem);
  } catch {
    throw new CertificateAuthorityError(`${where.cert}: not a PEM certificate`);
  }
  if (!nodeCert.ca)
    throw new CertificateAuthorityError(`${where.cert}: not a CA certificate (basicConstraints cA is not true)`);
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new CertificateAuthorityError(`${where.key}: not a PEM private key`);
  }
  const derivedSpki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  const certSpki = nodeCert.publicKey.export({ type: 'spki', format: 'der' });
  if (!derivedSpki.equals(certSpki))
    throw new CertificateAuthorityError(
      `${where.key}: the private key does not belong to the CA certificate ${where.cert}`,
    );
  const algorithms = algorithmFor(key, where.key);
  const signingKey = await webcrypto.subtle.importKey(
    'pkcs8',
    key.export({ type: 'pkcs8', format: 'der' }),
    algorithms.importAlgorithm,
    false,
    ['sign'],
  );
  return {
    certPem: `${cert.toString('pem')}\n`,
    cert,
    signingKey,
    signingAlgorithm: algorithms.signingAlgorithm,
    notAfterMs: cert.notAfter.getTime(),
  };
}

export interface VerifiedCsr {
  readonly csr: x509.Pkcs10CertificateRequest;
  /** DER SubjectPublicKeyInfo of the requested key. */
  readonly spki: Uint8Array;
  readonly publicKeySHA256: string;
  readonly keyType: 'ec' | 'rsa' | 'ed25519';
}

const CSR_PEM = /^-----BEGIN CERTIFICATE REQUEST-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE REQUEST-----\s*$/;

/** Parses a PEM CSR and checks its self-signature (proof that the requester holds the private key). */
export async function verifyCsr(pem: string): Promise<VerifiedCsr> {
  if (!CSR_PEM.test(pem)) throw new CsrError('csr must be one PEM "CERTIFICATE REQUEST" block');
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch {
    throw new CsrError('csr is not a parseable PKCS#10 certificate request');
  }
  const spki = new Uint8Array(csr.publicKey.rawData);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
  } catch {
    throw new CsrError('csr public key cannot be read');
  }
  const type = key.asymmetricKeyType;
  if (type === 'rsa') {
    if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048)
      throw new CsrError('csr RSA key is shorter than 2048 bits');
  } else if (type === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve !== 'prime256v1' && curve !== 'secp384r1' && curve !== 'secp521r1')
      throw new CsrError(`csr EC curve ${curve ?? 'unknown'} is not supported (use P-256, P-384 or P-521)`);
  } else if (type !== 'ed25519') {
    throw new CsrError(`csr key type ${type ?? 'unknown'} is not supported (use EC, RSA or Ed25519)`);
  }
  let signed = false;
  try {
    signed = await csr.verify();
  } catch {
    signed = false;
  }
  if (!signed) throw new CsrError('csr signature does not verify: it was not signed by the key it carries');
  return { csr, spki, publicKeySHA256: spkiSha256(spki), keyType: type };
}

function randomSerial(): string {
  // 16 random bytes, top bit cleared so the DER integer stays positive, never zero.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x01;
  return Buffer.from(bytes).toString('hex');
}

export interface IssuedSiteCertificate {
  readonly certPem: string;
  readonly serialNumber: string;
  readonly notAfter: string;
}

/**
 * A site certificate for `site`: CN and DNS SAN = site, serverAuth + clientAuth (the site certificate both serves
 * and dials), CA false, random serial, lifetime capped by the CA's own expiry.
 */
export async function issueSiteCertificate(
  ca: GridCa,
  request: VerifiedCsr,
  site: string,
  lifetimeMs: number,
  nowMs: number,
): Promise<IssuedSiteCertificate> {
  const notBefore = new Date(nowMs - BACKDATE_MS);
  const notAfter = new Date(Math.min(nowMs + lifetimeMs, ca.notAfterMs));
  if (notAfter.getTime() <= nowMs + HOUR_MS)
    throw new CertificateAuthorityError(
      'the grid CA certificate expires within the hour; rotate it before enrolling sites',
    );
  const usage =
    request.keyType === 'rsa'
      ? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
      : x509.KeyUsageFlags.digitalSignature;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${site}, O=grid-${site}`,
    issuer: ca.cert.subject,
    notBefore,
    notAfter,
    signingKey: ca.signingKey,
    publicKey: request.csr.publicKey,
    signingAlgorithm: ca.signingAlgorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(usage, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], false),
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: site }], false),
      await x509.SubjectKeyIdentifierExtension.create(request.csr.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
    ],
  });
  return {
    certPem: `${cert.toString('pem')}\n`,
    serialNumber: cert.serialNumber.toLowerCase(),
    notAfter: notAfter.toISOString(),
  };
}
