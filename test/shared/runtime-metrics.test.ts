// The daemons' runtime metrics: prom-client's process metrics without its 10 ms event-loop monitor, and our
// event-loop delay, which reports the delay past each sample's due time (an idle loop reads about 0, a stall reads
// its length within one sampling interval).
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  EVENT_LOOP_SAMPLE_MS,
  collectProcessMetrics,
  registerEventLoopDelay,
} from '../../daemons/shared/runtime-metrics.ts';

const LAG_SERIES = ['', '_min', '_max', '_mean', '_stddev', '_p50', '_p90', '_p99'].map(
  (s) => `nodejs_eventloop_lag${s}_seconds`,
);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // the stall under test
  }
}

async function values(registry: Registry): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values) if (Object.keys(value.labels).length === 0) out.set(metric.name, value.value);
  }
  return out;
}

describe('collectProcessMetrics', () => {
  it("registers prom-client's process metrics under the prefix, without any event-loop series", async () => {
    const registry = new Registry();
    collectProcessMetrics(registry, 'grid_test_');
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'grid_test_process_cpu_seconds_total',
        'grid_test_process_resident_memory_bytes',
        'grid_test_nodejs_heap_size_used_bytes',
      ]),
    );
    expect(names.filter((n) => n.includes('eventloop'))).toEqual([]);
  });
});

describe('registerEventLoopDelay', () => {
  it("registers each of prom-client's event-loop series once, and an idle loop reads about 0, not the sampling interval", async () => {
    const registry = new Registry();
    registerEventLoopDelay(registry, 'grid_test_');
    await values(registry); // resets what was sampled before this test
    await sleep(EVENT_LOOP_SAMPLE_MS * 8);
    const v = await values(registry);
    expect([...v.keys()].filter((n) => n.includes('eventloop')).sort()).toEqual(
      LAG_SERIES.map((n) => `grid_test_${n}`).sort(),
    );
    // prom-client's monitor read the raw interval between samples: 10 ms on an idle loop at its 10 ms sampling.
    expect(v.get('grid_test_nodejs_eventloop_lag_min_seconds')!).toBeLessThan(EVENT_LOOP_SAMPLE_MS / 2 / 1000);
    expect(v.get('grid_test_nodejs_eventloop_lag_p50_seconds')!).toBeLessThan(EVENT_LOOP_SAMPLE_MS / 2 / 1000);
    expect(v.get('grid_test_nodejs_eventloop_lag_min_seconds')!).toBeGreaterThanOrEqual(0);
  });

  // Right after a scrape, the monitor's first interval goes unrecorded (its reset forgets the last sample's time)
  // and the bridge timer sees the stall; later in the window, the monitor itself does.
  it.each([
    ['right after a scrape', 0],
    ['later in the window', EVENT_LOOP_SAMPLE_MS * 3],
  ])(
    'reads a 300 ms stall %s as its length, within one sampling interval, and forgets it at the next scrape',
    async (_, afterScrapeMs) => {
      const registry = new Registry();
      registerEventLoopDelay(registry, 'grid_test_');
      await sleep(EVENT_LOOP_SAMPLE_MS * 2);
      await values(registry);
      if (afterScrapeMs > 0) await sleep(afterScrapeMs);
      busyFor(300);
      await sleep(EVENT_LOOP_SAMPLE_MS * 2);
      const stalled = await values(registry);
      expect(stalled.get('grid_test_nodejs_eventloop_lag_max_seconds')!).toBeGreaterThanOrEqual(
        (300 - EVENT_LOOP_SAMPLE_MS - 5) / 1000,
      );
      // Above 300 ms only by what a loaded machine adds to the sleep around it.
      expect(stalled.get('grid_test_nodejs_eventloop_lag_max_seconds')!).toBeLessThan(0.6);
      await sleep(EVENT_LOOP_SAMPLE_MS * 4);
      expect((await values(registry)).get('grid_test_nodejs_eventloop_lag_max_seconds')!).toBeLessThan(0.25);
    },
  );

  it("reads 0 when no sample fell due since the previous scrape, never a histogram's empty extremes", async () => {
    const registry = new Registry();
    registerEventLoopDelay(registry, 'grid_test_');
    await sleep(EVENT_LOOP_SAMPLE_MS * 2);
    await values(registry);
    const v = await values(registry); // at once: no sample in between
    for (const name of LAG_SERIES.slice(1)) expect(v.get(`grid_test_${name}`), name).toBe(0);
  });
});
