// Certificate generation for `agn pki`, tests, benchmarks and the local grid runner: a CA plus server and client
// leaf certificates with SANs and an organization, built with @peculiar/x509 over node:crypto's WebCrypto.
// ECDSA P-256 keeps generation fast on a 2-core machine while being accepted by every TLS stack we use.
// @peculiar/x509's dependency tsyringe needs the Reflect metadata API at load time.
import 'reflect-metadata';
import { createHash, webcrypto, X509Certificate as NodeX509Certificate } from 'node:crypto';
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
  /** Several subject O values (one RDN each), for a client several peer_identity_trust lists must each admit. */
  organizations?: readonly string[];
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

function distinguishedName(commonName: string, organization?: string | readonly string[]): string {
  const escapeDn = (value: string): string => value.replace(/([,+"\\<>;=])/g, '\\$1');
  const organizations =
    organization === undefined ? [] : typeof organization === 'string' ? [organization] : organization;
  return [`CN=${escapeDn(commonName)}`, ...organizations.map((o) => `O=${escapeDn(o)}`)].join(', ');
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', key);
  const body = Buffer.from(pkcs8)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`;
}

function randomSerial(): string {
  // A positive 16-byte serial: clear the top bit so DER does not need a sign byte.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x01;
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
    certPem: `${cert.toString('pem')}\n`,
    keyPem: await exportKeyPem(keys.privateKey),
    fingerprint: certificateFingerprint(cert.rawData),
    cert,
    keys,
  };
}

function sanEntries(sans: string[]): x509.JsonGeneralName[] {
  return sans.map((value) => (isIP(value) !== 0 ? { type: 'ip', value } : { type: 'dns', value }));
}

async function issueLeaf(
  ca: CertificateAuthority,
  options: LeafOptions,
  usage: 'server' | 'client' | 'site',
): Promise<LeafCertificate> {
  const keys = (await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
  const notBefore = options.notBefore ?? new Date(Date.now() - 60_000);
  const serialNumber = options.serialNumber ?? randomSerial();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
    new x509.ExtendedKeyUsageExtension(
      usage === 'site'
        ? [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]
        : [usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth],
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
    subject: distinguishedName(
      options.commonName,
      options.organizations !== undefined && options.organizations.length > 0
        ? options.organizations
        : options.organization,
    ),
    issuer: ca.cert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + (options.validDays ?? 30) * DAY_MS),
    signingKey: ca.keys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions,
  });
  return {
    certPem: `${cert.toString('pem')}\n`,
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

/** A CA written earlier (its PEM certificate and PKCS#8 key), loaded back to sign more leaves. */
export async function loadCertificateAuthority(certPem: string, keyPem: string): Promise<CertificateAuthority> {
  const cert = new x509.X509Certificate(certPem);
  const der = Buffer.from(keyPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, true, ['sign']);
  const publicKey = await cert.publicKey.export(
    KEY_ALGORITHM,
    ['verify'],
    webcrypto as unknown as Parameters<typeof cert.publicKey.export>[2],
  );
  return {
    certPem,
    keyPem,
    fingerprint: certificateFingerprint(cert.rawData),
    cert,
    keys: { privateKey, publicKey } as CryptoKeyPair,
  };
}

const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

/** What a leaf written earlier must still say to be kept (a changed declaration may ask for more). */
export interface LeafWants {
  readonly sans?: readonly string[];
  /** Every one of these must be a subject O. */
  readonly organizations?: readonly string[];
  readonly commonName?: string;
  readonly serverAuth?: boolean;
  readonly clientAuth?: boolean;
  /** Issued by this CA (its certificate PEM). */
  readonly caPem?: string;
  /** Still valid this long after `nowMs`. */
  readonly minRemainingMs?: number;
}

/** Why a PEM leaf does not satisfy `wants`, or undefined when it does. */
export function leafMismatch(certPem: string, wants: LeafWants, nowMs = Date.now()): string | undefined {
  let cert: NodeX509Certificate;
  try {
    cert = new NodeX509Certificate(certPem);
  } catch {
    return 'not a readable certificate';
  }
  const subject = cert.subject.split('\n');
  const sanList = (cert.subjectAltName ?? '').split(', ').map((e) => e.replace(/^(DNS|IP Address):/, ''));
  for (const organization of wants.organizations ?? [])
    if (!subject.includes(`O=${organization}`)) return `its subject has no O=${organization}`;
  if (wants.commonName !== undefined && !subject.includes(`CN=${wants.commonName}`))
    return `its subject CN is not ${wants.commonName}`;
  const missing = (wants.sans ?? []).filter((n) => !sanList.includes(n));
  if (missing.length > 0) return `it does not name ${missing.join(', ')}`;
  // No extended key usage at all allows every purpose.
  if (wants.serverAuth === true && cert.keyUsage !== undefined && !cert.keyUsage.includes(SERVER_AUTH_OID))
    return 'it is not for TLS servers';
  if (wants.clientAuth === true && cert.keyUsage !== undefined && !cert.keyUsage.includes(CLIENT_AUTH_OID))
    return 'it is not for TLS clients';
  if (wants.caPem !== undefined) {
    const ca = new NodeX509Certificate(wants.caPem);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'another CA issued it';
  }
  const remaining = Date.parse(cert.validTo) - nowMs;
  if (remaining <= 0) return `it expired on ${new Date(Date.parse(cert.validTo)).toISOString().slice(0, 10)}`;
  if (wants.minRemainingMs !== undefined && remaining < wants.minRemainingMs)
    return `it expires on ${new Date(Date.parse(cert.validTo)).toISOString().slice(0, 10)}`;
  return undefined;
}
