import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { OVERLAY_REJECT_REASONS, REFERENCE_REASON_ALIASES } from '../../schemas/overlay/reasons.ts';
import {
  GATEWAY_MAX_OVERLAY_BYTES,
  MAX_OVERLAY_DEPTH,
  type OverlayValidationOptions,
  validateOverlay,
} from '../../schemas/overlay/validate.ts';
import { SHARED_FIXTURES } from '../fixtures-path.ts';
import { candidate, envelope, mutated, payload, rawEnvelope } from './overlay-builders.ts';

const CONTRACT = join(SHARED_FIXTURES, 'overlay-contract-v1');
const manifest = JSON.parse(readFileSync(join(CONTRACT, 'manifest.json'), 'utf8')) as {
  fixtures: Record<string, { expected: 'accept' | 'reject' | 'accept_legacy'; reason?: string; revision?: string }>;
};
const GATEWAY: OverlayValidationOptions = { maxBytes: 2 * 1024 * 1024, allowLegacy: true };
const SYNC: OverlayValidationOptions = { maxBytes: 1024 * 1024, allowLegacy: false };

function reject(raw: string | Uint8Array, options: OverlayValidationOptions = SYNC) {
  const result = validateOverlay(raw, options);
  if (result.ok) throw new Error(`expected a rejection, got accept (${result.format})`);
  return result;
}

describe('overlay contract v1 fixtures (fixtures/overlay-contract-v1/manifest.json)', () => {
  it.each(Object.entries(manifest.fixtures))('%s → %j', (file, expectation) => {
    const bytes = readFileSync(join(CONTRACT, file));
    const strict = validateOverlay(bytes, SYNC);
    const legacyAllowed = validateOverlay(bytes, GATEWAY);
    switch (expectation.expected) {
      case 'accept':
        expect(strict).toMatchObject({ ok: true, format: 'envelope', revision: expectation.revision });
        expect(legacyAllowed).toMatchObject({ ok: true, format: 'envelope', revision: expectation.revision });
        break;
      case 'accept_legacy':
        expect(legacyAllowed).toMatchObject({ ok: true, format: 'legacy' });
        expect(strict).toMatchObject({ ok: false, reason: 'malformed' });
        break;
      case 'reject': {
        const reason = REFERENCE_REASON_ALIASES[expectation.reason!] ?? expectation.reason;
        expect(strict).toMatchObject({ ok: false, reason });
        expect(legacyAllowed).toMatchObject({ ok: false, reason });
        break;
      }
    }
  });

  it('covers every fixture file listed in the manifest and maps every reason to ours', () => {
    const reasons = Object.values(manifest.fixtures).flatMap((f) => (f.reason ? [f.reason] : []));
    for (const reason of reasons) {
      const ours = REFERENCE_REASON_ALIASES[reason] ?? reason;
      expect(OVERLAY_REJECT_REASONS).toContain(ours);
    }
    expect(reject(readFileSync(join(CONTRACT, 'hybrid-missing-schema.json'))).message).toMatch(
      /missing schema_version/,
    );
  });

  it('accepts valid-selection-policy.json with the revision docs/contract.md §6 gives', () => {
    expect(validateOverlay(readFileSync(join(CONTRACT, 'valid-selection-policy.json')), SYNC)).toMatchObject({
      ok: true,
      revision: 'd3321586b5e414b8bd80c07a9d16ac10dce38d6810e3591a8526a6bdd0639007',
    });
  });
});

describe('validateOverlay: docs/contract.md §2.4 steps in order', () => {
  const good = envelope();

  it('1. refuses more bytes than the limit before parsing anything', () => {
    const text = serializeOverlay(good);
    expect(reject(text, { ...SYNC, maxBytes: text.length - 1 })).toMatchObject({ reason: 'oversized' });
    expect(reject('x'.repeat(100), { ...SYNC, maxBytes: 10 })).toMatchObject({ reason: 'oversized' });
    expect(validateOverlay(text, { ...SYNC, maxBytes: Buffer.byteLength(text) }).ok).toBe(true);
  });

  it.each([
    ['not JSON', '{"schema_version": '],
    ['an array', '[]'],
    ['a string', '"overlay"'],
    ['null', 'null'],
    ['invalid UTF-8', new Uint8Array([0x7b, 0xff, 0x7d])],
  ])('2. rejects %s as malformed', (_name, raw) => {
    expect(reject(raw)).toMatchObject({ reason: 'malformed' });
  });

  it('2. never quotes the input in a JSON syntax error', () => {
    const result = reject('{"token": "sk-live-SECRET" oops}');
    expect(result.message).not.toContain('SECRET');
    expect(result.message).toMatch(/not valid JSON \(at position \d+/);
  });

  it('2. treats any envelope key as an envelope that never falls back to the bare format', () => {
    const hybrid = mutated(payload(), (d) => {
      d.scope = { network: 'grid' };
    });
    expect(reject(hybrid, GATEWAY)).toMatchObject({
      reason: 'malformed',
      message: 'envelope is missing schema_version',
    });
  });

  it.each([
    ['revision', (d: any) => (d.revision = 'x'), /revision must be an object/],
    ['content_digest', (d: any) => delete d.content_digest, /content_digest must be an object/],
    ['scope', (d: any) => (d.scope = []), /scope must be an object/],
    ['provenance', (d: any) => (d.provenance = null), /provenance must be an object/],
    ['overlay', (d: any) => delete d.overlay, /overlay must be an object/],
    ['overlay.candidates', (d: any) => (d.overlay.candidates = {}), /overlay.candidates must be an array/],
    ['schema_version type', (d: any) => (d.schema_version = 1), /schema_version must be a string/],
  ])('2. rejects a broken %s as malformed', (_name, mutate, message) => {
    expect(reject(mutated(good, mutate))).toMatchObject({
      reason: 'malformed',
      message: expect.stringMatching(message),
    });
  });

  it.each(['2.0.0', '0.9.0', '1', '1.0.0-rc1', 'v1.0.0', ''])('3. refuses schema_version %j', (version) => {
    expect(reject(mutated(good, (d) => (d.schema_version = version)))).toMatchObject({ reason: 'unsupported_schema' });
  });

  it.each(['1.0.0', '1.1', '1.7.3'])('3. accepts schema_version %j (any 1.x)', (version) => {
    expect(
      validateOverlay(
        mutated(good, (d) => (d.schema_version = version)),
        SYNC,
      ).ok,
    ).toBe(true);
  });

  it.each([
    ['blank scope.gateway', (d: any) => (d.scope.gateway = '  '), /scope.gateway must be a non-blank string/],
    ['257-byte scope.namespace', (d: any) => (d.scope.namespace = 'n'.repeat(257)), /scope.namespace/],
    [
      'multi-byte name over 256 bytes',
      (d: any) => (d.provenance.source_uid = 'é'.repeat(129)),
      /provenance.source_uid/,
    ],
    ['missing provenance.producer', (d: any) => delete d.provenance.producer, /provenance.producer/],
    [
      'zero source_generation',
      (d: any) => (d.provenance.source_generation = 0),
      /source_generation must be a positive integer/,
    ],
    ['fractional source_generation', (d: any) => (d.provenance.source_generation = 1.5), /source_generation/],
    [
      'non-RFC 3339 rendered_at',
      (d: any) => (d.provenance.rendered_at = '29/11/2026'),
      /rendered_at must be an RFC 3339/,
    ],
    ['missing overlay.network', (d: any) => delete d.overlay.network, /overlay.network must be a non-blank/],
  ])('4. rejects %s', (_name, mutate, message) => {
    expect(reject(mutated(good, mutate))).toMatchObject({
      reason: 'malformed',
      message: expect.stringMatching(message),
    });
  });

  it.each([
    ['scope.network ≠ overlay.network', (d: any) => (d.scope.network = 'other')],
    ['scope.local_site ≠ overlay.local_site', (d: any) => (d.scope.local_site = 'west')],
    ['provenance.source_name ≠ scope.network', (d: any) => (d.provenance.source_name = 'other')],
  ])('4. rejects %s as scope_mismatch', (_name, mutate) => {
    expect(reject(mutated(good, mutate))).toMatchObject({ reason: 'scope_mismatch' });
  });

  it.each(['network', 'gateway', 'namespace', 'local_site'] as const)(
    '4. enforces the configured expected scope.%s',
    (key) => {
      const expected = { network: 'grid', gateway: 'edge', namespace: 'grid-system', local_site: 'east' };
      const text = serializeOverlay(good);
      expect(validateOverlay(text, { ...SYNC, expectedScope: expected }).ok).toBe(true);
      const result = reject(text, { ...SYNC, expectedScope: { ...expected, [key]: 'elsewhere' } });
      expect(result).toMatchObject({ reason: 'scope_mismatch', message: expect.stringContaining(`scope.${key}`) });
    },
  );

  it('4. a bare payload is refused once any expected scope is configured, even where legacy is allowed', () => {
    const bare = serializeOverlay(payload());
    expect(validateOverlay(bare, GATEWAY)).toMatchObject({ ok: true, format: 'legacy' });
    expect(reject(bare, { ...GATEWAY, expectedScope: { gateway: 'edge' } })).toMatchObject({ reason: 'malformed' });
  });

  it.each([
    ['revision.kind', (d: any) => (d.revision.kind = 'sequence')],
    ['revision.algorithm', (d: any) => (d.revision.algorithm = 'sha1')],
    ['content_digest.algorithm', (d: any) => (d.content_digest.algorithm = 'md5')],
    ['uppercase revision.value', (d: any) => (d.revision.value = d.revision.value.toUpperCase())],
    ['short content_digest.value', (d: any) => (d.content_digest.value = d.content_digest.value.slice(1))],
    ['revision ≠ content_digest', (d: any) => (d.revision.value = '1'.repeat(64))],
  ])('5. rejects a wrong %s as revision_digest_mismatch', (_name, mutate) => {
    expect(reject(mutated(good, mutate))).toMatchObject({ reason: 'revision_digest_mismatch' });
  });

  it('6. recomputes the digest from what is serialized: any routing change without a new digest is caught', () => {
    expect(reject(mutated(good, (d) => (d.overlay.candidates[0].fresh = false)))).toMatchObject({
      reason: 'digest_mismatch',
    });
    expect(reject(mutated(good, (d) => (d.overlay.candidates[0].extra = 1)))).toMatchObject({
      reason: 'digest_mismatch',
    });
    // Timestamps, scope-independent provenance and envelope metadata are outside the digest.
    expect(
      validateOverlay(
        mutated(good, (d) => (d.overlay.generated_at = '2030-01-01T00:00:00Z')),
        SYNC,
      ).ok,
    ).toBe(true);
    expect(
      validateOverlay(
        mutated(good, (d) => (d.provenance.rendered_at = '2030-01-01T00:00:00+02:00')),
        SYNC,
      ).ok,
    ).toBe(true);
  });

  it('6. rejects a lone surrogate smuggled in through a JSON escape as malformed, not with a crash', () => {
    const text = serializeOverlay(good).replace('"model-a"', '"model-\\ud800"');
    expect(reject(text)).toMatchObject({ reason: 'malformed', message: expect.stringMatching(/lone surrogate/) });
  });
});

describe('validateOverlay: step 7, candidates and selection policy', () => {
  /** Build a correctly digested envelope around candidates/policy that break a step-7 rule. */
  function check(overrides: Record<string, unknown>) {
    return validateOverlay(rawEnvelope({ ...payload(), ...overrides }), SYNC);
  }

  it.each([
    ['an unknown kind', [{ ...candidate(), kind: 'a2a_agent' }], /kind must be one of inference_model, mcp_tool/],
    ['a blank name', [candidate({ name: ' ' })], /candidates\[0\]\.name/],
    ['a 257-byte cluster', [candidate({ cluster: 'c'.repeat(257) })], /candidates\[0\]\.cluster/],
    ['a missing fresh', [{ ...candidate(), fresh: undefined }], /fresh must be a boolean/],
    ['a duplicate', [candidate(), candidate()], /candidates\[1\] duplicates/],
    ['an unknown admission_state', [{ ...candidate(), admission_state: 'maybe' }], /admission_state must be one of/],
    ['a 129-byte selection_tier', [candidate({ selection_tier: 't'.repeat(129) })], /selection_tier/],
    [
      'a stable_id with a newline',
      [candidate({ stable_id: 'ab\r\nX-Injected: 1' })],
      /stable_id must be a header-safe/,
    ],
    ['a 257-byte stable_id', [candidate({ stable_id: 'a'.repeat(257) })], /stable_id/],
    ['a traffic_weight of 0', [candidate({ traffic_weight: 0 })], /traffic_weight must be an integer from 1 to 1000/],
    ['a negative rank', [candidate({ rank: -1 })], /rank must be a non-negative integer/],
    [
      'a credential strategy other than bearer_token',
      [{ ...candidate(), credential: { strategy: 'basic', secretRef: { name: 'a', namespace: 'b', key: 'c' } } }],
      /strategy must be one of bearer_token/,
    ],
    [
      'a secretRef without namespace',
      [{ ...candidate(), credential: { strategy: 'bearer_token', secretRef: { name: 'a', key: 'c' } } }],
      /secretRef.namespace/,
    ],
  ] as [string, unknown[], RegExp][])('rejects %s', (_name, candidates, message) => {
    expect(check({ candidates: candidates as never })).toMatchObject({
      ok: false,
      reason: 'invalid_candidate',
      message: expect.stringMatching(message),
    });
  });

  it.each([
    [
      'token',
      { strategy: 'bearer_token', token: 'sk-live-SECRET', secretRef: { name: 'a', namespace: 'b', key: 'c' } },
    ],
    [
      'value',
      { strategy: 'bearer_token', secretRef: { name: 'a', namespace: 'b', key: 'c', value: 'sk-live-SECRET' } },
    ],
  ])('rejects a credential carrying a %s key without echoing its content', (key, credential) => {
    const result = check({ candidates: [{ ...candidate(), credential } as never] });
    expect(result).toMatchObject({
      ok: false,
      reason: 'invalid_candidate',
      message: expect.stringContaining(`"${key}"`),
    });
    expect(JSON.stringify(result)).not.toContain('SECRET');
  });

  it('allows at most 1024 candidates', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => candidate({ name: `m${i}` }));
    expect(check({ candidates: many(1024) }).ok).toBe(true);
    expect(check({ candidates: many(1025) })).toMatchObject({
      ok: false,
      reason: 'invalid_candidate',
      message: expect.stringMatching(/1025 entries, limit is 1024/),
    });
  });

  const a = (group: number, site: string, admission: 'new_and_existing' | 'existing_only' = 'new_and_existing') =>
    candidate({ site, cluster: `c-${site}`, selection_group: group, admission_state: admission });

  it('accepts contiguous groups starting at 0, each with one admission state', () => {
    expect(
      check({ candidates: [a(0, 'e'), a(0, 'w'), a(1, 'x', 'existing_only'), a(1, 'y', 'existing_only')] }).ok,
    ).toBe(true);
  });

  it.each([
    ['a first group other than 0', [a(1, 'e')], /must start at 0/],
    ['a skipped group', [a(0, 'e'), a(2, 'w')], /groups must be contiguous and increasing/],
    ['a decreasing group', [a(0, 'e'), a(1, 'w'), a(0, 'x')], /contiguous and increasing/],
    ['two admission states in one group', [a(0, 'e'), a(0, 'w', 'existing_only')], /admission_state differs/],
    [
      'grouped and ungrouped for one capability',
      [a(0, 'e'), candidate({ site: 'w', cluster: 'c-w' })],
      /mixes grouped and ungrouped/,
    ],
  ] as [string, unknown[], RegExp][])('rejects %s', (_name, candidates, message) => {
    expect(check({ candidates: candidates as never })).toMatchObject({
      ok: false,
      reason: 'invalid_candidate',
      message: expect.stringMatching(message),
    });
  });

  it('judges groups per capability: another model starts its own groups at 0', () => {
    const other = candidate({ name: 'model-b', selection_group: 0, admission_state: 'existing_only' });
    expect(check({ candidates: [a(0, 'e'), a(1, 'w', 'existing_only'), other] }).ok).toBe(true);
  });

  it.each([
    ['an unknown mode', { mode: 'leastLoaded' }],
    ['an extra key', { mode: 'random', grouping: 'site' }],
    ['a non-object', 'random'],
  ])('rejects a selection_policy with %s', (_name, policy) => {
    expect(check({ selection_policy: policy as never })).toMatchObject({
      ok: false,
      reason: 'invalid_selection_policy',
    });
  });

  it('accepts an empty candidate set (a valid empty overlay is how everything is withdrawn)', () => {
    expect(check({ candidates: [] })).toMatchObject({ ok: true, format: 'envelope' });
  });

  it('accepts unknown keys outside the credential (forward compatibility)', () => {
    const doc = mutated(good(), (d) => {
      d.future_top_level = { any: 'thing' };
      d.scope.future = 1;
    });
    expect(validateOverlay(doc, SYNC).ok).toBe(true);
  });

  function good() {
    return envelope();
  }
});

describe('validateOverlay never throws', () => {
  it('on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => {
        const result = validateOverlay(bytes, GATEWAY);
        return result.ok === false || result.ok === true;
      }),
      { numRuns: 500 },
    );
  });

  it('on arbitrary JSON values, and rejects with a catalogued reason', () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const result = validateOverlay(text, SYNC);
        return result.ok || OVERLAY_REJECT_REASONS.includes(result.reason);
      }),
      { numRuns: 500 },
    );
  });

  it('on structurally plausible envelopes with random field values', () => {
    const base = envelope();
    fc.assert(
      fc.property(fc.constantFrom('scope', 'provenance', 'revision', 'overlay'), fc.anything(), (key, value) => {
        const result = validateOverlay(
          mutated(base, (d) => (d[key] = value)),
          SYNC,
        );
        return result.ok || OVERLAY_REJECT_REASONS.includes(result.reason);
      }),
      { numRuns: 300 },
    );
  });

  it('on deeply nested input', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    expect(validateOverlay(deep, { ...GATEWAY, maxBytes: 1 << 20 })).toMatchObject({ ok: false, reason: 'malformed' });
    const deepCandidate = serializeOverlay(envelope()).replace(
      '"fresh": true',
      `"fresh": true, "x": ${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    );
    expect(validateOverlay(deepCandidate, { ...GATEWAY, maxBytes: 1 << 20 }).ok).toBe(false);
  });

  it(`refuses nesting past ${MAX_OVERLAY_DEPTH} levels before parsing: a 2 MiB overlay nested a million levels costs one scan`, () => {
    const half = GATEWAY_MAX_OVERLAY_BYTES / 2;
    const deepest = Buffer.from(`${'['.repeat(half)}${']'.repeat(half)}`);
    const started = performance.now();
    expect(validateOverlay(deepest, GATEWAY)).toEqual({
      ok: false,
      reason: 'malformed',
      message: `overlay nests deeper than ${MAX_OVERLAY_DEPTH} levels`,
    });
    expect(performance.now() - started).toBeLessThan(50);
    // Brackets inside strings are text, not nesting.
    const bracketsInAString = serializeOverlay(envelope()).replace(
      '"fresh": true',
      `"fresh": true, "x": "${'['.repeat(1_000)}"`,
    );
    expect(validateOverlay(bracketsInAString, GATEWAY)).toMatchObject({ ok: false, reason: 'digest_mismatch' });
  });
});
