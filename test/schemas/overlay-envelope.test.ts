import { describe, expect, it } from 'vitest';
import { buildEnvelope, orderCandidate, serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import { validateOverlay } from '../../schemas/overlay/validate.ts';
import { candidate, envelope, payload } from './overlay-builders.ts';

describe('buildEnvelope (docs/contract.md §2.2)', () => {
  it('writes the envelope keys, scope and provenance in contract order', () => {
    const env = envelope();
    expect(Object.keys(env)).toEqual([
      'schema_version',
      'revision',
      'content_digest',
      'scope',
      'provenance',
      'overlay',
    ]);
    expect(env.schema_version).toBe('1.0.0');
    expect(Object.keys(env.revision)).toEqual(['kind', 'algorithm', 'value']);
    expect(Object.keys(env.scope)).toEqual(['network', 'gateway', 'namespace', 'local_site']);
    expect(Object.keys(env.provenance)).toEqual([
      'producer',
      'producer_version',
      'source_name',
      'source_uid',
      'source_generation',
      'rendered_at',
    ]);
    expect(env.provenance.producer).toBe('grid-operator');
    expect(env.provenance.source_name).toBe('grid');
    expect(env.revision.value).toBe(env.content_digest.value);
    expect(env.revision.value).toBe(overlayRevision(env.overlay as unknown as Record<string, unknown>));
  });

  it('orders payload and candidate keys and omits absent optional keys instead of writing null', () => {
    const env = envelope(
      payload({
        selection_policy: { mode: 'weightedRandom' },
        candidates: [
          candidate({
            traffic_weight: 5,
            selection_group: 0,
            rank: 0,
            score: 0.5,
            admission_state: 'new_and_existing',
            credential: { secretRef: { key: 'token', namespace: 'ns', name: 'cred' }, strategy: 'bearer_token' },
          }),
        ],
      }),
    );
    expect(Object.keys(env.overlay)).toEqual([
      'network',
      'local_site',
      'selection_policy',
      'candidates',
      'generated_at',
    ]);
    const c = env.overlay.candidates[0]!;
    expect(Object.keys(c)).toEqual([
      'kind',
      'name',
      'site',
      'cluster',
      'fresh',
      'credential',
      'stable_id',
      'admission_state',
      'score',
      'rank',
      'selection_group',
      'traffic_weight',
    ]);
    expect(Object.keys(c.credential!.secretRef)).toEqual(['name', 'namespace', 'key']);
    expect(serializeOverlay(env)).not.toContain('null');
  });

  it('keeps score_breakdown keys in contract order', () => {
    const ordered = orderCandidate(
      candidate({
        score_breakdown: { total: 1, cost: 0, latency: 0, prefix_cache: 0, kv_cache: 0, queue_depth: 0, locality: 1 },
      }),
    );
    expect(Object.keys(ordered.score_breakdown!)).toEqual([
      'locality',
      'queue_depth',
      'kv_cache',
      'prefix_cache',
      'latency',
      'cost',
      'total',
    ]);
  });

  it('reuses a candidate already in contract order and copies one that is not, with the same revision either way', () => {
    const inOrder = orderCandidate(
      candidate({
        credential: { strategy: 'bearer_token', secretRef: { name: 'cred', namespace: 'ns', key: 'token' } },
        admission_state: 'new_and_existing',
        score: 0.5,
        score_breakdown: {
          locality: 1,
          queue_depth: 0.5,
          kv_cache: 0,
          prefix_cache: 0,
          latency: 0,
          cost: 0,
          total: 0.5,
        },
        rank: 0,
      }),
    );
    expect(Object.keys(inOrder)).toEqual([
      'kind',
      'name',
      'site',
      'cluster',
      'fresh',
      'credential',
      'stable_id',
      'admission_state',
      'score',
      'score_breakdown',
      'rank',
    ]);
    expect(orderCandidate(inOrder)).toBe(inOrder);
    // Each of these breaks the contract form in one place, so it must be copied into it (never shared as it is).
    const { kind, ...rest } = inOrder;
    const scrambled = { ...rest, kind }; // kind moved to the end
    const extra = { ...inOrder, vendor_hint: 'x' } as typeof inOrder;
    const nullKey = { ...inOrder, score: null } as unknown as typeof inOrder;
    const creds = {
      ...inOrder,
      credential: { secretRef: inOrder.credential!.secretRef, strategy: 'bearer_token' as const },
    };
    const breakdown = {
      ...inOrder,
      score_breakdown: { total: 0.5, locality: 1, queue_depth: 0.5, kv_cache: 0, prefix_cache: 0, latency: 0, cost: 0 },
    };
    for (const [label, variant] of Object.entries({ scrambled, extra, nullKey, creds, breakdown })) {
      const copy = orderCandidate(variant);
      expect(copy, label).not.toBe(variant);
      expect(orderCandidate(copy), label).toBe(copy);
    }
    expect(Object.keys(orderCandidate(scrambled))[0]).toBe('kind');
    expect(orderCandidate(extra)).not.toHaveProperty('vendor_hint');
    expect(orderCandidate(nullKey)).not.toHaveProperty('score');
    expect(Object.keys(orderCandidate(creds).credential!)).toEqual(['strategy', 'secretRef']);
    expect(Object.keys(orderCandidate(breakdown).score_breakdown!)[0]).toBe('locality');
    // The same values in the same order, in a fresh object: reused too (the check is on form, not identity).
    const sameForm = { ...inOrder, score_breakdown: { ...inOrder.score_breakdown! } };
    expect(orderCandidate(sameForm)).toBe(sameForm);
    const shared = envelope(payload({ candidates: [inOrder] }));
    const copied = envelope(payload({ candidates: [scrambled] }));
    expect(shared.overlay.candidates[0]).toBe(inOrder);
    expect(serializeOverlay(copied)).toBe(serializeOverlay(shared));
    expect(copied.revision.value).toBe(shared.revision.value);
  });

  it('gives the same revision when only timestamps change, a new one when routing content changes', () => {
    const base = envelope(
      payload({ selection_policy: { mode: 'weightedRandom' }, candidates: [candidate({ traffic_weight: 1 })] }),
    );
    const later = envelope(
      payload({
        generated_at: '2027-01-01T00:00:00Z',
        selection_policy: { mode: 'weightedRandom' },
        candidates: [candidate({ traffic_weight: 1 })],
      }),
    );
    const reweighted = envelope(
      payload({ selection_policy: { mode: 'weightedRandom' }, candidates: [candidate({ traffic_weight: 2 })] }),
    );
    expect(later.revision.value).toBe(base.revision.value);
    expect(reweighted.revision.value).not.toBe(base.revision.value);
  });

  it('refuses a scope that contradicts the payload (a producer bug, not a runtime condition)', () => {
    const provenance = {
      producer_version: '0.1.0',
      source_uid: 'u',
      source_generation: 1,
      rendered_at: '2026-11-29T00:00:00Z',
    };
    expect(() =>
      buildEnvelope({ payload: payload(), scope: { network: 'other', gateway: 'g', namespace: 'n' }, provenance }),
    ).toThrow(/scope.network "other" differs from payload network "grid"/);
    expect(() =>
      buildEnvelope({ payload: payload(), scope: { local_site: 'west', gateway: 'g', namespace: 'n' }, provenance }),
    ).toThrow(/scope.local_site "west" differs/);
  });

  it('serializes pretty-printed with two spaces and a final newline; consumers accept the result', () => {
    const text = serializeOverlay(envelope());
    expect(text.startsWith('{\n  "schema_version": "1.0.0",\n')).toBe(true);
    expect(text.endsWith('}\n')).toBe(true);
    const result = validateOverlay(text, { maxBytes: 1 << 20, allowLegacy: false });
    expect(result).toMatchObject({ ok: true, format: 'envelope' });
  });
});
