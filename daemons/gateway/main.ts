// The gateway program: `node daemons/gateway/main.ts --config FILE [--workers N]`. The config decides the role
// (consumer/edge with intelligent_route, or provider with peer_identity_trust -> provider_route). main only wires and
// handles signals: SIGTERM/SIGINT drain and exit, SIGHUP re-reads the mounted files at once (they are also followed
// on disk, so a rotated Secret takes effect without it). `--workers N` (N > 1) serves the
// listeners from N worker threads (workers.ts); 1, the default, is the single-threaded gateway.
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger, errorFields } from '../shared/log.ts';
import { extensionKeyPointers } from '../../schemas/gateway/praxis-rules.ts';
import { ConfigError, loadConfigFile } from './config.ts';
import { startGateway } from './server.ts';
import { TracingEnvError, checkTracingEnv, tracingFromEnv } from './tracing/tracing.ts';
import { ServingEnvError, servingOptionsFromEnv } from './site-route/site-view-service.ts';
import { WARMUP_REQUESTS } from './warmup.ts';
import { MAX_GATEWAY_WORKERS as MAX_WORKERS } from '../../schemas/gateway/workers.ts';
import { startWorkerPool, workersProblem } from './workers.ts';
import type { WorkerPool } from './workers.ts';

/** What main runs: one gateway, or a pool of worker threads (close resolves false when a worker missed its deadline). */
type Serving = WorkerPool;

/**
 * After SIGTERM the gateway reports not ready at once but keeps accepting this long: a terminating pod leaves its
 * Service's endpoints when its deletion starts, and this is the time the proxies get to stop sending it new
 * connections before its listener closes. Short, so a stop stays well inside the 30 s grace period.
 */
const DRAIN_DELAY_MS = 600;

const USAGE = `usage: node daemons/gateway/main.ts --config FILE [--workers N]
  --config FILE  the gateway config (YAML, or JSON when the name ends in .json)
  --workers N    worker threads serving the listeners, 1..${MAX_WORKERS} (default 1); give the pod N CPUs
                 (daemons/gateway/README.md "Workers"); with local_load each worker steers by its own in-flight
                 requests (daemons/gateway/README.md "Local load")
The caller keys, credential and TLS files the config names are followed on disk (a changed file is in force about
0.3 s later; a bad one keeps the previous); SIGHUP re-reads them at once (daemons/gateway/README.md "Mounted files").`;
const USAGE_LINE = 'usage: node daemons/gateway/main.ts --config FILE [--workers N]';

/** The worker count of `--workers`, or a usage error (one line). */
function parseWorkers(text: string | undefined): number | string {
  if (text === undefined) return 1;
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_WORKERS)
    return `--workers must be a whole number from 1 to ${MAX_WORKERS}, got "${text.slice(0, 32)}"`;
  return n;
}

async function main(): Promise<number> {
  const logger = createLogger({ name: 'gateway' });
  let args;
  try {
    args = parseArgs({
      options: { config: { type: 'string' }, workers: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    });
  } catch (error) {
    process.stderr.write(`gateway: ${(error as Error).message.split('\n')[0]} (${USAGE_LINE})\n`);
    return 2;
  }
  if (args.values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const configPath = args.values.config;
  if (configPath === undefined) {
    process.stderr.write(`gateway: --config FILE is required (${USAGE_LINE})\n`);
    return 2;
  }
  const workers = parseWorkers(args.values.workers);
  if (typeof workers === 'string') {
    process.stderr.write(`gateway: ${workers} (${USAGE_LINE})\n`);
    return 2;
  }
  // AGN_GATEWAY_WARMUP_REQUESTS overrides the warm-up before ready (0 turns it off: faster start, slow first seconds).
  const warmupEnv = process.env['AGN_GATEWAY_WARMUP_REQUESTS'];
  const warmupRequests = warmupEnv === undefined ? WARMUP_REQUESTS : Number(warmupEnv);
  if (!Number.isSafeInteger(warmupRequests) || warmupRequests < 0) {
    process.stderr.write(
      `gateway: AGN_GATEWAY_WARMUP_REQUESTS must be a non-negative integer, got "${warmupEnv}" (${USAGE_LINE})\n`,
    );
    return 2;
  }
  const path = resolve(configPath);
  let fatal: ((message: string) => void) | undefined;
  let serving: Serving;
  let hasServing = false;
  try {
    const resolved = await loadConfigFile(path);
    const problem = workersProblem(resolved, workers);
    if (problem !== undefined) throw new ConfigError(`${path}: ${problem}`);
    const extensions = extensionKeyPointers(resolved.config);
    // Accepted, never silently: Praxis AI would refuse this file (daemons/gateway/README.md lists the extensions).
    if (extensions.length > 0)
      logger.warn({ config: path, extension_keys: extensions }, 'config uses extension keys Praxis AI refuses');
    const servingOptions = servingOptionsFromEnv(process.env);
    hasServing = servingOptions !== undefined;
    const options = {
      configDir: dirname(path),
      logger,
      drainDelayMs: DRAIN_DELAY_MS,
      warmupRequests,
      ...(servingOptions !== undefined ? { serving: servingOptions } : {}),
    };
    if (workers === 1) {
      // Each worker thread makes its own (worker.ts): spans are exported from the thread that served the request.
      const tracing = tracingFromEnv(process.env, resolved.role);
      if (tracing !== undefined) logger.info({ endpoint: tracing.endpoint }, 'tracing: exporting spans over OTLP');
      const gateway = await startGateway(resolved, { ...options, ...(tracing === undefined ? {} : { tracing }) });
      // One process exits 0 once its close settles, as it always has.
      serving = {
        ...gateway,
        isReady: () => gateway.isReady(),
        reloadFiles: () => gateway.reloadFiles(),
        close: () =>
          gateway.close().then(
            () => true,
            () => true,
          ),
      };
    } else {
      checkTracingEnv(process.env);
      serving = await startWorkerPool({ ...options, workers, resolved, onFatal: (message) => fatal?.(message) });
    }
  } catch (error) {
    const message =
      error instanceof ConfigError || error instanceof ServingEnvError || error instanceof TracingEnvError
        ? error.message
        : `startup failed: ${errorFields(error).message}`;
    logger.fatal({ config: path }, message);
    process.stderr.write(`gateway: ${message}\n`);
    return 1;
  }
  for (const l of serving.listeners)
    logger.info(
      {
        listener: l.name,
        host: l.host,
        port: l.port,
        tls: l.tls,
        role: serving.role,
        ...(workers > 1 ? { workers } : {}),
      },
      'listening',
    );
  if (serving.adminPort !== undefined) logger.info({ admin_port: serving.adminPort }, 'admin listening');
  if (!serving.isReady())
    logger.warn(
      {},
      hasServing
        ? 'not ready: no valid routing overlay or serving config yet'
        : 'not ready: no valid routing overlay yet',
    );

  const instance = serving;
  return new Promise<number>((resolveExit) => {
    const stop = (reason: Record<string, string>, code: number): void => {
      logger.info(reason, 'shutting down');
      instance.close().then(
        (inTime) => resolveExit(inTime ? code : 1),
        () => resolveExit(1),
      );
    };
    fatal = (message) => {
      logger.fatal({}, message);
      process.stderr.write(`gateway: ${message}\n`);
      stop({ reason: 'worker crash loop' }, 1);
    };
    process.once('SIGTERM', () => stop({ signal: 'SIGTERM' }, 0));
    process.once('SIGINT', () => stop({ signal: 'SIGINT' }, 0));
    process.on('SIGHUP', () => {
      logger.info({ signal: 'SIGHUP' }, 're-reading the mounted files (caller keys, credentials, TLS)');
      void instance.reloadFiles();
    });
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`gateway: ${errorFields(error).message}\n`);
    process.exitCode = 1;
  },
);
