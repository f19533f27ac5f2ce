/**
 * Optimistic-concurrency status writes for objects whose status several writers share (GridNetwork: reconcile
 * writes Ready, the peer poller PeerTimeValid, the gateway age ingest GatewayAgesRejected and gatewayAgeReports).
 * A merge patch replaces whole lists, so each writer builds its patch from a fresh read and sends that read's
 * resourceVersion as a precondition; when another writer (or an administrator's status edit) got in between, the
 * store answers 409 and the patch is rebuilt from a new read. Nothing is reverted and no write is lost.
 */
import { ResourceStoreError } from '../../shared/resource-store/errors.ts';
import type { ObjectRef, ResourceKind, ResourceStore } from '../../shared/resource-store/types.ts';

/** Read-build-patch rounds before a conflict is given up to the caller (whose own retry then takes over). */
export const STATUS_WRITE_ATTEMPTS = 5;
/** Base of the jittered pause between rounds: attempt n waits n × base × [0.5, 1.5). */
export const STATUS_WRITE_BACKOFF_MS = 20;

export interface StatusWriteOptions {
  readonly attempts?: number;
  readonly random?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

export interface StatusWriteResult<T> {
  /** The object as written, or as last read when `build` wanted no write; undefined when it does not exist. */
  readonly object: T | undefined;
  readonly written: boolean;
  /** Read-build-patch rounds used (1 without a conflict). */
  readonly attempts: number;
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Anything with object metadata: the CRD resource types are not index-signature KubeObjects. */
export interface Versioned {
  readonly metadata: { readonly resourceVersion?: string | undefined };
}

/**
 * Reads `ref`, asks `build` for the status patch against that read (undefined: nothing to write) and patches with
 * the read's resourceVersion as precondition; on conflict reads again, at most `attempts` times. `build` must be
 * pure over its argument: it runs once per round and only the last round's patch is written.
 */
export async function patchStatusFresh<T extends Versioned>(
  store: ResourceStore,
  kind: ResourceKind,
  ref: ObjectRef,
  fieldManager: string,
  build: (fresh: T) => Record<string, unknown> | undefined,
  options: StatusWriteOptions = {},
): Promise<StatusWriteResult<T>> {
  const attempts = Math.max(1, options.attempts ?? STATUS_WRITE_ATTEMPTS);
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? pause;
  for (let attempt = 1; ; attempt++) {
    const fresh = (await store.get(kind, ref)) as unknown as T | undefined;
    if (fresh === undefined) return { object: undefined, written: false, attempts: attempt };
    const patch = build(fresh);
    if (patch === undefined) return { object: fresh, written: false, attempts: attempt };
    try {
      const resourceVersion = fresh.metadata.resourceVersion;
      const object = (await store.patchStatus(kind, ref, patch, {
        fieldManager,
        ...(resourceVersion !== undefined ? { resourceVersion } : {}),
      })) as unknown as T;
      return { object, written: true, attempts: attempt };
    } catch (error) {
      if (!(error instanceof ResourceStoreError) || error.code !== 'conflict' || attempt >= attempts) throw error;
      await sleep(Math.round(attempt * STATUS_WRITE_BACKOFF_MS * (0.5 + random())));
    }
  }
}
