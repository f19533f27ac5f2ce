// The routing bench's arithmetic, pure: the fleet's capacity from the sims' parameters, the per-policy summary of a
// window, the ratios to round-robin and the printed table.
import type { BenchBackend } from './policies.ts';
import type { FleetCounters, RequestOutcome } from './run.ts';

/** The p-th percentile (0..100) by nearest rank; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Tokens the Llama 3 chat template adds: <|begin_of_text|> and the assistant header, and 4 + the role per message. */
export function templateTokens(messages: number): number {
  return 1 + 4 + messages * 5;
}

/**
 * Requests per second one backend serves with its batch full and nothing cached: every request's prompt prefilled
 * (prefill_ms_per_token each token) and its output decoded in steps of step_overhead_ms + decode_ms_per_seq per
 * sequence shared by max_num_seqs sequences. Cache hits make the real figure higher; it is the cold capacity.
 */
export function backendCapacity(backend: BenchBackend, promptTokens: number, outputTokens: number): number {
  const e = backend.engine;
  const prefillMs = promptTokens * e.prefillMsPerToken;
  const decodeMs = (outputTokens * (e.stepOverheadMs + e.decodeMsPerSeq * e.maxNumSeqs)) / e.maxNumSeqs;
  return 1000 / (prefillMs + decodeMs);
}

export function fleetCapacity(backends: readonly BenchBackend[], promptTokens: number, outputTokens: number): number {
  return backends.reduce((sum, b) => sum + backendCapacity(b, promptTokens, outputTokens), 0);
}

export interface WindowSummary {
  readonly policy: string;
  readonly load: number;
  readonly rate: number;
  /** Requests that arrived in the measured window (after the warm-up). */
  readonly requests: number;
  readonly ttftP50: number;
  readonly ttftP99: number;
  readonly e2eP50: number;
  readonly e2eP99: number;
  /** Output tokens the fleet generated per second during the measured window (the sims' counters). */
  readonly tokensPerSecond: number;
  /** Prefix-cache hits over queries during the window (the sims' counters), 0..1. */
  readonly prefixHitRate: number;
  readonly failed: number;
  /** Share of requests each backend answered. */
  readonly shares: Record<string, number>;
}

export function summarize(
  policy: string,
  load: number,
  rate: number,
  outcomes: readonly RequestOutcome[],
  warmMs: number,
  counters: FleetCounters,
  windowMs: number,
): WindowSummary {
  const measured = outcomes.filter((o) => o.sentAtMs >= warmMs);
  const ok = measured.filter((o) => o.ok);
  const shares: Record<string, number> = {};
  for (const o of ok) if (o.backend !== undefined) shares[o.backend] = (shares[o.backend] ?? 0) + 1 / ok.length;
  return {
    policy,
    load,
    rate,
    requests: measured.length,
    ttftP50: percentile(
      ok.flatMap((o) => (o.ttftMs === undefined ? [] : [o.ttftMs])),
      50,
    ),
    ttftP99: percentile(
      ok.flatMap((o) => (o.ttftMs === undefined ? [] : [o.ttftMs])),
      99,
    ),
    e2eP50: percentile(
      ok.flatMap((o) => (o.e2eMs === undefined ? [] : [o.e2eMs])),
      50,
    ),
    e2eP99: percentile(
      ok.flatMap((o) => (o.e2eMs === undefined ? [] : [o.e2eMs])),
      99,
    ),
    tokensPerSecond: counters.generationTokens / (windowMs / 1000),
    prefixHitRate: counters.prefixQueries === 0 ? 0 : counters.prefixHits / counters.prefixQueries,
    failed: measured.length - ok.length,
    shares,
  };
}

const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)}` : '-');

/** One row per policy and load: the table the bench prints and BENCHMARKS.md quotes. */
export function formatTable(rows: readonly WindowSummary[]): string {
  const header =
    '| load | policy | req/s | requests | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | output tok/s | prefix hit | failed |';
  const rule = '|---|---|---|---|---|---|---|---|---|---|---|';
  const lines = rows.map(
    (r) =>
      `| ${Math.round(r.load * 100)} % | ${r.policy} | ${r.rate.toFixed(1)} | ${r.requests} | ${ms(r.ttftP50)} | ${ms(r.ttftP99)} | ${ms(r.e2eP50)} | ${ms(r.e2eP99)} | ${r.tokensPerSecond.toFixed(0)} | ${(r.prefixHitRate * 100).toFixed(1)} % | ${r.failed} |`,
  );
  return [header, rule, ...lines].join('\n');
}

export interface Ratios {
  readonly policy: string;
  readonly load: number;
  readonly ttftP99: number;
  readonly e2eP99: number;
  readonly tokensPerSecond: number;
  readonly prefixHitRate: number;
}

/** Each policy's figures over round-robin's at the same load (the targets are stated against it). */
export function ratiosToRoundRobin(rows: readonly WindowSummary[], baseline = 'round-robin'): Ratios[] {
  const out: Ratios[] = [];
  for (const r of rows) {
    if (r.policy === baseline) continue;
    const b = rows.find((x) => x.policy === baseline && x.load === r.load);
    if (b === undefined) continue;
    out.push({
      policy: r.policy,
      load: r.load,
      ttftP99: r.ttftP99 / b.ttftP99,
      e2eP99: r.e2eP99 / b.e2eP99,
      tokensPerSecond: r.tokensPerSecond / b.tokensPerSecond,
      prefixHitRate: b.prefixHitRate === 0 ? Number.POSITIVE_INFINITY : r.prefixHitRate / b.prefixHitRate,
    });
  }
  return out;
}

export function formatRatios(ratios: readonly Ratios[]): string {
  const x = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const header = '| load | policy / round-robin | TTFT p99 | e2e p99 | output tok/s | prefix hit |';
  const rule = '|---|---|---|---|---|---|';
  return [
    header,
    rule,
    ...ratios.map(
      (r) =>
        `| ${Math.round(r.load * 100)} % | ${r.policy} | ${x(r.ttftP99)} | ${x(r.e2eP99)} | ${x(r.tokensPerSecond)} | ${x(r.prefixHitRate)} |`,
    ),
  ].join('\n');
}

export function formatShares(rows: readonly WindowSummary[], backends: readonly string[]): string {
  const header = `| load | policy | ${backends.join(' | ')} |`;
  const rule = `|---|---|${backends.map(() => '---|').join('')}`;
  const pct = (v: number | undefined): string => `${Math.round((v ?? 0) * 100)} %`;
  return [
    header,
    rule,
    ...rows.map(
      (r) => `| ${Math.round(r.load * 100)} % | ${r.policy} | ${backends.map((b) => pct(r.shares[b])).join(' | ')} |`,
    ),
  ].join('\n');
}

/**
 * When traffic left a dead backend or site: the send time of the last request after `killedAtMs` (and before `untilMs`)
 * that failed, or the last moment the gateway's retry counter moved, whichever is later; 0 when nothing failed or retried.
 */
export function movedAfterMs(
  outcomes: readonly RequestOutcome[],
  retryTimesMs: readonly number[],
  killedAtMs: number,
  untilMs: number,
): number {
  let last = killedAtMs;
  for (const o of outcomes)
    if (!o.ok && o.sentAtMs >= killedAtMs && o.sentAtMs < untilMs) last = Math.max(last, o.sentAtMs);
  for (const t of retryTimesMs) if (t >= killedAtMs && t < untilMs) last = Math.max(last, t);
  return last - killedAtMs;
}
