// Assembles the gateway's SiteView from its environment (with gridServing enabled, the ConsumerGateway construct
// mounts the serving config and sets GRID_SERVING_CONFIG): the ServingStore on that file and the site signals poller
// with the client identity in GRID_SIGNALS_TLS_DIR. server.ts starts and closes it; grid_site_route reads the view.
import { join, resolve } from 'node:path';
import type { Registry } from 'prom-client';
import type { Logger } from '../../shared/log.ts';
import { GridSiteView } from './grid-site-view.ts';
import { createServingMetrics } from './serving-metrics.ts';
import { ServingStore } from './serving-store.ts';
import { SiteSignalsPoller, type SignalsTlsFiles } from './site-signals-poller.ts';
import type { SiteView } from './site-view.ts';

export interface ServingOptions {
  /** The serving config file overlay-sync writes (GRID_SERVING_CONFIG). */
  readonly file: string;
  /** The client identity the signals endpoints trust: the grid CA and a certificate it issued. */
  readonly tls: SignalsTlsFiles;
  readonly pollIntervalMs?: number;
  readonly staleAfterMs?: number;
  /** Safety re-read of the file; tests shorten it. */
  readonly filePollIntervalMs?: number;
}

export class ServingEnvError extends Error {}

function positiveMs(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw) || value < min || value > max)
    throw new ServingEnvError(
      `${name} must be a whole number of milliseconds from ${min} to ${max} (got "${raw.slice(0, 40)}")`,
    );
  return value;
}

/** The serving options the environment asks for, or undefined when GRID_SERVING_CONFIG is unset. */
export function servingOptionsFromEnv(env: NodeJS.ProcessEnv): ServingOptions | undefined {
  const file = env['GRID_SERVING_CONFIG'];
  if (file === undefined || file === '') return undefined;
  const dir = env['GRID_SIGNALS_TLS_DIR'];
  if (dir === undefined || dir === '') {
    throw new ServingEnvError(
      "GRID_SERVING_CONFIG is set but GRID_SIGNALS_TLS_DIR is not: the gateway polls every site's signals endpoint with a client certificate of the grid CA (ca.crt, tls.crt, tls.key in that directory)",
    );
  }
  const pollIntervalMs = positiveMs(env, 'GRID_SIGNALS_POLL_INTERVAL_MS', 100, 600_000);
  const staleAfterMs = positiveMs(env, 'GRID_SIGNALS_STALE_AFTER_MS', 100, 3_600_000);
  return {
    file: resolve(file),
    tls: { caFile: join(dir, 'ca.crt'), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') },
    ...(pollIntervalMs !== undefined ? { pollIntervalMs } : {}),
    ...(staleAfterMs !== undefined ? { staleAfterMs } : {}),
  };
}

export interface SiteViewService {
  readonly view: SiteView;
  readonly store: ServingStore;
  readonly poller: SiteSignalsPoller;
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createSiteViewService(
  options: ServingOptions,
  deps: { readonly logger: Logger; readonly registry: Registry; readonly onRefusedAges?: (count: number) => void },
): SiteViewService {
  const metrics = createServingMetrics(deps.registry);
  const logger = deps.logger;
  const store = new ServingStore({
    file: options.file,
    logger,
    metrics,
    ...(options.filePollIntervalMs !== undefined ? { pollIntervalMs: options.filePollIntervalMs } : {}),
  });
  const poller = new SiteSignalsPoller({
    tls: options.tls,
    logger,
    metrics,
    ...(deps.onRefusedAges !== undefined ? { onRefusedAges: deps.onRefusedAges } : {}),
    ...(options.pollIntervalMs !== undefined ? { intervalMs: options.pollIntervalMs } : {}),
    ...(options.staleAfterMs !== undefined ? { staleAfterMs: options.staleAfterMs } : {}),
  });
  const view = new GridSiteView(store, poller);
  return {
    view,
    store,
    poller,
    async start() {
      // A missing or invalid file at start leaves the view empty and keeps watching, like the overlay.
      await store.start();
      poller.start();
    },
    async close() {
      store.close();
      await poller.close();
    },
  };
}
