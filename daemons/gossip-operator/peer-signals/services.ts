/**
 * Starts the leader's signal services from the operator configuration: the peer poller with its signals
 * endpoint, and the gateway age ingest listener when configured. Kept apart from operator.ts so the assembly
 * there stays one call.
 */
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { GatewayAgeIngest } from '../gateway-ages/ingest.ts';
import { PeerPoller } from './poller.ts';

export interface SignalServices {
  stop(): Promise<void>;
}

function wildcard(address: string): boolean {
  return /^(0\.0\.0\.0|\[::\]|::|):/.test(address) || address.startsWith(':');
}

export async function startSignalServices(ctx: OperatorContext): Promise<SignalServices> {
  const { config } = ctx;
  const poller = new PeerPoller({
    site: config.site,
    store: ctx.store,
    logger: ctx.logger,
    metrics: ctx.metrics,
    polled: ctx.peerSignals,
    members: () => {
      const runtime = ctx.gossip;
      if (runtime === undefined) return undefined;
      const sites = runtime.store.sites();
      return runtime.members()
        .filter((m) => m.state !== 'left')
        .map((m) => {
          const address = sites.get(m.name)?.signals_address;
          return { name: m.name, ...(address !== undefined ? { signalsAddress: address } : {}) };
        });
    },
    converged: () => ctx.gossip?.membership.joined === true,
    localSignals: () => ctx.signals.samples(),
    onSignalsChanged: (network) => ctx.enqueue(CONTROLLER_NAMES.network, network),
    ...(config.signalsAddress !== undefined ? { serveAddress: config.signalsAddress } : {}),
    intervalMs: config.peerPollIntervalMs ?? 10_000,
    now: ctx.now,
  });
  await poller.start();
  const bound = poller.servedAddress;
  ctx.signalsAddress = config.signalsAdvertise ?? (bound !== undefined && !wildcard(bound) ? bound : undefined);
  if (bound !== undefined && ctx.signalsAddress === undefined) {
    ctx.logger.warn({ bind: bound }, 'the signals endpoint binds a wildcard address and no --signals-advertise is set: peers cannot poll this site');
  }
  let ingest: GatewayAgeIngest | undefined;
  if (config.gatewayAgeAddress !== undefined) {
    ingest = new GatewayAgeIngest({ address: config.gatewayAgeAddress, store: ctx.store, logger: ctx.logger, metrics: ctx.metrics, now: ctx.now });
    try {
      await ingest.start();
    } catch (error) {
      ctx.logger.error({ address: config.gatewayAgeAddress, error: errorFields(error) }, 'gateway age ingest listener did not start');
      ingest = undefined;
    }
  }
  return {
    async stop() {
      await poller.stop();
      await ingest?.close();
    },
  };
}
