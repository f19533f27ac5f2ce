/**
 * `agn site keygen` and `agn site enroll`: the joining site's half of SiteInvite enrollment. The key pair is made
 * here and its private half never leaves this machine; the signer receives a CSR (proof of possession) and returns
 * a site certificate signed by the grid CA. The token is read from a file or AGN_INVITE_TOKEN, never from argv
 * (the process list would show it), and never printed.
 */
import 'reflect-metadata';
import { createPrivateKey, createPublicKey, type KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { checkServerIdentity } from 'node:tls';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as x509 from '@peculiar/x509';
import { REDEEM_PATH, spkiSha256 } from '../../schemas/enrollment/protocol.ts';
import { pemCertificates } from '../shared/tls.ts';
import { CliError, usageError } from './cli-error.ts';
import type { CommandResult } from './overlay-commands.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

import { ENROLL_USAGE, KEYGEN_USAGE } from './site-usage.ts';

const SITE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const REQUEST_TIMEOUT_MS = 30_000;
const MAX_RESPONSE_BYTES = 256 * 1024;

interface SiteKey {
  readonly keys: webcrypto.CryptoKeyPair;
  readonly signingAlgorithm: { name: string; hash?: string };
  readonly keyPem: string;
  readonly spki: Buffer;
}

function keyPemOf(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }).toString();
}

async function generateSiteKey(): Promise<SiteKey> {
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const privateKey = createPrivateKey({
    key: Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)),
    format: 'der',
    type: 'pkcs8',
  });
  return {
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    keyPem: keyPemOf(privateKey),
    spki: Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey)),
  };
}

/** An existing key (kept from `site keygen` so a key-bound invite matches). EC P-256/P-384 or Ed25519. */
async function loadSiteKey(file: string): Promise<SiteKey> {
  let key: KeyObject;
  try {
    key = createPrivateKey(readFileSync(file));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CliError(
      code?.startsWith('E') && !code.startsWith('ERR')
        ? `cannot read ${file}: ${code}`
        : `${file}: not a PEM private key`,
      2,
    );
  }
  const curve = key.asymmetricKeyDetails?.namedCurve;
  const algorithm =
    key.asymmetricKeyType === 'ed25519'
      ? { importAlgorithm: { name: 'Ed25519' }, signingAlgorithm: { name: 'Ed25519' } }
      : key.asymmetricKeyType === 'ec' && (curve === 'prime256v1' || curve === 'secp384r1')
        ? {
            importAlgorithm: { name: 'ECDSA', namedCurve: curve === 'prime256v1' ? 'P-256' : 'P-384' },
            signingAlgorithm: { name: 'ECDSA', hash: curve === 'prime256v1' ? 'SHA-256' : 'SHA-384' },
          }
        : undefined;
  if (algorithm === undefined)
    throw new CliError(
      `${file}: key type ${key.asymmetricKeyType ?? 'unknown'} ${curve ?? ''} is not supported (EC P-256, P-384 or Ed25519)`,
      1,
    );
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    key.export({ type: 'pkcs8', format: 'der' }),
    algorithm.importAlgorithm,
    false,
    ['sign'],
  );
  const publicKey = await webcrypto.subtle.importKey('spki', spki, algorithm.importAlgorithm, true, ['verify']);
  return { keys: { privateKey, publicKey }, signingAlgorithm: algorithm.signingAlgorithm, keyPem: keyPemOf(key), spki };
}

function writeKey(file: string, pem: string): void {
  writeFileSync(file, pem, { mode: 0o600 });
  chmodSync(file, 0o600);
}

function ensureDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new CliError(`cannot create ${dir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`, 2);
  }
}

/** `agn site keygen DIR`: DIR/tls.key (0600, kept if present) and its publicKeySHA256 on stdout, for a bound invite. */
export async function keygenCommand(args: readonly string[]): Promise<CommandResult> {
  if (args.length !== 1 || args[0] === undefined || args[0].trim() === '' || args[0].startsWith('--'))
    throw usageError(`usage: agn ${KEYGEN_USAGE}`);
  const dir = args[0];
  ensureDir(dir);
  const keyFile = join(dir, 'tls.key');
  let key: SiteKey;
  if (existsSync(keyFile)) {
    key = await loadSiteKey(keyFile);
  } else {
    key = await generateSiteKey();
    writeKey(keyFile, key.keyPem);
  }
  return { stdout: `${spkiSha256(key.spki)}\n`, exitCode: 0 };
}

const ENROLL_OPTIONS = {
  url: { type: 'string' },
  ca: { type: 'string' },
  'token-id': { type: 'string' },
  'token-file': { type: 'string' },
  site: { type: 'string' },
  out: { type: 'string' },
  signer: { type: 'string' },
} as const;

interface Response {
  readonly status: number;
  readonly body: string;
}

function describeTlsFailure(error: NodeJS.ErrnoException, caFile: string, expected: string): string {
  const code = error.code ?? '';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `the signer's certificate does not name ${expected} (pass --signer with the signer's site name)`;
  if (/CERT|SELF_SIGNED|UNABLE_TO|ISSUER/.test(code))
    return `the signer's certificate does not verify against --ca ${caFile} (${code})`;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ETIMEDOUT' || code === 'ECONNRESET') return code === 'ETIMEDOUT' ? 'timed out' : 'connection reset';
  return (code || error.message).slice(0, 120);
}

function post(url: URL, caPem: string, caFile: string, signer: string | undefined, body: string): Promise<Response> {
  const expected = signer ?? url.hostname;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        protocol: 'https:',
        hostname: url.hostname,
        port: url.port === '' ? 443 : Number(url.port),
        path: REDEEM_PATH,
        method: 'POST',
        ca: caPem,
        minVersion: 'TLSv1.2',
        // The signer's certificate names its site, not necessarily the address dialled.
        ...(signer !== undefined
          ? {
              servername: signer,
              checkServerIdentity: (_host: string, cert: Parameters<typeof checkServerIdentity>[1]) =>
                checkServerIdentity(signer, cert),
            }
          : {}),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        timeout: REQUEST_TIMEOUT_MS,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) req.destroy(new Error(`response larger than ${MAX_RESPONSE_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    req.on('error', (error: NodeJS.ErrnoException) =>
      reject(new CliError(`cannot redeem at ${url.origin}: ${describeTlsFailure(error, caFile, expected)}`, 1)),
    );
    req.end(body);
  });
}

function oneLine(text: unknown, max = 300): string {
  return String(text).replace(/\s+/g, ' ').trim().slice(0, max);
}

/** `agn site enroll ...`: redeem an invite and write tls.crt, tls.key (0600) and ca.crt into --out. */
export async function enrollCommand(args: readonly string[]): Promise<CommandResult> {
  let values: Partial<Record<keyof typeof ENROLL_OPTIONS, string>>;
  try {
    const parsed = parseArgs({ args: [...args], options: ENROLL_OPTIONS, strict: true, allowPositionals: false });
    values = parsed.values as typeof values;
  } catch (error) {
    throw usageError(`usage: agn ${ENROLL_USAGE}: ${String((error as Error).message).split('\n')[0]}`);
  }
  const need = (flag: keyof typeof ENROLL_OPTIONS): string => {
    const value = values[flag];
    if (value === undefined || value.trim() === '')
      throw usageError(`usage: agn ${ENROLL_USAGE}: --${flag} is required`);
    return value.trim();
  };
  const urlText = need('url');
  const caFile = need('ca');
  const tokenId = need('token-id');
  const site = need('site');
  const out = need('out');
  const signer = values.signer?.trim() || undefined;
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw usageError(`--url "${oneLine(urlText, 80)}" is not a URL such as https://signer.example:9443`);
  }
  if (url.protocol !== 'https:') throw usageError(`--url must use https, got ${url.protocol}`);
  if (!SITE_NAME.test(site) || site.length > 63)
    throw usageError(`--site "${oneLine(site, 80)}" must be a DNS label: 1-63 lowercase letters, digits or -`);

  let caPem: string;
  try {
    caPem = readFileSync(caFile, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read --ca ${caFile}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`, 2);
  }
  const cas = pemCertificates(caPem).map((pem) => {
    try {
      return new X509Certificate(pem);
    } catch {
      throw new CliError(`--ca ${caFile}: contains a certificate that cannot be parsed`, 1);
    }
  });
  if (cas.length === 0) throw new CliError(`--ca ${caFile}: no PEM certificate found`, 1);

  let token: string | undefined;
  const tokenFile = values['token-file'];
  if (tokenFile !== undefined && tokenFile.trim() !== '') {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch (error) {
      throw new CliError(
        `cannot read --token-file ${tokenFile}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        2,
      );
    }
  } else {
    token = process.env['AGN_INVITE_TOKEN']?.trim();
  }
  if (token === undefined || token === '')
    throw usageError('the invite token is required: --token-file FILE or env AGN_INVITE_TOKEN');

  ensureDir(out);
  const keyFile = join(out, 'tls.key');
  const existingKey = existsSync(keyFile);
  const key = existingKey ? await loadSiteKey(keyFile) : await generateSiteKey();
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${site}`,
    keys: key.keys,
    signingAlgorithm: key.signingAlgorithm,
  });
  const response = await post(
    url,
    caPem,
    caFile,
    signer,
    JSON.stringify({ tokenId, token, siteName: site, csr: csr.toString('pem') }),
  );

  let body: Record<string, unknown>;
  try {
    body = JSON.parse(response.body) as Record<string, unknown>;
  } catch {
    throw new CliError(`the signer answered HTTP ${response.status} with a body that is not JSON`, 1);
  }
  if (response.status !== 200) {
    throw new CliError(
      `the signer refused the redeem: ${oneLine(body['error'] ?? 'error', 40)} (HTTP ${response.status}): ${oneLine(body['message'] ?? '')}`,
      1,
    );
  }
  const certPem = body['certificate'];
  if (typeof certPem !== 'string') throw new CliError('the signer answered 200 without a certificate', 1);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    throw new CliError('the signer returned a certificate that cannot be parsed', 1);
  }
  // Never write a certificate this site could not use: it must carry our key and chain to the CA we trust.
  if (!cert.publicKey.export({ type: 'spki', format: 'der' }).equals(key.spki))
    throw new CliError("the returned certificate does not carry this site's public key", 1);
  if (!cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey)))
    throw new CliError(`the returned certificate is not issued by a CA in --ca ${caFile}`, 1);
  if (!existingKey) writeKey(keyFile, key.keyPem);
  writeFileSync(join(out, 'tls.crt'), certPem);
  writeFileSync(join(out, 'ca.crt'), caPem);
  return {
    stdout: `enrolled ${site}: wrote ${join(out, 'tls.crt')}, ${keyFile} and ${join(out, 'ca.crt')} (certificate valid until ${new Date(cert.validTo).toISOString()})\n`,
    exitCode: 0,
  };
}
