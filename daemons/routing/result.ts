/**
 * Outcomes of the routing core as values. A render error means "keep the last distributed revision" (docs/contract.md
 * §2.1); an exclusion is one provider or capability left out of an otherwise good overlay, reported so status and logs
 * can say why a model is missing.
 */

export type Result<T, E> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: E };

export function ok<T>(value: T): { readonly ok: true; readonly value: T } {
  return { ok: true, value };
}

export function err<E>(error: E): { readonly ok: false; readonly error: E } {
  return { ok: false, error };
}

/** Why a whole overlay cannot be rendered. Append only: the strings become GridNetwork status reasons. */
export const RENDER_ERROR_CODES = [
  'placement_policy_mismatch', // placementPolicy set without weightedRandom, or weightedRandom without static placement
  'invalid_scope', // gateway name/namespace/local site or network blank or over 256 bytes
  'invalid_provenance', // source uid/version blank or too long, generation not a positive integer
  'invalid_clock', // the injected clock gave a time that is not a valid date
  'unencodable_payload', // a value JCS cannot hash (a non-finite number slipped through)
  'invalid_policy', // a GridNetwork routing field that bypassed API validation (unknown enum, bad threshold or duration)
] as const;
export type RenderErrorCode = (typeof RENDER_ERROR_CODES)[number];

export interface RenderError {
  readonly code: RenderErrorCode;
  /** Names the resource and field, and what to do. */
  readonly message: string;
}

/** Why a provider or one of its capabilities is not in the overlay. Append only (metric label values). */
export const EXCLUSION_REASONS = [
  'provider_unavailable', // phase Unavailable
  'unrecognized_backend_kind', // neither backendKind nor providerKind names a routing category (routing/backend-kind.ts)
  'no_matching_site', // siteSelector matches no GridSite of the network
  'other_network', // remote record of another GridNetwork
  'own_echo', // remote record written by this site
  'site_not_found', // no GridSite named discovered_site_k8s_name(network, site)
  'site_not_eligible', // GridSite not Active (nor Unreachable under poll)
  'stale_ttl_expired', // stale remote candidate past staleCandidateTtlSeconds
  'unhealthy', // metrics healthy=false, or admission none
  'invalid_capability', // name/site/cluster blank or over 256 bytes: the gateway would reject the whole overlay
  'access_denied', // accessPolicy labels not a subset of the consumer site's labels
  'duplicate', // same (kind, name, site, cluster) as a better-ranked candidate
  'over_limit', // past the 1024-candidate cap
  'not_ready', // the InferenceProvider's Ready condition is False
  'sovereignty_mismatch', // the consumer site has a sovereigntyZone and the candidate's site is not in it
] as const;
export type ExclusionReason = (typeof EXCLUSION_REASONS)[number];

export interface Exclusion {
  readonly reason: ExclusionReason;
  /** `{network}/{site}/{provider}` for remote records, the provider name for local ones. */
  readonly provider: string;
  readonly detail: string;
}
