import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { CanonicalJsonError, canonicalize, canonicalizeInto } from '../../schemas/canonical-json.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import { SHARED_FIXTURES } from '../fixtures-path.ts';
import { readNumberVectors } from './number-vectors.ts';

const RFC = join(SHARED_FIXTURES, 'rfc8785');

describe('canonicalize (RFC 8785)', () => {
  const vectors = readdirSync(join(RFC, 'input')).filter((f) => f.endsWith('.json'));

  it('has the six official input/output pairs', () => {
    expect(vectors.sort()).toEqual([
      'arrays.json',
      'french.json',
      'structures.json',
      'unicode.json',
      'values.json',
      'weird.json',
    ]);
  });

  it.each(vectors)('%s canonicalizes byte for byte to the official output', (file) => {
    const input = JSON.parse(readFileSync(join(RFC, 'input', file), 'utf8'));
    const expected = readFileSync(join(RFC, 'output', file));
    expect(Buffer.from(canonicalize(input), 'utf8').equals(expected)).toBe(true);
  });

  it('formats all 10 000 number vectors as ECMAScript does', () => {
    const vectors = readNumberVectors();
    expect(vectors).toHaveLength(10_000);
    const wrong = vectors.filter((v) => canonicalize(v.value) !== v.expected);
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('writes -0 as 0 and sorts keys by UTF-16 code units, not code points', () => {
    expect(canonicalize(-0)).toBe('0');
    // U+FB33 sorts before U+1F602 in code points but after it in UTF-16 (surrogate D83D < FB33).
    expect(canonicalize({ '\ufb33': 1, '\u{1f602}': 2, a: 3 })).toBe('{"a":3,"\u{1f602}":2,"\ufb33":1}');
  });

  it('skips undefined object members as JSON.stringify does', () => {
    expect(canonicalize({ b: undefined, a: 1 })).toBe('{"a":1}');
  });

  const rejected: [string, unknown, RegExp][] = [
    ['NaN', { score: Number.NaN }, /\$\.score: NaN is not a finite number/],
    ['Infinity', [1, Number.POSITIVE_INFINITY], /\$\[1\]: Infinity is not a finite number/],
    ['-Infinity', Number.NEGATIVE_INFINITY, /-Infinity is not a finite number/],
    ['BigInt', { n: 10n }, /\$\.n: BigInt has no JSON representation/],
    ['lone high surrogate in a value', { s: 'a\ud800b' }, /\$\.s: lone surrogate U\+D800 at index 1/],
    ['lone low surrogate in a value', ['\udc00'], /lone surrogate U\+DC00/],
    ['lone surrogate in a key', { 'k\udbff': 1 }, /lone surrogate U\+DBFF/],
    ['undefined in an array', [undefined], /\$\[0\]: undefined has no JSON representation/],
    ['a function', { f: () => 1 }, /function has no JSON representation/],
    ['a Date (not plain JSON)', { d: new Date(0) }, /Date is not a plain JSON object/],
  ];
  it.each(rejected)('rejects %s with an error naming where', (_name, value, message) => {
    expect(() => canonicalize(value)).toThrow(CanonicalJsonError);
    expect(() => canonicalize(value)).toThrow(message);
  });

  it('rejects cycles in objects and arrays', () => {
    const object: Record<string, unknown> = { a: 1 };
    object['self'] = object;
    expect(() => canonicalize(object)).toThrow(/\$\.self: cycle/);
    const array: unknown[] = [];
    array.push({ inner: array });
    expect(() => canonicalize(array)).toThrow(/\$\[0\]\.inner: cycle/);
  });

  it('accepts the same object twice when it is not its own ancestor', () => {
    const shared = { x: 1 };
    expect(canonicalize({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });

  it('names a deep location in an error after earlier siblings were written', () => {
    const doc = {
      candidates: [
        { name: 'a', score: 1 },
        { name: 'b', score: 2 },
        { name: 'c', score: Number.NaN },
      ],
    };
    expect(() => canonicalize(doc)).toThrow(/\$\.candidates\[2\]\.score: NaN is not a finite number/);
  });
});

describe('canonicalize with repeated object shapes (the key-order cache)', () => {
  /** The JCS rules written out plainly, as the reference the cached writer must agree with. */
  function reference(value: unknown): string {
    if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
    if (typeof value === 'object' && value !== null) {
      const record = value as Record<string, unknown>;
      const members = Object.keys(record)
        .sort()
        .filter((k) => record[k] !== undefined);
      return `{${members.map((k) => `${JSON.stringify(k)}:${reference(record[k])}`).join(',')}}`;
    }
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  }

  it('sorts the same keys correctly whatever order they were inserted in, and skips undefined per object', () => {
    const doc = [
      { b: 1, a: 2, c: 3 },
      { c: 1, b: 2, a: 3 },
      { b: 4, a: undefined, c: 6 },
      { b: undefined, a: 7, c: 8 },
      { b: 9, a: 10, c: 11 },
    ];
    expect(canonicalize(doc)).toBe(
      '[{"a":2,"b":1,"c":3},{"a":3,"b":2,"c":1},{"b":4,"c":6},{"a":7,"c":8},{"a":10,"b":9,"c":11}]',
    );
  });

  it('agrees with the plain rules on 2 000 objects drawn from 40 key sets (more than the cache keeps)', () => {
    let state = 7;
    const next = (): number => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state;
    };
    const pool = ['name', 'site', 'é', '\u{1f602}', '\ufb33', 'a', 'A', '_', 'score', 'rank', 'k"q', 'tab\t'];
    const keySets = Array.from({ length: 40 }, () => pool.filter(() => next() % 2 === 0));
    const doc = Array.from({ length: 2_000 }, (_, i) => {
      const keys = keySets[next() % keySets.length] as string[];
      const object: Record<string, unknown> = {};
      for (const key of keys) object[key] = next() % 5 === 0 ? undefined : i % 3 === 0 ? { [key]: i } : `${key}-${i}`;
      return object;
    });
    expect(canonicalize(doc)).toBe(reference(doc));
  });

  it('names the object and key when a key set first seen mid-document holds a lone surrogate', () => {
    const doc = [
      { a: 1, b: 2 },
      { a: 3, b: 4 },
      { a: 1, 'k\udbff': 3 },
    ];
    expect(() => canonicalize(doc)).toThrow(/\$\[2\]\.k.: lone surrogate U\+DBFF/);
  });
});

describe('canonicalizeInto (streamed for hashing)', () => {
  // A multi-megabyte overlay is hashed chunk by chunk; the chunks must concatenate to exactly the canonical text, and
  // a chunk may never split a character (each chunk is UTF-8 encoded separately by the hash).
  const large = {
    network: 'n',
    candidates: Array.from({ length: 3_000 }, (_, i) => ({
      name: `m-${i}-\u{1F600}é`,
      rank: i,
      score: i / 7,
      fresh: i % 2 === 0,
    })),
  };

  it('delivers several chunks that concatenate to the canonical text', () => {
    const chunks: string[] = [];
    canonicalizeInto(large, (chunk) => chunks.push(chunk));
    expect(chunks.length).toBeGreaterThan(3);
    expect(chunks.join('')).toBe(canonicalize(large));
    expect(chunks.every((chunk) => chunk.isWellFormed())).toBe(true);
  });

  it('gives the overlay revision of the whole text', () => {
    const semantic = { candidates: large.candidates, local_site: 's', network: 'n' };
    const expected = createHash('sha256').update(canonicalize(semantic), 'utf8').digest('hex');
    expect(overlayRevision({ ...semantic, generated_at: '2026-01-01T00:00:00Z' })).toBe(expected);
  });
});
