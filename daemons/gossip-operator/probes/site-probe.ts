/**
 * The GridSite gateway probe: a bounded TLS handshake that verifies the CA chain,
 * the serverName SAN and the canonical fingerprint pin (SHA-256 of the leaf certificate DER), presenting this site's
 * certificate as the mTLS client identity. Plaintext mode only checks TCP reachability, for diagnostics: TCP alone
 * never makes a site routing-eligible.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { parseHostPort } from '../../shared/signals-client.ts';

export type SiteTransportMode = 'Mutual' | 'Plaintext';

export interface SiteProbeConfig {
  /** spec.gatewayEndpoint.address: host:port, [ipv6]:port. */
  readonly address: string;
  readonly mode: SiteTransportMode;
  readonly serverName?: string;
  /** Grid CA bundle (PEM) the peer's chain must lead to. */
  readonly ca?: string;
  /** This site's certificate and key (GridNetwork spec.tls.siteSecretRef), presented as the client identity. */
  readonly clientCert?: string;
  readonly clientKey?: string;
  /** spec.trust.canonicalFingerprints: 64 lowercase hex each. */
  readonly fingerprints: readonly string[];
  /**
   * spec.trust.certFingerprint, the deprecated single pin of the 0.3.x CRDs: colon-separated lowercase SHA-256 of the
   * leaf's PEM bytes (see legacyPemFingerprint). The API schema refuses it together with canonicalFingerprints.
   */
  readonly legacyPemFingerprint?: string;
  readonly timeoutMs: number;
}

export type SiteProbeResult =
  | { readonly outcome: 'verified'; readonly fingerprint: string }
  | { readonly outcome: 'pin_mismatch'; readonly fingerprint: string; readonly detail: string }
  | { readonly outcome: 'identity_failed'; readonly detail: string }
  | { readonly outcome: 'trust_missing'; readonly detail: string }
  | { readonly outcome: 'unreachable'; readonly detail: string }
  | { readonly outcome: 'plaintext'; readonly reachable: boolean; readonly detail: string };

export function probeSite(config: SiteProbeConfig): Promise<SiteProbeResult> {
  const target = parseHostPort(config.address);
  if (target === undefined) {
    return Promise.resolve({
      outcome: 'unreachable',
      detail: `gateway address "${config.address.slice(0, 80)}" is not host:port`,
    });
  }
  if (config.mode === 'Plaintext') return probeTcp(target, config.timeoutMs);
  const missing = [
    config.ca === undefined ? 'grid CA' : undefined,
    config.clientCert === undefined || config.clientKey === undefined ? 'site client certificate' : undefined,
    config.fingerprints.length === 0 && config.legacyPemFingerprint === undefined
      ? 'canonical fingerprint pin'
      : undefined,
  ].filter((m) => m !== undefined);
  if (missing.length > 0)
    return Promise.resolve({
      outcome: 'trust_missing',
      detail: `required trust material not available: ${missing.join(', ')}`,
    });
  return probeMutual(target, config);
}

function probeMutual(target: { host: string; port: number }, config: SiteProbeConfig): Promise<SiteProbeResult> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (result: SiteProbeResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const servername = config.serverName ?? (net.isIP(target.host) ? undefined : target.host);
    const socket = tls.connect({
      host: target.host,
      port: target.port,
      ca: config.ca,
      cert: config.clientCert,
      key: config.clientKey,
      rejectUnauthorized: true,
      ...(servername !== undefined ? { servername } : {}),
      // Verify the SAN against the configured serverName even when connecting by IP.
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(servername ?? target.host, cert),
    });
    const timer = setTimeout(
      () => finish({ outcome: 'unreachable', detail: `no TLS handshake within ${config.timeoutMs} ms` }),
      config.timeoutMs,
    );
    socket.once('secureConnect', () => {
      const raw = socket.getPeerCertificate().raw;
      const fingerprint = createHash('sha256').update(raw).digest('hex');
      if (config.fingerprints.includes(fingerprint)) {
        finish({ outcome: 'verified', fingerprint });
      } else if (config.legacyPemFingerprint !== undefined) {
        // Status always reports the canonical (DER) fingerprint, the value to migrate the pin to.
        if (legacyPemFingerprint(raw) === config.legacyPemFingerprint) finish({ outcome: 'verified', fingerprint });
        else
          finish({
            outcome: 'pin_mismatch',
            fingerprint,
            detail: `leaf certificate (canonical sha256 ${fingerprint}) does not match the deprecated trust.certFingerprint pin`,
          });
      } else {
        finish({
          outcome: 'pin_mismatch',
          fingerprint,
          detail: `leaf certificate sha256 ${fingerprint} matches no canonical fingerprint`,
        });
      }
    });
    socket.once('error', (error: Error & { code?: string }) => {
      const code = error.code ?? '';
      if (
        ['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT'].includes(
          code,
        )
      ) {
        finish({ outcome: 'unreachable', detail: `cannot connect to the gateway (${code})` });
      } else {
        finish({ outcome: 'identity_failed', detail: `TLS verification failed (${code || 'handshake'})` });
      }
    });
  });
}

/**
 * The deprecated pin's digest: SHA-256 over the leaf's PEM bytes in the one strict RFC 7468 form (base64 in 64-column
 * lines, LF line ends, a newline after the END line: what openssl and Node's X509Certificate#toString write), shown as
 * colon-separated lowercase hex pairs. PEM bytes of one certificate can differ (CRLF, line width), which is why the
 * canonical pin over the DER replaced it; a legacy pin taken over another PEM layout does not match and the site
 * stays Connecting with PinMismatch, fail closed.
 */
export function legacyPemFingerprint(der: Uint8Array): string {
  const body = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  const pem = `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----\n`;
  return createHash('sha256')
    .update(pem)
    .digest('hex')
    .replace(/(..)(?!$)/g, '$1:');
}

function probeTcp(target: { host: string; port: number }, timeoutMs: number): Promise<SiteProbeResult> {
  return new Promise((resolve) => {
    const socket = net.connect(target.port, target.host);
    const finish = (reachable: boolean, detail: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ outcome: 'plaintext', reachable, detail });
    };
    const timer = setTimeout(() => finish(false, `no TCP connection within ${timeoutMs} ms`), timeoutMs);
    socket.once('connect', () => finish(true, 'TCP connect succeeded; plaintext transport is never routing-eligible'));
    socket.once('error', (error: Error & { code?: string }) =>
      finish(false, `TCP connect failed (${error.code ?? 'error'})`),
    );
  });
}
