// The gateway program: `node daemons/gateway/main.ts --config FILE`. The config decides the role (consumer/edge
// with intelligent_route, or provider with peer_identity_trust -> provider_route). main only wires and handles
// signals: SIGTERM/SIGINT drain and exit, SIGHUP re-reads credential files.
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger, errorFields } from '../shared/log.ts';
import { extensionKeyPointers } from '../../schemas/gateway/praxis-rules.ts';
import { ConfigError, loadConfigFile } from './config.ts';
import { startGateway } from './server.ts';
import { ServingEnvError, servingOptionsFromEnv } from './site-route/site-view-service.ts';
import { WARMUP_REQUESTS } from './warmup.ts';

/**
 * After SIGTERM the gateway reports not ready at once but keeps accepting this long: a terminating pod leaves its
 * Service's endpoints when its deletion starts, and this is the time the proxies get to stop sending it new
 * connections before its listener closes. Short, so a stop stays well inside the 30 s grace period.
 */
const DRAIN_DELAY_MS = 600;

const USAGE = 'usage: node daemons/gateway/main.ts --config FILE';

async function main(): Promise<number> {
  const logger = createLogger({ name: 'gateway' });
  let args;
  try {
    args = parseArgs({ options: { config: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true });
  } catch (error) {
    process.stderr.write(`gateway: ${(error as Error).message} (${USAGE})\n`);
    return 2;
  }
  if (args.values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const configPath = args.values.config;
  if (configPath === undefined) {
    process.stderr.write(`gateway: --config FILE is required (${USAGE})\n`);
    return 2;
  }
  // AGN_GATEWAY_WARMUP_REQUESTS overrides the warm-up before ready (0 turns it off: faster start, slow first seconds).
  const warmupEnv = process.env['AGN_GATEWAY_WARMUP_REQUESTS'];
  const warmupRequests = warmupEnv === undefined ? WARMUP_REQUESTS : Number(warmupEnv);
  if (!Number.isSafeInteger(warmupRequests) || warmupRequests < 0) {
    process.stderr.write(`gateway: AGN_GATEWAY_WARMUP_REQUESTS must be a non-negative integer, got "${warmupEnv}" (${USAGE})\n`);
    return 2;
  }
  const path = resolve(configPath);
  let gateway;
  try {
    const resolved = await loadConfigFile(path);
    const extensions = extensionKeyPointers(resolved.config);
    // Accepted, never silently: Praxis AI would refuse this file (daemons/gateway/README.md lists the extensions).
    if (extensions.length > 0) logger.warn({ config: path, extension_keys: extensions }, 'config uses extension keys Praxis AI refuses');
    const serving = servingOptionsFromEnv(process.env);
    gateway = await startGateway(resolved, { configDir: dirname(path), logger, drainDelayMs: DRAIN_DELAY_MS, warmupRequests, ...(serving !== undefined ? { serving } : {}) });
  } catch (error) {
    const message = error instanceof ConfigError || error instanceof ServingEnvError ? error.message : `startup failed: ${errorFields(error).message}`;
    logger.fatal({ config: path }, message);
    process.stderr.write(`gateway: ${message}\n`);
    return 1;
  }
  for (const l of gateway.listeners) logger.info({ listener: l.name, host: l.host, port: l.port, tls: l.tls, role: gateway.role }, 'listening');
  if (gateway.adminPort !== undefined) logger.info({ admin_port: gateway.adminPort }, 'admin listening');
  if (!gateway.isReady()) logger.warn({}, gateway.siteView === undefined ? 'not ready: no valid routing overlay yet' : 'not ready: no valid routing overlay or serving config yet');

  const instance = gateway;
  await new Promise<void>((resolveStop) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, 'shutting down');
      instance.close().then(resolveStop, resolveStop);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    process.on('SIGHUP', () => {
      instance.reloadCredentials();
      logger.info({}, 'credentials re-read');
    });
  });
  return 0;
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
