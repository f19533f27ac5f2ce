// Builds valid overlay envelopes with the contract's own builder, so tests and the sync benchmark can
// publish many distinct revisions of a realistic size.

import { fnv1a32Hex } from '../../schemas/fnv1a.ts';
import { buildEnvelope, serializeOverlay } from '../../schemas/overlay/envelope.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';

export const SCOPE = {
  network: 'glb-demo',
  gateway: 'glb-demo-edge-gateway',
  namespace: 'grid-system',
  local_site: 'east-edge',
} as const;

/** A valid envelope whose revision differs for every `sequence`; `candidates` sets its size (~250 B each). */
export function makeOverlay(sequence: number, candidates: number): string {
  const list: OverlayCandidate[] = [];
  for (let i = 0; i < candidates; i += 1) {
    const name = `model-${i % 64}`;
    const site = `site-${i}`;
    const cluster = `cluster-${i}`;
    list.push({
      kind: 'inference_model',
      name,
      site,
      cluster,
      fresh: true,
      stable_id: fnv1a32Hex(`inference_model/${name}/${site}/${cluster}`),
      admission_state: 'new_and_existing',
      selection_tier: 'cross_region',
      score: ((sequence * 7919 + i) % 1000) / 1000,
      rank: i,
    });
  }
  return serializeOverlay(
    buildEnvelope({
      payload: {
        network: SCOPE.network,
        local_site: SCOPE.local_site,
        candidates: list,
        generated_at: '2026-11-29T00:00:00Z',
      },
      scope: { gateway: SCOPE.gateway, namespace: SCOPE.namespace },
      provenance: {
        producer_version: '0.1.0',
        source_uid: 'bench-uid',
        source_generation: sequence + 1,
        rendered_at: '2026-11-29T00:00:00Z',
      },
    }),
  );
}
