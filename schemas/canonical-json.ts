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
  const chunks: string[] = [];
  canonicalizeInto(value, (chunk) => chunks.push(chunk));
  return chunks.join('');
}

/** Canonical UTF-8 bytes of `value`: what revisions and digests hash. */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalize(value), 'utf8');
}

/**
 * Streams the canonical text of `value` to `sink` in chunks of about CHUNK characters, in order, so a hash can
 * consume a multi-megabyte document without the whole text ever being alive at once. Throws CanonicalJsonError
 * (after some chunks may already have been delivered) for anything JCS cannot represent.
 */
export function canonicalizeInto(value: unknown, sink: (chunk: string) => void): void {
  const writer = new Writer(sink);
  writer.value(value);
  writer.flush();
}

const CHUNK = 16_384;
const SHAPE_CACHE_SIZE = 16;
const SHAPE_MAX_KEYS = 64;

interface Shape {
  /** The keys as Object.keys listed them. */
  readonly keys: readonly string[];
  /** JCS order, and per sorted key its quoted form with ':' for the first member written (head) or later (tail). */
  readonly sorted: readonly string[];
  readonly head: readonly string[];
  readonly tail: readonly string[];
}

const shapeCache: Shape[] = [];
let nextShapeSlot = 0;

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Writes canonical text into a pending string that is handed to the sink whenever it passes CHUNK characters. Two
 * costs are avoided on purpose, because they make a large overlay cost more per candidate than a small one: a
 * path string per value (the location is kept as a stack of keys and indexes and spelled out only for an error),
 * and one long-lived text for the whole document (its fragments survive young-generation collections, so garbage
 * collection grows with the document's size).
 */
class Writer {
  readonly #sink: (chunk: string) => void;
  #pending = '';
  readonly #segments: (string | number)[] = [];
  /** The containers being written, outermost first: a cycle check as deep as the document, not a Set per call. */
  readonly #ancestors: object[] = [];

  constructor(sink: (chunk: string) => void) {
    this.#sink = sink;
  }

  flush(): void {
    if (this.#pending.length > 0) this.#sink(this.#pending);
    this.#pending = '';
  }

  #add(text: string): void {
    this.#pending += text;
    if (this.#pending.length >= CHUNK) this.flush();
  }

  /**
   * The JCS key order and quoted keys for an object with these keys. Every candidate of an overlay has one of a
   * few key sets, and the operator renders the same forms on every reconcile, so sorting and quoting them again for
   * each object was repeated work and garbage. A repeat is recognised by comparing key lists (for the same keys in
   * the same order, the same strings). The cache is shared and holds SHAPE_CACHE_SIZE shapes, replaced in turn, so
   * documents of arbitrary objects cost about what they did without it and cannot grow it (nor can an object
   * with more than SHAPE_MAX_KEYS keys).
   */
  #shapeOf(keys: readonly string[]): Shape {
    for (const shape of shapeCache) if (sameKeys(shape.keys, keys)) return shape;
    // Default sort compares UTF-16 code units, exactly the JCS key order.
    const sorted = [...keys].sort();
    const head: string[] = [];
    const tail: string[] = [];
    for (const key of sorted) {
      this.#segments.push(key);
      const quoted = `${this.#quote(key)}:`;
      this.#segments.pop();
      head.push(quoted);
      tail.push(`,${quoted}`);
    }
    const shape: Shape = { keys, sorted, head, tail };
    // An object with very many keys is not a repeated form worth keeping, and would keep its keys alive.
    if (keys.length > SHAPE_MAX_KEYS) return shape;
    if (shapeCache.length < SHAPE_CACHE_SIZE) shapeCache.push(shape);
    else shapeCache[nextShapeSlot++ % SHAPE_CACHE_SIZE] = shape;
    return shape;
  }

  #fail(problem: string): never {
    let path = '$';
    for (const segment of this.#segments) path += typeof segment === 'number' ? `[${segment}]` : `.${segment}`;
    throw new CanonicalJsonError(path, problem);
  }

  #quote(text: string): string {
    // isWellFormed is native and cheap; the index is only looked for when there is something to report.
    if (!text.isWellFormed()) {
      const lone = findLoneSurrogate(text);
      const unit = text.charCodeAt(lone).toString(16);
      this.#fail(`lone surrogate U+${unit.toUpperCase()} at index ${lone} is not valid Unicode`);
    }
    return JSON.stringify(text);
  }

  value(value: unknown): void {
    switch (typeof value) {
      case 'string':
        this.#add(this.#quote(value));
        return;
      case 'number':
        if (!Number.isFinite(value)) this.#fail(`${value} is not a finite number`);
        // Number.prototype.toString is the JCS number rule, and it writes -0 as 0.
        this.#add(String(value));
        return;
      case 'boolean':
        this.#add(value ? 'true' : 'false');
        return;
      case 'bigint':
        this.#fail('BigInt has no JSON representation');
        return;
      case 'undefined':
      case 'function':
      case 'symbol':
        this.#fail(`${typeof value} has no JSON representation`);
        return;
    }
    if (value === null) {
      this.#add('null');
      return;
    }
    const object = value as object;
    const segments = this.#segments;
    const ancestors = this.#ancestors;
    if (ancestors.includes(object)) this.#fail('cycle: the value contains itself');
    ancestors.push(object);
    if (Array.isArray(object)) {
      this.#add('[');
      for (let i = 0; i < object.length; i++) {
        if (i > 0) this.#add(',');
        segments.push(i);
        this.value(object[i]);
        segments.pop();
      }
      this.#add(']');
    } else {
      const proto = Object.getPrototypeOf(object);
      if (proto !== Object.prototype && proto !== null) {
        this.#fail(`${object.constructor?.name ?? 'object'} is not a plain JSON object`);
      }
      const record = object as Record<string, unknown>;
      const shape = this.#shapeOf(Object.keys(record));
      const { sorted } = shape;
      this.#add('{');
      let first = true;
      for (let i = 0; i < sorted.length; i++) {
        const key = sorted[i] as string;
        const member = record[key];
        if (member === undefined) continue;
        segments.push(key);
        this.#add(first ? (shape.head[i] as string) : (shape.tail[i] as string));
        this.value(member);
        segments.pop();
        first = false;
      }
      this.#add('}');
    }
    ancestors.pop();
  }
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
