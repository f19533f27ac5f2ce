/**
 * Starts the leader's signal services from the operator configuration: the peer poller with its signals
 * endpoint, and the gateway age ingest listener when configured. Kept apart from operator.ts so the assembly
 * there stays one call.
 */
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { GatewayAgeIngest } from '../gateway-ages/ingest.ts';
import { GRID_NETWORK } from '../kinds.ts';
import { PeerPoller, type PeerPollerOptions } from './poller.ts';

export interface SignalServices {
  /** host:port the signals endpoint is bound to; undefined when not configured or when it failed to bind. */
  readonly signalsBound: string | undefined;
  /** Port of the gateway age ingest listener; undefined when not configured or when it failed to bind. */
  readonly gatewayAgePort: number | undefined;
  stop(): Promise<void>;
}

function wildcard(address: string): boolean {
  return /^(0\.0\.0\.0|\[::\]|::|):/.test(address) || address.startsWith(':');
}

/**
 * The two listeners are independent: a bad --signals-address (say EADDRINUSE) must not take the gateway age ingest
 * down with it, nor the other way round. Each failure is logged once, naming the service and the address.
 */
export async function startSignalServices(ctx: OperatorContext): Promise<SignalServices> {
  const { config } = ctx;
  const pollerOptions = (serveAddress: string | undefined): PeerPollerOptions => ({
    site: config.site,
    store: ctx.store,
    logger: ctx.logger,
    metrics: ctx.metrics,
    polled: ctx.peerSignals,
    members: () => {
      const runtime = ctx.gossip;
      if (runtime === undefined) return undefined;
      const sites = runtime.store.sites();
      return runtime
        .members()
        .filter((m) => m.state !== 'left')
        .map((m) => {
          const address = sites.get(m.name)?.signals_address;
          return { name: m.name, ...(address !== undefined ? { signalsAddress: address } : {}) };
        });
    },
    converged: () => ctx.gossip?.membership.joined === true,
    localSignals: () => ctx.signals.samples(),
    onSignalsChanged: (network) => ctx.enqueue(CONTROLLER_NAMES.network, network),
    ...(serveAddress !== undefined ? { serveAddress } : {}),
    intervalMs: config.peerPollIntervalMs ?? 10_000,
    now: ctx.now,
  });
  let poller = new PeerPoller(pollerOptions(config.signalsAddress));
  try {
    await poller.start();
  } catch (error) {
    ctx.logger.error(
      { service: 'peer signals endpoint', address: config.signalsAddress, error: errorFields(error) },
      `peer signals endpoint did not start on ${config.signalsAddress ?? '?'} (--signals-address): peers cannot poll this site; this site still polls its peers`,
    );
    poller = new PeerPoller(pollerOptions(undefined));
    await poller.start();
  }
  const bound = poller.servedAddress;
  ctx.signalsAddress =
    bound === undefined ? undefined : (config.signalsAdvertise ?? (!wildcard(bound) ? bound : undefined));
  if (bound !== undefined && ctx.signalsAddress === undefined) {
    ctx.logger.warn(
      { bind: bound },
      'the signals endpoint binds a wildcard address and no --signals-advertise is set: peers cannot poll this site',
    );
  }
  if (ctx.signalsAddress !== undefined) await requeueNetworks(ctx);
  let ingest: GatewayAgeIngest | undefined;
  if (config.gatewayAgeAddress !== undefined && config.ingestTokenFile !== undefined) {
    ingest = new GatewayAgeIngest({
      address: config.gatewayAgeAddress,
      tokenFile: config.ingestTokenFile,
      store: ctx.store,
      logger: ctx.logger,
      metrics: ctx.metrics,
      now: ctx.now,
    });
    try {
      await ingest.start();
    } catch (error) {
      ctx.logger.error(
        { service: 'gateway age ingest', address: config.gatewayAgeAddress, error: errorFields(error) },
        `gateway age ingest listener did not start on ${config.gatewayAgeAddress} (--gateway-age-address): gateway age reports are not received`,
      );
      ingest = undefined;
    }
  }
  return {
    signalsBound: bound,
    gatewayAgePort: ingest?.port,
    async stop() {
      await poller.stop();
      await ingest?.close();
    },
  };
}

/**
 * The address is known only after the bind, which runs beside the controllers: a GridNetwork reconcile that already
 * published the site record without signals_address would not run again for up to metricsRefreshInterval (300 s),
 * and peers could not poll this site meanwhile. Re-queue every GridNetwork so the record is republished now.
 */
async function requeueNetworks(ctx: OperatorContext): Promise<void> {
  try {
    for (const network of (await ctx.store.list(GRID_NETWORK)).items)
      ctx.enqueue(CONTROLLER_NAMES.network, network.metadata.name);
  } catch (error) {
    ctx.logger.warn(
      { error: errorFields(error) },
      'could not list GridNetworks to republish the site record with signals_address; the next reconcile will',
    );
  }
}
