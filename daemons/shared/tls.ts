// Certificate generation for tests, benchmarks and the local grid runner: a CA plus server and client
// leaf certificates with SANs and an organization, built with @peculiar/x509 over node:crypto's WebCrypto.
// ECDSA P-256 keeps generation fast on a 2-core machine while being accepted by every TLS stack we use.
// @peculiar/x509's dependency tsyringe needs the Reflect metadata API at load time.
import 'reflect-metadata';
import { createHash, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';

type CryptoKeyPair = webcrypto.CryptoKeyPair;
type CryptoKey = webcrypto.CryptoKey;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

export interface CertificateAuthority {
  /** PEM of the CA certificate (what peers put in `ca_path`). */
  certPem: string;
  /** PEM (PKCS#8) of the CA private key. */
  keyPem: string;
  /** SHA-256 of the certificate DER, 64 lowercase hex. */
  fingerprint: string;
  readonly cert: x509.X509Certificate;
  readonly keys: CryptoKeyPair;
}

export interface LeafCertificate {
  certPem: string;
  keyPem: string;
  /** SHA-256 of the leaf certificate DER, 64 lowercase hex (what `cert_digest` pins). */
  fingerprint: string;
  /** Serial number as lowercase hex without separators. */
  serialNumber: string;
}

export interface CaOptions {
  commonName?: string;
  organization?: string;
  validDays?: number;
}

export interface LeafOptions {
  commonName: string;
  organization?: string;
  /** DNS names and IP addresses for the subjectAltName extension. */
  sans?: string[];
  validDays?: number;
  /** Start of validity; tests use a past date to build expired certificates. */
  notBefore?: Date;
  serialNumber?: string;
}

/** SHA-256 fingerprint of a certificate's DER bytes, 64 lowercase hex. */
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Every CERTIFICATE block of a PEM bundle (a chain or a CA bundle), in order; other block types are skipped. */
export function pemCertificates(bundle: string): string[] {
  return bundle.match(PEM_CERTIFICATE) ?? [];
}

export function certificateFingerprint(der: Uint8Array | ArrayBuffer): string {
  const bytes = der instanceof Uint8Array ? der : new Uint8Array(der);
  return createHash('sha256').update(bytes).digest('hex');
}

/** Fingerprint of the first certificate of a PEM bundle. */
export function pemFingerprint(pem: string): string {
  return certificateFingerprint(new x509.X509Certificate(pem).rawData);
}

function distinguishedName(commonName: string, organization?: string): string {
  const escape = (value: string): string => value.replace(/([,+"\\<>;=])/g, '\\$1');
  return organization === undefined ? `CN=${escape(commonName)}` : `CN=${escape(commonName)}, O=${escape(organization)}`;
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', key);
  const body = Buffer.from(pkcs8).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '');
  return `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`;
}

function randomSerial(): string {
  // A positive 16-byte serial: clear the top bit so DER does not need a sign byte.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f | 0x01;
  return Buffer.from(bytes).toString('hex');
}

export async function createCertificateAuthority(options: CaOptions = {}): Promise<CertificateAuthority> {
  const keys = (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
  const notBefore = new Date(Date.now() - 60_000);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: distinguishedName(options.commonName ?? 'agn test ca', options.organization),
    notBefore,
    notAfter: new Date(notBefore.getTime() + (options.validDays ?? 30) * DAY_MS),
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return {
    certPem: cert.toString('pem') + '\n',
    keyPem: await exportKeyPem(keys.privateKey),
    fingerprint: certificateFingerprint(cert.rawData),
    cert,
    keys,
  };
}

function sanEntries(sans: string[]): x509.JsonGeneralName[] {
  return sans.map((value) => (isIP(value) !== 0 ? { type: 'ip', value } : { type: 'dns', value }));
}

async function issueLeaf(ca: CertificateAuthority, options: LeafOptions, usage: 'server' | 'client' | 'site'): Promise<LeafCertificate> {
  const keys = (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
  const notBefore = options.notBefore ?? new Date(Date.now() - 60_000);
  const serialNumber = options.serialNumber ?? randomSerial();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
    new x509.ExtendedKeyUsageExtension(
      usage === 'site' ? [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth] : [usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth],
      false,
    ),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
  ];
  if (options.sans !== undefined && options.sans.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension(sanEntries(options.sans), false));
  }
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber,
    subject: distinguishedName(options.commonName, options.organization),
    issuer: ca.cert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + (options.validDays ?? 30) * DAY_MS),
    signingKey: ca.keys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions,
  });
  return {
    certPem: cert.toString('pem') + '\n',
    keyPem: await exportKeyPem(keys.privateKey),
    fingerprint: certificateFingerprint(cert.rawData),
    serialNumber: cert.serialNumber.toLowerCase(),
  };
}

/** A server leaf (extendedKeyUsage serverAuth); `sans` must name every host or IP clients dial or send as SNI. */
export function createServerCertificate(ca: CertificateAuthority, options: LeafOptions): Promise<LeafCertificate> {
  return issueLeaf(ca, options, 'server');
}

/** A client leaf (extendedKeyUsage clientAuth) for mTLS peers; `organization` is what `peer_identity_trust` can match. */
export function createClientCertificate(ca: CertificateAuthority, options: LeafOptions): Promise<LeafCertificate> {
  return issueLeaf(ca, options, 'client');
}

/**
 * A site certificate for both directions (serverAuth and clientAuth): the peer signals endpoint serves with it
 * and polls peers with it.
 */
export function createSiteCertificate(ca: CertificateAuthority, options: LeafOptions): Promise<LeafCertificate> {
  return issueLeaf(ca, options, 'site');
}
