// The request body scanner against JSON.parse: the same verdict (valid or not) on generated documents and their
// byte mutations, the same top-level field, and the refusals where parsers disagree (BOM, repeated field, depth).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonScanError, MAX_JSON_DEPTH, scanTopLevelField } from '../../daemons/gateway/filters/json-scan.ts';

function reference(text: string, field: string): { ok: boolean; object: boolean; value?: unknown } {
  try {
    const parsed: unknown = JSON.parse(text);
    const object = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed);
    return { ok: true, object, ...(object ? { value: (parsed as Record<string, unknown>)[field] } : {}) };
  } catch {
    return { ok: false, object: false };
  }
}

function scan(text: string | Buffer, field = 'model'): ReturnType<typeof scanTopLevelField> | JsonScanError {
  try {
    return scanTopLevelField(typeof text === 'string' ? Buffer.from(text) : text, field, 1 << 20);
  } catch (error) {
    if (error instanceof JsonScanError) return error;
    throw error;
  }
}

const SEED = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31);

describe('json scan', () => {
  it('agrees with JSON.parse on generated documents and their mutations', () => {
    console.log(`json-scan seed ${SEED} (FUZZ_SEED=${SEED} reproduces)`);
    const doc = fc.record({
      model: fc.option(fc.oneof(fc.string(), fc.integer(), fc.constant(null)), { nil: undefined }),
      rest: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 })),
    });
    fc.assert(
      fc.property(
        doc,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
        ({ model, rest }, edits) => {
          const { model: _drop, ...others } = rest as Record<string, unknown>;
          const text = JSON.stringify(
            { ...others, ...(model === undefined ? {} : { model }) },
            null,
            edits.length % 2 === 0 ? undefined : 1,
          );
          const bytes = Buffer.from(text);
          for (const [at, byte] of edits) if (bytes.length > 0 && byte < 0x80) bytes[at % bytes.length] = byte;
          const mutated = bytes.toString('utf8');
          const expected = reference(mutated, 'model');
          const got = scan(bytes);
          if (!mutated.trimStart().startsWith('{')) {
            // Not an object at all: refused before the scan, valid JSON or not.
            expect(got instanceof JsonScanError && got.problem).toBe('not_object');
          } else if (!expected.ok) {
            expect(got).toBeInstanceOf(JsonScanError);
          } else if (got instanceof JsonScanError) {
            // Only a repeated "model" key may be refused where JSON.parse accepts.
            expect(got.problem).toBe('duplicate_field');
          } else if (expected.value === undefined) {
            expect(got.kind).toBe('absent');
          } else if (typeof expected.value === 'string') {
            expect(got).toEqual({ kind: 'string', value: expected.value });
          } else {
            expect(got.kind).toBe('other');
          }
        },
      ),
      { seed: SEED, numRuns: 2000 },
    );
  });

  it('reads the top-level field only, with escapes decoded', () => {
    expect(scan('{"messages":[{"model":"inner"}],"m\\u006fdel":"m\\u0031"}')).toEqual({ kind: 'string', value: 'm1' });
    expect(scan(' {"a":{"model":1}} ')).toEqual({ kind: 'absent' });
    expect(scan('{"model":["x"]}')).toEqual({ kind: 'other' });
    expect(scan('{}')).toEqual({ kind: 'absent' });
  });

  it('refuses what parsers disagree on: a byte-order mark, a repeated field, nesting past the bound', () => {
    expect(
      (scan(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"m1"}')])) as JsonScanError).problem,
    ).toBe('bom');
    expect((scan('{"model":"m1","model":"m2"}') as JsonScanError).problem).toBe('duplicate_field');
    expect((scan('{"model":"m1","mod\\u0065l":"m2"}') as JsonScanError).problem).toBe('duplicate_field');
    const ok = `{"model":"m1","x":${'['.repeat(MAX_JSON_DEPTH - 1)}${']'.repeat(MAX_JSON_DEPTH - 1)}}`;
    expect(scan(ok)).toEqual({ kind: 'string', value: 'm1' });
    const deep = `{"model":"m1","x":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`;
    const error = scan(deep) as JsonScanError;
    expect(error.problem).toBe('too_deep');
    expect(error.message).toBe(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  });

  it('scans a 10 MiB body of nothing but "[" in bounded time and stops at the depth bound', () => {
    const body = Buffer.alloc(10 * 1024 * 1024, '[');
    const started = performance.now();
    expect((scan(body) as JsonScanError).problem).toBe('not_object');
    const deepObject = Buffer.concat([Buffer.from('{"a":'), body]);
    expect((scan(deepObject) as JsonScanError).problem).toBe('too_deep');
    expect(performance.now() - started).toBeLessThan(50);
  });
});
