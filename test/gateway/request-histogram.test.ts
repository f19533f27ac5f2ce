// The request-path histogram must expose exactly what prom-client's Histogram exposes for the same observations
// (text, JSON, and the workers' sum), since dashboards and alerts read those series.
import { AggregatorRegistry, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestHistogram } from '../../daemons/gateway/request-histogram.ts';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const OPTIONS = {
  name: 'grid_gateway_test_seconds',
  help: 'A test histogram.',
  labelNames: ['role', 'cluster'] as const,
  buckets: BUCKETS,
};

// Below, on and above bounds, both ends, and repeats; two series.
const OBSERVATIONS: [string, string, number][] = [
  ['consumer', 'sim', 0.0004],
  ['consumer', 'sim', 0.001],
  ['consumer', 'sim', 0.0010001],
  ['consumer', 'sim', 0.03],
  ['consumer', 'sim', 0.03],
  ['consumer', 'sim', 119.9],
  ['consumer', 'sim', 500],
  ['consumer', 'hop', 0],
  ['consumer', 'hop', 2.5],
  ['consumer', 'hop', 7],
];

function both(): { reference: Registry; ours: Registry; histogram: RequestHistogram<'role' | 'cluster'> } {
  const reference = new Registry();
  const ours = new Registry();
  const promHistogram = new Histogram({ ...OPTIONS, labelNames: [...OPTIONS.labelNames], registers: [reference] });
  const histogram = new RequestHistogram({ ...OPTIONS, registers: [ours] });
  for (const [role, cluster, value] of OBSERVATIONS) {
    promHistogram.labels(role, cluster).observe(value);
    histogram.labels(role, cluster).observe(value);
  }
  return { reference, ours, histogram };
}

describe('RequestHistogram', () => {
  it('exposes the same text as prom-client for the same observations', async () => {
    const { reference, ours } = both();
    const text = await ours.metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('grid_gateway_test_seconds_bucket{le="0.001",role="consumer",cluster="sim"} 2');
    expect(text).toContain('grid_gateway_test_seconds_bucket{le="+Inf",role="consumer",cluster="sim"} 7');
    expect(text).toContain('grid_gateway_test_seconds_count{role="consumer",cluster="hop"} 3');
  });

  it('sums across workers (AggregatorRegistry) as prom-client histograms do', async () => {
    const a = both();
    const b = both();
    const reference = AggregatorRegistry.aggregate([
      await a.reference.getMetricsAsJSON(),
      await b.reference.getMetricsAsJSON(),
    ]);
    const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
    const text = await ours.metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('grid_gateway_test_seconds_bucket{le="+Inf",role="consumer",cluster="sim"} 14');
  });

  it('binds a series once and keeps counting into it; a non-finite value is not counted; reset zeroes every series', async () => {
    const { ours, histogram } = both();
    const sim = histogram.labels('consumer', 'sim');
    expect(histogram.labels('consumer', 'sim')).toBe(sim);
    sim.observe(Number.NaN);
    sim.observe(Number.POSITIVE_INFINITY);
    expect(await ours.metrics()).toContain('grid_gateway_test_seconds_count{role="consumer",cluster="sim"} 7');
    ours.resetMetrics();
    sim.observe(0.002);
    const text = await ours.metrics();
    expect(text).toContain('grid_gateway_test_seconds_count{role="consumer",cluster="sim"} 1');
    expect(text).toContain('grid_gateway_test_seconds_bucket{le="0.0025",role="consumer",cluster="sim"} 1');
    expect(text).toContain('grid_gateway_test_seconds_count{role="consumer",cluster="hop"} 0');
  });

  it('refuses buckets out of order and a wrong number of label values', () => {
    expect(() => new RequestHistogram({ ...OPTIONS, name: 'x_seconds', buckets: [1, 0.5], registers: [] })).toThrow(
      /ascending/,
    );
    const histogram = new RequestHistogram({ ...OPTIONS, name: 'y_seconds', registers: [] });
    expect(() => histogram.labels('consumer')).toThrow(/2 label values expected, got 1/);
  });
});
