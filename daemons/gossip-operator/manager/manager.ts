/**
 * A small controller manager in the controller-runtime shape: level-based reconcilers fed by store watches, where
 * a request carries only the object name; one de-duplicating work queue per controller with per-key backoff; a
 * periodic requeue asked for by the reconciler. A reconcile that throws is retried with backoff and never stops
 * the other keys; a TerminalError (invalid spec) is reported and waits for the next change instead.
 */
import type { Tracer } from '@opentelemetry/api';
import { inSpan } from '../tracing.ts';
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';
import type { KubeObject, ResourceKind, ResourceStore, WatchSubscription } from '../../shared/resource-store/types.ts';
import { WorkQueue } from './work-queue.ts';

export interface ReconcileResult {
  /** Run again after this long even if nothing changes (periodic work such as metrics refresh or probes). */
  readonly requeueAfterMs?: number;
}

/** A failure retrying cannot fix (the object itself is invalid): logged, not retried until the object changes. */
export class TerminalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TerminalError';
  }
}

export interface SecondaryWatch {
  readonly kind: ResourceKind;
  readonly namespace?: string;
  readonly labelSelector?: string;
  /** Keys of the primary kind to reconcile when an object of this kind changes. */
  readonly map: (object: KubeObject) => readonly string[];
}

export interface Controller {
  readonly name: string;
  /** The kind whose object names are the keys of this controller's queue. */
  readonly kind: ResourceKind;
  readonly watches?: readonly SecondaryWatch[];
  reconcile(name: string): Promise<ReconcileResult>;
  /**
   * Releases what the controller holds outside reconciles (the MCP list watchers' open streams), once its worker
   * stopped or the stop deadline passed: Manager.stop awaits it, so it must be bounded.
   */
  close?(): Promise<void>;
}

export type ReconcileObserver = (
  controller: string,
  result: 'success' | 'error' | 'terminal',
  durationMs: number,
) => void;

export interface ManagerOptions {
  readonly store: ResourceStore;
  readonly logger: Logger;
  readonly baseBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly onReconcile?: ReconcileObserver;
  /** A span per reconcile when tracing is on (../tracing.ts). */
  readonly tracer?: Tracer;
}

interface Running {
  readonly controller: Controller;
  readonly queue: WorkQueue;
  readonly worker: Promise<void>;
}

export class Manager {
  readonly #options: ManagerOptions;
  readonly #controllers: Controller[] = [];
  readonly #running = new Map<string, Running>();
  readonly #subscriptions: WatchSubscription[] = [];
  #synced = 0;
  #expectedSyncs = 0;
  #started = false;

  constructor(options: ManagerOptions) {
    this.#options = options;
  }

  add(controller: Controller): void {
    if (this.#started) throw new Error(`controller ${controller.name} added after the manager started`);
    this.#controllers.push(controller);
  }

  /** True once every watch delivered its first full list. */
  get synced(): boolean {
    return this.#started && this.#synced >= this.#expectedSyncs;
  }

  get started(): boolean {
    return this.#started;
  }

  /** Queues `name` for `controller` now (external triggers: gossip state, membership). */
  enqueue(controller: string, name: string, afterMs = 0): void {
    const running = this.#running.get(controller);
    if (running === undefined) return;
    if (afterMs > 0) running.queue.addAfter(name, afterMs);
    else running.queue.add(name);
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    for (const controller of this.#controllers) {
      const queue = new WorkQueue({
        baseBackoffMs: this.#options.baseBackoffMs,
        maxBackoffMs: this.#options.maxBackoffMs,
      });
      this.#running.set(controller.name, { controller, queue, worker: this.#work(controller, queue) });
      this.#watch(controller.kind, {}, (object) => [object.metadata.name], queue);
      for (const secondary of controller.watches ?? []) {
        this.#watch(
          secondary.kind,
          { namespace: secondary.namespace, labelSelector: secondary.labelSelector },
          secondary.map,
          queue,
        );
      }
    }
  }

  #watch(
    kind: ResourceKind,
    filter: { namespace?: string; labelSelector?: string },
    map: (object: KubeObject) => readonly string[],
    queue: WorkQueue,
  ): void {
    this.#expectedSyncs += 1;
    let firstSync = true;
    const enqueue = (object: KubeObject): void => {
      try {
        for (const key of map(object)) queue.add(key);
      } catch (error) {
        this.#options.logger.warn(
          { kind: kind.kind, name: object.metadata?.name, error: errorFields(error) },
          'cannot map a watch event to reconcile keys',
        );
      }
    };
    const subscription = this.#options.store.watch(kind, {
      ...(filter.namespace !== undefined ? { namespace: filter.namespace } : {}),
      ...(filter.labelSelector !== undefined ? { labelSelector: filter.labelSelector } : {}),
      onEvent: (event) => enqueue(event.object),
      onSynced: (items) => {
        // A relist is a resync: every current object is reconciled again (level-based, nothing is missed).
        for (const item of items) enqueue(item);
        if (firstSync) {
          firstSync = false;
          this.#synced += 1;
        }
      },
      onRestart: (reason, error) => {
        this.#options.logger.warn(
          { kind: kind.kind, reason, ...(error ? { error: errorFields(error) } : {}) },
          'watch restarted',
        );
      },
    });
    this.#subscriptions.push(subscription);
  }

  async #work(controller: Controller, queue: WorkQueue): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const started = Date.now();
      try {
        const result = await inSpan(
          this.#options.tracer,
          `reconcile ${controller.name}`,
          { 'grid.controller': controller.name, 'k8s.object.name': key },
          () => controller.reconcile(key),
        );
        queue.forget(key);
        if (result.requeueAfterMs !== undefined && result.requeueAfterMs > 0)
          queue.addAfter(key, result.requeueAfterMs);
        this.#options.onReconcile?.(controller.name, 'success', Date.now() - started);
      } catch (error) {
        if (error instanceof TerminalError) {
          queue.forget(key);
          this.#options.logger.warn(
            { controller: controller.name, name: key, error: errorFields(error) },
            'reconcile failed permanently; waiting for the object to change',
          );
          this.#options.onReconcile?.(controller.name, 'terminal', Date.now() - started);
        } else {
          const delay = queue.addRateLimited(key);
          this.#options.logger.warn(
            { controller: controller.name, name: key, retryInMs: delay, error: errorFields(error) },
            'reconcile failed; retrying with backoff',
          );
          this.#options.onReconcile?.(controller.name, 'error', Date.now() - started);
        }
      } finally {
        queue.done(key);
      }
    }
  }

  /**
   * Stops dequeuing at once; a reconcile in flight runs to its end (its status write lands) for up to `deadlineMs`,
   * then is abandoned: reconciles are level-based, so the next leader redoes whatever it left half done.
   */
  async stop(deadlineMs = Infinity): Promise<void> {
    for (const running of this.#running.values()) running.queue.shutDown();
    // Closing a watch is inside the deadline too: on the Kubernetes store it waits for the watch request to end,
    // which can outlast the operator's whole 10 s shutdown deadline. The store's own close
    // (after this) ends whatever is still open.
    let watchesOpen = true;
    const watchesClosed = Promise.all(this.#subscriptions.splice(0).map((s) => s.close())).finally(() => {
      watchesOpen = false;
    });
    const running = [...this.#running.values()];
    this.#running.clear();
    const busy = new Set(running.map((r) => r.controller.name));
    const finished = Promise.all([
      watchesClosed,
      ...running.map((r) => r.worker.finally(() => busy.delete(r.controller.name))),
    ]);
    try {
      await this.#settle(finished, busy, deadlineMs, () => watchesOpen);
    } finally {
      await Promise.all(
        running.map(async (r) => {
          try {
            await r.controller.close?.();
          } catch (error) {
            this.#options.logger.warn(
              { controller: r.controller.name, error: errorFields(error) },
              'controller close failed',
            );
          }
        }),
      );
    }
  }

  async #settle(
    finished: Promise<unknown>,
    busy: Set<string>,
    deadlineMs: number,
    watchesOpen: () => boolean,
  ): Promise<void> {
    if (deadlineMs === Infinity) {
      await finished;
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      finished.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), deadlineMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
    if (timedOut)
      this.#options.logger.warn(
        { deadlineMs, controllers: [...busy], watchesOpen: watchesOpen() },
        'reconciles or watches still running at the stop deadline; abandoning them',
      );
  }
}
