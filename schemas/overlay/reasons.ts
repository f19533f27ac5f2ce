/**
 * Why a consumer rejects an overlay (docs/contract.md §2.4), in validation order. The same strings are the `reason`
 * label of the gateway's and overlay-sync's metrics and the `reject <reason>` output of `agn overlay verify`. Append
 * only.
 */
export const OVERLAY_REJECT_REASONS = [
  'oversized', // step 1: more bytes than the consumer's limit
  'malformed', // step 2: not a JSON object, broken envelope structure (a missing schema_version too), or bare payload where an envelope is required
  'unsupported_schema', // step 3: schema_version is not 1.x
  'scope_mismatch', // step 4: scope disagrees with the payload, the provenance or the configured expected scope
  'revision_digest_mismatch', // step 5: revision/digest metadata malformed or the two values differ
  'digest_mismatch', // step 6: recomputed digest differs from the declared one
  'invalid_candidate', // step 7: a candidate breaks a bound or the selection-group rules
  'invalid_selection_policy', // step 7: selection_policy has unknown keys or an unknown mode
] as const;

export type OverlayRejectReason = (typeof OVERLAY_REJECT_REASONS)[number];

/**
 * The reference gateway's finer reason names, as used by fixtures/overlay-contract-v1/manifest.json, mapped to ours.
 * Both finer names are kinds of structural failure in docs/contract.md §2.4 step 2/3.
 */
export const REFERENCE_REASON_ALIASES: Readonly<Record<string, OverlayRejectReason>> = {
  malformed_structure: 'malformed',
  missing_schema_version: 'malformed',
  unsupported_schema_version: 'unsupported_schema',
};
