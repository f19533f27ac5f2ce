/**
 * The HTTPS shell of the redeem endpoint: POST /v1/enroll/redeem with a JSON body bounded to 32 KiB. It serves this
 * operator's site certificate (the joining site verifies it against the grid CA bundle it received out of band),
 * counts every attempt by outcome and logs the token id, never the token. The CA key and the serving key are read
 * at start and on reload() only.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Counter } from 'prom-client';
import { parseListenAddress } from '../../shared/admin-server.ts';
import { errorFields, type Logger } from '../../shared/log.ts';
import type { ObjectRef, ResourceStore } from '../../shared/resource-store/types.ts';
import type { EnrollmentConfig } from './config.ts';
import { InviteRedeemer, MAX_REDEEM_BODY_BYTES, parseRedeemRequest, REDEEM_HTTP_STATUS, REDEEM_OUTCOMES, RedeemRefusal, type RedeemOutcome, type RedeemRequest } from './redeem.ts';
import { type GridCa, loadGridCa } from './site-certificate.ts';
import { REDEEM_PATH } from './protocol.ts';
import { listen } from '../../shared/listen.ts';
import { closeServer } from '../../shared/close-server.ts';
import { readBoundedBody } from '../../shared/http-body.ts';

export { REDEEM_PATH };

const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';

export interface EnrollmentServerOptions {
  readonly config: EnrollmentConfig;
  readonly store: ResourceStore;
  /** Namespace of the invite token Secrets. */
  readonly namespace: string;
  readonly logger: Logger;
  readonly redeems: Counter<'outcome'>;
  readonly now: () => number;
  readonly onRedeemed?: (invite: string) => void;
  /** The site name ledger the redeem checks for deleted names (InviteRedeemerOptions.siteNameLedger). */
  readonly siteNameLedger?: ObjectRef;
}

export interface EnrollmentServer {
  readonly host: string;
  readonly port: number;
  /** Re-reads the serving certificate and the grid CA; on failure the old material stays in use. */
  reload(): Promise<void>;
  close(): Promise<void>;
}

interface Material {
  readonly cert: string;
  readonly key: string;
  readonly ca: GridCa;
}

async function readPem(file: string, flag: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(`${flag} ${file}: cannot be read (${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code ?? 'error'})`);
  }
}

/** Reads and cross-checks the files; errors name the flag and file, never their contents. */
export async function loadEnrollmentMaterial(config: EnrollmentConfig): Promise<Material> {
  const [cert, key, caCert, caKey] = await Promise.all([
    readPem(config.tlsCertFile, '--enrollment-tls-cert'),
    readPem(config.tlsKeyFile, '--enrollment-tls-key'),
    readPem(config.caCertFile, '--grid-ca-cert'),
    readPem(config.caKeyFile, '--grid-ca-key'),
  ]);
  const ca = await loadGridCa(caCert, caKey, { cert: `--grid-ca-cert ${config.caCertFile}`, key: `--grid-ca-key ${config.caKeyFile}` });
  let serving: X509Certificate;
  try {
    serving = new X509Certificate(cert);
  } catch {
    throw new Error(`--enrollment-tls-cert ${config.tlsCertFile}: not a PEM certificate`);
  }
  const caCertificate = new X509Certificate(caCert);
  // Joining sites trust only the grid CA, so a serving certificate from elsewhere would fail every enrollment.
  if (!serving.checkIssued(caCertificate) || !serving.verify(caCertificate.publicKey)) {
    throw new Error(`--enrollment-tls-cert ${config.tlsCertFile}: not issued by the grid CA ${config.caCertFile}; joining sites could not verify it`);
  }
  if (Array.isArray(serving.keyUsage) && !serving.keyUsage.includes(SERVER_AUTH_OID)) {
    throw new Error(`--enrollment-tls-cert ${config.tlsCertFile}: its extended key usage does not include serverAuth`);
  }
  return { cert, key, ca };
}

export async function startEnrollmentServer(options: EnrollmentServerOptions): Promise<EnrollmentServer> {
  const { config, logger, redeems } = options;
  let material = await loadEnrollmentMaterial(config);
  const redeemer = new InviteRedeemer({
    store: options.store,
    namespace: options.namespace,
    ca: () => material.ca,
    certificateLifetimeMs: config.certificateLifetimeMs,
    now: options.now,
    ...(options.onRedeemed !== undefined ? { onRedeemed: options.onRedeemed } : {}),
    ...(options.siteNameLedger !== undefined ? { siteNameLedger: options.siteNameLedger } : {}),
    onStatusError: (invite, error) => logger.error({ siteInvite: invite, error: errorFields(error) }, 'certificate issued and token spent, but the invite status could not record the redemption'),
  });
  // Zero series for every outcome, so a dashboard sees the full catalogue before the first attempt.
  for (const outcome of REDEEM_OUTCOMES) redeems.inc({ outcome }, 0);

  const send = (res: ServerResponse, status: number, body: unknown, close = false): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'content-length': Buffer.byteLength(text),
      ...(close ? { connection: 'close' } : {}),
    });
    res.end(text);
  };
  const finish = (req: IncomingMessage, res: ServerResponse, outcome: RedeemOutcome, body: unknown, request?: RedeemRequest): void => {
    redeems.inc({ outcome });
    const fields = { outcome, remote: req.socket.remoteAddress, ...(request !== undefined ? { tokenId: request.tokenId, siteName: request.siteName } : {}) };
    if (outcome === 'issued') logger.info(fields, 'invite redeemed; site certificate issued');
    else logger.warn({ ...fields, detail: (body as { message?: string }).message }, 'invite redeem refused');
    send(res, REDEEM_HTTP_STATUS[outcome], body, outcome === 'payload_too_large');
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== REDEEM_PATH) return send(res, 404, { error: 'not_found', message: `only POST ${REDEEM_PATH} is served here` });
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return send(res, 405, { error: 'method_not_allowed', message: `${REDEEM_PATH} accepts POST only` });
    }
    let body: Buffer;
    try {
      body = await readBoundedBody(req, MAX_REDEEM_BODY_BYTES, (max) => new RedeemRefusal('payload_too_large', `the request body exceeds ${max} bytes`));
    } catch (error) {
      if (error instanceof RedeemRefusal) return finish(req, res, error.outcome, { error: error.outcome, message: error.message });
      return void req.destroy(); // the client hung up mid-body: there is no one to answer
    }
    let request: RedeemRequest | undefined;
    try {
      request = parseRedeemRequest(body);
      const result = await redeemer.redeem(request);
      finish(req, res, 'issued', result, request);
    } catch (error) {
      if (error instanceof RedeemRefusal) return finish(req, res, error.outcome, { error: error.outcome, message: error.message }, request);
      logger.error({ error: errorFields(error), ...(request !== undefined ? { tokenId: request.tokenId } : {}) }, 'invite redeem failed');
      finish(req, res, 'internal_error', { error: 'internal_error', message: 'the signer could not complete the redeem; see its log' }, request);
    }
  };

  const { host, port } = parseListenAddress(config.address);
  const server: Server = createServer({ cert: material.cert, key: material.key, minVersion: 'TLSv1.2' }, (req, res) => {
    handle(req, res).catch((error: unknown) => {
      logger.error({ error: errorFields(error) }, 'enrollment request failed');
      if (!res.headersSent) send(res, 500, { error: 'internal_error', message: 'internal error' });
      else res.destroy();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 15_000;
  server.keepAliveTimeout = 5_000;
  // A failed TLS handshake is the client's problem; it must not surface as an unhandled error.
  server.on('tlsClientError', (error) => logger.debug({ error: errorFields(error) }, 'enrollment TLS handshake failed'));
  await listen(server, port, host);
  const bound = server.address() as AddressInfo;
  logger.info({ address: `${bound.address}:${bound.port}`, path: REDEEM_PATH }, 'enrollment endpoint listening');
  return {
    host: bound.address,
    port: bound.port,
    async reload() {
      const next = await loadEnrollmentMaterial(config);
      server.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
      material = next;
      logger.info({}, 'enrollment certificates reloaded');
    },
    // A redeem already running (the token claim is a store write) finishes before the listener goes.
    close: () => closeServer(server),
  };
}
