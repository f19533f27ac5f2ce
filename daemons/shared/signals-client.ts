/**
 * Polls one site's signals endpoint over mTLS: the grid CA must issue the site's certificate and that certificate
 * must name the polled site (CN or DNS SAN), so a member cannot answer for another site. Bounded in time and size.
 * Operators poll their peers with it, gateways every site of their serving config.
 */
import { request } from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';

export const PEER_SIGNALS_PATH = '/v1/signals';

/** PEM text of the grid CA and of the certificate and key presented. */
export interface TlsMaterial {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

/** host:port, with a bracketed IPv6 host; undefined for anything else. */
export function parseHostPort(address: string): { host: string; port: number } | undefined {
  const match = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(address) ?? /^([^:[\]]+):(\d{1,5})$/.exec(address);
  if (match === null) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: match[1]!, port };
}

export const MAX_ANSWER_BYTES = 1024 * 1024;

export type PollResult = { readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly error: string };

function namesSite(cert: PeerCertificate, site: string): boolean {
  try {
    const x = new X509Certificate(cert.raw);
    const cn = x.subject.split('\n').some((line) => line === `CN=${site}`);
    const san = (x.subjectAltName ?? '').split(', ').some((entry) => entry === `DNS:${site}`);
    return cn || san;
  } catch {
    return false;
  }
}

export function pollPeer(site: string, address: string, material: TlsMaterial, timeoutMs: number): Promise<PollResult> {
  const target = parseHostPort(address);
  if (target === undefined)
    return Promise.resolve({ ok: false, error: `signals address "${address.slice(0, 80)}" is not host:port` });
  return new Promise((resolve) => {
    let done = false;
    const finish = (result: PollResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    const req = request(
      {
        host: target.host,
        port: target.port,
        path: PEER_SIGNALS_PATH,
        method: 'GET',
        ca: material.caPem,
        cert: material.certPem,
        key: material.keyPem,
        rejectUnauthorized: true,
        agent: false,
        // The peer is identified by its site certificate, not by the address gossip advertised.
        checkServerIdentity: (_host, cert) =>
          namesSite(cert, site) ? undefined : new Error(`certificate does not name site ${site}`),
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          finish({ ok: false, error: `HTTP ${res.statusCode ?? 0}` });
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) finish({ ok: false, error: `answer larger than ${MAX_ANSWER_BYTES} bytes` });
          else chunks.push(chunk);
        });
        res.on('end', () => {
          try {
            finish({ ok: true, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown });
          } catch {
            finish({ ok: false, error: 'answer is not JSON' });
          }
        });
        res.on('error', (error) => finish({ ok: false, error: error.message.slice(0, 160) }));
      },
    );
    const timer = setTimeout(() => finish({ ok: false, error: `no answer within ${timeoutMs} ms` }), timeoutMs);
    req.on('error', (error: Error & { code?: string }) =>
      finish({ ok: false, error: (error.code ?? error.message).slice(0, 160) }),
    );
    req.end();
  });
}
