// The gateway's Prometheus metrics (docs/contract.md §3.3). Label values are bounded: models and clusters come from the
// accepted snapshot or the config (anything else is "other"), so a client cannot grow the series count. With
// several workers (workers.ts) each has its own registry and /metrics sums them; `aggregator` marks the gauges a sum
// would misstate (readiness is the least of the workers', info and size gauges the largest).
import { Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics, registerEventLoopDelay } from '../shared/runtime-metrics.ts';
import { RequestHistogram } from './request-histogram.ts';
import type { GatewayRole } from './config.ts';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export interface GatewayMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'role' | 'model' | 'cluster' | 'status'>;
  readonly upstreamLatency: RequestHistogram<'role' | 'cluster'>;
  readonly timeToFirstByte: RequestHistogram<'role' | 'cluster'>;
  readonly upstreamConnectFailures: Counter<'role' | 'cluster'>;
  readonly retries: Counter<'role' | 'cluster'>;
  readonly overlayReloads: Counter<'outcome' | 'reason'>;
  readonly fileReloads: Counter<'file_kind' | 'outcome'>;
  readonly overlayAcceptedRevision: Gauge<'revision' | 'format'>;
  readonly overlayServingRevision: Gauge<'revision'>;
  readonly overlayCandidates: Gauge;
  readonly ready: Gauge;
  readonly inFlight: Gauge<'role'>;
  /** local_load: this gateway's own in-flight requests per upstream cluster (the sum of its candidates'). */
  readonly candidateInFlight: Gauge<'cluster'>;
  /** local_load: which arm of the selection made each pick. */
  readonly selections: Counter<'path'>;
  readonly tlsHandshakes: Counter<'listener' | 'session'>;
  readonly role: GatewayRole;
  /**
   * Runs `flush` whenever the requests counter or the in-flight gauge is collected: the request path counts in
   * plain variables (prom-client hashes a label object on every inc) and hands the counts over at scrape time.
   */
  onCollect(flush: () => void): void;
}

/**
 * `runtime.process`: the process's CPU, memory and descriptors (one per process: a worker leaves them to the
 * supervisor). `runtime.eventLoop`: this thread's event-loop delay (each worker has its own loop). Neither for a
 * gateway that is not the process's (tests, the warm-up's pipeline): each would start another sampling timer.
 */
export function createGatewayMetrics(
  role: GatewayRole,
  runtime: { process: boolean; eventLoop: boolean },
): GatewayMetrics {
  const registry = new Registry();
  if (runtime.process) collectProcessMetrics(registry, 'grid_gateway_');
  if (runtime.eventLoop) registerEventLoopDelay(registry, 'grid_gateway_');
  const registers = [registry];
  const flushes: (() => void)[] = [];
  const collect = (): void => {
    for (const flush of flushes) flush();
  };
  return {
    registry,
    role,
    onCollect: (flush) => {
      flushes.push(flush);
    },
    requests: new Counter({
      name: 'grid_gateway_requests_total',
      help: 'Requests answered, by gateway role, requested model, upstream cluster and HTTP status.',
      labelNames: ['role', 'model', 'cluster', 'status'],
      registers,
      collect,
    }),
    upstreamLatency: new RequestHistogram({
      name: 'grid_gateway_upstream_latency_seconds',
      help: 'Time from sending the upstream request to the end of its response body.',
      labelNames: ['role', 'cluster'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    timeToFirstByte: new RequestHistogram({
      name: 'grid_gateway_time_to_first_byte_seconds',
      help: 'Time from receiving the client request to the first response body byte from upstream.',
      labelNames: ['role', 'cluster'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    upstreamConnectFailures: new Counter({
      name: 'grid_gateway_upstream_connect_failures_total',
      help: 'Upstream connection attempts that failed before any request byte was sent.',
      labelNames: ['role', 'cluster'],
      registers,
    }),
    retries: new Counter({
      name: 'grid_gateway_retries_total',
      help: 'Requests retried on another candidate or endpoint after a connect failure.',
      labelNames: ['role', 'cluster'],
      registers,
    }),
    overlayReloads: new Counter({
      name: 'grid_gateway_overlay_reloads_total',
      help: 'Overlay load attempts by outcome (accepted, unchanged, rejected) and reason.',
      labelNames: ['outcome', 'reason'],
      registers,
    }),
    fileReloads: new Counter({
      name: 'grid_gateway_file_reloads_total',
      help: 'Loads of mounted files (caller_keys, credential, listener_tls, upstream_tls) that took new material (accepted) or kept the previous because a file was unreadable or invalid (rejected).',
      labelNames: ['file_kind', 'outcome'],
      registers,
    }),
    overlayAcceptedRevision: new Gauge({
      name: 'grid_gateway_overlay_accepted_revision_info',
      help: 'The overlay revision currently accepted (value 1); revision is "legacy" for a bare payload.',
      labelNames: ['revision', 'format'],
      aggregator: 'max',
      registers,
    }),
    overlayServingRevision: new Gauge({
      name: 'grid_gateway_overlay_serving_revision_info',
      help: 'The overlay revision that served the most recent routed request (value 1).',
      labelNames: ['revision'],
      aggregator: 'max',
      registers,
    }),
    overlayCandidates: new Gauge({
      name: 'grid_gateway_overlay_candidates',
      help: 'Candidates in the accepted overlay.',
      aggregator: 'max',
      registers,
    }),
    ready: new Gauge({
      name: 'grid_gateway_ready',
      help: '1 when the gateway serves traffic.',
      aggregator: 'min',
      registers,
    }),
    tlsHandshakes: new Counter({
      name: 'grid_gateway_tls_handshakes_total',
      help: 'TLS handshakes completed on a listener, by session: new (full handshake) or resumed (session ticket).',
      labelNames: ['listener', 'session'],
      registers,
    }),
    inFlight: new Gauge({
      name: 'grid_gateway_requests_in_flight',
      help: 'Requests being served.',
      labelNames: ['role'],
      registers,
      collect,
    }),
    candidateInFlight: new Gauge({
      name: 'grid_gateway_candidate_in_flight',
      help: 'Requests this gateway dispatched to an upstream cluster and has not finished (route filters with local_load); what local_load steers by.',
      labelNames: ['cluster'],
      registers,
      collect,
    }),
    selections: new Counter({
      name: 'grid_gateway_selections_total',
      help: 'intelligent_route picks under local_load by path: first_draw or second_draw (random, weightedRandom: the lighter of two draws), cursor or skipped (roundRobin: the cursor kept or passed over for a lighter candidate).',
      labelNames: ['path'],
      registers,
      collect,
    }),
  };
}
