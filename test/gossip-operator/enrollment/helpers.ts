// Shared parts of the enrollment suites: a grid CA and the signer's serving certificate written to files, an
// in-process operator with the redeem endpoint on 127.0.0.1:0, invites created through its store, their one-time
// tokens read from the token Secrets, CSRs made with real keys, and an HTTPS client that trusts only the grid CA.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import type { OperatorConfig } from '../../../daemons/gossip-operator/config.ts';
import { SITE_INVITE } from '../../../daemons/gossip-operator/kinds.ts';
import { REDEEM_PATH } from '../../../schemas/enrollment/protocol.ts';
import { spkiSha256 } from '../../../schemas/enrollment/protocol.ts';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createServerCertificate,
} from '../../../daemons/shared/tls.ts';
import type { OperatorOptions } from '../../../daemons/gossip-operator/operator.ts';
import {
  grid,
  type LocalOperator,
  readStateObject,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
} from '../helpers.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export const SIGNER = 'site-a';

export interface SignerFiles {
  readonly ca: CertificateAuthority;
  readonly dir: string;
  readonly caCertFile: string;
  readonly caKeyFile: string;
  readonly tlsCertFile: string;
  readonly tlsKeyFile: string;
}

/** A grid CA and the signer's site certificate (CN and DNS SAN = site-a, serverAuth) as PEM files in `dir`. */
export async function writeSignerFiles(dir: string): Promise<SignerFiles> {
  const ca = await createCertificateAuthority({ commonName: 'agn-test-grid-ca' });
  const serving = await createServerCertificate(ca, { commonName: SIGNER, sans: [SIGNER] });
  const files = {
    ca,
    dir,
    caCertFile: join(dir, 'grid-ca.crt'),
    caKeyFile: join(dir, 'grid-ca.key'),
    tlsCertFile: join(dir, 'signer.crt'),
    tlsKeyFile: join(dir, 'signer.key'),
  };
  await writeFile(files.caCertFile, ca.certPem);
  await writeFile(files.caKeyFile, ca.keyPem, { mode: 0o600 });
  await writeFile(files.tlsCertFile, serving.certPem);
  await writeFile(files.tlsKeyFile, serving.keyPem, { mode: 0o600 });
  return files;
}

export interface Signer {
  readonly files: SignerFiles;
  readonly op: LocalOperator;
  readonly state: string;
  readonly port: number;
  /** Milliseconds added to the operator's clock (expiry tests). */
  skewMs: number;
  stop(): Promise<void>;
}

export const CERT_LIFETIME_MS = 48 * 3_600_000;

export async function startSigner(
  prefix: string,
  extra: Partial<OperatorConfig> = {},
  options: Partial<OperatorOptions> = {},
): Promise<Signer> {
  const dirs = await tempDir(prefix);
  const files = await writeSignerFiles(dirs.path);
  const state = join(dirs.path, 'state');
  const config = testConfig({
    site: SIGNER,
    store: { backend: 'local', stateDir: state },
    enrollment: {
      address: '127.0.0.1:0',
      tlsCertFile: files.tlsCertFile,
      tlsKeyFile: files.tlsKeyFile,
      caCertFile: files.caCertFile,
      caKeyFile: files.caKeyFile,
      certificateLifetimeMs: CERT_LIFETIME_MS,
    },
    ...extra,
  });
  const signer: Signer = {
    files,
    state,
    skewMs: 0,
    port: 0,
    op: undefined as unknown as LocalOperator,
    async stop() {
      await signer.op?.stop();
      await dirs.remove();
    },
  };
  try {
    const op = await startLocalOperator(
      config,
      { stateDir: state },
      { now: () => Date.now() + signer.skewMs, ...options },
    );
    Object.assign(signer, { op, port: op.operator.enrollment?.port ?? 0 });
  } catch (error) {
    await dirs.remove();
    throw error;
  }
  return signer;
}

export interface IssuedInvite {
  readonly name: string;
  readonly tokenId: string;
  readonly token: string;
}

/** Creates a SiteInvite through the operator's store and waits for its token; returns the out-of-band pair. */
export async function createInvite(signer: Signer, name: string, spec: Record<string, unknown>): Promise<IssuedInvite> {
  await signer.op.store.apply(
    SITE_INVITE,
    { apiVersion: SITE_INVITE.apiVersion, kind: 'SiteInvite', metadata: { name }, spec },
    { fieldManager: 'test' },
  );
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const invite: any = await waitFor(`the token of invite ${name}`, async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const i: any = await grid(signer.state, 'SiteInvite', name);
    return i?.status?.tokenId !== undefined ? i : undefined;
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const secret: any = await waitFor(`the token Secret of invite ${name}`, () =>
    readStateObject(signer.state, 'core', 'Secret', 'grid-system', `grid-invite-${name}`),
  );
  return {
    name,
    tokenId: invite.status.tokenId as string,
    token: Buffer.from(secret.data.token as string, 'base64').toString('utf8'),
  };
}

export interface SiteKeys {
  readonly keys: webcrypto.CryptoKeyPair;
  readonly spki: Buffer;
  readonly publicKeySHA256: string;
  readonly keyPem: string;
}

export async function siteKeys(): Promise<SiteKeys> {
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey));
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return {
    keys,
    spki,
    publicKeySHA256: spkiSha256(spki),
    keyPem: `-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----\n`,
  };
}

export async function csrFor(keys: SiteKeys, commonName = 'anything'): Promise<string> {
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${commonName}`,
    keys: keys.keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return csr.toString('pem');
}

export interface Reply {
  readonly status: number;
  readonly text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly json: any;
}

/** One HTTPS request to the signer, verifying its certificate against the grid CA and its site name. */
export function call(
  signer: Signer,
  body: string | Buffer,
  options: { method?: string; path?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: signer.port,
        method: options.method ?? 'POST',
        path: options.path ?? REDEEM_PATH,
        ca: signer.files.ca.certPem,
        servername: SIGNER,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export function redeem(signer: Signer, fields: Record<string, unknown>): Promise<Reply> {
  return call(signer, JSON.stringify(fields));
}
