/**
 * One bounded HTTP(S) exchange for the operator's probes (health, metrics, model discovery, MCP tools/list).
 *
 * Probes talk to endpoints users configure, so every exchange is bounded in time and bytes, never follows a redirect
 * (a 3xx could bounce a bearer token to another origin), and reports failures as a small set of categories that
 * become metric labels. Error text from the network layer is classified, never forwarded: it can quote addresses
 * and certificate details, but never headers, so tokens cannot leak through it either way.
 */
import http from 'node:http';
import https from 'node:https';

export interface ProbeTls {
  /** PEM CA bundle; when set it is the only trust used (no system roots). */
  readonly ca?: string;
  /** PEM client certificate and key for mTLS. */
  readonly cert?: string;
  readonly key?: string;
  /** TLS server name to verify; defaults to the URL host. */
  readonly servername?: string;
}

export interface ProbeRequest {
  readonly url: URL;
  readonly method?: 'GET' | 'POST' | 'DELETE';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly tls?: ProbeTls;
  readonly timeoutMs: number;
  /** Responses longer than this are abandoned as `too_large`. */
  readonly maxBytes: number;
  /** Connect to this already-vetted address instead of resolving the URL host again (no DNS rebinding). */
  readonly address?: { readonly ip: string; readonly family: 4 | 6 };
  /** Ends the exchange early (a watcher being stopped); it then fails as `protocol`. */
  readonly signal?: AbortSignal;
}

/** Why an exchange produced no usable response. Stable strings: they are metric label values. */
export type ProbeFailure = 'timeout' | 'unreachable' | 'tls' | 'too_large' | 'protocol';

export type ProbeResponse =
  | { readonly ok: true; readonly status: number; readonly headers: http.IncomingHttpHeaders; readonly body: Buffer }
  | { readonly ok: false; readonly failure: ProbeFailure; readonly detail: string };

export function probeHttp(request: ProbeRequest): Promise<ProbeResponse> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: ProbeResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    const secure = request.url.protocol === 'https:';
    const options: https.RequestOptions = {
      method: request.method ?? 'GET',
      headers: { accept: 'application/json, text/plain;q=0.9, */*;q=0.1', ...request.headers },
      ...connectionOptions(request),
    };
    const req = (secure ? https : http).request(request.url, options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > request.maxBytes) {
          finish({ ok: false, failure: 'too_large', detail: `response exceeds ${request.maxBytes} bytes` });
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () =>
        finish({ ok: true, status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', (error) => finish(classify(error)));
    });
    const timer = setTimeout(
      () => finish({ ok: false, failure: 'timeout', detail: `no complete response within ${request.timeoutMs} ms` }),
      request.timeoutMs,
    );
    req.on('error', (error) => finish(classify(error)));
    req.end(request.body);
  });
}

/**
 * What every probe connection shares, the one-shot exchange here and the MCP list watcher's long GET
 * (event-stream.ts): no pooled agent, the vetted address when there is one, and the provider's TLS material.
 */
export function connectionOptions(
  request: Pick<ProbeRequest, 'url' | 'tls' | 'address' | 'signal'>,
): https.RequestOptions {
  const options: https.RequestOptions = { agent: false };
  if (request.address !== undefined) {
    const { ip, family } = request.address;
    // net may ask for all addresses (happy eyeballs); answer in whichever form it asked for.
    options.lookup = ((_host: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) =>
      opts.all
        ? callback(null, [{ address: ip, family }])
        : callback(null, ip, family)) as unknown as https.RequestOptions['lookup'];
  }
  if (request.url.protocol === 'https:' && request.tls) {
    if (request.tls.ca !== undefined) options.ca = request.tls.ca;
    if (request.tls.cert !== undefined) options.cert = request.tls.cert;
    if (request.tls.key !== undefined) options.key = request.tls.key;
    if (request.tls.servername !== undefined) options.servername = request.tls.servername;
  }
  if (request.signal !== undefined) options.signal = request.signal;
  return options;
}

const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_OSSL_|HOSTNAME_MISMATCH)/;
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ETIMEDOUT',
]);

/** A network-layer error as a failure category and a detail that quotes only its code. */
export function classify(error: Error & { code?: string }): Extract<ProbeResponse, { ok: false }> {
  const code = error.code ?? '';
  if (TLS_CODES.test(code) || /certificate|handshake|SSL|TLS/i.test(error.message)) {
    return { ok: false, failure: 'tls', detail: `TLS failure (${code || 'handshake'})` };
  }
  if (UNREACHABLE_CODES.has(code)) return { ok: false, failure: 'unreachable', detail: `connection failed (${code})` };
  return { ok: false, failure: 'protocol', detail: `HTTP exchange failed (${code || error.name})` };
}

/** Same scheme, host and effective port: the only targets that may receive the provider's bearer token. */
export function sameOrigin(a: URL, b: URL): boolean {
  return a.protocol === b.protocol && a.hostname === b.hostname && effectivePort(a) === effectivePort(b);
}

function effectivePort(url: URL): string {
  if (url.port !== '') return url.port;
  return url.protocol === 'https:' ? '443' : url.protocol === 'http:' ? '80' : '';
}

/** Joins a base URL and a path the way the CRDs describe `{endpoint}{path}` (no double slash, no dropped base path). */
export function joinUrl(base: string, path: string): URL {
  const url = new URL(base);
  const basePath = url.pathname.endsWith('/') ? url.pathname.slice(0, -1) : url.pathname;
  const suffix = path.startsWith('/') ? path : `/${path}`;
  url.pathname = `${basePath}${suffix}`;
  return url;
}
