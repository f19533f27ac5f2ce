// The local resource store: what the embedded grid runs on instead of an API server. Objects live one per
// file in a state directory shared by every daemon of the grid; a manifest directory (for example `dist/`)
// is imported into it with the field manager `local-manifests` and re-imported when a manifest changes.
// Watches follow the state directory's change journal through fs events, coalesced over a short window,
// with a periodic rescan (and manifest re-import) as the safety net for events the OS dropped.

import { randomUUID } from 'node:crypto';
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { Backoff, WATCH_BACKOFF } from './backoff.ts';
import { checkRef, describeRef, ResourceStoreError } from './errors.ts';
import { loadManifests, type ManifestProblem } from './manifests.ts';
import { applyObject, managers, patchObjectStatus } from './merge.ts';
import { checkLabelSelector, matchesFilter, ObjectCache } from './object-cache.ts';
import { readAllObjects, StateDir } from './state-dir.ts';
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
  WatchRestartReason,
  WatchSubscription,
} from './types.ts';

export const MANIFEST_FIELD_MANAGER = 'local-manifests';

export interface LocalStoreOptions {
  readonly stateDir: string;
  /** Imported at open and on every change; absent for a daemon that only reads what others write. */
  readonly manifestsDir?: string;
  /** How long fs events are gathered before one rescan (bounded: later events do not push it back). */
  readonly coalesceMs?: number;
  /** Safety-net rescan period for fs events the OS dropped. */
  readonly rescanIntervalMs?: number;
  /** Bad manifest documents and watcher failures: reported, never thrown. */
  readonly onProblem?: (message: string) => void;
}

const DEFAULT_COALESCE_MS = 10;
const DEFAULT_RESCAN_MS = 10_000;

export async function openLocalStore(options: LocalStoreOptions): Promise<LocalStore> {
  const store = new LocalStore(options);
  await store.start();
  return store;
}

export class LocalStore implements ResourceStore {
  readonly backend = 'local' as const;
  readonly #state: StateDir;
  readonly #options: LocalStoreOptions;
  readonly #subscriptions = new Set<LocalSubscription>();
  readonly #fsWatchers: FSWatcher[] = [];
  #rescanTimer: NodeJS.Timeout | undefined;
  #manifestTimer: NodeJS.Timeout | undefined;
  #stateTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #lastManifestProblems = new Set<string>();

  constructor(options: LocalStoreOptions) {
    this.#options = options;
    this.#state = new StateDir(options.stateDir);
  }

  async start(): Promise<void> {
    await this.#state.init();
    if (this.#options.manifestsDir !== undefined) {
      await mkdir(this.#options.manifestsDir, { recursive: true });
      await this.importManifests();
      this.#watchDir(this.#options.manifestsDir, () => this.#scheduleManifestImport());
    }
    this.#watchDir(this.#state.journalDir, (name) => this.#scheduleStateRescan(name));
    this.#rescanTimer = setInterval(() => {
      this.#rescanAll(true);
      if (this.#options.manifestsDir !== undefined) this.#scheduleManifestImport();
    }, this.#options.rescanIntervalMs ?? DEFAULT_RESCAN_MS);
    this.#rescanTimer.unref();
  }

  #problem(message: string): void {
    this.#options.onProblem?.(message);
  }

  /** A plain (non-recursive) directory watch: manifests in subdirectories are picked up by the periodic pass. */
  #watchDir(directory: string, onChange: (name: string | null) => void): void {
    const backoff = new Backoff(WATCH_BACKOFF);
    const open = (): void => {
      if (this.#closed) return;
      try {
        const watcher = fsWatch(directory, { persistent: false }, (_event, name) => onChange(name));
        watcher.on('error', (error) => {
          watcher.close();
          this.#fsWatchers.splice(this.#fsWatchers.indexOf(watcher), 1);
          this.#problem(`file watch on ${directory} failed (${error.message}); retrying, periodic rescan continues`);
          for (const subscription of this.#subscriptions) subscription.restarted('error', error);
          setTimeout(open, backoff.next()).unref();
        });
        this.#fsWatchers.push(watcher);
        backoff.reset();
      } catch (error) {
        this.#problem(`cannot watch ${directory} (${(error as Error).message}); retrying, periodic rescan continues`);
        setTimeout(open, backoff.next()).unref();
      }
    };
    open();
  }

  #coalesce(timer: NodeJS.Timeout | undefined, run: () => void): NodeJS.Timeout {
    if (timer !== undefined) return timer;
    const next = setTimeout(run, this.#options.coalesceMs ?? DEFAULT_COALESCE_MS);
    next.unref();
    return next;
  }

  #changedKinds = new Set<string>();
  #allKindsChanged = false;

  #scheduleStateRescan(journalEntry: string | null): void {
    if (journalEntry === null) this.#allKindsChanged = true;
    else this.#changedKinds.add(journalEntry.replace(/^\./, '').replace(/\.\d+\.tmp$/, ''));
    this.#stateTimer = this.#coalesce(this.#stateTimer, () => {
      this.#stateTimer = undefined;
      const all = this.#allKindsChanged;
      const kinds = this.#changedKinds;
      this.#allKindsChanged = false;
      this.#changedKinds = new Set();
      for (const subscription of this.#subscriptions) {
        if (all || kinds.has(this.#state.journalName(subscription.kind.apiVersion, subscription.kind.kind)))
          subscription.scheduleRescan(false);
      }
    });
  }

  #scheduleManifestImport(): void {
    this.#manifestTimer = this.#coalesce(this.#manifestTimer, () => {
      this.#manifestTimer = undefined;
      this.importManifests().catch((error: unknown) =>
        this.#problem(`manifest import failed: ${(error as Error).message}`),
      );
    });
  }

  #rescanAll(resync: boolean): void {
    for (const subscription of this.#subscriptions) subscription.scheduleRescan(resync);
  }

  /**
   * Applies every manifest object with the `local-manifests` field manager and deletes objects that only
   * that manager owns and no manifest lists any more (like `kubectl apply --prune`).
   */
  async importManifests(): Promise<ManifestProblem[]> {
    const directory = this.#options.manifestsDir;
    if (directory === undefined) return [];
    const { objects, problems } = await loadManifests(directory);
    const current = new Set(problems.map((p) => p.message));
    for (const problem of problems)
      if (!this.#lastManifestProblems.has(problem.message)) this.#problem(problem.message);
    this.#lastManifestProblems = current;
    const listed = new Set<string>();
    for (const object of objects) {
      const path = this.#state.objectPath(
        object.apiVersion,
        object.kind,
        object.metadata.namespace,
        object.metadata.name,
      );
      listed.add(path);
      try {
        await this.#applyAt(path, object, MANIFEST_FIELD_MANAGER);
      } catch (error) {
        this.#problem(`manifest ${object.kind} ${object.metadata.name}: ${(error as Error).message}; skipped`);
      }
    }
    if (problems.length === 0) {
      // Prune only after a clean read: a half-edited file must not delete what it used to declare.
      for (const stored of await readAllObjects(this.#state)) {
        const path = this.#state.objectPath(
          stored.apiVersion,
          stored.kind,
          stored.metadata.namespace,
          stored.metadata.name,
        );
        const owners = managers(stored);
        if (!listed.has(path) && owners.length === 1 && owners[0] === MANIFEST_FIELD_MANAGER) {
          await this.#state.mutate(path, () => ({ write: null, result: undefined }));
        }
      }
    }
    return problems;
  }

  #path(kind: ResourceKind, ref: ObjectRef): string {
    checkRef(kind, ref);
    return this.#state.objectPath(kind.apiVersion, kind.kind, kind.namespaced ? ref.namespace : undefined, ref.name);
  }

  async get<T extends KubeObject = KubeObject>(kind: ResourceKind, ref: ObjectRef): Promise<T | undefined> {
    return (await this.#state.readObject(this.#path(kind, ref))) as T | undefined;
  }

  async list<T extends KubeObject = KubeObject>(kind: ResourceKind, options: ListOptions = {}): Promise<ListResult<T>> {
    const selectorProblem = checkLabelSelector(options.labelSelector);
    if (selectorProblem !== undefined) throw new ResourceStoreError('invalid', `list ${kind.kind}: ${selectorProblem}`);
    // Read the collection version first: a watch from it may replay a change, but never miss one.
    const resourceVersion = await this.#state.currentResourceVersion();
    const items = (await this.#readMatching(kind, options)) as T[];
    return { items, resourceVersion };
  }

  async #readMatching(kind: ResourceKind, options: ListOptions): Promise<KubeObject[]> {
    const namespace = kind.namespaced ? options.namespace : undefined;
    const objects = await this.#state.readKind(kind.apiVersion, kind.kind, namespace, options.name);
    return objects.filter((object) => matchesFilter(object, options)).sort((a, b) => compareRv(a, b));
  }

  watch<T extends KubeObject = KubeObject>(kind: ResourceKind, options: WatchOptions<T>): WatchSubscription {
    const selectorProblem = checkLabelSelector(options.labelSelector);
    if (selectorProblem !== undefined)
      throw new ResourceStoreError('invalid', `watch ${kind.kind}: ${selectorProblem}`);
    if (this.#closed) throw new ResourceStoreError('unavailable', `watch ${kind.kind}: the store is closed`);
    const subscription = new LocalSubscription(
      kind,
      options as unknown as WatchOptions,
      (k, o) => this.#readMatching(k, o),
      (message) => this.#problem(message),
      () => this.#subscriptions.delete(subscription),
    );
    this.#subscriptions.add(subscription);
    subscription.scheduleRescan(true);
    return subscription;
  }

  async apply<T extends KubeObject = KubeObject>(kind: ResourceKind, object: T, options: ApplyOptions): Promise<T> {
    if (object.kind !== kind.kind || object.apiVersion !== kind.apiVersion) {
      throw new ResourceStoreError('invalid', `apply ${kind.kind}: object is ${object.apiVersion}/${object.kind}`);
    }
    const path = this.#path(kind, { name: object.metadata.name, namespace: object.metadata.namespace });
    return (await this.#applyAt(
      path,
      object,
      options.fieldManager,
      options.resourceVersion,
      describeRef(kind, { name: object.metadata.name, namespace: object.metadata.namespace }),
    )) as T;
  }

  async #applyAt(
    path: string,
    object: KubeObject,
    fieldManager: string,
    precondition?: string,
    what?: string,
  ): Promise<KubeObject> {
    const result = await this.#state.mutate(path, (current, nextRv) => {
      // The API server's optimistic lock: a resourceVersion precondition that no longer matches writes nothing.
      if (precondition !== undefined && current?.metadata.resourceVersion !== precondition) {
        throw new ResourceStoreError(
          'conflict',
          `apply ${what ?? path}: the object has been modified (resourceVersion ${current?.metadata.resourceVersion ?? 'none'}, precondition ${precondition})`,
          { statusCode: 409 },
        );
      }
      const next = applyObject(current, object, fieldManager);
      if (next === undefined) return { write: undefined, result: current as KubeObject };
      next.metadata.resourceVersion = nextRv;
      next.metadata.uid ??= randomUUID();
      next.metadata.creationTimestamp ??= new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      return { write: next, result: next };
    });
    this.#rescanAll(false);
    return result;
  }

  async patchStatus<T extends KubeObject = KubeObject>(
    kind: ResourceKind,
    ref: ObjectRef,
    status: Record<string, unknown>,
    options: PatchStatusOptions,
  ): Promise<T> {
    const path = this.#path(kind, ref);
    const result = await this.#state.mutate(path, (current, nextRv) => {
      if (current === undefined)
        throw new ResourceStoreError('not_found', `patch status: ${describeRef(kind, ref)} not found`, {
          statusCode: 404,
        });
      // Checked under the state directory lock, so read-compare-write is atomic across every daemon sharing it.
      if (options.resourceVersion !== undefined && current.metadata.resourceVersion !== options.resourceVersion) {
        throw new ResourceStoreError(
          'conflict',
          `patch status of ${describeRef(kind, ref)}: the object has been modified (resourceVersion ${current.metadata.resourceVersion ?? '<none>'}, patch expected ${options.resourceVersion}); read it again and retry`,
          { statusCode: 409 },
        );
      }
      const next = patchObjectStatus(current, status, options.fieldManager);
      if (next === undefined) return { write: undefined, result: current };
      next.metadata.resourceVersion = nextRv;
      return { write: next, result: next };
    });
    this.#rescanAll(false);
    return result as T;
  }

  /**
   * Refused: a token is only worth sending if the receiver can verify it (TokenReview against the API server that
   * minted it), and a local grid has no API server. Minting from a file would hand out a credential nothing checks.
   */
  async createToken(ref: ObjectRef, _options: TokenRequestOptions): Promise<ServiceAccountToken> {
    throw new ResourceStoreError(
      'invalid',
      `create token for ServiceAccount ${ref.namespace ?? '<no namespace>'}/${ref.name}: the local store has no API server to mint ServiceAccount tokens; metricsConfig.auth serviceAccountToken needs the kubernetes store`,
    );
  }

  async delete(kind: ResourceKind, ref: ObjectRef): Promise<boolean> {
    const path = this.#path(kind, ref);
    const existed = await this.#state.mutate(path, (current) => ({
      write: current === undefined ? undefined : null,
      result: current !== undefined,
    }));
    this.#rescanAll(false);
    return existed;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#rescanTimer);
    clearTimeout(this.#manifestTimer);
    clearTimeout(this.#stateTimer);
    for (const watcher of this.#fsWatchers.splice(0)) watcher.close();
    await Promise.all([...this.#subscriptions].map((s) => s.close()));
  }
}

function compareRv(a: KubeObject, b: KubeObject): number {
  const x = BigInt(a.metadata.resourceVersion ?? '0');
  const y = BigInt(b.metadata.resourceVersion ?? '0');
  return x < y ? -1 : x > y ? 1 : 0;
}

/** One watch: its own view of the collection, rescanned (never concurrently) whenever the directory changes. */
class LocalSubscription implements WatchSubscription {
  readonly kind: ResourceKind;
  readonly #options: WatchOptions;
  readonly #read: (kind: ResourceKind, options: ListOptions) => Promise<KubeObject[]>;
  readonly #problem: (message: string) => void;
  readonly #onClose: () => void;
  readonly #cache = new ObjectCache();
  #running: Promise<void> | undefined;
  #pending: 'none' | 'rescan' | 'resync' = 'none';
  #closed = false;
  #first = true;

  constructor(
    kind: ResourceKind,
    options: WatchOptions,
    read: (kind: ResourceKind, options: ListOptions) => Promise<KubeObject[]>,
    problem: (message: string) => void,
    onClose: () => void,
  ) {
    this.kind = kind;
    this.#options = options;
    this.#read = read;
    this.#problem = problem;
    this.#onClose = onClose;
  }

  restarted(reason: WatchRestartReason, error?: Error): void {
    if (!this.#closed) this.#options.onRestart?.(reason, error);
  }

  scheduleRescan(resync: boolean): void {
    if (this.#closed) return;
    if (resync || this.#pending === 'none') this.#pending = resync ? 'resync' : 'rescan';
    this.#running ??= this.#drain();
  }

  async #drain(): Promise<void> {
    try {
      while (this.#pending !== 'none' && !this.#closed) {
        const resync = this.#pending === 'resync';
        this.#pending = 'none';
        await this.#rescan(resync);
      }
    } finally {
      this.#running = undefined;
    }
  }

  async #rescan(resync: boolean): Promise<void> {
    let items: KubeObject[];
    try {
      items = await this.#read(this.kind, this.#options);
    } catch (error) {
      this.#problem(`watch ${this.kind.kind}: rescan failed (${(error as Error).message}); will retry`);
      this.restarted('error', error as Error);
      return;
    }
    if (this.#closed) return;
    if (this.#first && this.#options.resourceVersion !== undefined) {
      // Watch from a resourceVersion: objects at or below it are already known to the caller.
      const since = BigInt(this.#options.resourceVersion);
      this.#cache.replace(items.filter((o) => BigInt(o.metadata.resourceVersion ?? '0') <= since));
    }
    const events = this.#cache.replace(items);
    const first = this.#first;
    this.#first = false;
    for (const event of events) {
      if (this.#closed) return;
      this.#options.onEvent(event);
    }
    if ((resync || first) && !this.#closed) this.#options.onSynced?.(this.#cache.values());
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#onClose();
    await this.#running;
  }
}
