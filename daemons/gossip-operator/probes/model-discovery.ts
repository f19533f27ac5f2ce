/**
 * Model discovery (spec.modelDiscovery): GET {endpoint}/v1/models and read data[].id, within fixed bounds.
 * A response is accepted or rejected as a whole, never partly applied. The outcome is the label of
 * grid_model_discovery_total{provider,outcome}.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isBlockedAddress, isBlockedHostname } from './blocked-addresses.ts';
import { type ProbeTls, joinUrl, probeHttp } from './http-probe.ts';

export interface ModelDiscoveryConfig {
  readonly endpoint: string;
  readonly path?: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  readonly timeoutMs: number;
  /** Name resolution; bounded by timeoutMs. Defaults to the system resolver. */
  readonly resolve?: (hostname: string) => Promise<{ address: string; family: number }[]>;
  /**
   * Which addresses are refused. Defaults to the standard block list (isBlockedAddress); the only other caller is the
   * test suite, which must reach its servers on loopback, the one address range this machine allows.
   */
  readonly isBlocked?: (address: string) => boolean;
}

export type DiscoveryOutcome =
  | 'ok'
  | 'credential'
  | 'tls'
  | 'config'
  | 'unreachable'
  | 'timeout'
  | 'http_status'
  | 'invalid_response';

export type DiscoveryResult =
  | { readonly outcome: 'ok'; readonly models: readonly string[]; readonly url: string }
  | { readonly outcome: Exclude<DiscoveryOutcome, 'ok'>; readonly detail: string; readonly url: string };

export const DEFAULT_MODELS_PATH = '/v1/models';
export const MAX_MODELS = 256;
export const MAX_MODELS_RESPONSE_BYTES = 1024 * 1024;
const MAX_MODEL_ID_BYTES = 256;

/** The effective URL (status.modelDiscoveryUrl), reported whether or not a poll succeeds. */
export function discoveryUrl(config: Pick<ModelDiscoveryConfig, 'endpoint' | 'path'>): URL {
  return joinUrl(config.endpoint, config.path ?? DEFAULT_MODELS_PATH);
}

export async function discoverModels(config: ModelDiscoveryConfig): Promise<DiscoveryResult> {
  let url: URL;
  try {
    url = discoveryUrl(config);
  } catch {
    return { outcome: 'config', detail: 'modelDiscovery endpoint is not a valid URL', url: config.endpoint };
  }
  const fail = (outcome: Exclude<DiscoveryOutcome, 'ok'>, detail: string): DiscoveryResult => ({
    outcome,
    detail,
    url: url.href,
  });
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return fail('config', `unsupported scheme ${url.protocol}`);
  if (config.bearerToken !== undefined && url.protocol !== 'https:') {
    return fail('config', 'model discovery must use https:// when a bearer token is configured');
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const isBlocked = config.isBlocked ?? isBlockedAddress;
  const hostnameBlocked = config.isBlocked === undefined && isBlockedHostname(host);
  if (hostnameBlocked || (isIP(host) !== 0 && isBlocked(host))) {
    return fail(
      'config',
      `model discovery refuses ${host}: loopback, link-local, unspecified and metadata addresses are blocked`,
    );
  }
  let address: { ip: string; family: 4 | 6 };
  if (isIP(host) !== 0) {
    address = { ip: host, family: isIP(host) as 4 | 6 };
  } else {
    const resolved = await resolveBounded(config, host);
    if (typeof resolved === 'string')
      return fail(resolved === 'timeout' ? 'timeout' : 'unreachable', `cannot resolve ${host}`);
    const blocked = resolved.find((r) => isBlocked(r.address));
    if (blocked !== undefined) return fail('unreachable', `${host} resolves to a blocked address`);
    const first = resolved[0];
    if (first === undefined) return fail('unreachable', `${host} has no addresses`);
    address = { ip: first.address, family: first.family === 6 ? 6 : 4 };
  }
  const headers: Record<string, string> = {};
  if (config.bearerToken !== undefined) headers['authorization'] = `Bearer ${config.bearerToken}`;
  const response = await probeHttp({
    url,
    headers,
    address,
    timeoutMs: config.timeoutMs,
    maxBytes: MAX_MODELS_RESPONSE_BYTES,
    // The URL host stays the TLS server name and Host header; only the socket goes to the vetted address.
    ...(config.tls ? { tls: config.tls } : {}),
  });
  if (!response.ok) {
    switch (response.failure) {
      case 'too_large':
        return fail('invalid_response', `response exceeds ${MAX_MODELS_RESPONSE_BYTES} bytes`);
      case 'protocol':
        return fail('unreachable', response.detail);
      default:
        return fail(response.failure, response.detail);
    }
  }
  if (response.status === 401 || response.status === 403)
    return fail('credential', `models endpoint refused the credential (HTTP ${response.status})`);
  if (response.status < 200 || response.status > 299)
    return fail('http_status', `models endpoint answered HTTP ${response.status}`);
  const models = parseModelList(response.body);
  if (typeof models === 'string') return fail('invalid_response', models);
  return { outcome: 'ok', models, url: url.href };
}

/** data[].id, all valid or the whole response is refused (duplicates are malformed, not deduplicated). */
export function parseModelList(body: Buffer): string[] | string {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    return 'response is not JSON';
  }
  const data = (doc as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return 'response has no data[] array';
  if (data.length > MAX_MODELS) return `response lists ${data.length} models, limit is ${MAX_MODELS}`;
  const ids: string[] = [];
  const seen = new Set<string>();
  for (const [index, entry] of data.entries()) {
    const id = (entry as { id?: unknown } | null)?.id;
    if (typeof id !== 'string' || id.trim() === '') return `data[${index}].id is missing or blank`;
    if (Buffer.byteLength(id) > MAX_MODEL_ID_BYTES)
      return `data[${index}].id is longer than ${MAX_MODEL_ID_BYTES} bytes`;
    if (/[\u0000-\u001f\u007f]/.test(id)) return `data[${index}].id contains control characters`;
    if (seen.has(id)) return `data[${index}].id repeats an earlier id`;
    seen.add(id);
    ids.push(id);
  }
  return ids;
}

async function resolveBounded(
  config: ModelDiscoveryConfig,
  host: string,
): Promise<{ address: string; family: number }[] | 'timeout' | 'failed'> {
  const resolver = config.resolve ?? ((h: string) => lookup(h, { all: true, verbatim: true }));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), config.timeoutMs);
  });
  try {
    return await Promise.race([resolver(host), timeout]);
  } catch {
    return 'failed';
  } finally {
    clearTimeout(timer);
  }
}
