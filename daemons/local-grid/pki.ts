/**
 * The local grid's certificates: one grid CA and, per site, the provider gateway's server certificate, the consumer
 * gateway's client certificate (its identity on the provider hop) and the site identity the GridSite probe presents.
 * Written once into the state directory and reused by later starts, so pinned fingerprints stay valid.
 */
import { webcrypto, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  createSiteCertificate,
  pemFingerprint,
} from '../shared/tls.ts';
import { ensurePrivateDirSync, tightenPrivateFileSync, writePrivateFileSync } from '../shared/private-files.ts';
import * as x509 from '@peculiar/x509';

export interface PemPair {
  readonly certFile: string;
  readonly keyFile: string;
  /** SHA-256 of the leaf DER: what trust.canonicalFingerprints and peer_identity_trust pin. */
  readonly fingerprint: string;
}

export interface SitePki {
  readonly site: string;
  /** Provider gateway server certificate (SANs: <site>.grid.internal, localhost, 127.0.0.1). */
  readonly providerGateway: PemPair;
  /** Consumer gateway client certificate, organization grid-<site> unless options.consumerOrganization says otherwise. */
  readonly consumerClient: PemPair;
  /** The site identity (CN = site name, serverAuth and clientAuth): GridNetwork spec.tls.siteSecretRef, presented by the GridSite probe and served by the signals endpoint. */
  readonly siteIdentity: PemPair;
}

export interface GridPkiOptions {
  /** Organization of every consumer client certificate: what the provider gateways' peer_identity_trust matches. */
  readonly consumerOrganization?: string;
  /** Extra SANs of a site's provider gateway certificate: the names consumers send as SNI and probes verify. */
  readonly providerSans?: Readonly<Record<string, readonly string[]>>;
}

export interface GridPki {
  readonly caFile: string;
  readonly sites: readonly SitePki[];
}

export async function ensureGridPki(dir: string, sites: readonly string[], options: GridPkiOptions = {}): Promise<GridPki> {
  ensurePrivateDirSync(dir);
  const caFile = join(dir, 'ca.crt');
  const caKeyFile = join(dir, 'ca.key');
  let ca: CertificateAuthority | undefined;
  if (!existsSync(caFile) || !existsSync(caKeyFile)) {
    ca = await createCertificateAuthority({ commonName: 'agn-local-grid-ca', organization: 'agn-local-grid' });
    writePrivateFileSync(caKeyFile, ca.keyPem);
    writeFileSync(caFile, ca.certPem);
  }
  tightenPrivateFileSync(caKeyFile);
  const result: SitePki[] = [];
  for (const site of sites) {
    const siteDir = join(dir, site);
    ensurePrivateDirSync(siteDir);
    const sans = [...new Set([`${site}.grid.internal`, 'localhost', '127.0.0.1', ...(options.providerSans?.[site] ?? [])])];
    const providerGateway = await ensureLeaf(siteDir, 'provider-gateway', { sans }, async () => {
      ca ??= await loadCa(caFile, caKeyFile);
      return createServerCertificate(ca, { commonName: `${site}.grid.internal`, organization: `grid-${site}`, sans });
    });
    const organization = options.consumerOrganization ?? `grid-${site}`;
    const consumerClient = await ensureLeaf(siteDir, 'consumer-client', { organization }, async () => {
      ca ??= await loadCa(caFile, caKeyFile);
      return createClientCertificate(ca, { commonName: `${site}-consumer`, organization });
    });
    // Server and client: the operator's signals endpoint serves it, the GridSite probe and the peer poller present it.
    const siteIdentity = await ensureLeaf(siteDir, 'site-identity', { commonName: site, serverAuth: true }, async () => {
      ca ??= await loadCa(caFile, caKeyFile);
      return createSiteCertificate(ca, { commonName: site, organization: `grid-${site}` });
    });
    result.push({ site, providerGateway, consumerClient, siteIdentity });
  }
  return { caFile, sites: result };
}

const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';

interface LeafWants {
  readonly sans?: readonly string[];
  readonly organization?: string;
  readonly commonName?: string;
  /** The leaf must also serve TLS (an earlier start may have written a client-only one). */
  readonly serverAuth?: boolean;
}

/** An existing leaf is reused only while it still says what the grid needs (a changed manifest may ask for more). */
function leafMatches(certFile: string, wants: LeafWants): boolean {
  try {
    const cert = new X509Certificate(readFileSync(certFile));
    const subject = cert.subject.split('\n');
    const sanList = (cert.subjectAltName ?? '').split(', ').map((e) => e.replace(/^(DNS|IP Address):/, ''));
    if (wants.organization !== undefined && !subject.includes(`O=${wants.organization}`)) return false;
    if (wants.commonName !== undefined && !subject.includes(`CN=${wants.commonName}`)) return false;
    if (wants.sans !== undefined && !wants.sans.every((n) => sanList.includes(n))) return false;
    // No extended key usage at all allows every purpose.
    if (wants.serverAuth === true && cert.keyUsage !== undefined && !cert.keyUsage.includes(SERVER_AUTH_OID)) return false;
    return Date.parse(cert.validTo) > Date.now() + 86_400_000;
  } catch {
    return false;
  }
}

async function ensureLeaf(dir: string, name: string, wants: LeafWants, create: () => Promise<{ certPem: string; keyPem: string }>): Promise<PemPair> {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  if (!existsSync(certFile) || !existsSync(keyFile) || !leafMatches(certFile, wants)) {
    const leaf = await create();
    writePrivateFileSync(keyFile, leaf.keyPem);
    writeFileSync(certFile, leaf.certPem);
  }
  tightenPrivateFileSync(keyFile);
  return { certFile, keyFile, fingerprint: pemFingerprint(readFileSync(certFile, 'utf8')) };
}

/** Reloads the CA written by an earlier start, so a site added later is signed by the same CA. */
async function loadCa(certFile: string, keyFile: string): Promise<CertificateAuthority> {
  const certPem = readFileSync(certFile, 'utf8');
  const keyPem = readFileSync(keyFile, 'utf8');
  const cert = new x509.X509Certificate(certPem);
  const der = Buffer.from(keyPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256' } as const;
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, algorithm, true, ['sign']);
  const publicKey = await cert.publicKey.export(algorithm, ['verify'], webcrypto as unknown as Parameters<typeof cert.publicKey.export>[2]);
  return { certPem, keyPem, fingerprint: pemFingerprint(certPem), cert, keys: { privateKey, publicKey } as CertificateAuthority['keys'] };
}
