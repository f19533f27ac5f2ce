/**
 * The local grid's certificates: one grid CA and, per site, the provider gateway's server certificate, the consumer
 * gateway's client certificate (its identity on the provider hop) and the site identity the GridSite probe presents.
 * Written once into the state directory and reused by later starts, so pinned fingerprints stay valid.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  createSiteCertificate,
  type LeafWants,
  leafMismatch,
  loadCertificateAuthority,
  pemFingerprint,
} from '../shared/tls.ts';
import { ensurePrivateDirSync, tightenPrivateFileSync, writePrivateFileSync } from '../shared/private-files.ts';

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
  /** The CA's private key: only an enrollment endpoint (a site that signs invites) is given it. */
  readonly caKeyFile: string;
  readonly sites: readonly SitePki[];
}

export async function ensureGridPki(
  dir: string,
  sites: readonly string[],
  options: GridPkiOptions = {},
): Promise<GridPki> {
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
    const sans = [
      ...new Set([`${site}.grid.internal`, 'localhost', '127.0.0.1', ...(options.providerSans?.[site] ?? [])]),
    ];
    const providerGateway = await ensureLeaf(siteDir, 'provider-gateway', { sans }, async () => {
      ca ??= await loadCa(caFile, caKeyFile);
      return createServerCertificate(ca, { commonName: `${site}.grid.internal`, organization: `grid-${site}`, sans });
    });
    const organization = options.consumerOrganization ?? `grid-${site}`;
    const consumerClient = await ensureLeaf(siteDir, 'consumer-client', { organizations: [organization] }, async () => {
      ca ??= await loadCa(caFile, caKeyFile);
      return createClientCertificate(ca, { commonName: `${site}-consumer`, organization });
    });
    // Server and client: the operator's signals endpoint serves it, the GridSite probe and the peer poller present it.
    const siteIdentity = await ensureLeaf(
      siteDir,
      'site-identity',
      { commonName: site, serverAuth: true },
      async () => {
        ca ??= await loadCa(caFile, caKeyFile);
        return createSiteCertificate(ca, { commonName: site, organization: `grid-${site}` });
      },
    );
    result.push({ site, providerGateway, consumerClient, siteIdentity });
  }
  return { caFile, caKeyFile, sites: result };
}

async function ensureLeaf(
  dir: string,
  name: string,
  wants: LeafWants,
  create: () => Promise<{ certPem: string; keyPem: string }>,
): Promise<PemPair> {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  if (
    !existsSync(certFile) ||
    !existsSync(keyFile) ||
    leafMismatch(readFileSync(certFile, 'utf8'), { ...wants, minRemainingMs: 86_400_000 }) !== undefined
  ) {
    const leaf = await create();
    writePrivateFileSync(keyFile, leaf.keyPem);
    writeFileSync(certFile, leaf.certPem);
  }
  tightenPrivateFileSync(keyFile);
  return { certFile, keyFile, fingerprint: pemFingerprint(readFileSync(certFile, 'utf8')) };
}

/** Reloads the CA written by an earlier start, so a site added later is signed by the same CA. */
function loadCa(certFile: string, keyFile: string): Promise<CertificateAuthority> {
  return loadCertificateAuthority(readFileSync(certFile, 'utf8'), readFileSync(keyFile, 'utf8'));
}
