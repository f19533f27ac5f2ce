/**
 * The dashboard as the operator serves it, from its configuration: nothing when it is off; otherwise the read
 * model over the replica targets (fixed by --dashboard-targets, else discovered from the pods with the kubernetes
 * store) and the access (open, or the token kept loaded from its file).
 */
import { type AdminServerOptions, parseListenAddress } from '../../shared/admin-server.ts';
import { DashboardTokenFile } from '../../shared/dashboard-token-file.ts';
import type { DashboardAccess } from '../../shared/dashboard-routes.ts';
import type { Logger } from '../../shared/log.ts';
import { isLoopbackHost, type OperatorConfig } from '../config.ts';
import { DashboardSource, type DashboardContext } from './source.ts';
import { ReplicaDiscovery } from './replica-discovery.ts';
import type { DashboardTarget } from './targets.ts';

export interface ServedDashboard {
  /** What the admin server serves; undefined when the dashboard is off. */
  readonly admin: AdminServerOptions['dashboard'];
  close(): Promise<void>;
}

export async function startDashboard(
  ctx: DashboardContext,
  config: OperatorConfig,
  logger: Logger,
): Promise<ServedDashboard> {
  if (config.dashboard.access === 'off') return { admin: undefined, close: async () => undefined };
  let targets: () => readonly DashboardTarget[];
  let discovery: ReplicaDiscovery | undefined;
  if (config.dashboardTargets.length > 0 || config.store.backend !== 'kubernetes') {
    const fixed = config.dashboardTargets;
    targets = () => fixed;
  } else {
    discovery = new ReplicaDiscovery({ store: ctx.store, namespace: config.namespace, logger });
    discovery.start();
    const found = discovery;
    targets = () => found.targets();
  }
  let access: DashboardAccess;
  let tokenFile: DashboardTokenFile | undefined;
  if (config.dashboard.access === 'token') {
    tokenFile = new DashboardTokenFile({ file: config.dashboard.tokenFile, logger });
    await tokenFile.start();
    const loaded = tokenFile;
    access = { mode: 'token', token: () => loaded.current() };
  } else {
    access = { mode: 'open' };
    if (!isLoopbackHost(parseListenAddress(config.adminAddress).host)) {
      logger.warn(
        { admin: config.adminAddress },
        'the fleet dashboard is open without authentication to everyone who reaches the admin port (--dashboard open)',
      );
    }
  }
  const source = new DashboardSource(ctx, targets);
  return {
    admin: { view: () => source.view(), access },
    async close() {
      tokenFile?.close();
      await discovery?.close();
    },
  };
}
