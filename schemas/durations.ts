/**
 * The one duration syntax of the grid API: a whole, positive number without leading zeros followed by exactly one
 * unit of ms, s, m or h ("500ms", "30s", "5m", "24h"). It is the union of the `pattern`s the CRD schemas give their
 * duration fields (schemas/crds/*.schema.json); each field's pattern then narrows the units and, through its
 * `[0-9]{3,}`-style digit counts, the range. Go's ParseDuration accepts more ("1h30m", "1.5s", "µs"), but the API
 * server refuses those for every grid field, so accepting them here would let the daemons and the compiler take
 * what a cluster never would. Values beyond Go's largest duration (2^63-1 ns) overflow, as they do in Kubernetes.
 *
 * Lives in schemas/ because both the compiler (constructs/, synth-time checks) and the daemons parse durations.
 */

export type DurationUnit = 'ms' | 's' | 'm' | 'h';

/** Milliseconds per unit. */
export const DURATION_UNIT_MS: Readonly<Record<DurationUnit, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Everything any CRD duration field admits. */
export const DURATION_SYNTAX = /^([1-9][0-9]*)(ms|s|m|h)$/;

/** Go's largest time.Duration (2^63-1 ns) in whole milliseconds: 2562047h47m16.854s. */
export const MAX_DURATION_MS = 9_223_372_036_854;

export type DurationParse =
  | { readonly ok: true; readonly ms: number; readonly unit: DurationUnit }
  | { readonly ok: false; readonly reason: string };

/**
 * Parses one duration. On failure `reason` says what is wrong in words a user can act on ("has no unit"); it
 * does not repeat the text, so callers can quote it once, bounded.
 */
export function parseDuration(text: string): DurationParse {
  const match = DURATION_SYNTAX.exec(text);
  if (match !== null) {
    const unit = match[2] as DurationUnit;
    const ms = Number(match[1]) * DURATION_UNIT_MS[unit];
    if (ms > MAX_DURATION_MS) return { ok: false, reason: 'overflows the largest duration (2562047h47m16.854s)' };
    return { ok: true, ms, unit };
  }
  return { ok: false, reason: whyNotDuration(text) };
}

/** Milliseconds, or undefined when `text` is not a duration. */
export function parseDurationMs(text: string): number | undefined {
  const parsed = parseDuration(text);
  return parsed.ok ? parsed.ms : undefined;
}

// Only reached for text DURATION_SYNTAX refused, so each test here names the first thing a user would fix.
function whyNotDuration(text: string): string {
  if (text === '') return 'is empty';
  if (/\s/u.test(text)) return 'contains whitespace';
  if (text.startsWith('-')) return 'is negative';
  if (/^0+([a-zµ]*)$/u.test(text)) return 'is zero';
  if (/^[0-9]+$/u.test(text)) return 'has no unit';
  if (/^0[0-9]+(ms|s|m|h)$/u.test(text)) return 'has a leading zero';
  if (/^[0-9]*\.[0-9]*[a-zµ]*$/u.test(text) && /[0-9]/u.test(text)) return 'has a fraction';
  if (/^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h)){2,}$/u.test(text)) return 'combines units';
  const unknown = /^[0-9]+([A-Za-zµ]+)$/u.exec(text);
  if (unknown !== null) return `has the unknown unit ${JSON.stringify((unknown[1] as string).slice(0, 8))}`;
  return 'is not a duration';
}

/** `ms` in the largest of `units` that holds it whole ("300000" -> "5m"); plain ms when none does. */
export function formatDuration(ms: number, units: readonly DurationUnit[]): string {
  const largestFirst = [...units].sort((a, b) => DURATION_UNIT_MS[b] - DURATION_UNIT_MS[a]);
  for (const unit of largestFirst) {
    const step = DURATION_UNIT_MS[unit];
    if (ms % step === 0) return `${ms / step}${unit}`;
  }
  return `${ms}ms`;
}

/** What one field (or flag) accepts: units as its CRD pattern lists them, and its inclusive range. */
export interface DurationRule {
  readonly units: readonly DurationUnit[];
  readonly minMs: number;
  /** Absent: up to MAX_DURATION_MS. */
  readonly maxMs?: number;
  /** Shown in errors, e.g. "30s". */
  readonly example?: string;
}

export type DurationCheck =
  | { readonly ok: true; readonly ms: number }
  /**
   * `fault`: the quoted value and what is wrong with it; `problem`: fault and what is accepted; `message`:
   * `<field>: <problem>`, for callers whose errors do not name the field themselves.
   */
  | { readonly ok: false; readonly fault: string; readonly problem: string; readonly message: string };

const UNIT_WORDS: Readonly<Record<DurationUnit, string>> = {
  ms: 'milliseconds (ms)',
  s: 'seconds (s)',
  m: 'minutes (m)',
  h: 'hours (h)',
};

/** "whole seconds (s) or milliseconds (ms) from 1s through 1h", the accepted form of a rule in words. */
export function describeDurationRule(rule: DurationRule): string {
  const words = rule.units.map((unit) => UNIT_WORDS[unit]);
  const list = words.length <= 1 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words.at(-1) as string}`;
  const max = rule.maxMs ?? MAX_DURATION_MS;
  const range =
    max >= MAX_DURATION_MS
      ? `from ${formatDuration(rule.minMs, rule.units)}`
      : `from ${formatDuration(rule.minMs, rule.units)} through ${formatDuration(max, rule.units)}`;
  return `whole ${list} ${range}${rule.example !== undefined ? `, such as ${rule.example}` : ''}`;
}

/**
 * Parses `text` and checks it against `rule`. The error names `field` (a CRD path such as "spec.lifetime" or a
 * flag such as "--lease-duration (env GRID_LEASE_DURATION)"), quotes at most 40 characters of the value, says
 * what is wrong and what is accepted.
 */
export function checkDuration(field: string, text: unknown, rule: DurationRule): DurationCheck {
  const fail = (quoted: string, reason: string): DurationCheck => {
    const fault = `${quoted} ${reason}`;
    const problem = `${fault}; use ${describeDurationRule(rule)}`;
    return { ok: false, fault, problem, message: `${field}: ${problem}` };
  };
  if (typeof text !== 'string') return fail(String(JSON.stringify(text) ?? text).slice(0, 40), 'is not a string');
  const quoted = JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
  const parsed = parseDuration(text);
  if (!parsed.ok) return fail(quoted, parsed.reason);
  if (!rule.units.includes(parsed.unit)) return fail(quoted, `is in ${parsed.unit}, which is not accepted here`);
  if (parsed.ms < rule.minMs) return fail(quoted, `is below ${formatDuration(rule.minMs, rule.units)}`);
  const max = rule.maxMs ?? MAX_DURATION_MS;
  if (parsed.ms > max) return fail(quoted, `is above ${formatDuration(max, rule.units)}`);
  return { ok: true, ms: parsed.ms };
}

/**
 * Lifetime of a site certificate issued by the enrollment endpoint: the daemon flag --enrollment-cert-lifetime
 * and the compiler's `enrollment.certificateLifetime` (which becomes that flag) share it, so synth refuses exactly
 * what the daemon would refuse at start.
 */
export const CERTIFICATE_LIFETIME_RULE: DurationRule = {
  units: ['m', 'h'],
  minMs: 3_600_000,
  maxMs: 8_760 * 3_600_000,
  example: '2160h',
};
