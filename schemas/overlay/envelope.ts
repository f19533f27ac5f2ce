import type { OverlayCandidate, OverlayEnvelope, OverlayPayload, OverlayScope, ScoreBreakdown } from './types.ts';
import { overlayRevision } from './revision.ts';

export const OVERLAY_SCHEMA_VERSION = '1.0.0';
export const OVERLAY_PRODUCER = 'grid-operator';

export interface EnvelopeProvenanceInput {
  readonly producer_version: string;
  readonly source_uid: string;
  readonly source_generation: number;
  readonly rendered_at: string;
}

export interface EnvelopeInput {
  readonly payload: OverlayPayload;
  /** network and local_site must equal the payload's: they are taken from it when omitted. */
  readonly scope: Pick<OverlayScope, 'gateway' | 'namespace'> & Partial<Pick<OverlayScope, 'network' | 'local_site'>>;
  readonly provenance: EnvelopeProvenanceInput;
}

/**
 * Builds the envelope with the key order of docs/contract.md §2.2 and the revision computed from the payload as it
 * will be serialized. The payload's key order follows the contract's example (selection_policy before candidates);
 * the revision does not depend on key order.
 */
export function buildEnvelope(input: EnvelopeInput): OverlayEnvelope {
  const payload = orderPayload(input.payload);
  const { scope } = input;
  if (scope.network !== undefined && scope.network !== payload.network) {
    throw new RangeError(`overlay scope.network "${scope.network}" differs from payload network "${payload.network}"`);
  }
  if (scope.local_site !== undefined && scope.local_site !== payload.local_site) {
    throw new RangeError(
      `overlay scope.local_site "${scope.local_site}" differs from payload local_site "${payload.local_site}"`,
    );
  }
  const revision = overlayRevision(payload as unknown as Record<string, unknown>);
  return {
    schema_version: OVERLAY_SCHEMA_VERSION,
    revision: { kind: 'content_addressed', algorithm: 'sha256', value: revision },
    content_digest: { algorithm: 'sha256', value: revision },
    scope: {
      network: payload.network,
      gateway: scope.gateway,
      namespace: scope.namespace,
      local_site: payload.local_site,
    },
    provenance: {
      producer: OVERLAY_PRODUCER,
      producer_version: input.provenance.producer_version,
      source_name: payload.network,
      source_uid: input.provenance.source_uid,
      source_generation: input.provenance.source_generation,
      rendered_at: input.provenance.rendered_at,
    },
    overlay: payload,
  };
}

/**
 * The payload with its keys (and each candidate's) in contract order and optional keys omitted, never null. Always a
 * new payload object and candidates array; candidates already in contract order are shared with the input, so the
 * input must not be changed afterwards (the revision was computed over them).
 */
export function orderPayload(payload: OverlayPayload): OverlayPayload {
  const ordered: Record<string, unknown> = { network: payload.network, local_site: payload.local_site };
  if (payload.selection_policy !== undefined) ordered['selection_policy'] = { mode: payload.selection_policy.mode };
  ordered['candidates'] = payload.candidates.map(orderCandidate);
  if (payload.generated_at !== undefined) ordered['generated_at'] = payload.generated_at;
  return ordered as unknown as OverlayPayload;
}

const CANDIDATE_KEYS = [
  'kind',
  'name',
  'site',
  'cluster',
  'fresh',
  'credential',
  'stable_id',
  'admission_state',
  'selection_tier',
  'score',
  'score_breakdown',
  'rank',
  'selection_group',
  'traffic_weight',
] as const satisfies readonly (keyof OverlayCandidate)[];
const BREAKDOWN_KEYS = [
  'locality',
  'queue_depth',
  'kv_cache',
  'prefix_cache',
  'latency',
  'cost',
  'total',
] as const satisfies readonly (keyof ScoreBreakdown)[];

/** The keys of `value` are exactly `expected`, in that order (a plain object; values are not looked at). */
function hasExactKeys(value: unknown, expected: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  if (keys.length !== expected.length) return false;
  for (let i = 0; i < keys.length; i++) if (keys[i] !== expected[i]) return false;
  return true;
}

const CREDENTIAL_KEYS = ['strategy', 'secretRef'] as const;
const SECRET_REF_KEYS = ['name', 'namespace', 'key'] as const;

/**
 * True when copying `candidate` would give an equal object with the same key order: only contract keys, in
 * contract order, none null or undefined, and the nested credential and breakdown already in theirs. The renderer
 * builds candidates this way, and a copy of each would be an object graph per candidate that lives through the
 * whole render, which garbage collection of a large overlay pays for.
 */
function inContractOrder(candidate: Record<string, unknown>): boolean {
  let next = 0;
  for (const key of Object.keys(candidate)) {
    while (next < CANDIDATE_KEYS.length && CANDIDATE_KEYS[next] !== key) next++;
    if (next === CANDIDATE_KEYS.length) return false;
    next++;
    const value = candidate[key];
    if (value === undefined || value === null) return false;
    if (key === 'credential') {
      const credential = value as { secretRef?: unknown };
      if (!hasExactKeys(credential, CREDENTIAL_KEYS) || !hasExactKeys(credential.secretRef, SECRET_REF_KEYS))
        return false;
    } else if (key === 'score_breakdown' && !hasExactKeys(value, BREAKDOWN_KEYS)) {
      return false;
    }
  }
  return true;
}

/**
 * The candidate with its keys in contract order; keys outside the v1 contract are dropped (a producer emits only
 * what the contract defines). A candidate already in that form is returned as it is, not copied.
 */
export function orderCandidate(candidate: OverlayCandidate): OverlayCandidate {
  const source = candidate as unknown as Record<string, unknown>;
  if (inContractOrder(source)) return candidate;
  const ordered: Record<string, unknown> = {};
  for (const key of CANDIDATE_KEYS) {
    const value = source[key];
    if (value === undefined || value === null) continue;
    if (key === 'credential') {
      const credential = value as NonNullable<OverlayCandidate['credential']>;
      const { name, namespace, key: secretKey } = credential.secretRef;
      ordered[key] = { strategy: credential.strategy, secretRef: { name, namespace, key: secretKey } };
    } else if (key === 'score_breakdown') {
      const breakdown = value as Record<string, unknown>;
      const copy: Record<string, unknown> = {};
      for (const k of BREAKDOWN_KEYS) copy[k] = breakdown[k];
      ordered[key] = copy;
    } else {
      ordered[key] = value;
    }
  }
  return ordered as unknown as OverlayCandidate;
}

/** Overlay documents are stored pretty-printed (2 spaces) with a final newline, as kubectl users expect to read them. */
export function serializeOverlay(doc: unknown): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}
