/**
 * InferenceProvider health check (spec.healthCheck): GET {endpoint}/health by default.
 *
 * The provider's bearer token is sent only to the same origin as spec.endpoint and only over HTTPS, and redirects
 * are never followed (a 3xx degrades health), so a health URL can never carry the credential elsewhere.
 */
import { type ProbeFailure, type ProbeTls, joinUrl, probeHttp, sameOrigin } from './http-probe.ts';

export interface HealthProbeConfig {
  /** spec.endpoint: the origin that owns the credential. */
  readonly providerEndpoint: string;
  /** healthCheck.endpoint: another base URL within (or outside) that origin. */
  readonly endpoint?: string;
  readonly path?: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  readonly timeoutMs: number;
}

export type HealthResult = 'healthy' | 'redirect' | 'http_status' | ProbeFailure;

export interface HealthOutcome {
  readonly healthy: boolean;
  readonly result: HealthResult;
  /** Whether the credential was attached: tests and logs can show the same-origin rule held. */
  readonly sentCredential: boolean;
  readonly detail: string;
}

export const DEFAULT_HEALTH_PATH = '/health';

export async function probeHealth(config: HealthProbeConfig): Promise<HealthOutcome> {
  const origin = new URL(config.providerEndpoint);
  const url = joinUrl(config.endpoint ?? config.providerEndpoint, config.path ?? DEFAULT_HEALTH_PATH);
  const sendCredential = config.bearerToken !== undefined && url.protocol === 'https:' && sameOrigin(url, origin);
  const headers: Record<string, string> = {};
  if (sendCredential) headers['authorization'] = `Bearer ${config.bearerToken}`;
  const response = await probeHttp({
    url,
    headers,
    timeoutMs: config.timeoutMs,
    maxBytes: 64 * 1024,
    ...(config.tls ? { tls: config.tls } : {}),
  });
  if (!response.ok)
    return { healthy: false, result: response.failure, sentCredential: sendCredential, detail: response.detail };
  if (response.status >= 300 && response.status < 400) {
    return {
      healthy: false,
      result: 'redirect',
      sentCredential: sendCredential,
      detail: `health check answered a redirect (HTTP ${response.status}); redirects are not followed`,
    };
  }
  if (response.status < 200 || response.status > 299) {
    return {
      healthy: false,
      result: 'http_status',
      sentCredential: sendCredential,
      detail: `health check answered HTTP ${response.status}`,
    };
  }
  return { healthy: true, result: 'healthy', sentCredential: sendCredential, detail: `HTTP ${response.status}` };
}
