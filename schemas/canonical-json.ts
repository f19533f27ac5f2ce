/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * The overlay revision is a hash of these bytes, so producer and consumers must agree on every byte: keys sorted
 * by UTF-16 code units, no whitespace, ECMAScript number text, strings escaped as JSON.stringify does (which is the
 * JCS rule set) once lone surrogates have been refused.
 */

export class CanonicalJsonError extends Error {
  /** JSON-pointer-like location of the offending value, e.g. `$.candidates[3].score`. */
  readonly path: string;
  constructor(path: string, problem: string) {
    super(`cannot canonicalize ${path}: ${problem}`);
    this.name = 'CanonicalJsonError';
    this.path = path;
  }
}

/** Canonical JSON text of `value`. Throws CanonicalJsonError for anything JCS cannot represent. */
export function canonicalize(value: unknown): string {
  const out: string[] = [];
  write(value, '$', out, new Set());
  return out.join('');
}

/** Canonical UTF-8 bytes of `value`: what revisions and digests hash. */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalize(value), 'utf8');
}

function write(value: unknown, path: string, out: string[], ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
      out.push(quote(value, path));
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(path, `${value} is not a finite number`);
      // JSON.stringify applies Number.prototype.toString (the JCS number rule) and maps -0 to 0.
      out.push(JSON.stringify(value));
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'bigint':
      throw new CanonicalJsonError(path, 'BigInt has no JSON representation');
    case 'undefined':
    case 'function':
    case 'symbol':
      throw new CanonicalJsonError(path, `${typeof value} has no JSON representation`);
  }
  if (value === null) {
    out.push('null');
    return;
  }
  const object = value as object;
  if (ancestors.has(object)) throw new CanonicalJsonError(path, 'cycle: the value contains itself');
  ancestors.add(object);
  if (Array.isArray(object)) {
    out.push('[');
    for (let i = 0; i < object.length; i++) {
      if (i > 0) out.push(',');
      write(object[i], `${path}[${i}]`, out, ancestors);
    }
    out.push(']');
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      throw new CanonicalJsonError(path, `${object.constructor?.name ?? 'object'} is not a plain JSON object`);
    }
    const record = object as Record<string, unknown>;
    // Default sort compares UTF-16 code units, exactly the JCS key order.
    const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort();
    out.push('{');
    keys.forEach((key, i) => {
      if (i > 0) out.push(',');
      const keyPath = `${path}.${key}`;
      out.push(quote(key, keyPath), ':');
      write(record[key], keyPath, out, ancestors);
    });
    out.push('}');
  }
  ancestors.delete(object);
}

function quote(text: string, path: string): string {
  // isWellFormed is native and cheap; the index is only looked for when there is something to report.
  if (!text.isWellFormed()) {
    const lone = findLoneSurrogate(text);
    const unit = text.charCodeAt(lone).toString(16);
    throw new CanonicalJsonError(path, `lone surrogate U+${unit.toUpperCase()} at index ${lone} is not valid Unicode`);
  }
  return JSON.stringify(text);
}

/** Index of the first unpaired UTF-16 surrogate, or -1. */
export function findLoneSurrogate(text: string): number {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return i;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return i;
  }
  return -1;
}
