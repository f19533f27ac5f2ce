// A Prometheus histogram for the request path. prom-client's `observe` validates the label object, builds a hash
// string from it and looks the series up on every observation, allocating as it goes; the gateway observes two
// histograms per request. Here a label set is bound once (`labels()` returns the series) and an observation is a
// bucket search and three additions. The registry reads it through `get()` like any prom-client metric, so
// /metrics and the workers' sum (AggregatorRegistry) see the same histogram prom-client would expose.
// prom-client's typings declare a metric's `type` as a numeric enum; its registry writes the string ('histogram').
import type { MetricObjectWithValues, MetricType, MetricValueWithName, Registry } from 'prom-client';

export interface HistogramSeries {
  observe(seconds: number): void;
}

class Series implements HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  readonly #bounds: Float64Array;
  /** Per bucket (not cumulative); the last one is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(labels: Record<string, string>, bounds: Float64Array) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // prom-client throws on a non-finite value; the request path must not, and such a value measures nothing.
    if (!Number.isFinite(value)) return;
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export interface RequestHistogramOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  /** Upper bounds in ascending order; +Inf is implied. */
  readonly buckets: readonly number[];
  readonly registers: readonly Registry[];
}

export class RequestHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  readonly #labelNames: readonly L[];
  readonly #bounds: Float64Array;
  readonly #series = new Map<string, Series>();

  constructor(options: RequestHistogramOptions<L>) {
    for (let i = 1; i < options.buckets.length; i++) {
      if (!(options.buckets[i]! > options.buckets[i - 1]!))
        throw new Error(`histogram ${options.name}: buckets must be ascending`);
    }
    this.name = options.name;
    this.help = options.help;
    this.#labelNames = options.labelNames;
    this.#bounds = Float64Array.from(options.buckets);
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  /** The series of these label values (in labelNames order), made on first use and kept: bind it once, observe often. */
  labels(...values: string[]): HistogramSeries {
    if (values.length !== this.#labelNames.length)
      throw new Error(`histogram ${this.name}: ${this.#labelNames.length} label values expected, got ${values.length}`);
    const key = values.join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      const labels: Record<string, string> = {};
      this.#labelNames.forEach((name, i) => {
        labels[name] = values[i]!;
      });
      series = new Series(labels, this.#bounds);
      this.#series.set(key, series);
    }
    return series;
  }

  /** What prom-client's Histogram.get() returns for the same observations: cumulative buckets, +Inf, sum, count. */
  async get(): Promise<Omit<MetricObjectWithValues<MetricValueWithName<string>>, 'collect'>> {
    const values: MetricValueWithName<string>[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.#series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ labels: { le: this.#bounds[i]!, ...series.labels }, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: bucket });
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type as unknown as MetricType,
      values,
      aggregator: this.aggregator,
    };
  }

  /** Registry.resetMetrics(): every series back to zero, kept, so a series bound earlier still counts. */
  reset(): void {
    for (const series of this.#series.values()) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }
}
