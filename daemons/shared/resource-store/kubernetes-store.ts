// The resource store on a real API server: server-side apply with a field manager, status subresource merge
// patches, and list+watch loops (kube-watch.ts). Tested against a real API server in test/cluster/.

import { checkRef, describeRef, ResourceStoreError } from './errors.ts';
import { KubeHttp, failure, resourcePath } from './kube-http.ts';
import { loadKubeConfig, type KubeConfigSource } from './kubeconfig.ts';
import { DEFAULT_KUBE_WATCH_TUNING, KubeWatch, type KubeWatchTuning } from './kube-watch.ts';
import { checkLabelSelector } from './object-cache.ts';
import type {
  ApplyOptions,
  KubeObject,
  ListOptions,
  ListResult,
  ObjectRef,
  PatchStatusOptions,
  ResourceKind,
  ResourceStore,
  ServiceAccountToken,
  TokenRequestOptions,
  WatchOptions,
  WatchSubscription,
} from './types.ts';

export interface KubernetesStoreOptions extends KubeConfigSource {
  readonly tuning?: Partial<KubeWatchTuning>;
}

const SERVICE_ACCOUNT: ResourceKind = {
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  plural: 'serviceaccounts',
  namespaced: true,
};
const APPLY_PATCH = 'application/apply-patch+yaml';
const MERGE_PATCH = 'application/merge-patch+json';

export class KubernetesStore implements ResourceStore {
  readonly backend = 'kubernetes' as const;
  readonly #http: KubeHttp;
  readonly #tuning: KubeWatchTuning;
  readonly #watches = new Set<KubeWatch>();

  constructor(options: KubernetesStoreOptions = {}) {
    this.#http = new KubeHttp(loadKubeConfig(options));
    this.#tuning = { ...DEFAULT_KUBE_WATCH_TUNING, ...options.tuning };
  }

  get server(): string {
    return this.#http.server;
  }

  async get<T extends KubeObject = KubeObject>(kind: ResourceKind, ref: ObjectRef): Promise<T | undefined> {
    checkRef(kind, ref);
    const path = resourcePath(kind, ref.namespace, ref.name);
    const response = await this.#http.request({ method: 'GET', path });
    if (response.status === 404) return undefined;
    if (response.status !== 200) throw failure(`get ${describeRef(kind, ref)}`, response);
    return response.body as T;
  }

  async list<T extends KubeObject = KubeObject>(kind: ResourceKind, options: ListOptions = {}): Promise<ListResult<T>> {
    const selectorProblem = checkLabelSelector(options.labelSelector);
    if (selectorProblem !== undefined) throw new ResourceStoreError('invalid', `list ${kind.kind}: ${selectorProblem}`);
    const path = resourcePath(kind, options.namespace);
    const response = await this.#http.request({
      method: 'GET',
      path,
      query: {
        fieldSelector: options.name === undefined ? undefined : `metadata.name=${options.name}`,
        labelSelector: options.labelSelector,
      },
    });
    if (response.status !== 200) throw failure(`list ${path}`, response);
    const body = response.body as { items?: T[]; metadata?: { resourceVersion?: string } };
    const items = (body.items ?? []).map((item) => ({ ...item, apiVersion: kind.apiVersion, kind: kind.kind }));
    return { items, resourceVersion: body.metadata?.resourceVersion ?? '' };
  }

  watch<T extends KubeObject = KubeObject>(kind: ResourceKind, options: WatchOptions<T>): WatchSubscription {
    const selectorProblem = checkLabelSelector(options.labelSelector);
    if (selectorProblem !== undefined)
      throw new ResourceStoreError('invalid', `watch ${kind.kind}: ${selectorProblem}`);
    const watch = new KubeWatch(this.#http, kind, options as unknown as WatchOptions, this.#tuning);
    this.#watches.add(watch);
    return {
      close: async () => {
        this.#watches.delete(watch);
        await watch.close();
      },
    };
  }

  async apply<T extends KubeObject = KubeObject>(kind: ResourceKind, object: T, options: ApplyOptions): Promise<T> {
    const ref = { name: object.metadata.name, namespace: object.metadata.namespace };
    checkRef(kind, ref);
    // Server-side apply owns resourceVersion/managedFields itself; sending them back would pin the apply.
    const {
      resourceVersion: _rv,
      managedFields: _mf,
      uid: _uid,
      creationTimestamp: _ct,
      generation: _gen,
      ...metadata
    } = object.metadata;
    const response = await this.#http.request({
      method: 'PATCH',
      path: resourcePath(kind, ref.namespace, ref.name),
      query: { fieldManager: options.fieldManager, force: options.force === true ? 'true' : undefined },
      // metadata.resourceVersion in an apply body is a precondition the API server checks (409 on mismatch).
      body: {
        ...object,
        metadata:
          options.resourceVersion === undefined ? metadata : { ...metadata, resourceVersion: options.resourceVersion },
      },
      contentType: APPLY_PATCH,
    });
    if (response.status !== 200 && response.status !== 201) throw failure(`apply ${describeRef(kind, ref)}`, response);
    return response.body as T;
  }

  async patchStatus<T extends KubeObject = KubeObject>(
    kind: ResourceKind,
    ref: ObjectRef,
    status: Record<string, unknown>,
    options: PatchStatusOptions,
  ): Promise<T> {
    checkRef(kind, ref);
    // metadata.resourceVersion in a merge patch is a precondition: the API server answers 409 when it moved on.
    const precondition =
      options.resourceVersion === undefined ? {} : { metadata: { resourceVersion: options.resourceVersion } };
    const response = await this.#http.request({
      method: 'PATCH',
      path: resourcePath(kind, ref.namespace, ref.name, 'status'),
      query: { fieldManager: options.fieldManager },
      body: { ...precondition, status },
      contentType: MERGE_PATCH,
    });
    if (response.status !== 200) throw failure(`patch status of ${describeRef(kind, ref)}`, response);
    return response.body as T;
  }

  async createToken(ref: ObjectRef, options: TokenRequestOptions): Promise<ServiceAccountToken> {
    checkRef(SERVICE_ACCOUNT, ref);
    const response = await this.#http.request({
      method: 'POST',
      path: resourcePath(SERVICE_ACCOUNT, ref.namespace, ref.name, 'token'),
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          expirationSeconds: options.expirationSeconds,
          ...(options.audiences !== undefined ? { audiences: [...options.audiences] } : {}),
        },
      },
    });
    if (response.status !== 200 && response.status !== 201)
      throw failure(`create token for ${describeRef(SERVICE_ACCOUNT, ref)}`, response);
    const status = (response.body as { status?: { token?: unknown; expirationTimestamp?: unknown } } | undefined)
      ?.status;
    if (typeof status?.token !== 'string' || status.token === '' || typeof status.expirationTimestamp !== 'string') {
      throw new ResourceStoreError(
        'unavailable',
        `create token for ${describeRef(SERVICE_ACCOUNT, ref)}: the TokenRequest answer has no status.token/expirationTimestamp`,
      );
    }
    return { token: status.token, expirationTimestamp: status.expirationTimestamp };
  }

  async delete(kind: ResourceKind, ref: ObjectRef): Promise<boolean> {
    checkRef(kind, ref);
    const response = await this.#http.request({ method: 'DELETE', path: resourcePath(kind, ref.namespace, ref.name) });
    if (response.status === 404) return false;
    if (response.status !== 200 && response.status !== 202) throw failure(`delete ${describeRef(kind, ref)}`, response);
    return true;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#watches].map((watch) => watch.close()));
    this.#watches.clear();
  }
}
