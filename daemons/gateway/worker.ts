// One worker thread of a gateway started with `--workers N` (workers.ts is the supervisor). It runs the same
// startGateway as a single-process gateway, with its own overlay store, filter state and metrics registry, binds the
// listeners with SO_REUSEPORT beside its siblings, and answers the supervisor: its state (ready, overlay revision),
// its metrics as JSON for the one /metrics view, SIGHUP's re-read of the mounted files, and close (the same drain as SIGTERM).
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger, errorFields } from '../shared/log.ts';
import { ConfigError } from './config.ts';
import { startGateway } from './server.ts';
import { tracingFromEnv } from './tracing/tracing.ts';
import type { GatewayInstance } from './server.ts';
import type { SupervisorMessage, WorkerData, WorkerMessage } from './workers.ts';

const port = parentPort;
if (port === null) throw new Error('daemons/gateway/worker.ts runs only as a worker thread of workers.ts');
const data = workerData as WorkerData;
const post = (message: WorkerMessage): void => port.postMessage(message);
const logger = createLogger({ name: 'gateway' }).child({ worker: data.index });

let gateway: GatewayInstance;
// The environment was checked by the supervisor before it started the workers (main.ts).
const tracing = tracingFromEnv(process.env, data.resolved.role);
try {
  gateway = await startGateway(data.resolved, {
    configDir: data.configDir,
    logger,
    drainDelayMs: data.drainDelayMs,
    reusePort: true,
    // The supervisor collects the process's metrics once; each worker reports its own event loop.
    processMetrics: false,
    eventLoopMetrics: true,
    warmupRequests: data.warmupRequests,
    ...(data.serving !== undefined ? { serving: data.serving } : {}),
    ...(tracing === undefined ? {} : { tracing }),
  });
} catch (error) {
  // The supervisor's caller words it as a single-process gateway would ("startup failed: …").
  post({ type: 'failed', message: error instanceof ConfigError ? error.message : errorFields(error).message });
  process.exit(1);
}
const instance = gateway;

const state = (): { ready: boolean; revision: string | null } => ({
  ready: instance.isReady(),
  revision: instance.overlay?.current()?.revision ?? null,
});
let told = JSON.stringify(state());
post({ type: 'started', listeners: instance.listeners.map((l) => ({ ...l })), ...state() });
const tellState = (): void => {
  const now = state();
  const key = JSON.stringify(now);
  if (key === told) return;
  told = key;
  post({ type: 'state', ...now });
};
// Told when it changes (an overlay or serving config accepted, close begun), not polled: an idle worker sleeps.
instance.onStateChange(tellState);

port.on('message', (message: SupervisorMessage) => {
  switch (message.type) {
    case 'metrics':
      instance.metrics.registry.getMetricsAsJSON().then(
        (metrics) => post({ type: 'metrics', id: message.id, metrics }),
        (error: unknown) => post({ type: 'metrics', id: message.id, error: errorFields(error).message }),
      );
      return;
    case 'reload-files':
      void instance.reloadFiles();
      return;
    case 'close':
      instance.close().then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ error: errorFields(error) }, 'close failed');
          process.exit(1);
        },
      );
      return;
  }
});
