// The compiled manifests in dist/ on a real API server: read every YAML document, resolve each kind to its URL
// through discovery (no hand-kept table of plurals), and server-side apply it as a raw JSON body with a field
// manager, CRDs first. Raw bodies matter: @kubernetes/client-node's typed clients re-serialize objects through
// their own models and drop keys they have no field for (`default`, `x-kubernetes-validations`).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { KubeHttp, statusMessage } from '../../daemons/shared/resource-store/kube-http.ts';
import type { KubeResponse } from '../../daemons/shared/resource-store/kube-http.ts';

export const DIST_DIR = fileURLToPath(new URL('../../dist/', import.meta.url));
export const APPLY_FIELD_MANAGER = 'agn-cluster-test';

export interface Manifest {
  readonly file: string; // e.g. east.k8s.yaml
  readonly index: number; // document index in the file
  readonly object: {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace?: string; [key: string]: unknown };
    [key: string]: unknown;
  };
}

export function readManifests(file: string): Manifest[] {
  const text = readFileSync(join(DIST_DIR, file), 'utf8');
  const manifests: Manifest[] = [];
  parseAllDocuments(text).forEach((doc, index) => {
    if (doc.errors.length > 0)
      throw new Error(`${file} document ${index}: ${doc.errors[0]?.message ?? 'invalid YAML'}`);
    const object = doc.toJS() as Manifest['object'] | null;
    if (object === null) return; // an empty document (trailing ---)
    manifests.push({ file, index, object });
  });
  return manifests;
}

export function distFiles(): string[] {
  return readdirSync(DIST_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
}

export const describeManifest = (m: Manifest): string =>
  `${m.file}#${m.index} ${m.object.kind} ${m.object.metadata.namespace ? `${m.object.metadata.namespace}/` : ''}${m.object.metadata.name}`;

export interface ResourceInfo {
  readonly plural: string;
  readonly namespaced: boolean;
}

// A raw client for one identity (admin certificate or a ServiceAccount token): every test request goes
// through the same node:https path the daemons' resource store uses.
export class RawClient {
  readonly http: KubeHttp;
  readonly #discovery = new Map<string, Map<string, ResourceInfo>>();

  constructor(config: KubeConfig) {
    this.http = new KubeHttp(config);
  }

  request(
    method: 'GET' | 'PATCH' | 'DELETE' | 'POST' | 'PUT',
    path: string,
    body?: unknown,
    options: { query?: Record<string, string | undefined>; contentType?: string } = {},
  ): Promise<KubeResponse> {
    return this.http.request({ method, path, body, ...options });
  }

  /** The kind's plural and scope, from the server's discovery document for its group/version. */
  async resource(apiVersion: string, kind: string): Promise<ResourceInfo> {
    let kinds = this.#discovery.get(apiVersion);
    if (kinds === undefined) {
      const res = await this.request('GET', apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`);
      if (res.status !== 200) throw new Error(`discovery of ${apiVersion}: HTTP ${res.status}: ${statusMessage(res)}`);
      kinds = new Map();
      for (const r of (res.body as { resources: { name: string; kind: string; namespaced: boolean }[] }).resources) {
        if (!r.name.includes('/')) kinds.set(r.kind, { plural: r.name, namespaced: r.namespaced });
      }
      this.#discovery.set(apiVersion, kinds);
    }
    const info = kinds.get(kind);
    if (info === undefined) throw new Error(`the API server serves no ${kind} in ${apiVersion}`);
    return info;
  }

  forget(apiVersion: string): void {
    this.#discovery.delete(apiVersion);
  }

  async objectPath(object: Manifest['object'], subresource?: string): Promise<string> {
    const { plural, namespaced } = await this.resource(object.apiVersion, object.kind);
    const base = object.apiVersion.includes('/') ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
    const ns = namespaced ? `/namespaces/${object.metadata.namespace ?? 'default'}` : '';
    return `${base}${ns}/${plural}/${object.metadata.name}${subresource ? `/${subresource}` : ''}`;
  }

  /** Server-side apply of the object as raw JSON (JSON is YAML) with `fieldManager`; strict field validation. */
  async apply(
    object: Manifest['object'],
    fieldManager: string,
    extra: Record<string, string> = {},
  ): Promise<KubeResponse> {
    return this.request('PATCH', await this.objectPath(object), object, {
      query: { fieldManager, fieldValidation: 'Strict', ...extra },
      contentType: 'application/apply-patch+yaml',
    });
  }
}

export async function waitUntil<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Applies every document of `files` (CRDs from all files first, waiting until each is Established, then the rest
 * in file order) and returns the server's answer for each. A failure names the document and the server's reason.
 */
export async function applyManifests(
  client: RawClient,
  files: readonly string[],
  fieldManager = APPLY_FIELD_MANAGER,
): Promise<{ manifest: Manifest; response: KubeResponse }[]> {
  return applyObjects(client, files.flatMap(readManifests), fieldManager);
}

/** applyManifests for documents already in hand (e.g. a site synthesized in the test from a changed declaration). */
export async function applyObjects(
  client: RawClient,
  all: readonly Manifest[],
  fieldManager = APPLY_FIELD_MANAGER,
): Promise<{ manifest: Manifest; response: KubeResponse }[]> {
  const isCrd = (m: Manifest): boolean => m.object.kind === 'CustomResourceDefinition';
  const results: { manifest: Manifest; response: KubeResponse }[] = [];
  const applyOne = async (m: Manifest): Promise<void> => {
    const response = await client.apply(m.object, fieldManager);
    if (response.status !== 200 && response.status !== 201) {
      throw new Error(`apply ${describeManifest(m)}: HTTP ${response.status}: ${statusMessage(response)}`);
    }
    results.push({ manifest: m, response });
  };
  const crds = all.filter(isCrd);
  await Promise.all(crds.map(applyOne));
  for (const m of crds) {
    await waitUntil(`CRD ${m.object.metadata.name} to be Established`, async () => {
      const res = await client.request(
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${m.object.metadata.name}`,
      );
      const conditions =
        (res.body as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? [];
      return conditions.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
    });
  }
  // Discovery of a new group can lag a moment behind Established; retry the first lookup of each kind.
  const rest = all.filter((m) => !isCrd(m));
  for (const m of rest) {
    await waitUntil(`discovery of ${m.object.apiVersion} ${m.object.kind}`, async () => {
      try {
        await client.resource(m.object.apiVersion, m.object.kind);
        return true;
      } catch (err) {
        client.forget(m.object.apiVersion);
        throw err;
      }
    });
  }
  // Namespaces before what lives in them; the rest of a file in its own order.
  for (const m of rest.filter((x) => x.object.kind === 'Namespace')) await applyOne(m);
  await Promise.all(rest.filter((x) => x.object.kind !== 'Namespace').map(applyOne));
  return results;
}
