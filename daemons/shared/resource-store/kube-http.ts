// Thin HTTP layer to the API server. Configuration and authentication (in-cluster ServiceAccount token,
// kubeconfig certificates, tokens, exec plugins) come from kubeconfig.ts; requests go through node:https so one code
// path serves get, list, apply, the status subresource and watch streams.

import http from 'node:http';
import https from 'node:https';
import { ResourceStoreError, type ResourceStoreErrorCode } from './errors.ts';
import type { KubeAuthSource } from './kubeconfig.ts';
import type { ResourceKind } from './types.ts';

export function resourcePath(
  kind: ResourceKind,
  namespace: string | undefined,
  name?: string,
  subresource?: string,
): string {
  const slash = kind.apiVersion.indexOf('/');
  const base = slash < 0 ? `/api/${kind.apiVersion}` : `/apis/${kind.apiVersion}`;
  const scope = kind.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const object = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  const sub = subresource === undefined ? '' : `/${subresource}`;
  return `${base}${scope}/${kind.plural}${object}${sub}`;
}

export function codeForStatus(status: number): ResourceStoreErrorCode {
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 410) return 'gone';
  if (status === 401 || status === 403) return 'forbidden';
  if (status === 400 || status === 422) return 'invalid';
  return 'unavailable';
}

export interface KubeResponse {
  readonly status: number;
  readonly body: unknown;
}

export interface RequestSpec {
  readonly method: 'GET' | 'PATCH' | 'DELETE' | 'POST' | 'PUT';
  readonly path: string;
  readonly query?: Record<string, string | undefined>;
  readonly body?: unknown;
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

export class KubeHttp {
  readonly #config: KubeAuthSource;
  readonly #server: URL;

  constructor(config: KubeAuthSource) {
    this.#config = config;
    const cluster = config.getCurrentCluster();
    if (cluster === null) throw new ResourceStoreError('invalid', 'no Kubernetes cluster configured');
    this.#server = new URL(cluster.server);
  }

  get server(): string {
    return this.#server.origin;
  }

  #url(spec: RequestSpec): URL {
    const url = new URL(this.#server.pathname.replace(/\/$/, '') + spec.path, this.#server);
    for (const [key, value] of Object.entries(spec.query ?? {}))
      if (value !== undefined) url.searchParams.set(key, value);
    return url;
  }

  async #open(spec: RequestSpec): Promise<http.IncomingMessage> {
    const options: https.RequestOptions = { headers: {} };
    // Re-applied per request: rotated service-account tokens and refreshed exec credentials are picked up.
    await this.#config.applyToHTTPSOptions(options);
    const url = this.#url(spec);
    const payload = spec.body === undefined ? undefined : Buffer.from(JSON.stringify(spec.body));
    const headers: http.OutgoingHttpHeaders = {
      ...(options.headers as http.OutgoingHttpHeaders),
      accept: 'application/json',
    };
    if (payload !== undefined) {
      headers['content-type'] = spec.contentType ?? 'application/json';
      headers['content-length'] = payload.length;
    }
    const transport = url.protocol === 'http:' ? http : https;
    return new Promise((resolve, reject) => {
      const request = transport.request(
        url,
        { ...options, method: spec.method, headers, signal: spec.signal },
        resolve,
      );
      request.on('error', reject);
      if (spec.timeoutMs !== undefined) {
        request.setTimeout(spec.timeoutMs, () => request.destroy(new Error(`no response within ${spec.timeoutMs} ms`)));
      }
      request.end(payload);
    });
  }

  /** One request with a JSON answer. Transport failures become `unavailable` errors naming the server. */
  async request(spec: RequestSpec): Promise<KubeResponse> {
    let response: http.IncomingMessage;
    try {
      response = await this.#open({ timeoutMs: 30_000, ...spec });
    } catch (error) {
      throw new ResourceStoreError(
        'unavailable',
        `${spec.method} ${spec.path} on ${this.server}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const chunks: Buffer[] = [];
    for await (const chunk of response) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    return { status: response.statusCode ?? 0, body };
  }

  /** Opens a streaming GET (a watch); the caller reads and destroys the response. */
  async stream(spec: RequestSpec): Promise<http.IncomingMessage> {
    return this.#open(spec);
  }
}

/** The API server's `Status.message` (bounded), or the HTTP status when it sent none. */
export function statusMessage(response: KubeResponse): string {
  const body = response.body;
  const message =
    typeof body === 'object' && body !== null && typeof (body as Record<string, unknown>)['message'] === 'string'
      ? ((body as Record<string, unknown>)['message'] as string)
      : `HTTP ${response.status}`;
  return message.length > 300 ? `${message.slice(0, 300)}…` : message;
}

export function failure(what: string, response: KubeResponse): ResourceStoreError {
  return new ResourceStoreError(codeForStatus(response.status), `${what}: ${statusMessage(response)}`, {
    statusCode: response.status,
  });
}
