/**
 * The HTTPS shell of the redeem endpoint: POST /v1/enroll/redeem with a JSON body bounded to 32 KiB. It serves this
 * operator's site certificate (the joining site verifies it against the grid CA bundle it received out of band),
 * counts every attempt by outcome and logs the token id, never the token. The four files (serving certificate and
 * key, grid CA certificate and key) are read at start and followed on disk: a renewed certificate or CA (the kubelet's
 * Secret swap) is checked whole and then served to new connections and used to sign, without a restart or SIGHUP; a
 * bad replacement keeps what is in force (logged once, counted in grid_operator_file_reloads_total). reload() (SIGHUP)
 * re-reads them at once.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Counter } from 'prom-client';
import { parseListenAddress } from '../../shared/admin-server.ts';
import { errorFields, type Logger } from '../../shared/log.ts';
import type { ObjectRef, ResourceStore } from '../../shared/resource-store/types.ts';
import type { EnrollmentConfig } from './config.ts';
import {
  InviteRedeemer,
  MAX_REDEEM_BODY_BYTES,
  parseRedeemRequest,
  REDEEM_HTTP_STATUS,
  REDEEM_OUTCOMES,
  RedeemRefusal,
  type RedeemOutcome,
  type RedeemRequest,
} from './redeem.ts';
import { type GridCa, loadGridCa } from './site-certificate.ts';
import { REDEEM_PATH } from '../../../schemas/enrollment/protocol.ts';
import { listen } from '../../shared/listen.ts';
import { closeServer } from '../../shared/close-server.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import { MountedFileError, MountedFiles } from '../../shared/mounted-files.ts';

export { REDEEM_PATH };

const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';

export interface EnrollmentServerOptions {
  readonly config: EnrollmentConfig;
  readonly store: ResourceStore;
  /** Namespace of the invite token Secrets. */
  readonly namespace: string;
  readonly logger: Logger;
  readonly redeems: Counter<'outcome'>;
  /** Counts the loads of the certificate files that took new material or kept the previous. */
  readonly fileReloads?: Counter<'file_kind' | 'outcome'>;
  readonly now: () => number;
  /** Safety re-read of the certificate files when file system events are lost; 0 leaves the watch alone. @default 5000 */
  readonly filePollIntervalMs?: number;
  readonly onRedeemed?: (invite: string) => void;
  /** The site name ledger the redeem checks for deleted names (InviteRedeemerOptions.siteNameLedger). */
  readonly siteNameLedger?: ObjectRef;
}

export interface EnrollmentServer {
  readonly host: string;
  readonly port: number;
  /** Re-reads the serving certificate and the grid CA now; on failure the old material stays in use and this rejects. */
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
    throw new Error(
      `${flag} ${file}: cannot be read (${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (code ?? 'error')})`,
    );
  }
}

/** The enrollment files in the order they are read, each named by its flag. */
function enrollmentFiles(config: EnrollmentConfig): { files: string[]; labels: string[] } {
  const files = [config.tlsCertFile, config.tlsKeyFile, config.caCertFile, config.caKeyFile];
  const flags = ['--enrollment-tls-cert', '--enrollment-tls-key', '--grid-ca-cert', '--grid-ca-key'];
  return { files, labels: files.map((file, i) => `${flags[i]} ${file}`) };
}

/** Reads and cross-checks the files; errors name the flag and file, never their contents. */
export async function loadEnrollmentMaterial(config: EnrollmentConfig): Promise<Material> {
  const [cert, key, caCert, caKey] = await Promise.all([
    readPem(config.tlsCertFile, '--enrollment-tls-cert'),
    readPem(config.tlsKeyFile, '--enrollment-tls-key'),
    readPem(config.caCertFile, '--grid-ca-cert'),
    readPem(config.caKeyFile, '--grid-ca-key'),
  ]);
  return checkEnrollmentMaterial(config, cert, key, caCert, caKey);
}

/** Cross-checks the four files' texts: the serving certificate with its key, issued by the grid CA for serverAuth. */
async function checkEnrollmentMaterial(
  config: EnrollmentConfig,
  cert: string,
  key: string,
  caCert: string,
  caKey: string,
): Promise<Material> {
  const ca = await loadGridCa(caCert, caKey, {
    cert: `--grid-ca-cert ${config.caCertFile}`,
    key: `--grid-ca-key ${config.caKeyFile}`,
  });
  let serving: X509Certificate;
  try {
    serving = new X509Certificate(cert);
  } catch {
    throw new Error(`--enrollment-tls-cert ${config.tlsCertFile}: not a PEM certificate`);
  }
  const caCertificate = new X509Certificate(caCert);
  // Joining sites trust only the grid CA, so a serving certificate from elsewhere would fail every enrollment.
  if (!serving.checkIssued(caCertificate) || !serving.verify(caCertificate.publicKey)) {
    throw new Error(
      `--enrollment-tls-cert ${config.tlsCertFile}: not issued by the grid CA ${config.caCertFile}; joining sites could not verify it`,
    );
  }
  if (Array.isArray(serving.keyUsage) && !serving.keyUsage.includes(SERVER_AUTH_OID)) {
    throw new Error(`--enrollment-tls-cert ${config.tlsCertFile}: its extended key usage does not include serverAuth`);
  }
  // A renewed certificate and key arrive as two files: a pair that does not match would fail every handshake.
  let servingKey;
  try {
    servingKey = createPrivateKey(key);
  } catch {
    throw new Error(`--enrollment-tls-key ${config.tlsKeyFile}: not a PEM private key`);
  }
  if (!serving.checkPrivateKey(servingKey)) {
    throw new Error(
      `--enrollment-tls-key ${config.tlsKeyFile}: the private key does not belong to the certificate --enrollment-tls-cert ${config.tlsCertFile}`,
    );
  }
  return { cert, key, ca };
}

/** PEM files are small; anything larger is not one. */
const MAX_PEM_FILE_BYTES = 1024 * 1024;

export async function startEnrollmentServer(options: EnrollmentServerOptions): Promise<EnrollmentServer> {
  const { config, logger, redeems } = options;
  let server: Server | undefined;
  const files = new MountedFiles<Material>({
    kind: 'enrollment_tls',
    name: config.address,
    ...enrollmentFiles(config),
    maxBytes: MAX_PEM_FILE_BYTES,
    parse: async ([cert, key, caCert, caKey]) => {
      try {
        return await checkEnrollmentMaterial(
          config,
          cert!.toString('utf8'),
          key!.toString('utf8'),
          caCert!.toString('utf8'),
          caKey!.toString('utf8'),
        );
      } catch (error) {
        throw new MountedFileError((error as Error).message);
      }
    },
    // New connections present the renewed certificate; redeems already running finish with the CA they started with.
    use: (next, previous) => {
      if (previous !== undefined) server?.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
    },
    logger,
    ...(options.fileReloads === undefined
      ? {}
      : {
          count: (outcome: 'accepted' | 'rejected') =>
            options.fileReloads!.inc({ file_kind: 'enrollment_tls', outcome }),
        }),
    ...(options.filePollIntervalMs === undefined ? {} : { pollIntervalMs: options.filePollIntervalMs }),
  });
  const first = await files.start();
  const initial = files.current();
  if (first.outcome === 'rejected' || initial === undefined) {
    files.close();
    throw new Error(first.outcome === 'rejected' ? first.problem : 'the enrollment certificates were not read');
  }
  const material = (): Material => files.current() ?? initial;
  const redeemer = new InviteRedeemer({
    store: options.store,
    namespace: options.namespace,
    ca: () => material().ca,
    certificateLifetimeMs: config.certificateLifetimeMs,
    now: options.now,
    ...(options.onRedeemed !== undefined ? { onRedeemed: options.onRedeemed } : {}),
    ...(options.siteNameLedger !== undefined ? { siteNameLedger: options.siteNameLedger } : {}),
    onStatusError: (invite, error) =>
      logger.error(
        { siteInvite: invite, error: errorFields(error) },
        'certificate issued and token spent, but the invite status could not record the redemption',
      ),
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
  const finish = (
    req: IncomingMessage,
    res: ServerResponse,
    outcome: RedeemOutcome,
    body: unknown,
    request?: RedeemRequest,
  ): void => {
    redeems.inc({ outcome });
    const fields = {
      outcome,
      remote: req.socket.remoteAddress,
      ...(request !== undefined ? { tokenId: request.tokenId, siteName: request.siteName } : {}),
    };
    if (outcome === 'issued') logger.info(fields, 'invite redeemed; site certificate issued');
    else logger.warn({ ...fields, detail: (body as { message?: string }).message }, 'invite redeem refused');
    send(res, REDEEM_HTTP_STATUS[outcome], body, outcome === 'payload_too_large');
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== REDEEM_PATH)
      return send(res, 404, { error: 'not_found', message: `only POST ${REDEEM_PATH} is served here` });
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return send(res, 405, { error: 'method_not_allowed', message: `${REDEEM_PATH} accepts POST only` });
    }
    let body: Buffer;
    try {
      body = await readBoundedBody(
        req,
        MAX_REDEEM_BODY_BYTES,
        (max) => new RedeemRefusal('payload_too_large', `the request body exceeds ${max} bytes`),
      );
    } catch (error) {
      if (error instanceof RedeemRefusal)
        return finish(req, res, error.outcome, { error: error.outcome, message: error.message });
      return void req.destroy(); // the client hung up mid-body: there is no one to answer
    }
    let request: RedeemRequest | undefined;
    try {
      request = parseRedeemRequest(body);
      const result = await redeemer.redeem(request);
      finish(req, res, 'issued', result, request);
    } catch (error) {
      if (error instanceof RedeemRefusal)
        return finish(req, res, error.outcome, { error: error.outcome, message: error.message }, request);
      logger.error(
        { error: errorFields(error), ...(request !== undefined ? { tokenId: request.tokenId } : {}) },
        'invite redeem failed',
      );
      finish(
        req,
        res,
        'internal_error',
        { error: 'internal_error', message: 'the signer could not complete the redeem; see its log' },
        request,
      );
    }
  };

  const { host, port } = parseListenAddress(config.address);
  server = createServer({ cert: initial.cert, key: initial.key, minVersion: 'TLSv1.2' }, (req, res) => {
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
  server.on('tlsClientError', (error) =>
    logger.debug({ error: errorFields(error) }, 'enrollment TLS handshake failed'),
  );
  try {
    await listen(server, port, host);
  } catch (error) {
    files.close();
    throw error;
  }
  const listening = server;
  const bound = listening.address() as AddressInfo;
  logger.info({ address: `${bound.address}:${bound.port}`, path: REDEEM_PATH }, 'enrollment endpoint listening');
  return {
    host: bound.address,
    port: bound.port,
    async reload() {
      const result = await files.reload('signal');
      if (result.outcome === 'rejected') throw new Error(result.problem);
    },
    // A redeem already running (the token claim is a store write) finishes before the listener goes.
    close: () => {
      files.close();
      return closeServer(listening);
    },
  };
}
