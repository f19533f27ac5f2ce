// Caller API keys: the key format, minting, and the salted-hash table a consumer gateway checks keys against.
// A key is `agn_<id>_<secret>`: 16 hex digits of public id (to find the entry without trying every salt) and 32
// random bytes of secret (base64url). The file stores only HMAC-SHA-256(salt, key) with a 16-byte salt per key.
// HMAC, not scrypt: a minted key carries 256 random bits, so a slow KDF buys no resistance to guessing (there is
// nothing to guess faster than 2^256) while it would cost every request milliseconds of CPU on the event loop;
// the salt keeps two files with the same key from sharing a hash. Pure except `readCallerKeysFile` (the CLI's read; the gateway reads through its mounted-file loader).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import schema from './caller-keys.schema.json' with { type: 'json' };
import type { CallerKeyEntry, CallerKeysFile } from '../generated/caller-keys.ts';

export type { CallerKeyEntry, CallerKeysFile };

export const MAX_CALLER_KEYS_FILE_BYTES = 4 * 1024 * 1024;
const KEY = /^agn_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

const validate = new Ajv2020({ allErrors: false, strict: false }).compile<CallerKeysFile>(schema);

export function hashCallerKey(key: string, saltHex: string): string {
  return createHmac('sha256', Buffer.from(saltHex, 'hex')).update(key, 'utf8').digest('hex');
}

/** A fresh key and the entry that accepts it. The key exists only in the return value: print it once. */
export function mintCallerKey(tenant: string, now: Date = new Date()): { key: string; entry: CallerKeyEntry } {
  const id = randomBytes(8).toString('hex');
  const key = `agn_${id}_${randomBytes(32).toString('base64url')}`;
  const salt = randomBytes(16).toString('hex');
  return { key, entry: { id, tenant, salt, hash: hashCallerKey(key, salt), created_at: now.toISOString() } };
}

/** Problems of a parsed keys file (schema, then unique ids), empty when it is usable. Never quotes a hash. */
export function callerKeysProblems(document: unknown): string[] {
  if (!validate(document)) {
    const error = validate.errors?.[0];
    const where = error?.instancePath === '' || error === undefined ? '/' : error.instancePath;
    const extra = error?.keyword === 'additionalProperties' ? ` (${String(error.params['additionalProperty'])})` : '';
    return [`${where}: ${error?.message ?? 'invalid'}${extra}`];
  }
  const seen = new Set<string>();
  const problems: string[] = [];
  document.keys.forEach((entry, i) => {
    if (seen.has(entry.id)) problems.push(`/keys/${i}: id repeats an earlier entry`);
    seen.add(entry.id);
  });
  return problems;
}

export type CallerKeyVerdict =
  | { readonly ok: true; readonly tenant: string; readonly id: string }
  | { readonly ok: false; readonly reason: 'malformed' | 'unknown' | 'revoked' };

/** The lookup table of one accepted file: id → entry. */
export class CallerKeyTable {
  readonly #byId: ReadonlyMap<string, CallerKeyEntry>;
  constructor(file: CallerKeysFile) {
    this.#byId = new Map(file.keys.map((entry) => [entry.id, entry]));
  }

  get size(): number {
    return this.#byId.size;
  }

  verify(presented: string): CallerKeyVerdict {
    const match = KEY.exec(presented);
    if (match === null) return { ok: false, reason: 'malformed' };
    const entry = this.#byId.get(match[1]!);
    if (entry === undefined) return { ok: false, reason: 'unknown' };
    const expected = Buffer.from(entry.hash, 'hex');
    const actual = Buffer.from(hashCallerKey(presented, entry.salt), 'hex');
    if (!timingSafeEqual(expected, actual)) return { ok: false, reason: 'unknown' };
    if (entry.revoked === true) return { ok: false, reason: 'revoked' };
    return { ok: true, tenant: entry.tenant, id: entry.id };
  }
}

/** Parses and checks a keys file's text; throws an Error whose message names the file and the problem, never a hash. */
export function parseCallerKeys(text: string, path: string): CallerKeysFile {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error(`${path}: not valid JSON`);
  }
  const problem = callerKeysProblems(document)[0];
  if (problem !== undefined) throw new Error(`${path}: ${problem}`);
  return document as CallerKeysFile;
}

/** Reads and checks a keys file; throws an Error whose message names the file and the problem, never a hash. */
export function readCallerKeysFile(path: string): CallerKeysFile {
  let text: string;
  try {
    if (statSync(path).size > MAX_CALLER_KEYS_FILE_BYTES)
      throw new Error(`${path}: larger than ${MAX_CALLER_KEYS_FILE_BYTES} bytes`);
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(code === undefined ? (error as Error).message : `${path}: unreadable (${code})`);
  }
  return parseCallerKeys(text, path);
}
