/**
 * Per-gateway overlay rendering (docs/contract.md §2.2, §2.5). The gateway's local site
 * decides access policy, locality tiers and therefore order, so every gateway reference gets its own overlay. Every
 * failure is a RenderError value: the caller keeps the last distributed revision instead of publishing a partial one.
 */
import { CanonicalJsonError } from '../../schemas/canonical-json.ts';
import { stableIdText } from '../../schemas/fnv1a.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import { type ConsumerDialect, dialectSelection, type UnhonouredFeature } from '../../schemas/overlay/dialect.ts';
import { buildEnvelope } from '../../schemas/overlay/envelope.ts';
import type { OverlayCandidate, OverlayEnvelope, OverlayPayload } from '../../schemas/overlay/types.ts';
import { isBoundedName, MAX_NAME_BYTES, type RoutingBackend } from './backends.ts';
import type { GatewayReference, GridSiteView, NetworkRoutingPolicy, RenderSource, SelectionTier } from './model.ts';
import { assignSelectionGroups, orderCandidates, type TieredBackend } from './ordering.ts';
import { err, ok, type Exclusion, type RenderError, type Result } from './result.ts';
import { LOCALITY_WEIGHT } from './scoring.ts';
import { accessAllowed, localityTier, SiteIndex } from './sites.ts';

export interface GatewayRenderInput {
  readonly network: string;
  readonly gateway: GatewayReference;
  readonly policy: NetworkRoutingPolicy;
  readonly sites: readonly GridSiteView[] | SiteIndex;
  readonly backends: readonly RoutingBackend[];
  readonly source: RenderSource;
  /** Epoch ms from the injected clock: generated_at and rendered_at. */
  readonly nowMs: number;
  /**
   * The candidate cap; defaults to the contract's 1024. Only the render benchmark raises it, to measure scaling past
   * the cap: gateways reject longer overlays.
   */
  readonly candidateLimit?: number;
}

export interface RenderedOverlay {
  readonly envelope: OverlayEnvelope;
  /** The bare payload (routing-config.json) = envelope.overlay. */
  readonly payload: OverlayPayload;
  readonly revision: string;
  readonly configMapName: string;
  readonly excluded: readonly Exclusion[];
  /** The consumer dialect this overlay was rendered for. */
  readonly dialect: ConsumerDialect;
  /** What of the GridNetwork's selection policy this consumer will not honour (empty when it honours all of it). */
  readonly unhonoured: readonly { readonly feature: UnhonouredFeature; readonly message: string }[];
}

/** RFC 3339 UTC to the second, the form of the contract's examples; undefined outside years 0000-9999. */
export function rfc3339Seconds(epochMs: number): string | undefined {
  // Every gateway of a reconcile is rendered at one clock reading: the last second's text is reused.
  const second = Math.floor(epochMs / 1000);
  if (second === lastSecond) return lastSecondText;
  const date = new Date(epochMs);
  if (Number.isNaN(date.getTime())) return undefined;
  const text = date.toISOString();
  if (!/^\d{4}-/.test(text)) return undefined;
  lastSecond = second;
  lastSecondText = text.replace(/\.\d{3}Z$/, 'Z');
  return lastSecondText;
}

let lastSecond = Number.NaN;
let lastSecondText: string | undefined;

/** The gateway's local site: spec.consumerGateways[].siteName, defaulting to the network name (the CRD's default). */
export function gatewayLocalSite(network: string, gateway: GatewayReference): string {
  return gateway.siteName ?? network;
}

function checkRenderInput(input: GatewayRenderInput, localSite: string): RenderError | undefined {
  const { policy, gateway, source } = input;
  const weighted = policy.selectionMode === 'weightedRandom';
  if (weighted && policy.placementStrategy !== 'static') {
    return {
      code: 'placement_policy_mismatch',
      message: `GridNetwork ${input.network}: spec.selectionPolicy.mode weightedRandom requires spec.placementPolicy.strategy "static" (got ${policy.placementStrategy === undefined ? 'none' : JSON.stringify(policy.placementStrategy)})`,
    };
  }
  if (!weighted && policy.placementStrategy !== undefined) {
    return {
      code: 'placement_policy_mismatch',
      message: `GridNetwork ${input.network}: spec.placementPolicy is only valid with spec.selectionPolicy.mode weightedRandom (mode is ${policy.selectionMode ?? 'unset'}); remove placementPolicy or switch the mode`,
    };
  }
  const scope: [string, string | undefined][] = [
    ['GridNetwork name', input.network],
    [`spec.consumerGateways[${gateway.name}].name`, gateway.name],
    [`spec.consumerGateways[${gateway.name}].namespace`, gateway.namespace],
    [`spec.consumerGateways[${gateway.name}].siteName`, localSite],
  ];
  for (const [field, value] of scope) {
    if (!isBoundedName(value)) {
      return {
        code: 'invalid_scope',
        message: `GridNetwork ${input.network}: overlay scope ${field} must be 1-${MAX_NAME_BYTES} bytes and not blank`,
      };
    }
  }
  if (!isBoundedName(source.uid) || !isBoundedName(source.producerVersion)) {
    return {
      code: 'invalid_provenance',
      message: `GridNetwork ${input.network}: metadata.uid and the operator version must be 1-${MAX_NAME_BYTES} bytes and not blank`,
    };
  }
  if (!Number.isSafeInteger(source.generation) || source.generation < 1) {
    return {
      code: 'invalid_provenance',
      message: `GridNetwork ${input.network}: metadata.generation must be a positive integer (got ${source.generation})`,
    };
  }
  return undefined;
}

/**
 * The published candidate, in contract key order (so the envelope uses it as it is). One object literal per form
 * (credential or not, traffic weight or not): adding keys one by one to a smaller literal would give each candidate
 * a separately allocated property store as well, which a large overlay pays for in garbage collection.
 */
function toCandidate(
  item: TieredBackend,
  id: number,
  rank: number,
  group: number,
  weighted: boolean,
): OverlayCandidate {
  const { backend, tier } = item;
  const { kind, name, site, cluster, fresh, score } = backend;
  const stable_id = stableIdText(id);
  const admission_state = backend.admission;
  const score_breakdown = {
    locality: LOCALITY_WEIGHT[tier],
    queue_depth: score.queue_depth,
    kv_cache: score.kv_cache,
    prefix_cache: score.prefix_cache,
    latency: score.latency,
    cost: score.cost,
    total: score.total,
  };
  const ref = backend.credential;
  if (ref === undefined) {
    return weighted
      ? {
          kind,
          name,
          site,
          cluster,
          fresh,
          stable_id,
          admission_state,
          selection_tier: tier,
          score: score.total,
          score_breakdown,
          rank,
          selection_group: group,
          traffic_weight: backend.capacityWeight,
        }
      : {
          kind,
          name,
          site,
          cluster,
          fresh,
          stable_id,
          admission_state,
          selection_tier: tier,
          score: score.total,
          score_breakdown,
          rank,
          selection_group: group,
        };
  }
  const credential = {
    strategy: 'bearer_token' as const,
    secretRef: { name: ref.name, namespace: ref.namespace, key: ref.key },
  };
  return weighted
    ? {
        kind,
        name,
        site,
        cluster,
        fresh,
        credential,
        stable_id,
        admission_state,
        selection_tier: tier,
        score: score.total,
        score_breakdown,
        rank,
        selection_group: group,
        traffic_weight: backend.capacityWeight,
      }
    : {
        kind,
        name,
        site,
        cluster,
        fresh,
        credential,
        stable_id,
        admission_state,
        selection_tier: tier,
        score: score.total,
        score_breakdown,
        rank,
        selection_group: group,
      };
}

export function renderGatewayOverlay(input: GatewayRenderInput): Result<RenderedOverlay, RenderError> {
  const { network, gateway, policy } = input;
  const localSite = gatewayLocalSite(network, gateway);
  const invalid = checkRenderInput(input, localSite);
  if (invalid !== undefined) return err(invalid);
  const generatedAt = rfc3339Seconds(input.nowMs);
  if (generatedAt === undefined) {
    return err({ code: 'invalid_clock', message: `clock returned ${input.nowMs}, which is not a valid time` });
  }

  const sites = input.sites instanceof SiteIndex ? input.sites : new SiteIndex(network, input.sites);
  const consumer = sites.lookup(localSite);
  const tiers = new Map<string, SelectionTier>();
  const excluded: Exclusion[] = [];
  const admitted: TieredBackend[] = [];
  // Residency before ordering (docs/contract.md §2.5), because ordering "does not override data-residency or
  // sovereignty constraints; those must be enforced separately before candidates reach the ordering phase": a
  // consumer site that declares a sovereigntyZone sends requests only to sites declaring the same zone; a site without
  // one is not known to be in it.
  const residency = consumer?.sovereigntyZone;
  for (const backend of input.backends) {
    if (residency !== undefined) {
      const zone = sites.lookup(backend.site)?.sovereigntyZone;
      if (zone !== residency) {
        excluded.push({
          reason: 'sovereignty_mismatch',
          provider: backend.provider,
          detail: `${backend.kind} "${backend.name}" at site ${backend.site} (sovereigntyZone ${zone ?? 'unset'}): consumer site ${localSite} is in sovereigntyZone ${residency}`,
        });
        continue;
      }
    }
    if (!accessAllowed(backend.accessLabels, consumer)) {
      excluded.push({
        reason: 'access_denied',
        provider: backend.provider,
        detail: `${backend.kind} "${backend.name}": accessPolicy.siteSelector does not match consumer site ${localSite}${consumer === undefined ? ' (no GridSite for it)' : ''}`,
      });
      continue;
    }
    let tier = tiers.get(backend.site);
    if (tier === undefined) {
      tier = localityTier(localSite, consumer, backend.site, sites.lookup(backend.site));
      tiers.set(backend.site, tier);
    }
    admitted.push({ backend, tier });
  }

  const { ordered, stableIds, duplicates, overLimit } = orderCandidates(
    policy.routingPolicy,
    admitted,
    input.candidateLimit,
  );
  for (const { backend } of duplicates) {
    excluded.push({
      reason: 'duplicate',
      provider: backend.provider,
      detail: `${backend.kind} "${backend.name}" at ${backend.site} via ${backend.cluster} is already published by a better-ranked provider`,
    });
  }
  for (const { backend } of overLimit) {
    excluded.push({
      reason: 'over_limit',
      provider: backend.provider,
      detail: `${backend.kind} "${backend.name}" at ${backend.site} ranks past the ${ordered.length}-candidate overlay limit`,
    });
  }
  const groups = assignSelectionGroups(policy.routingPolicy, ordered);
  // The consumer's dialect decides the published mode (none for Praxis AI main); traffic weights go only with
  // weightedRandom as published, so a degraded mode carries no weights it would ignore or refuse.
  const dialect = gateway.dialect ?? 'agn';
  const selection = dialectSelection(policy.selectionMode, dialect);
  const weighted = selection.mode === 'weightedRandom';
  const candidates = ordered.map((item, rank) =>
    toCandidate(item, stableIds[rank] ?? 0, rank, groups[rank] ?? 0, weighted),
  );

  const payload: OverlayPayload = { network, local_site: localSite, candidates };
  if (selection.mode !== undefined) payload.selection_policy = { mode: selection.mode };
  payload.generated_at = generatedAt;

  let envelope: OverlayEnvelope;
  try {
    envelope = buildEnvelope({
      payload,
      scope: { gateway: gateway.name, namespace: gateway.namespace },
      provenance: {
        producer_version: input.source.producerVersion,
        source_uid: input.source.uid,
        source_generation: input.source.generation,
        rendered_at: generatedAt,
      },
    });
  } catch (error) {
    // CanonicalJsonError names the JSON path of the value (a non-finite number that slipped past normalisation).
    const problem = error instanceof CanonicalJsonError || error instanceof Error ? error.message : String(error);
    return err({
      code: 'unencodable_payload',
      message: `GridNetwork ${network} gateway ${gateway.namespace}/${gateway.name}: ${problem}`,
    });
  }
  return ok({
    envelope,
    payload: envelope.overlay,
    revision: envelope.revision.value,
    configMapName: overlayConfigMapName(network, gateway.name),
    excluded,
    dialect,
    unhonoured: selection.unhonoured,
  });
}
