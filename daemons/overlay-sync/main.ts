// overlay-sync entry point: wiring only. Sidecar mode serves /livez, /readyz, /status and /metrics and runs
// until SIGTERM; init-container mode (--once / OVERLAY_SYNC_ONCE) exits 0 as soon as a valid overlay file is
// in place, so the gateway container starts ready.

import { pathToFileURL } from 'node:url';
import { startAdminServer, type AdminServer } from '../shared/admin-server.ts';
import { createLogger, errorFields, type Logger } from '../shared/log.ts';
import { createResourceStore } from '../shared/resource-store/index.ts';
import type { ResourceStore } from '../shared/resource-store/types.ts';
import { ConfigError, parseConfig, USAGE, type OverlaySyncConfig } from './config.ts';
import { OverlaySyncMetrics } from './metrics.ts';
import { OverlaySync } from './sync.ts';
import { usageErrorLine } from '../shared/usage-error.ts';

export interface RunningOverlaySync {
  readonly sync: OverlaySync;
  readonly admin: AdminServer | undefined;
  /** Resolves with the process exit code once the daemon has stopped. */
  readonly finished: Promise<number>;
  stop(): Promise<void>;
}

export async function startOverlaySync(config: OverlaySyncConfig, log: Logger): Promise<RunningOverlaySync> {
  const store: ResourceStore = await createResourceStore(
    config.store.backend === 'local'
      ? { ...config.store, onProblem: (message) => log.warn({ detail: message }, 'local store problem') }
      : config.store,
  );
  const metrics = new OverlaySyncMetrics();
  const sync = new OverlaySync({ target: config, store, metrics, log });
  let admin: AdminServer | undefined;
  if (!config.once) {
    admin = await startAdminServer({
      address: config.healthAddr,
      registry: metrics.registry,
      isReady: () => sync.isReady(),
      status: () => sync.statusDocument(),
    });
    log.info({ health_addr: `${admin.host}:${admin.port}`, health_port: admin.port }, 'health server listening');
  }

  let resolveFinished!: (code: number) => void;
  const finished = new Promise<number>((resolve) => {
    resolveFinished = resolve;
  });
  // The store's file watchers do not hold the event loop open; without this an init container waiting for
  // its first ConfigMap would simply exit 0 with no file.
  const keepAlive = setInterval(() => undefined, 60_000);
  let stopping: Promise<void> | undefined;
  const stop = (code = 0): Promise<void> => {
    stopping ??= (async () => {
      clearInterval(keepAlive);
      await sync.stop();
      await store.close();
      await admin?.close();
      resolveFinished(code);
    })();
    return stopping;
  };

  if (config.once) {
    sync.onProcessed((status) => {
      if (status.state === 'cold' || status.lastOutcome === undefined) return;
      if (status.state === 'ready_degraded') {
        log.warn(
          { degraded_reason: status.degradedReason, revision: status.writtenRevision },
          'ConfigMap unusable; leaving the last-known-good file for the gateway',
        );
      }
      log.info({ revision: status.writtenRevision }, 'init mode: overlay file in place, exiting');
      void stop(0);
    });
  }
  try {
    await sync.start();
  } catch (error) {
    // For example an output directory that cannot be created: release the port and timers, then report.
    await stop(1);
    throw error;
  }
  log.info(
    {
      contract: config.contract,
      configmap: `${config.namespace}/${config.configMap}`,
      data_key: config.dataKey,
      output: config.output,
      store: store.backend,
      mode: config.once ? 'init' : 'sidecar',
    },
    'overlay-sync started',
  );
  return { sync, admin, finished, stop: () => stop(config.once ? 1 : 0) };
}

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let config: OverlaySyncConfig;
  try {
    config = parseConfig(argv, env);
  } catch (error) {
    if (error instanceof ConfigError) {
      // The one stderr line and nothing on stdout: no logger exists yet, so no fatal log line either.
      process.stderr.write(usageErrorLine('overlay-sync', error.message, USAGE));
      return 2;
    }
    throw error;
  }
  const log = createLogger({ name: 'overlay-sync' });
  let running: RunningOverlaySync;
  try {
    running = await startOverlaySync(config, log);
  } catch (error) {
    log.fatal({ error: errorFields(error) }, 'overlay-sync failed to start');
    return 1;
  }
  const onSignal = (signal: NodeJS.Signals): void => {
    log.info({ signal }, 'stopping');
    void running.stop();
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  const code = await running.finished;
  process.off('SIGTERM', onSignal);
  process.off('SIGINT', onSignal);
  return code;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2), process.env).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`overlay-sync: ${errorFields(error).message}\n`);
      process.exitCode = 1;
    },
  );
}
