import { buildEnvelope, serializeOverlay } from '../../schemas/overlay/envelope.ts';
import type { OverlayCandidate, OverlayEnvelope, OverlayPayload } from '../../schemas/overlay/types.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';

/** A small, valid candidate; tests override what they exercise. */
export function candidate(overrides: Partial<OverlayCandidate> = {}): OverlayCandidate {
  const base = {
    kind: 'inference_model',
    name: 'model-a',
    site: 'east',
    cluster: 'provider-east',
    fresh: true,
  } as const;
  const merged = { ...base, ...overrides };
  return { stable_id: stableId(merged.kind, merged.name, merged.site, merged.cluster), ...merged };
}

export function payload(overrides: Partial<OverlayPayload> = {}): OverlayPayload {
  return {
    network: 'grid',
    local_site: 'east',
    candidates: [candidate()],
    generated_at: '2026-11-29T00:00:00Z',
    ...overrides,
  };
}

export function envelope(p: OverlayPayload = payload()): OverlayEnvelope {
  return buildEnvelope({
    payload: p,
    scope: { gateway: 'edge', namespace: 'grid-system' },
    provenance: {
      producer_version: '0.1.0',
      source_uid: 'uid-1',
      source_generation: 3,
      rendered_at: '2026-11-29T00:00:00Z',
    },
  });
}

/** Serialize after an arbitrary mutation of the parsed document (for building invalid overlays). */
export function mutated(doc: unknown, mutate: (d: any) => void): string {
  const copy = JSON.parse(JSON.stringify(doc));
  mutate(copy);
  return serializeOverlay(copy);
}

/**
 * An envelope around a payload exactly as given (no key ordering or scrubbing by the builder) with a correct digest,
 * so step-7 rules can be tested on content the producer would never emit.
 */
export function rawEnvelope(raw: Record<string, unknown>): string {
  const doc = JSON.parse(JSON.stringify(envelope())) as Record<string, any>;
  doc['overlay'] = raw;
  const revision = overlayRevision(raw);
  doc['revision'].value = revision;
  doc['content_digest'].value = revision;
  return serializeOverlay(doc);
}
