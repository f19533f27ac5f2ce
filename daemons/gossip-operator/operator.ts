/**
 * One operator process, assembled: store, metrics, admin endpoints, Lease leader election and the controller
 * manager. main.ts only parses configuration and handles signals; tests start this in-process.
 */
import type { Tracer } from '@opentelemetry/api';
import { createRequire } from 'node:module';
import type { Logger } from '../shared/log.ts';
import { errorFields } from '../shared/log.ts';
import { startAdminServer, type AdminServer } from '../shared/admin-server.ts';
import { createResourceStore } from '../shared/resource-store/index.ts';
import type { ResourceStore } from '../shared/resource-store/types.ts';
import type { OperatorConfig } from './config.ts';
import type { OperatorContext } from './context.ts';
import { AgentToAgentProviderController } from './controllers/agent-to-agent-provider.ts';
import { AgentToolProviderController } from './controllers/agent-tool-provider.ts';
import { GridNetworkController } from './controllers/grid-network.ts';
import { GridSiteController } from './controllers/grid-site.ts';
import { InferenceProviderController } from './controllers/inference-provider.ts';
import { ModelDiscoveryController } from './controllers/model-discovery.ts';
import { ProviderSignals } from './controllers/provider-signals.ts';
import { SiteInviteController } from './controllers/site-invite.ts';
import { LeaderElector } from './manager/leader-election.ts';
import { Manager } from './manager/manager.ts';
import { startSignalServices, type SignalServices } from './peer-signals/services.ts';
import { PolledSignals } from './peer-signals/polled-signals.ts';
import { OperatorMetrics } from './metrics.ts';
import { ScraperTokenSource } from './probes/scraper-token.ts';
import { type EnrollmentServer, startEnrollmentServer } from './enrollment/server.ts';
import { startDashboard } from './dashboard/serve.ts';
import { siteNameLedgerConfigMapName } from '../../schemas/object-names.ts';

export interface OperatorOptions {
  readonly config: OperatorConfig;
  readonly logger: Logger;
  /** An existing store (tests share one); otherwise created from config.store. */
  readonly store?: ResourceStore;
  readonly now?: () => number;
  readonly defaultMetrics?: boolean;
  readonly discoveryIsBlocked?: (address: string) => boolean;
  /** Spans of the reconciles and renders (tracing.ts); undefined: no tracing. */
  readonly tracer?: Tracer;
  readonly retryPeriodMs?: number;
  /** Called when leadership is lost: the process should exit so it restarts as a clean standby. */
  readonly onLeadershipLost?: () => void;
}

export interface OperatorHandle {
  readonly context: OperatorContext;
  readonly admin: AdminServer;
  readonly metrics: OperatorMetrics;
  /** The SiteInvite redeem endpoint, when config.enrollment is set. */
  readonly enrollment?: EnrollmentServer;
  isLeader(): boolean;
  /** Graceful stop: readiness false at once, controllers, listeners, SWIM leave, Lease release, admin server, store. */
  stop(options?: StopOptions): Promise<void>;
}

export interface StopOptions {
  /**
   * How long /readyz answers 503 while every listener still accepts, before any closes: the time a terminating pod's
   * Service endpoints take to drop it (main.ts). Default 0 (in-process tests).
   */
  readonly drainDelayMs?: number;
  /** How long reconciles already running get to finish (their status writes land). Default: no bound. */
  readonly reconcileDeadlineMs?: number;
}

function producerVersion(): string {
  try {
    const pkg = createRequire(import.meta.url)('../../package.json') as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export async function startOperator(options: OperatorOptions): Promise<OperatorHandle> {
  const { config, logger } = options;
  const ownsStore = options.store === undefined;
  const store =
    options.store ??
    (await createResourceStore(
      config.store.backend === 'local'
        ? {
            backend: 'local',
            stateDir: config.store.stateDir,
            ...(config.store.manifestsDir !== undefined ? { manifestsDir: config.store.manifestsDir } : {}),
            onProblem: (message) => logger.warn({ store: 'local' }, message),
          }
        : { backend: 'kubernetes' },
    ));
  const metrics = new OperatorMetrics({ defaultMetrics: options.defaultMetrics ?? false });
  let manager: Manager | undefined;
  const now = options.now ?? Date.now;
  const scraperToken =
    config.metricsScraperServiceAccount === undefined
      ? undefined
      : new ScraperTokenSource({
          store,
          serviceAccount: { namespace: config.namespace, name: config.metricsScraperServiceAccount },
          logger,
          now,
        });
  const context: OperatorContext = {
    ...(options.tracer === undefined ? {} : { tracer: options.tracer }),
    store,
    logger,
    metrics,
    config,
    now: options.now ?? Date.now,
    startedAtMs: (options.now ?? Date.now)(),
    producerVersion: producerVersion(),
    signals: new ProviderSignals(scraperToken === undefined ? undefined : () => scraperToken.bearer()),
    peerSignals: new PolledSignals(),
    siteProbeRtt: new Map(),
    signalsAddress: undefined,
    gossip: undefined,
    enqueue: (controller, name, afterMs) => manager?.enqueue(controller, name, afterMs),
    ...(options.discoveryIsBlocked !== undefined ? { discoveryIsBlocked: options.discoveryIsBlocked } : {}),
  };
  let signalServices: Promise<SignalServices | undefined> | undefined;
  // Served by every replica, leader or not: the token Secret delete is the one-time claim, so replicas cannot
  // both redeem one token. A start failure (unreadable CA, bad certificate) fails the operator start
  // before any controller runs.
  let enrollment: EnrollmentServer | undefined;
  if (config.enrollment !== undefined) {
    try {
      enrollment = await startEnrollmentServer({
        config: config.enrollment,
        store,
        namespace: config.namespace,
        logger,
        redeems: metrics.enrollmentRedeems,
        fileReloads: metrics.fileReloads,
        now: context.now,
        onRedeemed: (invite) => context.enqueue('siteinvite', invite),
        siteNameLedger: { name: siteNameLedgerConfigMapName(config.site), namespace: config.namespace },
      });
    } catch (error) {
      if (ownsStore) await store.close();
      throw error;
    }
  }
  const startControllers = (): void => {
    metrics.leader.set(1);
    manager = new Manager({
      store,
      logger,
      onReconcile: (controller, result) => metrics.reconciles.inc({ controller, result }),
      ...(options.tracer === undefined ? {} : { tracer: options.tracer }),
    });
    manager.add(new GridNetworkController(context));
    manager.add(new GridSiteController(context));
    manager.add(new InferenceProviderController(context));
    manager.add(new ModelDiscoveryController(context));
    manager.add(new AgentToolProviderController(context));
    manager.add(new AgentToAgentProviderController(context));
    manager.add(new SiteInviteController(context));
    manager.start();
    signalServices = startSignalServices(context).catch((error: unknown) => {
      logger.error({ error: errorFields(error) }, 'signal services (peer poller, gateway age ingest) did not start');
      return undefined;
    });
    logger.info({ site: config.site, identity: config.identity, store: store.backend }, 'controllers started');
  };
  let elector: LeaderElector | undefined;
  let stopped = false;
  const dashboard = await startDashboard(context, config, logger);
  let admin: Awaited<ReturnType<typeof startAdminServer>>;
  try {
    admin = await startAdminServer({
      address: config.adminAddress,
      registry: metrics.registry,
      // A standby replica is ready (it is doing its job: waiting); the leader once its watches have synced.
      // Stopping: not ready at once, while the listeners still answer (StopOptions.drainDelayMs).
      isReady: () => !stopped && (manager === undefined ? elector !== undefined : manager.synced),
      status: () => ({
        site: config.site,
        leader: manager !== undefined,
        gossip:
          context.gossip === undefined
            ? null
            : { address: context.gossip.address, members: context.gossip.membership.stats().members },
      }),
      ...(dashboard.admin !== undefined ? { dashboard: dashboard.admin } : {}),
    });
  } catch (error) {
    // Bound before any controller or election starts, so a taken admin port leaves nothing running behind it.
    await dashboard.close();
    await enrollment?.close();
    if (ownsStore) await store.close();
    throw error;
  }
  if (config.leaderElection) {
    elector = new LeaderElector({
      store,
      namespace: config.namespace,
      name: config.leaseName,
      identity: config.identity,
      leaseDurationMs: config.leaseDurationMs,
      ...(options.retryPeriodMs !== undefined ? { retryPeriodMs: options.retryPeriodMs } : {}),
      onStarted: () => {
        logger.info({ identity: config.identity }, 'acquired the Lease; this replica is the leader');
        startControllers();
      },
      onLost: () => {
        metrics.leader.set(0);
        logger.error({ identity: config.identity }, 'lost the Lease; stopping');
        void manager?.stop();
        void signalServices?.then((services) => services?.stop());
        options.onLeadershipLost?.();
      },
      onError: (error) => logger.warn({ error: errorFields(error) }, 'leader election attempt failed'),
    });
    logger.info({ identity: config.identity }, 'waiting for the Lease');
    elector.start();
  } else {
    startControllers();
  }
  return {
    context,
    admin,
    metrics,
    ...(enrollment !== undefined ? { enrollment } : {}),
    isLeader: () => manager !== undefined && (elector === undefined || elector.isLeader),
    async stop(stopOptions = {}) {
      if (stopped) return;
      stopped = true;
      logger.info({ drainDelayMs: stopOptions.drainDelayMs ?? 0 }, 'not ready; draining');
      // Controllers stop dequeuing now; the drain delay and the reconciles in flight run side by side.
      await Promise.all([
        manager?.stop(stopOptions.reconcileDeadlineMs),
        new Promise<void>((resolve) => setTimeout(resolve, stopOptions.drainDelayMs ?? 0).unref()),
      ]);
      // The listeners stop accepting; requests already running on them finish (LISTENER_GRACE_MS at most).
      await Promise.all([signalServices?.then((services) => services?.stop()), enrollment?.close()]);
      // Each stage is logged as it completes, so an operator (and the shutdown test) can read the order from the log.
      logger.info('listeners closed');
      if (context.gossip !== undefined) {
        try {
          await context.gossip.close();
        } catch (error) {
          logger.warn({ error: errorFields(error) }, 'SWIM leave failed');
        }
        context.gossip = undefined;
      }
      await elector?.stop();
      await admin.close();
      await dashboard.close();
      logger.info('admin server closed');
      if (ownsStore) await store.close();
    },
  };
}
