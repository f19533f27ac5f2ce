// `--workers N`: one gateway process that serves its listeners from N worker threads, so a pod given N CPUs gets
// N cores of throughput. Each worker (worker.ts) runs the whole gateway (startGateway) with its own overlay snapshot,
// filter state, upstream pools and metrics registry, and binds every listener with SO_REUSEPORT: the kernel spreads
// new connections over the workers' sockets, and nothing sits between a connection and its worker.
//
// Why worker threads with SO_REUSEPORT, not node:cluster or child processes: one process keeps PID 1 as it is (the
// signals reach only this thread, which fans them out; no orphaned children, no signal races with a terminal's
// process group), the supervisor never touches a connection (cluster's default round-robin makes the primary accept
// every connection and pass its handle over IPC; its SCHED_NONE shares one socket and wakes workers unevenly), and
// the workers' request paths are as isolated as processes (one V8 isolate and event loop each). The cost: a fatal
// V8 error (out of memory) ends the whole process, which Kubernetes then restarts like any crash.
//
// This thread is the supervisor: it runs the admin listener alone (/metrics sums the workers' registries, with the
// process metrics collected here once for the whole process; the event-loop delay is the workers' loops, the greatest
// maximum of them, not this thread's; /readyz is ready only while every worker is), relays
// SIGHUP, drains every worker on SIGTERM with the same deadlines as one process, and restarts a worker that dies.
//
// Mounted files (caller keys, credentials, TLS) are followed by every worker itself, not by this thread: each worker
// holds its own copy of the material on its own request path, so each must load it anyway, and a worker that
// watches needs no message from here, keeps working while this thread is busy (a /metrics sum), and picks the files
// up again by itself when it is restarted. The cost is one watch and one read per worker per change, which is small.
import { Worker } from 'node:worker_threads';
import { AggregatorRegistry, Registry } from 'prom-client';
import { collectProcessMetrics } from '../shared/runtime-metrics.ts';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { parseListenAddress, startAdminServer } from '../shared/admin-server.ts';
import type { AdminServer } from '../shared/admin-server.ts';
import { errorFields } from '../shared/log.ts';
import type { ServingOptions } from './site-route/site-view-service.ts';
import type { Logger } from '../shared/log.ts';
import type { GatewayRole, ResolvedConfig } from './config.ts';
import type { ListenerInfo } from './server.ts';

/** The worker thread's module: worker.ts from the repository, worker.js in the compiled package (build-package.ts). */
const WORKER_SCRIPT = new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js', import.meta.url);

/** What a worker is started with (structured-cloned into the thread). */
export interface WorkerData {
  readonly index: number;
  readonly resolved: ResolvedConfig;
  readonly configDir: string;
  readonly drainDelayMs: number;
  /** Each worker warms its own request path before it reports ready (warmup.ts). */
  readonly warmupRequests: number;
  /** Each worker builds its own SiteView from the same serving config and polls the sites itself. */
  readonly serving?: ServingOptions;
}

export type WorkerMessage =
  | {
      readonly type: 'started';
      readonly listeners: readonly ListenerInfo[];
      readonly ready: boolean;
      readonly revision: string | null;
    }
  | { readonly type: 'failed'; readonly message: string }
  | { readonly type: 'state'; readonly ready: boolean; readonly revision: string | null }
  | {
      readonly type: 'metrics';
      readonly id: number;
      readonly metrics?: MetricObjectWithValues<MetricValue<string>>[];
      readonly error?: string;
    };

export type SupervisorMessage =
  | { readonly type: 'metrics'; readonly id: number }
  | { readonly type: 'reload-files' }
  | { readonly type: 'close' };

/**
 * Restarts allowed inside RESTART_WINDOW_MS before the gateway gives up and exits 1 (Kubernetes then restarts the
 * pod and its restart count shows the crash loop): a worker that dies once (a bug one request hit) is replaced in
 * about its startup time, one that dies on every start does not hide behind restarts.
 */
export const MAX_RESTARTS = 5;
export const RESTART_WINDOW_MS = 60_000;

/** Counts worker restarts in a sliding window: allow() records one and says whether it is within the budget. */
export class RestartBudget {
  readonly #times: number[] = [];
  allow(nowMs: number): boolean {
    while (this.#times.length > 0 && nowMs - this.#times[0]! >= RESTART_WINDOW_MS) this.#times.shift();
    if (this.#times.length >= MAX_RESTARTS) return false;
    this.#times.push(nowMs);
    return true;
  }
}
/** A worker that does not answer a metrics request within this is a failed scrape, never a partial sum. */
const METRICS_TIMEOUT_MS = 2_000;
/**
 * Beyond a worker's own close bounds (drain delay, then in-flight requests up to shutdown_timeout_secs): a worker
 * still running then is ended and the exit code is 1.
 */
const CLOSE_MARGIN_MS = 3_000;

export interface WorkerPoolOptions {
  readonly workers: number;
  readonly resolved: ResolvedConfig;
  readonly configDir: string;
  readonly logger: Logger;
  readonly drainDelayMs: number;
  readonly warmupRequests: number;
  readonly serving?: ServingOptions;
  /** Called once when the pool gives up (a worker crash loop); the process should exit 1. */
  readonly onFatal: (message: string) => void;
}

export interface WorkerPool {
  readonly role: GatewayRole;
  readonly listeners: readonly ListenerInfo[];
  readonly adminPort: number | undefined;
  isReady(): boolean;
  /** SIGHUP: every worker re-reads its mounted files now. */
  reloadFiles(): Promise<void>;
  /** Drains every worker (SIGTERM); resolves false when a worker had to be ended at the deadline. */
  close(): Promise<boolean>;
}

/**
 * Why `resolved` cannot run on several workers, or undefined. budget_enforce's per-key windows are counted in each
 * worker's memory and a key's connections land on any worker, so N workers would let a key through up to N times
 * its limit: refused rather than silently loosened. (Spend budgets are fine: every worker polls the same converged
 * budgets, and each reports its own spend as its own epoch, which the operator sums.)
 */
export function workersProblem(resolved: ResolvedConfig, workers: number): string | undefined {
  if (workers === 1) return undefined;
  for (const { listener, filters } of resolved.listeners) {
    const limited = filters.find(
      (f) =>
        f.filter === 'budget_enforce' && (f.requests_per_minute !== undefined || f.tokens_per_minute !== undefined),
    );
    if (limited !== undefined) {
      return `listener ${listener.name}: budget_enforce requests_per_minute/tokens_per_minute are counted per worker, so --workers ${workers} would allow each key up to ${workers} times its limit; run one worker per pod (more replicas) or drop the per-key limits`;
    }
  }
  return undefined;
}

interface Slot {
  index: number;
  worker: Worker | undefined;
  ready: boolean;
  revision: string | null;
}

/** The listeners' addresses with the ports the first worker bound, so every other worker binds the same ports. */
function pinPorts(resolved: ResolvedConfig, bound: readonly ListenerInfo[]): ResolvedConfig {
  return {
    ...resolved,
    listeners: resolved.listeners.map((l) => {
      const port = bound.find((b) => b.name === l.listener.name)?.port;
      if (port === undefined) return l;
      const { host } = parseListenAddress(l.listener.address);
      return { ...l, listener: { ...l.listener, address: `${host.includes(':') ? `[${host}]` : host}:${port}` } };
    }),
  };
}

/** Starts the workers one after the other (the first binds any port 0, the rest bind the same), then the admin listener. */
export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const { logger } = options;
  // Process metrics (CPU, memory, descriptors) are the whole process's, so they are collected once, here, from the
  // start: a worker's registry has only the gateway's own metrics.
  const processRegistry = new Registry();
  collectProcessMetrics(processRegistry, 'grid_gateway_');
  // Workers run without the admin listener (it is this thread's) and without process metrics (collected here).
  let resolved: ResolvedConfig = { ...options.resolved, config: { ...options.resolved.config, admin: undefined } };
  const slots: Slot[] = Array.from({ length: options.workers }, (_, index) => ({
    index,
    worker: undefined,
    ready: false,
    revision: null,
  }));
  let closing = false;
  let gaveUp = false;
  const restarts = new RestartBudget();
  let nextMetricsId = 0;
  const pendingMetrics = new Map<number, (message: Extract<WorkerMessage, { type: 'metrics' }>) => void>();

  function spawn(slot: Slot): Promise<readonly ListenerInfo[]> {
    const data: WorkerData = {
      index: slot.index,
      resolved,
      configDir: options.configDir,
      drainDelayMs: options.drainDelayMs,
      warmupRequests: options.warmupRequests,
      ...(options.serving !== undefined ? { serving: options.serving } : {}),
    };
    const worker = new Worker(WORKER_SCRIPT, { workerData: data });
    slot.worker = worker;
    slot.ready = false;
    // Settled as soon as the worker listens, or once it has exited without listening (never before: a restart that
    // fails must find the slot empty to try again).
    return new Promise((resolveStart, rejectStart) => {
      let started = false;
      let failure: string | undefined;
      worker.on('message', (message: WorkerMessage) => {
        switch (message.type) {
          case 'started':
            started = true;
            slot.ready = message.ready;
            slot.revision = message.revision;
            resolveStart(message.listeners);
            return;
          case 'failed':
            failure = message.message;
            return;
          case 'state':
            slot.ready = message.ready;
            slot.revision = message.revision;
            return;
          case 'metrics':
            pendingMetrics.get(message.id)?.(message);
            return;
        }
      });
      worker.on('error', (error) => {
        logger.error({ worker: slot.index, error: errorFields(error) }, 'worker failed');
        failure ??= errorFields(error).message;
      });
      worker.on('exit', (code) => {
        if (slot.worker !== worker) return;
        slot.worker = undefined;
        slot.ready = false;
        if (!started) {
          rejectStart(new Error(failure ?? `worker ${slot.index} exited with code ${code} before it listened`));
          return;
        }
        if (closing) return;
        replace(slot, code);
      });
    });
  }

  function replace(slot: Slot, code: number): void {
    if (!restarts.allow(Date.now())) {
      if (!gaveUp) {
        gaveUp = true;
        options.onFatal(
          `worker ${slot.index} exited with code ${code}; ${MAX_RESTARTS} workers restarted within ${RESTART_WINDOW_MS / 1000} s, giving up`,
        );
      }
      return;
    }
    logger.error({ worker: slot.index, exit_code: code }, 'worker exited; starting a new one');
    spawn(slot).then(
      () => logger.info({ worker: slot.index }, 'worker restarted'),
      (error: unknown) => {
        logger.error({ worker: slot.index, error: errorFields(error) }, 'worker restart failed');
        if (!closing) replace(slot, 1);
      },
    );
  }

  async function stopAll(): Promise<void> {
    closing = true;
    await Promise.all(slots.map((s) => s.worker?.terminate()));
  }

  let listeners: readonly ListenerInfo[];
  try {
    listeners = await spawn(slots[0]!);
    resolved = pinPorts(resolved, listeners);
    await Promise.all(slots.slice(1).map((slot) => spawn(slot)));
  } catch (error) {
    await stopAll();
    throw error;
  }

  /** Every worker's registry plus the process metrics, summed (or as each metric's `aggregator` says) into one view. */
  async function aggregate(): Promise<Registry> {
    const live = slots.map((s) => s.worker);
    if (live.some((w) => w === undefined)) throw new Error('a worker is restarting');
    const parts = await Promise.all(
      live.map(
        (worker) =>
          new Promise<MetricObjectWithValues<MetricValue<string>>[]>((resolvePart, rejectPart) => {
            const id = nextMetricsId++;
            const timer = setTimeout(() => {
              pendingMetrics.delete(id);
              rejectPart(new Error('a worker did not answer for its metrics'));
            }, METRICS_TIMEOUT_MS);
            pendingMetrics.set(id, (message) => {
              clearTimeout(timer);
              pendingMetrics.delete(id);
              if (message.metrics === undefined) rejectPart(new Error(message.error ?? 'metrics failed'));
              else resolvePart(message.metrics);
            });
            worker!.postMessage({ type: 'metrics', id } satisfies SupervisorMessage);
          }),
      ),
    );
    return AggregatorRegistry.aggregate([...parts, await processRegistry.getMetricsAsJSON()]);
  }

  const isReady = (): boolean => !closing && slots.every((s) => s.worker !== undefined && s.ready);
  const adminAddress = options.resolved.config.admin?.address ?? options.resolved.config.admin?.metrics_address;
  let admin: AdminServer | undefined;
  if (adminAddress !== undefined) {
    try {
      admin = await startAdminServer({
        address: adminAddress,
        registry: { contentType: processRegistry.contentType, metrics: async () => (await aggregate()).metrics() },
        isReady,
        isLive: () => !gaveUp,
        status: () => ({
          role: options.resolved.role,
          ready: isReady(),
          accepted_revision: slots[0]?.revision ?? null,
          listeners,
          workers: slots.map((s) => ({
            index: s.index,
            running: s.worker !== undefined,
            ready: s.ready,
            accepted_revision: s.revision,
          })),
        }),
      });
    } catch (error) {
      await stopAll();
      throw error;
    }
  }

  const shutdownMs = (options.resolved.config.shutdown_timeout_secs ?? 5) * 1000;
  let closed: Promise<boolean> | undefined;
  return {
    role: options.resolved.role,
    listeners,
    adminPort: admin?.port,
    isReady,
    reloadFiles() {
      for (const s of slots) s.worker?.postMessage({ type: 'reload-files' } satisfies SupervisorMessage);
      return Promise.resolve();
    },
    close() {
      closed ??= drain();
      return closed;
    },
  };

  async function drain(): Promise<boolean> {
    closing = true;
    const deadlineMs = options.drainDelayMs + shutdownMs + CLOSE_MARGIN_MS;
    let inTime = true;
    await Promise.all(
      slots.map(async (slot) => {
        const worker = slot.worker;
        if (worker === undefined) return;
        const exited = new Promise<void>((resolveExit) => worker.once('exit', () => resolveExit()));
        worker.postMessage({ type: 'close' } satisfies SupervisorMessage);
        const timer = setTimeout(() => {
          inTime = false;
          logger.error({ worker: slot.index, deadline_ms: deadlineMs }, 'worker did not finish closing; ending it');
          void worker.terminate();
        }, deadlineMs);
        await exited;
        clearTimeout(timer);
      }),
    );
    await admin?.close();
    return inTime;
  }
}
