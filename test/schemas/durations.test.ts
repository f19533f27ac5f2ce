// The one duration parser: what it accepts is what the CRD duration patterns admit, every refusal says why, and
// checkDuration's errors name the field and the accepted range.
import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkDuration,
  describeDurationRule,
  DURATION_SYNTAX,
  DURATION_UNIT_MS,
  type DurationRule,
  type DurationUnit,
  formatDuration,
  MAX_DURATION_MS,
  parseDuration,
  parseDurationMs,
} from '../../schemas/durations.ts';

const CRD_DIR = new URL('../../schemas/crds/', import.meta.url);

/** Every `pattern` of a CRD field that is a duration (a positive count followed by a unit), by file and path. */
function crdDurationPatterns(): Array<{ where: string; pattern: RegExp }> {
  const found: Array<{ where: string; pattern: RegExp }> = [];
  const walk = (node: unknown, where: string): void => {
    if (node === null || typeof node !== 'object') return;
    const pattern = (node as { pattern?: unknown }).pattern;
    if (typeof pattern === 'string' && /\[1-9\]\[0-9\]/u.test(pattern) && /(s|h)\)?\$$/u.test(pattern)) {
      found.push({ where, pattern: new RegExp(pattern, 'u') });
    }
    for (const [key, value] of Object.entries(node)) walk(value, `${where}/${key}`);
  };
  for (const file of readdirSync(CRD_DIR).filter((f) => f.endsWith('.schema.json'))) {
    walk(JSON.parse(readFileSync(new URL(file, CRD_DIR), 'utf8')), file);
  }
  return found;
}

// Counts around every unit boundary, range bound and the overflow edge, each with every unit and near-units.
const COUNTS = [
  '0',
  '1',
  '5',
  '05',
  '9',
  '10',
  '59',
  '60',
  '99',
  '100',
  '168',
  '169',
  '999',
  '1000',
  '1500',
  '8760',
  '8761',
  '10080',
  '86400',
  '525600',
  '604800',
  '999999',
  '1000000',
  '2562047',
  '2562048',
  '153722867',
  '153722868',
  '9223372036',
  '9223372037',
  '9223372036854',
  '9223372036855',
  '99999999',
];
const SUFFIXES = ['', 'ms', 's', 'm', 'h', 'us', 'µs', 'ns', 'd', 'S', 'H', 'Ms', ' s', 's ', 'sec'];
const ODD = [
  '',
  ' ',
  ' 5s',
  '5s ',
  '\t5s',
  '5s\n',
  '-5s',
  '+5s',
  '1h30m',
  '1m30s',
  '1.5s',
  '0.5h',
  '.5s',
  '5.s',
  'NaN',
  'NaNs',
  'Infinity',
  'Infinitys',
  'fast',
  '0x10s',
  '1e3ms',
  '１s',
  's',
  'ms',
  '5s5',
  `${'9'.repeat(40)}s`,
];
const CORPUS = [...COUNTS.flatMap((count) => SUFFIXES.map((suffix) => count + suffix)), ...ODD];

describe('parseDuration', () => {
  it.each([
    ['1ms', 1],
    ['999ms', 999],
    ['1000ms', 1_000],
    ['1s', 1_000],
    ['59s', 59_000],
    ['1m', 60_000],
    ['90m', 5_400_000],
    ['1h', 3_600_000],
    ['168h', 604_800_000],
    ['8760h', 31_536_000_000],
    // The largest whole value of each unit that still fits Go's time.Duration.
    ['9223372036854ms', MAX_DURATION_MS],
    ['9223372036s', 9_223_372_036_000],
    ['153722867m', 9_223_372_020_000],
    ['2562047h', 9_223_369_200_000],
  ])('accepts %j as %d ms', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms, unit: /[a-z]+$/u.exec(text)?.[0] });
    expect(parseDurationMs(text)).toBe(ms);
  });

  it.each([
    ['', 'is empty'],
    [' ', 'contains whitespace'],
    [' 5s', 'contains whitespace'],
    ['5s ', 'contains whitespace'],
    ['5 s', 'contains whitespace'],
    ['\t5s', 'contains whitespace'],
    ['5s\n', 'contains whitespace'],
    ['-5s', 'is negative'],
    ['-0s', 'is negative'],
    ['0', 'is zero'],
    ['0s', 'is zero'],
    ['00ms', 'is zero'],
    ['5', 'has no unit'],
    ['1500', 'has no unit'],
    ['05s', 'has a leading zero'],
    ['1.5s', 'has a fraction'],
    ['0.5h', 'has a fraction'],
    ['.5s', 'has a fraction'],
    ['1h30m', 'combines units'],
    ['1m30s', 'combines units'],
    ['5d', 'has the unknown unit "d"'],
    ['5us', 'has the unknown unit "us"'],
    ['5µs', 'has the unknown unit "µs"'],
    ['5ns', 'has the unknown unit "ns"'],
    ['5S', 'has the unknown unit "S"'],
    ['5sec', 'has the unknown unit "sec"'],
    ['NaN', 'is not a duration'],
    ['NaNs', 'is not a duration'],
    ['Infinity', 'is not a duration'],
    ['fast', 'is not a duration'],
    ['+5s', 'is not a duration'],
    ['0x10s', 'is not a duration'],
    ['1e3ms', 'is not a duration'],
    ['１s', 'is not a duration'],
    ['s', 'is not a duration'],
    ['9223372036855ms', 'overflows the largest duration (2562047h47m16.854s)'],
    ['9223372037s', 'overflows the largest duration (2562047h47m16.854s)'],
    ['153722868m', 'overflows the largest duration (2562047h47m16.854s)'],
    ['2562048h', 'overflows the largest duration (2562047h47m16.854s)'],
    ['99999999h', 'overflows the largest duration (2562047h47m16.854s)'],
    [`${'9'.repeat(40)}s`, 'overflows the largest duration (2562047h47m16.854s)'],
  ])('refuses %j: %s', (text, reason) => {
    expect(parseDuration(text)).toEqual({ ok: false, reason });
    expect(parseDurationMs(text)).toBeUndefined();
  });

  it('accepts exactly the duration syntax below the overflow edge, for generated text too', () => {
    const agree = (text: string): void => {
      const parsed = parseDuration(text);
      const match = DURATION_SYNTAX.exec(text);
      // Computed apart from the parser: exact integers, so precision cannot hide an overflow.
      const fits =
        match !== null &&
        BigInt(match[1] as string) * BigInt(DURATION_UNIT_MS[match[2] as DurationUnit]) <= BigInt(MAX_DURATION_MS);
      expect(parsed.ok, JSON.stringify(text)).toBe(fits);
      if (parsed.ok)
        expect(BigInt(parsed.ms)).toBe(BigInt(match?.[1] as string) * BigInt(DURATION_UNIT_MS[parsed.unit]));
      if (match !== null && !parsed.ok) expect(parsed.reason).toMatch(/^overflows/u);
    };
    for (const text of CORPUS) agree(text);
    const chars = fc.constantFrom('0', '1', '5', '9', '.', '-', '+', ' ', 'm', 's', 'h', 'u', 'n', 'd', 'µ', 'e');
    fc.assert(
      fc.property(
        fc.array(chars, { maxLength: 10 }).map((a) => a.join('')),
        (text) => agree(text),
      ),
      { numRuns: 3_000, seed: 1729 },
    );
  });

  it('takes everything any CRD duration field admits (bar overflow), and no syntax none of them admits', () => {
    const fields = crdDurationPatterns();
    // Today: swim.probeInterval, swim.suspicionTimeout, metricsRefreshInterval, pressure.minimumStateDuration,
    // pressure.recoveryHoldDown, healthCheck.interval, healthCheck.timeout, metricsConfig.timeout, SiteInvite lifetime.
    expect(fields.length).toBeGreaterThanOrEqual(9);
    for (const text of CORPUS) {
      const admitted = fields.filter((f) => f.pattern.test(text));
      const parsed = parseDuration(text);
      if (admitted.length > 0) {
        expect(
          parsed.ok || parsed.reason.startsWith('overflows'),
          `${JSON.stringify(text)} is admitted by ${admitted[0]?.where}`,
        ).toBe(true);
      }
      if (parsed.ok) expect(DURATION_SYNTAX.test(text)).toBe(true);
    }
    // Every unit the parser knows is one some field's pattern admits.
    for (const unit of ['ms', 's', 'm', 'h']) expect(fields.some((f) => f.pattern.test(`5${unit}`))).toBe(true);
  });
});

describe('formatDuration', () => {
  it.each([
    [300_000, ['s', 'm', 'h'], '5m'],
    [604_800_000, ['s', 'm', 'h'], '168h'],
    [90_000, ['s', 'm', 'h'], '90s'],
    [1_000, ['s', 'ms'], '1s'],
    [1_500, ['s', 'ms'], '1500ms'],
    [1, ['ms'], '1ms'],
    [1_500, ['s'], '1500ms'],
  ] as const)('%d ms in %j is %s', (ms, units, want) => {
    expect(formatDuration(ms, units)).toBe(want);
  });
});

describe('checkDuration', () => {
  const LIFETIME: DurationRule = { units: ['s', 'm', 'h'], minMs: 300_000, maxMs: 604_800_000, example: '24h' };
  const ACCEPTS = 'use whole seconds (s), minutes (m) or hours (h) from 5m through 168h, such as 24h';

  it.each([
    ['300s', 300_000],
    ['5m', 300_000],
    ['168h', 604_800_000],
    ['10080m', 604_800_000],
    ['604800s', 604_800_000],
  ])('accepts %j at or inside the bounds', (text, ms) => {
    expect(checkDuration('spec.lifetime', text, LIFETIME)).toEqual({ ok: true, ms });
  });

  it.each([
    ['299s', '"299s" is below 5m'],
    ['4m', '"4m" is below 5m'],
    ['169h', '"169h" is above 168h'],
    ['604801s', '"604801s" is above 168h'],
    ['10081m', '"10081m" is above 168h'],
    ['99999999h', '"99999999h" overflows the largest duration (2562047h47m16.854s)'],
    ['300000ms', '"300000ms" is in ms, which is not accepted here'],
    ['', '"" is empty'],
    ['24 h', '"24 h" contains whitespace'],
    ['1d', '"1d" has the unknown unit "d"'],
  ])('refuses %j naming the field, what is wrong and the accepted range', (text, fault) => {
    const checked = checkDuration('spec.lifetime', text, LIFETIME);
    expect(checked).toEqual({
      ok: false,
      fault,
      problem: `${fault}; ${ACCEPTS}`,
      message: `spec.lifetime: ${fault}; ${ACCEPTS}`,
    });
  });

  it('quotes at most 40 characters, escaped, and copes with a value that is not a string', () => {
    const long = checkDuration('f', `${'x'.repeat(100)}\u0000`, LIFETIME);
    expect(long.ok).toBe(false);
    if (!long.ok) expect(long.fault).toBe(`"${'x'.repeat(40)}…" is not a duration`);
    const control = checkDuration('f', 'a\nb', LIFETIME);
    if (!control.ok) expect(control.fault).toBe('"a\\nb" contains whitespace');
    for (const value of [5, null, undefined, { s: 1 }]) {
      const checked = checkDuration('f', value, LIFETIME);
      expect(checked.ok).toBe(false);
      if (!checked.ok) expect(checked.message).toMatch(/^f: .* is not a string; use whole seconds/u);
    }
  });

  it('describes open-ended and single-unit rules', () => {
    expect(describeDurationRule({ units: ['s'], minMs: 1_000 })).toBe('whole seconds (s) from 1s');
    expect(describeDurationRule({ units: ['s', 'ms'], minMs: 1_000, example: '10s' })).toBe(
      'whole seconds (s) or milliseconds (ms) from 1s, such as 10s',
    );
    expect(describeDurationRule({ units: ['m', 'h'], minMs: 3_600_000, maxMs: 31_536_000_000 })).toBe(
      'whole minutes (m) or hours (h) from 1h through 8760h',
    );
  });
});
