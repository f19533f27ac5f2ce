/**
 * The routing core: from providers, sites and metrics to one scored, grouped, content-addressed overlay per gateway.
 * Pure functions over plain data; the operator's reconcile maps CRDs/CRDT/SWIM into NetworkRoutingInput, calls
 * renderNetwork with its clock reading and last admission memory, then applies the results.
 */
import type { AdmissionMemoryMap } from './admission.ts';
import { evaluateNetwork, type ProviderReadiness } from './backends.ts';
import type { GatewayReference, NetworkRoutingInput, RenderSource } from './model.ts';
import { renderGatewayOverlay, type RenderedOverlay } from './render.ts';
import type { Exclusion, RenderError, Result } from './result.ts';
import { siteIndexFor } from './sites.ts';

export * from './admission.ts';
export * from './backend-kind.ts';
export * from './backends.ts';
export * from './budget.ts';
export * from './model.ts';
export * from './ordering.ts';
export * from './policy.ts';
export * from './render.ts';
export * from './result.ts';
export * from './scoring.ts';
export * from './sites.ts';

export interface GatewayOverlayResult {
  readonly gateway: GatewayReference;
  readonly result: Result<RenderedOverlay, RenderError>;
}

export interface NetworkRenderResult {
  /** One entry per gateway reference, in the order given. */
  readonly gateways: readonly GatewayOverlayResult[];
  /** Pass to the next reconcile's renderNetwork call. */
  readonly admissionMemory: AdmissionMemoryMap;
  /** Providers left out before any gateway's perspective (per-gateway ones are in each RenderedOverlay). */
  readonly excluded: readonly Exclusion[];
  /** Candidates before any gateway's access policy, de-duplication and cap. */
  readonly candidateCount: number;
  /** Per provider: ready, admission and why it is left out (the same rows providerReadiness returns). */
  readonly providers: readonly ProviderReadiness[];
}

/**
 * One reconcile's routing: evaluates providers once (so hysteresis counts each sample once), then renders every
 * gateway's overlay from its own local site.
 */
export function renderNetwork(
  input: NetworkRoutingInput,
  gateways: readonly GatewayReference[],
  source: RenderSource,
  nowMs: number,
  admissionMemory: AdmissionMemoryMap,
): NetworkRenderResult {
  const evaluation = evaluateNetwork(input, nowMs, admissionMemory);
  const sites = siteIndexFor(input);
  return {
    gateways: gateways.map((gateway) => ({
      gateway,
      result: renderGatewayOverlay({
        network: input.network,
        gateway,
        policy: input.policy,
        sites,
        backends: evaluation.backends,
        source,
        nowMs,
      }),
    })),
    admissionMemory: evaluation.admissionMemory,
    excluded: evaluation.excluded,
    candidateCount: evaluation.backends.length,
    providers: evaluation.providers,
  };
}
