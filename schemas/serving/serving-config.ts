/**
 * The serving config contract's functions (schemas/serving/serving-config.schema.json is its only definition):
 * the ConfigMap name, the content-addressed revision, building a document and validating one. The operator builds,
 * overlay-sync and the gateway validate, with the same rules the overlay has (docs/contract.md §2.4 order: size, JSON,
 * structure, schema version, scope, revision), so a bad serving config never replaces a good one anywhere.
 */
import { createHash } from 'node:crypto';
import { Ajv, type ErrorObject } from 'ajv';
import { CanonicalJsonError, canonicalizeInto } from '../canonical-json.ts';
import { fnv1a32Hex } from '../fnv1a.ts';
import type { ServingConfigDocument, ServingPayload, ServingScope } from '../generated/serving-config.ts';
import schema from './serving-config.schema.json' with { type: 'json' };

export const SERVING_SCHEMA_VERSION = '1.0';
/** ConfigMap data key and the file name overlay-sync writes. */
export const SERVING_DATA_KEY = 'serving-config.json';
/** overlay-sync's limit, the overlay's (1 MiB); the gateway allows 2 MiB like it does for overlays. */
export const SYNC_MAX_SERVING_BYTES = 1024 * 1024;
export const GATEWAY_MAX_SERVING_BYTES = 2 * 1024 * 1024;

const PREFIX = 'grid-serving-';
const MAX_NAME = 63;
const PART = 20;

/**
 * `grid-serving-{network}-{gateway}`; past 63 characters truncated and made unique as the overlay's name is
 * (docs/contract.md §2.1).
 */
export function servingConfigMapName(network: string, gateway: string): string {
  const plain = `${PREFIX}${network}-${gateway}`;
  if (plain.length <= MAX_NAME) return plain;
  return `${PREFIX}${network.slice(0, PART)}-${gateway.slice(0, PART)}-${fnv1a32Hex(`${network}/${gateway}`)}`;
}

/** SHA-256 of the JCS bytes of `serving` as serialized; throws CanonicalJsonError on a value JCS cannot encode. */
export function servingRevision(serving: unknown): string {
  const hash = createHash('sha256');
  canonicalizeInto(serving, (chunk) => hash.update(chunk, 'utf8'));
  return hash.digest('hex');
}

export function buildServingDocument(
  scope: Pick<ServingScope, 'gateway' | 'namespace'>,
  serving: ServingPayload,
  generatedAt: string,
): ServingConfigDocument {
  return {
    schema_version: SERVING_SCHEMA_VERSION,
    revision: { kind: 'content_addressed', algorithm: 'sha256', value: servingRevision(serving) },
    scope: {
      network: serving.network,
      gateway: scope.gateway,
      namespace: scope.namespace,
      local_site: serving.local_site,
    },
    generated_at: generatedAt,
    serving,
  };
}

/** Pretty JSON, 2 spaces, as the overlay ConfigMap holds its documents. */
export function serializeServing(document: ServingConfigDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** Why a consumer refuses a serving config, in validation order; the `reason` label of the consumers' metrics. */
export const SERVING_REJECT_REASONS = [
  'oversized',
  'malformed',
  'unsupported_schema',
  'scope_mismatch',
  'digest_mismatch',
  'invalid_entry',
] as const;
export type ServingRejectReason = (typeof SERVING_REJECT_REASONS)[number];

export type ServingValidation =
  | { readonly ok: true; readonly document: ServingConfigDocument; readonly revision: string }
  | { readonly ok: false; readonly reason: ServingRejectReason; readonly message: string };

export interface ServingValidationOptions {
  readonly maxBytes: number;
  /** Configured scope fields must match exactly. */
  readonly expectedScope?: Readonly<Partial<ServingScope>>;
}

const ajv = new Ajv({ strict: false, allErrors: false });
const checkDocument = ajv.compile<ServingConfigDocument>(schema);

function fail(reason: ServingRejectReason, message: string): ServingValidation {
  return { ok: false, reason, message: message.slice(0, 300) };
}

function describe(errors: readonly ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  return `${e?.instancePath || '(document)'} ${e?.message ?? 'is invalid'}`;
}

/** Validates raw bytes (or text) of a serving config; the revision is recomputed from the raw parsed JSON. */
export function validateServing(raw: string | Uint8Array, options: ServingValidationOptions): ServingValidation {
  const size = typeof raw === 'string' ? Buffer.byteLength(raw, 'utf8') : raw.byteLength;
  if (size > options.maxBytes)
    return fail('oversized', `serving config is ${size} bytes, more than the ${options.maxBytes}-byte limit`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(
      typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'),
    );
  } catch (error) {
    return fail('malformed', `serving config is not JSON: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return fail('malformed', 'serving config is not a JSON object');
  const version = (parsed as Record<string, unknown>)['schema_version'];
  if (typeof version === 'string' && !/^1\.[0-9]+$/.test(version))
    return fail('unsupported_schema', `serving config schema_version "${version.slice(0, 40)}" is not 1.x`);
  if (!checkDocument(parsed)) return fail('malformed', `serving config ${describe(checkDocument.errors)}`);
  const document = parsed;
  const { scope, serving } = document;
  if (scope.network !== serving.network)
    return fail('scope_mismatch', `scope.network "${scope.network}" differs from serving.network "${serving.network}"`);
  if (scope.local_site !== serving.local_site)
    return fail(
      'scope_mismatch',
      `scope.local_site "${scope.local_site}" differs from serving.local_site "${serving.local_site}"`,
    );
  for (const [field, expected] of Object.entries(options.expectedScope ?? {})) {
    const actual = scope[field as keyof ServingScope];
    if (expected !== undefined && actual !== expected)
      return fail('scope_mismatch', `scope.${field} is "${actual}", this consumer expects "${expected}"`);
  }
  let revision: string;
  try {
    revision = servingRevision((parsed as { serving: unknown }).serving);
  } catch (error) {
    return fail(
      'malformed',
      `serving config cannot be hashed: ${error instanceof CanonicalJsonError ? error.message : String(error)}`,
    );
  }
  if (revision !== document.revision.value)
    return fail(
      'digest_mismatch',
      `revision.value ${document.revision.value} does not match the recomputed ${revision}`,
    );
  const entryProblem = checkEntries(serving);
  if (entryProblem !== undefined) return fail('invalid_entry', entryProblem);
  return { ok: true, document, revision };
}

/** What the schema cannot say: uniqueness, and every entry's site listed once in `sites`. */
function checkEntries(serving: ServingPayload): string | undefined {
  const sites = new Set<string>();
  for (const [i, s] of serving.sites.entries()) {
    if (sites.has(s.site)) return `sites[${i}]: site "${s.site}" is listed twice`;
    sites.add(s.site);
  }
  const seen = new Set<string>();
  for (const [i, e] of serving.entries.entries()) {
    const key = `${e.site}\u0000${e.provider}`;
    if (seen.has(key)) return `entries[${i}]: provider "${e.provider}" of site "${e.site}" appears twice`;
    seen.add(key);
    if (!sites.has(e.site)) return `entries[${i}]: site "${e.site}" is not in sites`;
    if (e.admission === 'all' && e.excluded !== undefined)
      return `entries[${i}]: provider "${e.provider}" is excluded (${e.excluded}) but admits all`;
  }
  return undefined;
}
