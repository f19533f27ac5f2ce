/**
 * A grid's PKI on disk, kept by `agn pki`: the grid CA, per site its identity, its provider gateway's serving
 * certificate (whose fingerprint is the site's pin), its consumer gateway's client certificate, the mesh's SWIM
 * key and the bearer tokens of simulated backends; and the public trust file (grid-trust.json) the declaration
 * imports. Every operation keeps what is still right and says what it changed, so running it again is safe.
 *
 * Layout of the private directory (0700, every key and token file 0600; never commit it outside a demo):
 *   ca.crt ca.key swim.key
 *   sites/<site>/site.{crt,key}                    site identity (CN and DNS SAN = the site name; server and client)
 *   sites/<site>/provider-gateway.{crt,key}        serving certificate, pinned by every other site
 *   sites/<site>/provider-gateway.next.{crt,key}   the renewal's next certificate, pinned beside it (renew --stage)
 *   sites/<site>/provider-gateway.previous.{crt,key}  the one it replaced, still pinned until renew --finish
 *   sites/<site>/consumer-gateway.{crt,key}        client certificate on the provider hop
 *   sites/<site>/credentials/<secret>.<key>        a simulated backend's bearer token
 *   sites/<site>/<purpose>.token                   a token the site's own daemons share (dashboard, ingest)
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { GridTrust } from '../../../schemas/generated/grid-trust.ts';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  createSiteCertificate,
  leafMismatch,
  type LeafWants,
  loadCertificateAuthority,
  pemFingerprint,
} from '../../shared/tls.ts';
import { ensurePrivateDirSync, tightenPrivateFileSync, writePrivateFileSync } from '../../shared/private-files.ts';

const DAY_MS = 86_400_000;
/** A leaf with less than this left is re-issued (unpinned) or reported (the pinned gateway certificate). */
export const RENEW_BEFORE_MS = 30 * DAY_MS;
export const DEFAULT_CA_DAYS = 3650;
export const DEFAULT_LEAF_DAYS = 365;

/** What the declaration asks of one site's certificates (from GridSiteStack.secretNeeds). */
export interface SitePlan {
  readonly site: string;
  /** The provider gateway's SANs, when the site has one. */
  readonly providerServerNames?: readonly string[];
  /** The consumer gateway's name and the organizations its client certificate must carry, when it has one. */
  readonly consumer?: { readonly gateway: string; readonly organizations: readonly string[] };
  /** Simulated backends' credential Secrets (name, key): tokens the grid makes itself. */
  readonly simulatedCredentials: readonly { readonly name: string; readonly key: string }[];
  /** The tokens the site's own daemons share (the dashboard's, the gateway ingest's), by purpose. */
  readonly tokens: readonly SiteToken[];
}

export type SiteToken = 'dashboard' | 'ingest';

export function tokenFile(dir: string, site: string, token: SiteToken): string {
  return join(siteDir(dir, site), `${token}.token`);
}

export interface PkiOptions {
  readonly caDays?: number;
  readonly leafDays?: number;
  readonly now?: () => number;
}

export class PkiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PkiError';
  }
}

export type LeafRole = 'site' | 'provider-gateway' | 'consumer-gateway';

export function siteDir(dir: string, site: string): string {
  return join(dir, 'sites', site);
}

function leafFiles(dir: string, site: string, name: string): { cert: string; key: string } {
  return { cert: join(siteDir(dir, site), `${name}.crt`), key: join(siteDir(dir, site), `${name}.key`) };
}

export function credentialFile(dir: string, site: string, secret: string, key: string): string {
  return join(siteDir(dir, site), 'credentials', `${secret}.${key}`);
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new PkiError(`${path}: cannot read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** The grid CA of `dir`, created when absent (never replaced: every pin and certificate hangs on it). */
async function ensureCa(
  dir: string,
  network: string,
  options: PkiOptions,
  changes: string[],
): Promise<CertificateAuthority> {
  const certFile = join(dir, 'ca.crt');
  const keyFile = join(dir, 'ca.key');
  const hasCert = existsSync(certFile);
  const hasKey = existsSync(keyFile);
  if (hasCert !== hasKey)
    throw new PkiError(
      `${hasCert ? keyFile : certFile} is missing while ${hasCert ? certFile : keyFile} exists; restore it from your backup (a new CA would invalidate every certificate and pin of the grid)`,
    );
  if (hasCert) {
    tightenPrivateFileSync(keyFile);
    try {
      return await loadCertificateAuthority(readText(certFile), readText(keyFile));
    } catch (error) {
      if (error instanceof PkiError) throw error;
      throw new PkiError(
        `${certFile}, ${keyFile}: not a usable CA certificate and ECDSA P-256 key (${(error as Error).message.split('\n')[0]})`,
      );
    }
  }
  const ca = await createCertificateAuthority({
    commonName: `${network} grid CA`,
    organization: `agn grid ${network}`,
    validDays: options.caDays ?? DEFAULT_CA_DAYS,
  });
  writePrivateFileSync(keyFile, ca.keyPem);
  writeFileSync(certFile, ca.certPem);
  changes.push(`created the grid CA (${certFile}, valid ${options.caDays ?? DEFAULT_CA_DAYS} days)`);
  return ca;
}

function ensureSwimKey(dir: string, changes: string[]): void {
  const file = join(dir, 'swim.key');
  if (existsSync(file)) {
    const text = readText(file).trim();
    if (!/^[0-9a-f]{64}$/u.test(text))
      throw new PkiError(`${file}: not a SWIM key (64 lowercase hex digits, 32 bytes)`);
    tightenPrivateFileSync(file);
    return;
  }
  writePrivateFileSync(file, `${randomBytes(32).toString('hex')}\n`);
  changes.push(`created the SWIM key (${file})`);
}

interface LeafSpec {
  readonly name: string;
  readonly role: LeafRole;
  readonly wants: LeafWants;
  readonly issue: (ca: CertificateAuthority) => Promise<{ certPem: string; keyPem: string }>;
}

function leafSpecs(plan: SitePlan, days: number): LeafSpec[] {
  const specs: LeafSpec[] = [
    {
      name: 'site',
      role: 'site',
      wants: { commonName: plan.site, sans: [plan.site], serverAuth: true, clientAuth: true },
      issue: (ca) =>
        createSiteCertificate(ca, {
          commonName: plan.site,
          organization: `grid site ${plan.site}`,
          sans: [plan.site],
          validDays: days,
        }),
    },
  ];
  if (plan.providerServerNames !== undefined) {
    const sans = [...plan.providerServerNames];
    specs.push({
      name: 'provider-gateway',
      role: 'provider-gateway',
      wants: { sans, serverAuth: true },
      issue: (ca) =>
        createServerCertificate(ca, {
          commonName: sans[0] ?? plan.site,
          organization: `grid site ${plan.site}`,
          sans,
          validDays: days,
        }),
    });
  }
  const consumer = plan.consumer;
  if (consumer !== undefined) {
    // Without a trusted organization to carry, the site's own name keeps the certificate identifiable.
    const organizations = consumer.organizations.length > 0 ? [...consumer.organizations] : [`grid site ${plan.site}`];
    specs.push({
      name: 'consumer-gateway',
      role: 'consumer-gateway',
      wants: { organizations, clientAuth: true },
      issue: (ca) =>
        createClientCertificate(ca, { commonName: `${consumer.gateway}.${plan.site}`, organizations, validDays: days }),
    });
  }
  return specs;
}

async function writeLeaf(
  dir: string,
  site: string,
  name: string,
  leaf: { certPem: string; keyPem: string },
): Promise<void> {
  const files = leafFiles(dir, site, name);
  writePrivateFileSync(files.key, leaf.keyPem);
  writeFileSync(files.cert, leaf.certPem);
}

/**
 * Creates what is missing and re-issues what no longer says what the declaration needs. The pinned provider gateway
 * certificate is re-issued only when it is missing or wrong (its pin changes: every site must be synthesized and
 * applied again); one that merely expires soon is reported for `renew`, since a silent new pin would cut the site
 * off until every peer applied it. Returns one line per change and per warning.
 */
export async function ensurePki(
  dir: string,
  network: string,
  plans: readonly SitePlan[],
  options: PkiOptions = {},
): Promise<{ changes: string[]; warnings: string[] }> {
  const now = options.now ?? Date.now;
  const days = options.leafDays ?? DEFAULT_LEAF_DAYS;
  const changes: string[] = [];
  const warnings: string[] = [];
  ensurePrivateDirSync(dir);
  const ca = await ensureCa(dir, network, options, changes);
  ensureSwimKey(dir, changes);
  for (const plan of plans) {
    ensurePrivateDirSync(join(dir, 'sites'));
    ensurePrivateDirSync(siteDir(dir, plan.site));
    for (const spec of leafSpecs(plan, days)) {
      const files = leafFiles(dir, plan.site, spec.name);
      const pinned = spec.role === 'provider-gateway';
      const present = existsSync(files.cert) && existsSync(files.key);
      const wrong = present
        ? leafMismatch(readText(files.cert), { ...spec.wants, caPem: ca.certPem }, now())
        : 'it does not exist';
      const soon =
        present && wrong === undefined
          ? leafMismatch(readText(files.cert), { minRemainingMs: RENEW_BEFORE_MS }, now())
          : undefined;
      if (wrong === undefined && (soon === undefined || pinned)) {
        tightenPrivateFileSync(files.key);
        if (soon !== undefined)
          warnings.push(
            `${plan.site}: the provider gateway certificate ${soon.replace(/^it /u, '')}: run agn pki renew --site ${plan.site} --stage`,
          );
        continue;
      }
      await writeLeaf(dir, plan.site, spec.name, await spec.issue(ca));
      const why = wrong ?? soon ?? '';
      changes.push(
        `${plan.site}: ${present ? 're-issued' : 'issued'} the ${spec.name} certificate${present ? ` (${why})` : ''}${pinned && present ? '; its pin changed: synthesize and apply every site' : ''}`,
      );
    }
    const tokenFiles = [
      ...plan.simulatedCredentials.map((c) => ({
        file: credentialFile(dir, plan.site, c.name, c.key),
        what: `the token of simulated backend credential ${c.name}`,
      })),
      ...plan.tokens.map((token) => ({ file: tokenFile(dir, plan.site, token), what: `the ${token} token` })),
    ];
    for (const { file, what } of tokenFiles) {
      if (existsSync(file) && readText(file).trim().length >= 16) {
        tightenPrivateFileSync(file);
        continue;
      }
      ensurePrivateDirSync(dirname(file));
      // 24 random bytes, base64url: 32 characters that no log line or overlay contains by accident.
      writePrivateFileSync(file, randomBytes(24).toString('base64url'));
      changes.push(`${plan.site}: made ${what}`);
    }
  }
  return { changes, warnings };
}

/** The pins of a site: the serving certificate's, then the next one's during a renewal, else the previous one's. */
export function sitePins(dir: string, site: string): string[] {
  const pins: string[] = [];
  for (const name of ['provider-gateway', 'provider-gateway.next', 'provider-gateway.previous']) {
    const file = leafFiles(dir, site, name).cert;
    if (existsSync(file)) pins.push(pemFingerprint(readText(file)));
  }
  return pins.slice(0, 2);
}

/** The public trust file of the PKI in `dir` for these sites (those with a provider gateway carry pins). */
export function trustOf(dir: string, network: string, plans: readonly SitePlan[]): GridTrust {
  const caPem = readText(join(dir, 'ca.crt'));
  const sites: GridTrust['sites'] = {};
  for (const plan of [...plans].sort((a, b) => (a.site < b.site ? -1 : a.site > b.site ? 1 : 0))) {
    if (plan.providerServerNames === undefined) continue;
    const pins = sitePins(dir, plan.site);
    if (pins.length > 0) sites[plan.site] = { gatewayPins: pins };
  }
  return {
    kind: 'GridTrust',
    version: 1,
    network,
    ca: { certificatePem: caPem, fingerprint: pemFingerprint(caPem) },
    sites,
  };
}

export function trustText(trust: GridTrust): string {
  return `${JSON.stringify(trust, null, 2)}\n`;
}

/** Reads one leaf of a site (certificate and key PEM). */
export function readLeaf(dir: string, site: string, name: string): { certPem: string; keyPem: string } {
  const files = leafFiles(dir, site, name);
  tightenPrivateFileSync(files.key);
  return { certPem: readText(files.cert), keyPem: readText(files.key) };
}

export function readCaPair(dir: string): { certPem: string; keyPem: string } {
  tightenPrivateFileSync(join(dir, 'ca.key'));
  return { certPem: readText(join(dir, 'ca.crt')), keyPem: readText(join(dir, 'ca.key')) };
}

export function readSwimKey(dir: string): Buffer {
  const file = join(dir, 'swim.key');
  const text = readText(file).trim();
  if (!/^[0-9a-f]{64}$/u.test(text)) throw new PkiError(`${file}: not a SWIM key (64 lowercase hex digits, 32 bytes)`);
  return Buffer.from(text, 'hex');
}

export type RenewStep = 'stage' | 'activate' | 'finish';

/**
 * One step of renewing a site's pinned provider gateway certificate without a moment in which a peer refuses it:
 * stage issues the next certificate and pins it beside the current one; activate makes it the serving one (the old
 * stays pinned); finish drops the old one and its pin. Between steps, synthesize and apply (see the command's
 * output), so every peer holds both pins before the gateway serves the new certificate.
 */
export async function renewGateway(
  dir: string,
  site: string,
  step: RenewStep,
  serverNames: readonly string[],
  options: PkiOptions = {},
): Promise<string> {
  const current = leafFiles(dir, site, 'provider-gateway');
  const next = leafFiles(dir, site, 'provider-gateway.next');
  const previous = leafFiles(dir, site, 'provider-gateway.previous');
  if (!existsSync(current.cert))
    throw new PkiError(`${site}: no provider gateway certificate in ${siteDir(dir, site)}; run agn pki init first`);
  const move = (from: { cert: string; key: string }, to: { cert: string; key: string }) => {
    renameSync(from.key, to.key);
    renameSync(from.cert, to.cert);
  };
  if (step === 'stage') {
    if (existsSync(next.cert))
      throw new PkiError(`${site}: a renewal is already staged (${next.cert}); continue with --activate`);
    if (existsSync(previous.cert))
      throw new PkiError(
        `${site}: the last renewal is not finished (${previous.cert} is still pinned); run --finish first`,
      );
    const caPair = readCaPair(dir);
    const ca = await loadCertificateAuthority(caPair.certPem, caPair.keyPem);
    const sans = [...serverNames];
    await writeLeaf(
      dir,
      site,
      'provider-gateway.next',
      await createServerCertificate(ca, {
        commonName: sans[0] ?? site,
        organization: `grid site ${site}`,
        sans,
        validDays: options.leafDays ?? DEFAULT_LEAF_DAYS,
      }),
    );
    return `${site}: staged the next provider gateway certificate; both pins are in the trust file now. Next: synthesize, apply every site's manifests, then agn pki renew --site ${site} --activate`;
  }
  if (step === 'activate') {
    if (!existsSync(next.cert)) throw new PkiError(`${site}: no staged renewal; run --stage first`);
    move(current, previous);
    move(next, current);
    return `${site}: the new certificate is the serving one (the old stays pinned). Next: apply ${site}'s Secrets (agn pki secrets --site ${site}); the provider gateway reloads it; then agn pki renew --site ${site} --finish`;
  }
  if (!existsSync(previous.cert)) throw new PkiError(`${site}: nothing to finish (no previous certificate is pinned)`);
  rmSync(previous.key, { force: true });
  rmSync(previous.cert, { force: true });
  return `${site}: dropped the old certificate and its pin. Next: synthesize and apply every site's manifests`;
}
