/**
 * A bounded reader for the Prometheus text exposition format (version 0.0.4), enough to pull the provider signals
 * AGN scores on (queue depth, KV-cache utilisation, prefix-cache hits) out of a serving engine's or an llm-d EPP's
 * /metrics page.
 *
 * Non-finite samples (NaN, ±Inf) are dropped at parse time, so
 * nothing downstream has to re-check them.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Lines beyond this are ignored: a metrics page with more series is not one we should be scoring from. */
export const MAX_SAMPLES = 50_000;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const rawLine of text.split('\n')) {
    if (samples.length >= MAX_SAMPLES) break;
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const sample = parseLine(line);
    if (sample !== undefined) samples.push(sample);
  }
  return samples;
}

function parseLine(line: string): Sample | undefined {
  const name = METRIC_NAME.exec(line)?.[0];
  if (name === undefined) return undefined;
  let rest = line.slice(name.length);
  let labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    const parsed = parseLabels(rest);
    if (parsed === undefined) return undefined;
    labels = parsed.labels;
    rest = rest.slice(parsed.length);
  }
  const valueText = rest.trim().split(/\s+/)[0];
  if (valueText === undefined || valueText === '') return undefined;
  const value = Number(valueText);
  // Number('') is 0 and Number('0x1') is 1: accept only what the exposition format allows.
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(valueText) || !Number.isFinite(value)) return undefined;
  return { name, labels, value };
}

/** Parses `{a="x",b="y\"z"}` from the start of `text`; returns the labels and how many characters were consumed. */
function parseLabels(text: string): { labels: Record<string, string>; length: number } | undefined {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (text[i] === ' ' || text[i] === ',') i++;
    if (text[i] === '}') return { labels, length: i + 1 };
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (nameMatch === null) return undefined;
    i += nameMatch[0].length;
    while (text[i] === ' ') i++;
    if (text[i] !== '=' || text[i + 1] !== '"') return undefined;
    i += 2;
    let value = '';
    for (;;) {
      const ch = text[i];
      if (ch === undefined) return undefined;
      if (ch === '"') break;
      if (ch === '\\') {
        const next = text[i + 1];
        value += next === 'n' ? '\n' : (next ?? '');
        i += 2;
        continue;
      }
      value += ch;
      i++;
    }
    labels[nameMatch[0]] = value;
    i++;
  }
}

/**
 * The value of one signal: the samples named `name` (optionally only those whose labels include `match`), averaged
 * when a pool exposes one series per endpoint. undefined when there is no such series.
 */
export function signalValue(
  samples: readonly Sample[],
  name: string,
  match: Readonly<Record<string, string>> = {},
): number | undefined {
  const { sum, count } = seriesTotals(samples, name, match);
  return count === 0 ? undefined : sum / count;
}

/**
 * The sum and number of the samples named `name` whose labels include every entry of `match` (other labels are not
 * looked at): engine presets sum counts and average fractions over the replicas or ranks behind one endpoint.
 */
export function seriesTotals(
  samples: readonly Sample[],
  name: string,
  match: Readonly<Record<string, string>> = {},
): { sum: number; count: number } {
  let sum = 0;
  let count = 0;
  const wanted = Object.entries(match);
  for (const sample of samples) {
    if (sample.name !== name) continue;
    if (!wanted.every(([key, value]) => sample.labels[key] === value)) continue;
    sum += sample.value;
    count++;
  }
  return { sum, count };
}
