// One JSON logger for every daemon. Secrets never reach a log line: known secret-bearing keys are
// redacted by path, and `redactText` masks bearer tokens and PEM private keys inside free text.
import pino from 'pino';
import type { Logger, LoggerOptions } from 'pino';

export type { Logger } from 'pino';

const REDACTED = '[redacted]';

/** Keys that may carry secret bytes wherever they appear (one and two levels deep). */
const SECRET_KEYS = [
  'authorization',
  'Authorization',
  'token',
  'password',
  'secret',
  'value',
  'key_pem',
  'keyPem',
  'private_key',
  'privateKey',
  'cookie',
  'set-cookie',
];

function redactPaths(): string[] {
  const paths: string[] = [];
  for (const key of SECRET_KEYS) {
    const quoted = `["${key}"]`;
    paths.push(quoted, `*${quoted}`, `*.*${quoted}`, `headers${quoted}`, `req.headers${quoted}`);
  }
  return paths;
}

export interface CreateLoggerOptions {
  /** Daemon name, written as `daemon` on every line. */
  name: string;
  level?: LoggerOptions['level'];
  /** Where lines go; stdout by default (tests pass a stream to capture them). */
  destination?: pino.DestinationStream;
}

export function createLogger(options: CreateLoggerOptions): Logger {
  const pinoOptions: LoggerOptions = {
    level: options.level ?? process.env['LOG_LEVEL'] ?? 'info',
    base: { daemon: options.name, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: redactPaths(), censor: REDACTED },
    formatters: { level: (label) => ({ level: label }) },
  };
  return options.destination === undefined ? pino(pinoOptions) : pino(pinoOptions, options.destination);
}

const BEARER = /(bearer\s+)[^\s",;]+/gi;
const PEM_PRIVATE_KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g;

/** Masks bearer tokens and PEM private keys in free text (error messages from libraries, upstream bodies). */
export function redactText(text: string): string {
  return text.replace(BEARER, `$1${REDACTED}`).replace(PEM_PRIVATE_KEY, REDACTED);
}

/** An error as a loggable object: message redacted and bounded, code kept, no stack of request data. */
export function errorFields(error: unknown): { message: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const message = redactText(error.message).slice(0, 512);
    return typeof code === 'string' ? { message, code } : { message };
  }
  return { message: redactText(String(error)).slice(0, 512) };
}
