// Small helpers the cluster suite's test files share: clients for the admin and for a ServiceAccount token,
// unique names, polling and API error checks.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { renderKubeconfig } from './certs.ts';

export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject('kubeconfigPath'));
  return kc;
}

// A client that authenticates only with a bearer token (e.g. a minted ServiceAccount token), trusting the test CA.
export function tokenKubeConfig(token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: 'token-user', token }));
  return kc;
}

// Test files share one API server; random suffixes keep their namespaces apart across files and reruns.
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${lastError})` : ''}`,
  );
}

export interface StatusBody {
  readonly code?: number;
  readonly reason?: string;
  readonly message?: string;
}

// Awaits a call that must fail with the given HTTP status and returns the API server's Status body.
export async function expectApiError(call: Promise<unknown>, code: number): Promise<StatusBody> {
  try {
    await call;
  } catch (err) {
    if (err instanceof ApiException) {
      if (err.code !== code) throw new Error(`expected HTTP ${code}, got ${err.code}: ${String(err.body)}`);
      const body: unknown = typeof err.body === 'string' ? safeJson(err.body) : err.body;
      return (body ?? {}) as StatusBody;
    }
    throw err;
  }
  throw new Error(`expected HTTP ${code}, but the call succeeded`);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}

// A request with the admin's client certificate that sends and receives raw JSON, for what the typed client
// does not cover (discovery, Table output) or would alter: its serializer maps bodies through its own models
// and silently drops schema keywords it has no field for under their wire names (`default`,
// `x-kubernetes-validations`), so a CRD created through ApiextensionsV1Api loses its CEL rules and defaults.
// `as` selects a server-side representation, e.g. 'Table;v=v1;g=meta.k8s.io'.
export function adminRequest(
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  body?: unknown,
  as?: string,
): Promise<{ status: number; body: string }> {
  const config = JSON.parse(readFileSync(inject('kubeconfigPath'), 'utf8')) as {
    users: { user: Record<string, string> }[];
  };
  const user = config.users[0]?.user ?? {};
  const decode = (key: string): string => Buffer.from(user[key] ?? '', 'base64').toString('utf8');
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = { accept: as ? `application/json;as=${as}` : 'application/json' };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = request(
      `${inject('apiServerUrl')}${path}`,
      {
        method,
        ca: inject('caPem'),
        cert: decode('client-certificate-data'),
        key: decode('client-key-data'),
        headers,
        agent: false,
        timeout: 10_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

export function adminGet(path: string, as?: string): Promise<{ status: number; body: string }> {
  return adminRequest('GET', path, undefined, as);
}
