/** What the controllers share: the store, logging, metrics, configuration, the gossip runtime and in-memory signals. */
import type { Tracer } from '@opentelemetry/api';
import type { Logger } from '../shared/log.ts';
import type { ResourceStore } from '../shared/resource-store/types.ts';
import type { OperatorConfig } from './config.ts';
import type { GossipRuntime } from './gossip-runtime.ts';
import type { OperatorMetrics } from './metrics.ts';
import type { ProviderSignals } from './controllers/provider-signals.ts';
import type { PolledSignals } from './peer-signals/polled-signals.ts';

export const CONTROLLER_NAMES = {
  network: 'gridnetwork',
  site: 'gridsite',
  provider: 'inferenceprovider',
  discovery: 'model-discovery',
  tools: 'agenttoolprovider',
  agents: 'agenttoagentprovider',
} as const;

export interface OperatorContext {
  /** Spans of the reconciles and the render, when tracing is on (tracing.ts). */
  readonly tracer?: Tracer;
  readonly store: ResourceStore;
  readonly logger: Logger;
  readonly metrics: OperatorMetrics;
  readonly config: OperatorConfig;
  readonly now: () => number;
  readonly startedAtMs: number;
  readonly producerVersion: string;
  readonly signals: ProviderSignals;
  /** Rows polled from peers under signalTransport poll (peer-signals/poller.ts). */
  readonly peerSignals: PolledSignals;
  /**
   * Duration of the latest probe of each GridSite's gateway (by GridSite name), in ms: the dashboard's RTT. Kept in
   * memory only, because writing it to status would make every probe a status write.
   */
  readonly siteProbeRtt: Map<string, number>;
  /** This site's peer signals endpoint as peers dial it (site record signals_address); undefined when not serving. */
  signalsAddress: string | undefined;
  /** The SWIM member and CRDT view; undefined until the GridNetwork controller starts it. */
  gossip: GossipRuntime | undefined;
  /** Queues `name` for a controller (external triggers). */
  readonly enqueue: (controller: string, name: string, afterMs?: number) => void;
  /**
   * Which addresses model discovery refuses; undefined keeps the default block list (blocked-addresses.ts). Only
   * in-process tests set it, because their servers can only listen on loopback; no flag or variable reaches it.
   */
  readonly discoveryIsBlocked?: (address: string) => boolean;
}
