// The one interface every daemon uses to talk to "the cluster". Two implementations sit behind it:
// `local-store.ts` (manifest directory + state directory) and `kubernetes-store.ts` (an API server).

/** Which resource type a call is about. `plural` and `namespaced` are what the API server's URL needs. */
export interface ResourceKind {
  readonly apiVersion: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface ObjectRef {
  readonly name: string;
  /** Required for namespaced kinds, ignored for cluster-scoped ones. */
  readonly namespace?: string;
}

export interface ListOptions {
  readonly namespace?: string;
  /** Restricts the result to one object (field selector `metadata.name`). */
  readonly name?: string;
  /** Equality-based label selector, `k=v,k2=v2`. */
  readonly labelSelector?: string;
}

export interface ListResult<T extends KubeObject = KubeObject> {
  readonly items: T[];
  /** The collection's resourceVersion: a watch started from it sees every later change. */
  readonly resourceVersion: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchEvent<T extends KubeObject = KubeObject> {
  readonly type: WatchEventType;
  readonly object: T;
}

/**
 * Why a watch stream was re-established. One catalogue for both stores, used verbatim as a metric label:
 * `gone` = 410, the resourceVersion expired and the store re-listed; `closed` = the stream ended normally
 * (server timeout) and resumed from the last resourceVersion; `error` = transport or HTTP failure, retried
 * with jittered backoff.
 */
export type WatchRestartReason = 'gone' | 'closed' | 'error';

export interface WatchOptions<T extends KubeObject = KubeObject> extends ListOptions {
  /**
   * Start after this resourceVersion without an initial list. Absent: list first and report every existing
   * object as ADDED (informer semantics), then stream changes.
   */
  readonly resourceVersion?: string;
  readonly onEvent: (event: WatchEvent<T>) => void;
  /**
   * Called after every (re)list with the full current set: the first sync, relists after 410 and periodic
   * resyncs. Lets a consumer act on "the object does not exist", which no event reports.
   */
  readonly onSynced?: (items: readonly T[]) => void;
  readonly onRestart?: (reason: WatchRestartReason, error?: Error) => void;
}

export interface WatchSubscription {
  /** Stops the watch; resolves once no further callback will run. */
  close(): Promise<void>;
}

export interface ApplyOptions {
  /** Server-side apply field manager, e.g. `grid-operator`. */
  readonly fieldManager: string;
  /** Take ownership of fields another manager owns (server-side apply `force=true`). */
  readonly force?: boolean;
  /**
   * Optimistic-lock precondition: apply only while the object is still at this resourceVersion, so a decision
   * taken on a GET is not written over a change made since. A mismatch (or a deleted object) fails with
   * `conflict` (409) and writes nothing. Not honoured by patchStatus.
   */
  readonly resourceVersion?: string;
}

export interface PatchStatusOptions extends ApplyOptions {
  /**
   * Optimistic concurrency: apply the patch only if the object is still at this resourceVersion, else fail with a
   * `conflict` error (409). A merge patch replaces whole lists, so a writer that read, changed one entry and sends the
   * list back must name the version it read, or it reverts what another writer did in between.
   */
  readonly resourceVersion?: string;
}

export interface TokenRequestOptions {
  /** Requested lifetime; the API server may shorten it (its answer's expirationTimestamp is what counts). */
  readonly expirationSeconds: number;
  /** Absent: the API server's default audiences. */
  readonly audiences?: readonly string[];
}

/** A minted ServiceAccount token. `token` is a secret: never log it or put it in an error or status. */
export interface ServiceAccountToken {
  readonly token: string;
  readonly expirationTimestamp: string;
}

export interface ResourceStore {
  /** Which implementation this is, for logs and status. */
  readonly backend: 'local' | 'kubernetes';
  get<T extends KubeObject = KubeObject>(kind: ResourceKind, ref: ObjectRef): Promise<T | undefined>;
  list<T extends KubeObject = KubeObject>(kind: ResourceKind, options?: ListOptions): Promise<ListResult<T>>;
  watch<T extends KubeObject = KubeObject>(kind: ResourceKind, options: WatchOptions<T>): WatchSubscription;
  /** Server-side apply: creates or updates; an apply that changes nothing leaves resourceVersion alone. */
  apply<T extends KubeObject = KubeObject>(kind: ResourceKind, object: T, options: ApplyOptions): Promise<T>;
  /** JSON merge patch (RFC 7386) of `{status}` through the status subresource. */
  patchStatus<T extends KubeObject = KubeObject>(
    kind: ResourceKind,
    ref: ObjectRef,
    status: Record<string, unknown>,
    options: PatchStatusOptions,
  ): Promise<T>;
  /**
   * TokenRequest (the serviceaccounts/token subresource create): a token of ServiceAccount `ref`, not bound to any
   * object. The local store has no API server to mint one and refuses with an `invalid` error.
   */
  createToken(ref: ObjectRef, options: TokenRequestOptions): Promise<ServiceAccountToken>;
  /** Deletes the object; resolves to false when it did not exist. */
  delete(kind: ResourceKind, ref: ObjectRef): Promise<boolean>;
  /** Closes every watch and releases file watchers / sockets. */
  close(): Promise<void>;
}
