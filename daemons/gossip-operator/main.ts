/**
 * gossip-operator: one process per site. Wiring only: configuration, logger, the operator, and a graceful
 * shutdown on SIGTERM/SIGINT with a deadline: not ready at once, a drain delay while the listeners still answer, then
 * controllers, listeners, the SWIM member leaves, the Lease is released, exit 0. A second signal exits at once.
 */
import { tracerFromEnv } from '../shared/otel-env.ts';
import { constants } from 'node:os';
import { createLogger, errorFields } from '../shared/log.ts';
import { ConfigError, parseConfig, USAGE } from './config.ts';
import { startOperator } from './operator.ts';
import { usageErrorLine } from '../shared/usage-error.ts';

const SHUTDOWN_DEADLINE_MS = 10_000;
/**
 * After SIGTERM the operator answers /readyz 503 at once but keeps every listener open this long (as the gateway
 * does): the time a terminating pod's Service endpoints take to drop it, so peers, gateways and redeemers stop being
 * sent here before the listeners close. Short, so a stop stays inside `podman stop`'s and the pod's grace.
 */
const DRAIN_DELAY_MS = 600;
/**
 * Reconciles in flight get this long to finish their status writes. Short: a reconcile can be waiting on a probe of
 * a site that is already gone, and the whole stop (this, the listeners' grace, the SWIM leave, the Lease release)
 * should end within 3 s; a reconcile cut here is redone by the next start, as every reconcile is. A 5 s bound
 * was measured to add up to the 10 s deadline (exit 1).
 */
const RECONCILE_DEADLINE_MS = 1_000;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  let config;
  try {
    config = parseConfig(argv, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(usageErrorLine('gossip-operator', error.message, USAGE));
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger({ name: 'gossip-operator', level: config.logLevel });
  let operator: Awaited<ReturnType<typeof startOperator>>;
  let tracing: ReturnType<typeof tracerFromEnv>;
  try {
    tracing = tracerFromEnv(process.env, 'gossip-operator', 'agn-gossip-operator');
  } catch (error) {
    process.stderr.write(`gossip-operator: ${(error as Error).message}\n`);
    process.exit(1);
  }
  if (tracing !== undefined) logger.info({ endpoint: tracing.endpoint }, 'tracing: exporting spans over OTLP');
  try {
    operator = await startOperator({
      config,
      logger,
      defaultMetrics: true,
      onLeadershipLost: () => process.exit(1),
      ...(tracing === undefined ? {} : { tracer: tracing.tracer }),
    });
  } catch (error) {
    logger.fatal({ error: errorFields(error) }, 'gossip-operator failed to start');
    process.exit(1);
  }
  logger.info(
    {
      site: config.site,
      admin: `${operator.admin.host}:${operator.admin.port}`,
      // Which access the dashboard runs with (off, open or token), so a reader of the log knows who can open it.
      dashboard: config.dashboard.access,
      ...(operator.enrollment !== undefined
        ? { enrollment: `${operator.enrollment.host}:${operator.enrollment.port}` }
        : {}),
    },
    'gossip-operator running',
  );
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal means "now": the operator stops without finishing its drain (128 + signal, as a shell reports).
      logger.warn({ signal }, 'second signal during shutdown; exiting now');
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      logger.error({ deadlineMs: SHUTDOWN_DEADLINE_MS }, 'shutdown deadline passed; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    operator.stop({ drainDelayMs: DRAIN_DELAY_MS, reconcileDeadlineMs: RECONCILE_DEADLINE_MS }).then(
      // The spans of the last reconciles are sent before the process ends.
      () => (tracing?.close() ?? Promise.resolve()).catch(() => undefined).then(() => process.exit(0)),
      (error: unknown) => {
        logger.error({ error: errorFields(error) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // The enrollment endpoint follows its certificate and grid CA files on disk; SIGHUP re-reads them at once. Without
  // the endpoint SIGHUP keeps its default meaning.
  const enrollment = operator.enrollment;
  if (enrollment !== undefined) {
    process.on('SIGHUP', () => {
      // A bad file is logged by the loader itself (once per bad version), naming the file.
      enrollment.reload().catch(() => undefined);
    });
  }
  process.on('unhandledRejection', (reason) => logger.error({ error: errorFields(reason) }, 'unhandled rejection'));
}

void main();
