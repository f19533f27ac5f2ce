// The command line every bench shares: strict options, --help on stdout with exit 0, a usage error as one stderr line
// naming the bench with exit 2, and numbers checked by name (positive, whole, or a count that may be 0).
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;
/** What parseArgs gives for `T` (its own inferred type does not survive a generic option set). */
type Values<T extends Options> = {
  [K in keyof T]?: T[K] extends { multiple: true } ? string[] : T[K] extends { type: 'boolean' } ? boolean : string;
};

/**
 * Parses argv with `options` (plus --help/-h); exits 0 after printing `usage` on --help, 2 on a usage error.
 * `positionals`: the bench takes bare arguments too (sizes, counts), returned as `positionals`.
 */
export function benchArgs<T extends Options>(bench: string, usage: string, options: T, { positionals = false } = {}) {
  const config = {
    strict: true as const,
    allowPositionals: positionals,
    options: { ...options, help: { type: 'boolean' as const, short: 'h' } },
  };
  let parsed: ReturnType<typeof parseArgs<typeof config>>;
  try {
    parsed = parseArgs(config);
  } catch (error) {
    // Node's messages can span lines; a usage error is one.
    process.stderr.write(`${bench}: ${(error as Error).message.replace(/\s*\n\s*/g, ' ')} (${usage})\n`);
    process.exit(2);
  }
  const values = parsed.values as Values<T>;
  if ((parsed.values as { help?: boolean }).help === true) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  /** A usage error: `message` on one stderr line with the usage, exit 2. */
  const fail = (message: string): never => {
    process.stderr.write(`${bench}: ${message} (${usage})\n`);
    process.exit(2);
  };
  /** `value` as a positive number (`fallback` when absent); anything else is a usage error naming --`name`. */
  const positive = (name: string, value: string | undefined, fallback: number): number => {
    const n = value === undefined ? fallback : Number(value);
    if (!Number.isFinite(n) || n <= 0) fail(`--${name} must be a positive number, got "${value}"`);
    return n;
  };
  /** `value` as a whole number of at least 1 (counts: rounds, requests, connections); anything else is a usage error. */
  const whole = (name: string, value: string | undefined, fallback: number): number => {
    const n = positive(name, value, fallback);
    if (!Number.isInteger(n)) fail(`--${name} must be a whole number, got "${value}"`);
    return n;
  };
  /** `value` as a whole number of at least 0 (a count that may be none: 0 turns a step off); anything else is a usage error. */
  const count = (name: string, value: string | undefined, fallback: number): number => {
    const n = value === undefined ? fallback : Number(value);
    if (value !== undefined && (value.trim() === '' || !Number.isInteger(n) || n < 0))
      fail(`--${name} must be a whole number of at least 0, got "${value}"`);
    return n;
  };
  return { values, positionals: parsed.positionals, positive, whole, count, fail };
}
