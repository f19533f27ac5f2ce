// Runtime metrics of every daemon: prom-client's process metrics (CPU, memory, descriptors, heap, GC, handles,
// version) and the event-loop delay, under prom-client's names.
//
// The event-loop delay is our own, for two reasons:
// - Cost. prom-client samples the loop every 10 ms, and every sample wakes a sleeping process: an idle gateway spends
//   5.5-11 ms of CPU per second that way, where the floor proxy spends none; 3.5-4.4 with 50 ms samples, and 2.2-2.7
//   when its readiness gauge is also set on change rather than on a timer (the idle case of `npm run bench:gateway`).
//   That is paid in every pod all day, and per request at low rates. We sample every EVENT_LOOP_SAMPLE_MS.
// - Meaning. prom-client reports the raw time between samples, so an idle loop reads 10 ms and any other sampling
//   interval would shift every series by that interval. We report the delay past the sample's due time: an idle
//   loop reads about 0.
// The trade: a stall of S ms reads between S - EVENT_LOOP_SAMPLE_MS and S (the sample falls due somewhere inside the
// stall; test/shared/runtime-metrics.test.ts), where a 10 ms sample would read it within 10 ms. Stalls that matter to
// an operator are hundreds of milliseconds; the request latency histograms see every shorter delay a request meets.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Gauge, collectDefaultMetrics } from 'prom-client';
import type { Registry } from 'prom-client';

export const EVENT_LOOP_SAMPLE_MS = 50;

/** prom-client's event-loop series, which registerEventLoopDelay replaces name for name. */
const PROM_CLIENT_LAG = ['', '_min', '_max', '_mean', '_stddev', '_p50', '_p90', '_p99'].map(
  (s) => `nodejs_eventloop_lag${s}_seconds`,
);

/**
 * prom-client's process metrics without its event-loop series. collectDefaultMetrics has no way to leave one out, so
 * its monitor is started with a sampling interval of about 24 days (it never wakes the process) and its series are
 * removed from the registry.
 */
export function collectProcessMetrics(registry: Registry, prefix = ''): void {
  collectDefaultMetrics({ register: registry, prefix, eventLoopMonitoringPrecision: 2 ** 31 - 1 });
  for (const name of PROM_CLIENT_LAG) registry.removeSingleMetric(prefix + name);
}

/**
 * This thread's event-loop delay past each sample's due time, in seconds: min, max, mean, stddev and p50/p90/p99 of
 * the samples since the previous scrape (reset on every scrape, as prom-client's), and `nodejs_eventloop_lag_seconds`,
 * how long a callback queued at scrape time waited. Each gauge carries the aggregator a sum over worker threads would
 * misstate otherwise (the least minimum, the greatest maximum, the average of the rest).
 */
export function registerEventLoopDelay(registry: Registry, prefix = ''): void {
  // Node's monitor samples from a native timer: no JS runs per sample, which is most of a wake-up's cost.
  const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS });
  histogram.enable();
  // reset() also forgets the time of the last sample, so the interval from each scrape to the next sample goes
  // unrecorded: a stall that began right after a scrape (the scrape's own rendering, say) would never be seen. One
  // JS timer per scrape covers that interval, due one sampling interval after the reset.
  let bridgeNs = 0;
  const bridge = (): void => {
    const due = performance.now() + EVENT_LOOP_SAMPLE_MS;
    setTimeout(() => (bridgeNs = Math.max(bridgeNs, (performance.now() - due) * 1e6)), EVENT_LOOP_SAMPLE_MS).unref();
  };
  const sampleNs = EVENT_LOOP_SAMPLE_MS * 1e6;
  // The monitor records whole intervals (the sampling interval plus the delay); a sample can come a little early.
  const seconds = (ns: number): number => Math.max(0, ns) / 1e9;
  const past = (ns: number): number => seconds(ns - sampleNs);
  const registers = [registry];
  const gauge = (suffix: string, help: string, aggregator: 'min' | 'max' | 'average'): Gauge =>
    new Gauge({ name: `${prefix}nodejs_eventloop_lag${suffix}_seconds`, help, aggregator, registers });
  // Registered first: a scrape reads the series in registration order, and this one's collect sets the others.
  new Gauge({
    name: `${prefix}nodejs_eventloop_lag_seconds`,
    help: 'How long a callback queued when the metrics were collected waited for the event loop.',
    aggregator: 'average',
    registers,
    collect() {
      const queued = process.hrtime.bigint();
      setImmediate(() => this.set(Number(process.hrtime.bigint() - queued) / 1e9));
      // No sample since the last scrape (a scrape within one interval of the previous): nothing to report but the
      // bridge's delay, never an empty histogram's extremes.
      const sampled = histogram.count > 0;
      min.set(sampled ? past(histogram.min) : 0);
      max.set(Math.max(sampled ? past(histogram.max) : 0, seconds(bridgeNs)));
      mean.set(sampled ? past(histogram.mean) : 0);
      stddev.set(sampled ? histogram.stddev / 1e9 : 0);
      p50.set(sampled ? past(histogram.percentile(50)) : 0);
      p90.set(sampled ? past(histogram.percentile(90)) : 0);
      p99.set(sampled ? past(histogram.percentile(99)) : 0);
      histogram.reset();
      bridgeNs = 0;
      bridge();
    },
  });
  const min = gauge(
    '_min',
    `Least event-loop delay past a sample's due time since the last scrape (sampled every ${EVENT_LOOP_SAMPLE_MS} ms).`,
    'min',
  );
  const max = gauge(
    '_max',
    `Greatest event-loop delay past a sample's due time since the last scrape (sampled every ${EVENT_LOOP_SAMPLE_MS} ms).`,
    'max',
  );
  const mean = gauge('_mean', "Mean event-loop delay past the samples' due times since the last scrape.", 'average');
  const stddev = gauge('_stddev', 'Standard deviation of the event-loop samples since the last scrape.', 'average');
  const p50 = gauge('_p50', "Median event-loop delay past the samples' due times since the last scrape.", 'average');
  const p90 = gauge(
    '_p90',
    "90th percentile of the event-loop delay past the samples' due times since the last scrape.",
    'average',
  );
  const p99 = gauge(
    '_p99',
    "99th percentile of the event-loop delay past the samples' due times since the last scrape.",
    'average',
  );
}
