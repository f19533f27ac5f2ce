/**
 * Which series each scoring signal is read from, and how they become a value in [0,1] (pure).
 *
 * A signal comes from spec.metricsConfig.signalNames when it names a metric (read as is: the mean over its series,
 * divided by queueCapacity for the queue), otherwise from the preset of spec.metricsConfig.engine
 * (schemas/engines/engine-presets.json), otherwise nowhere: the signal is then not configured. A configured signal
 * whose series are not on the page is missing, never NaN: the scoring and admission rules for missing signals apply.
 *
 * Counter readings (prefix-cache hits over queries) need the previous scrape's totals; the caller keeps the
 * returned counters with its last good sample and passes them back.
 */
import { ENGINE_PRESETS, selectorText, type MetricsEngine } from '../../../schemas/engines/presets.ts';
import type { CounterRatioReading, SeriesSelector, SignalReading } from '../../../schemas/generated/engine-presets.ts';
import type { ScrapedSignal } from '../../../schemas/generated/inferenceproviders.ts';
import { seriesTotals, signalValue, type Sample } from './prometheus-text.ts';

/** The scoring signals a scrape can fill, in the order status lists them. */
export const SCORED_SIGNALS = [
  'queueDepth',
  'kvCacheUtilization',
  'latencyP99Ms',
  'prefixCacheHitRatio',
  'errorRate',
] as const;
export type ScoredSignal = (typeof SCORED_SIGNALS)[number];

export type SignalNames = Readonly<Partial<Record<ScoredSignal, string>>>;

export type SignalSource =
  | { readonly from: 'signalNames'; readonly metric: string }
  | { readonly from: 'preset'; readonly engine: MetricsEngine; readonly readings: readonly SignalReading[] };

export type SignalPlan = Readonly<Partial<Record<ScoredSignal, SignalSource>>>;

/** Totals of one counter reading at the last good scrape, and the ratio it gave. */
export interface CounterMemory {
  /** The reading's series: totals of another reading (the spec changed) are not a baseline. */
  readonly key: string;
  readonly numerator: number;
  readonly denominator: number;
  readonly ratio: number | undefined;
}

export type CounterMemories = Readonly<Partial<Record<ScoredSignal, CounterMemory>>>;

export interface SignalReadOptions {
  /** Labels every series must carry (metricsConfig.poolName selects `name`). */
  readonly match?: Readonly<Record<string, string>>;
  /** metricsConfig.queueCapacity: replaces the preset's denominator of the queue, divides a named raw queue. */
  readonly queueCapacity?: number;
  readonly counters?: CounterMemories;
}

export interface SignalRead {
  /** Normalised values: ratios in [0,1], latency in ms (not negative); a signal without a value is absent. */
  readonly values: Readonly<Partial<Record<ScoredSignal, number>>>;
  /** The signals that got a value and the series each was read from (status.scrapedSignals). */
  readonly scraped: readonly ScrapedSignal[];
  readonly counters: CounterMemories;
}

/** The effective source of every signal: signalNames wins per signal, the engine preset fills the rest. */
export function planSignals(signalNames: SignalNames, engine: MetricsEngine | undefined): SignalPlan {
  const preset = engine === undefined ? undefined : ENGINE_PRESETS[engine]?.signals;
  const plan: Partial<Record<ScoredSignal, SignalSource>> = {};
  for (const signal of SCORED_SIGNALS) {
    const named = signalNames[signal];
    const readings = preset?.[signal as keyof typeof preset]?.readings;
    if (named !== undefined) plan[signal] = { from: 'signalNames', metric: named };
    else if (engine !== undefined && readings !== undefined) plan[signal] = { from: 'preset', engine, readings };
  }
  return plan;
}

export function readSignals(samples: readonly Sample[], plan: SignalPlan, options: SignalReadOptions = {}): SignalRead {
  const match = options.match ?? {};
  const capacity =
    options.queueCapacity !== undefined && Number.isFinite(options.queueCapacity) && options.queueCapacity > 0
      ? options.queueCapacity
      : undefined;
  const values: Partial<Record<ScoredSignal, number>> = {};
  const scraped: ScrapedSignal[] = [];
  const counters: Partial<Record<ScoredSignal, CounterMemory>> = {};
  for (const signal of SCORED_SIGNALS) {
    const source = plan[signal];
    if (source === undefined) continue;
    let read: Reading | undefined;
    if (source.from === 'signalNames') {
      const raw = signalValue(samples, source.metric, match);
      const value = raw === undefined ? undefined : normalizeNamed(signal, raw, capacity);
      read = { value, metrics: [source.metric] };
    } else {
      for (const reading of source.readings) {
        read = evaluate(
          reading,
          samples,
          match,
          signal === 'queueDepth' ? capacity : undefined,
          options.counters?.[signal],
        );
        if (read !== undefined) break;
      }
    }
    if (read?.memory !== undefined) counters[signal] = read.memory;
    if (read?.value === undefined || !Number.isFinite(read.value)) continue;
    values[signal] = read.value;
    scraped.push({ signal, ...(source.from === 'preset' ? { engine: source.engine } : {}), metrics: read.metrics });
  }
  return { values, scraped, counters };
}

interface Reading {
  readonly value: number | undefined;
  readonly metrics: string[];
  readonly memory?: CounterMemory;
}

/** A named metric is taken as its exporter publishes it: already normalised, or a raw queue over queueCapacity. */
function normalizeNamed(signal: ScoredSignal, raw: number, capacity: number | undefined): number {
  if (signal === 'latencyP99Ms') return Math.max(0, raw);
  return clamp01(signal === 'queueDepth' && capacity !== undefined ? raw / capacity : raw);
}

/** undefined when a series the reading needs is not on the page (the next reading is tried). */
function evaluate(
  reading: SignalReading,
  samples: readonly Sample[],
  match: Readonly<Record<string, string>>,
  queueCapacity: number | undefined,
  previous: CounterMemory | undefined,
): Reading | undefined {
  const totals = (selector: SeriesSelector) =>
    seriesTotals(samples, selector.metric, { ...selector.labels, ...match } as Record<string, string>);
  switch (reading.kind) {
    case 'fraction': {
      const value = totals(reading.value);
      if (value.count === 0) return undefined;
      return { value: finite01(value.sum / value.count), metrics: [selectorText(reading.value)] };
    }
    case 'waitingShare': {
      const waiting = totals(reading.waiting);
      if (waiting.count === 0) return undefined;
      const queued = Math.max(0, waiting.sum);
      if (queueCapacity !== undefined)
        return { value: finite01(queued / queueCapacity), metrics: [selectorText(reading.waiting)] };
      const running = totals(reading.running);
      if (running.count === 0) return undefined;
      const inEngine = queued + Math.max(0, running.sum);
      // An idle engine (nothing waiting, nothing running) has no queue.
      return {
        value: inEngine === 0 ? 0 : finite01(queued / inEngine),
        metrics: [selectorText(reading.waiting), selectorText(reading.running)],
      };
    }
    case 'gaugeRatio': {
      const numerator = totals(reading.numerator);
      const denominator = totals(reading.denominator);
      if (numerator.count === 0 || denominator.count === 0) return undefined;
      const value = denominator.sum > 0 ? finite01(numerator.sum / denominator.sum) : undefined;
      return { value, metrics: [selectorText(reading.numerator), selectorText(reading.denominator)] };
    }
    case 'counterRatio': {
      const numerator = totals(reading.numerator);
      const denominator = totals(reading.denominator);
      if (numerator.count === 0 || denominator.count === 0) return undefined;
      const memory = counterRatio(reading, numerator.sum, denominator.sum, previous);
      return {
        value: memory.ratio,
        metrics: [selectorText(reading.numerator), selectorText(reading.denominator)],
        memory,
      };
    }
  }
}

/**
 * The hit ratio of the interval since the last good scrape, so it follows the current workload rather than the
 * engine's lifetime. Without a baseline (first scrape, another reading) or after a counter went backwards (the
 * engine restarted: its counters start again at 0), the totals are the increase, as Prometheus' increase() treats
 * a reset. An interval with no new queries keeps the previous ratio: nothing happened that could change it.
 */
function counterRatio(
  reading: CounterRatioReading,
  numerator: number,
  denominator: number,
  previous: CounterMemory | undefined,
): CounterMemory {
  const key = `${selectorText(reading.numerator)}/${selectorText(reading.denominator)}`;
  const base =
    previous?.key === key && numerator >= previous.numerator && denominator >= previous.denominator
      ? previous
      : undefined;
  let ratio: number | undefined;
  if (base === undefined) ratio = denominator > 0 ? numerator / denominator : undefined;
  else if (denominator > base.denominator) ratio = (numerator - base.numerator) / (denominator - base.denominator);
  else ratio = base.ratio;
  return { key, numerator, denominator, ratio: ratio === undefined ? undefined : finite01(ratio) };
}

function clamp01(value: number): number {
  return Math.min(1, Math.max(0, value));
}

/** Sums of huge samples can overflow to Infinity and 0/0 is NaN: neither is a value. */
function finite01(value: number): number | undefined {
  return Number.isFinite(value) ? clamp01(value) : undefined;
}
