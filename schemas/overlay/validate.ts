/**
 * Consumer-side overlay validation (docs/contract.md §2.4), shared by the gateway, overlay-sync and
 * `agn overlay verify`.
 *
 * Checks run in the contract's order and stop at the first failure, so every consumer reports the same reason for
 * the same document. It never throws: a consumer must be able to feed it any bytes and keep its last-known-good
 * snapshot. Messages are bounded and name the field; they echo names but never credential contents.
 */
import { CanonicalJsonError } from '../canonical-json.ts';
import { type ConsumerDialect, DIALECT_RULES, type DialectRules } from './dialect.ts';
import overlaySchema from './overlay-envelope.schema.json' with { type: 'json' };
import type { OverlayRejectReason } from './reasons.ts';
import { overlayRevision } from './revision.ts';
import type { OverlayEnvelope, OverlayPayload, OverlayScope } from './types.ts';

export type { OverlayRejectReason } from './reasons.ts';

export type OverlayValidation =
  | { ok: true; format: 'envelope'; revision: string; envelope: OverlayEnvelope; payload: OverlayPayload }
  | { ok: true; format: 'legacy'; payload: OverlayPayload }
  | { ok: false; reason: OverlayRejectReason; message: string };

export interface OverlayValidationOptions {
  /** Size limit in bytes: gateway 2 MiB, overlay-sync 1 MiB. */
  readonly maxBytes: number;
  /** Scope fields this consumer was configured for; each one present must match exactly. */
  readonly expectedScope?: Readonly<Partial<OverlayScope>>;
  /** Accept a bare payload (no envelope keys). Ignored when any expected scope field is set: scope needs an envelope. */
  readonly allowLegacy: boolean;
  /** Which consumer's rules apply (schema version, what is hashed, selection modes); default agn, this project's gateway. */
  readonly dialect?: ConsumerDialect;
}

export const GATEWAY_MAX_OVERLAY_BYTES = 2 * 1024 * 1024;
/**
 * Deepest nesting of objects and arrays an overlay may have (the contract's documents nest 6 levels). Checked by one
 * pass over the bytes before JSON.parse, which would build every level: a 2 MiB overlay nested a million levels
 * held a consumer's event loop for ~240 ms.
 */
export const MAX_OVERLAY_DEPTH = 32;
export const OVERLAY_SYNC_MAX_OVERLAY_BYTES = 1024 * 1024;

/** Any of these keys makes the document an envelope, which never falls back to the bare format. */
const ENVELOPE_KEYS = ['schema_version', 'revision', 'content_digest', 'scope', 'provenance'] as const;
const SCOPE_KEYS = ['network', 'gateway', 'namespace', 'local_site'] as const;
const PROVENANCE_STRING_KEYS = ['producer', 'producer_version', 'source_name', 'source_uid', 'rendered_at'] as const;

// Enumerations and bounds come from the JSON Schema, the contract's one source of truth.
const defs = overlaySchema.$defs;
const candidateProps = defs.OverlayCandidate.properties;
const SCHEMA_VERSION = new RegExp(overlaySchema.properties.schema_version.pattern);
const SHA256_HEX = new RegExp(defs.Sha256Hex.pattern);
const MAX_NAME_BYTES = defs.BoundedName.maxLength;
const MAX_CANDIDATES = defs.OverlayPayload.properties.candidates.maxItems;
const MAX_STABLE_ID_BYTES = candidateProps.stable_id.maxLength;
const MAX_TIER_BYTES = candidateProps.selection_tier.maxLength;
const MIN_WEIGHT = candidateProps.traffic_weight.minimum;
const MAX_WEIGHT = candidateProps.traffic_weight.maximum;
const CANDIDATE_KINDS: ReadonlySet<string> = new Set(candidateProps.kind.enum);
const ADMISSION_STATES: ReadonlySet<string> = new Set(candidateProps.admission_state.enum);
const CREDENTIAL_STRATEGIES: ReadonlySet<string> = new Set(defs.CredentialReference.properties.strategy.enum);
const CREDENTIAL_KEYS: ReadonlySet<string> = new Set(Object.keys(defs.CredentialReference.properties));
const SECRET_REF_KEYS: ReadonlySet<string> = new Set(
  Object.keys(defs.CredentialReference.properties.secretRef.properties),
);
const SELECTION_POLICY_KEYS: ReadonlySet<string> = new Set(Object.keys(defs.SelectionPolicy.properties));

/** RFC 3339 date-time (the profile of ISO 8601 Kubernetes and the contract use). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
/** A header value we will put on the wire: visible ASCII, inner spaces allowed, no CR/LF/NUL. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

const utf8 = new TextDecoder('utf-8', { fatal: true });
type Json = Record<string, unknown>;

class Rejection {
  readonly reason: OverlayRejectReason;
  readonly message: string;
  constructor(reason: OverlayRejectReason, message: string) {
    this.reason = reason;
    this.message = message.length > 300 ? `${message.slice(0, 297)}...` : message;
  }
}

export function validateOverlay(raw: string | Uint8Array, options: OverlayValidationOptions): OverlayValidation {
  try {
    return validate(raw, options);
  } catch (error) {
    if (error instanceof Rejection) return { ok: false, reason: error.reason, message: error.message };
    // Deep nesting can exhaust the stack in JSON.parse or canonicalization: still a rejection, never a crash.
    return { ok: false, reason: 'malformed', message: `document could not be processed (${errorName(error)})` };
  }
}

function validate(raw: string | Uint8Array, options: OverlayValidationOptions): OverlayValidation {
  const dialect = options.dialect ?? 'agn';
  const rules = DIALECT_RULES[dialect];
  // 1. size, before any parsing work.
  const size = typeof raw === 'string' ? Buffer.byteLength(raw, 'utf8') : raw.byteLength;
  if (size > options.maxBytes)
    throw new Rejection('oversized', `overlay is ${size} bytes, limit is ${options.maxBytes}`);

  // 2. a JSON object; envelope or bare payload.
  const doc = parseObject(raw);
  const isEnvelope = ENVELOPE_KEYS.some((key) => Object.hasOwn(doc, key));
  if (!isEnvelope) {
    const scoped = Object.values(options.expectedScope ?? {}).some((value) => value !== undefined);
    if (!options.allowLegacy || scoped) {
      throw new Rejection(
        'malformed',
        'bare payload (no envelope keys) is not accepted: a versioned envelope is required',
      );
    }
    checkPayloadMetadata(doc, '');
    checkPayloadContent(doc, '', rules);
    return { ok: true, format: 'legacy', payload: doc as unknown as OverlayPayload };
  }
  if (!Object.hasOwn(doc, 'schema_version')) throw new Rejection('malformed', 'envelope is missing schema_version');
  if (typeof doc['schema_version'] !== 'string') throw new Rejection('malformed', 'schema_version must be a string');
  const revision = objectField(doc, 'revision', '');
  const digest = objectField(doc, 'content_digest', '');
  const scope = objectField(doc, 'scope', '');
  const provenance = objectField(doc, 'provenance', '');
  const overlay = objectField(doc, 'overlay', '');
  if (!Array.isArray(overlay['candidates'])) throw new Rejection('malformed', 'overlay.candidates must be an array');

  // 3. schema version.
  if (!SCHEMA_VERSION.test(doc['schema_version'])) {
    throw new Rejection(
      'unsupported_schema',
      `schema_version ${show(doc['schema_version'])} is not supported (1.x expected)`,
    );
  }
  if (rules.exactSchemaVersion !== undefined && doc['schema_version'] !== rules.exactSchemaVersion) {
    throw new Rejection(
      'unsupported_schema',
      `schema_version ${show(doc['schema_version'])} is not supported by ${dialect} (exactly ${show(rules.exactSchemaVersion)})`,
    );
  }

  // 4. scope and provenance: bounded, consistent, and what this consumer expects.
  for (const key of SCOPE_KEYS) boundedName(scope[key], `scope.${key}`, 'malformed');
  for (const key of PROVENANCE_STRING_KEYS) boundedName(provenance[key], `provenance.${key}`, 'malformed');
  const generation = provenance['source_generation'];
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 1) {
    throw new Rejection('malformed', 'provenance.source_generation must be a positive integer');
  }
  timestamp(provenance['rendered_at'], 'provenance.rendered_at');
  checkPayloadMetadata(overlay, 'overlay.');
  mustEqual(scope['network'], overlay['network'], 'scope.network', 'overlay.network');
  mustEqual(scope['local_site'], overlay['local_site'], 'scope.local_site', 'overlay.local_site');
  mustEqual(provenance['source_name'], scope['network'], 'provenance.source_name', 'scope.network');
  for (const key of SCOPE_KEYS) {
    const expected = options.expectedScope?.[key];
    if (expected !== undefined && scope[key] !== expected) {
      throw new Rejection(
        'scope_mismatch',
        `scope.${key} is ${show(scope[key])}, this consumer expects ${show(expected)}`,
      );
    }
  }

  // 5. revision and digest metadata are well formed.
  if (revision['kind'] !== 'content_addressed') {
    throw new Rejection(
      'revision_digest_mismatch',
      `revision.kind must be "content_addressed", got ${show(revision['kind'])}`,
    );
  }
  if (revision['algorithm'] !== 'sha256' || digest['algorithm'] !== 'sha256') {
    throw new Rejection('revision_digest_mismatch', 'revision.algorithm and content_digest.algorithm must be "sha256"');
  }
  const declared = revision['value'];
  if (typeof declared !== 'string' || !SHA256_HEX.test(declared)) {
    throw new Rejection('revision_digest_mismatch', 'revision.value must be 64 lowercase hex digits');
  }
  if (typeof digest['value'] !== 'string' || !SHA256_HEX.test(digest['value'])) {
    throw new Rejection('revision_digest_mismatch', 'content_digest.value must be 64 lowercase hex digits');
  }

  // 6. the digest covers what is serialized. The content digest is compared with the content before the revision is
  // compared with the digest: the reference fixtures (invalid-digest.json) report a wrong digest as digest_mismatch
  // even though it also disagrees with the revision.
  let computed: string;
  try {
    computed = overlayRevision(overlay, dialect);
  } catch (error) {
    if (error instanceof CanonicalJsonError)
      throw new Rejection('malformed', `overlay cannot be canonicalized: ${error.message}`);
    throw error;
  }
  if (computed !== digest['value']) {
    // A consumer that does not know selection_policy hashes the payload without it: say so, it is the usual cause.
    const why =
      !rules.readsSelectionPolicy && Object.hasOwn(overlay, 'selection_policy')
        ? `, which ${dialect} computes without selection_policy (a field it does not know)`
        : '';
    throw new Rejection(
      'digest_mismatch',
      `content_digest.value ${digest['value']} does not match the content (computed ${computed}${why})`,
    );
  }
  if (declared !== digest['value']) {
    throw new Rejection(
      'revision_digest_mismatch',
      `revision.value ${declared} differs from content_digest.value ${digest['value']}`,
    );
  }

  // 7. candidates and selection policy.
  checkPayloadContent(overlay, 'overlay.', rules);
  return {
    ok: true,
    format: 'envelope',
    revision: declared,
    envelope: doc as unknown as OverlayEnvelope,
    payload: overlay as unknown as OverlayPayload,
  };
}

/** True when brackets outside strings nest deeper than `limit` (the document need not be valid JSON). */
function nestsDeeperThan(raw: string | Uint8Array, limit: number): boolean {
  const bytes = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === 0x5c) i++;
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) {
      inString = true;
    } else if (b === 0x7b || b === 0x5b) {
      if (++depth > limit) return true;
    } else if (b === 0x7d || b === 0x5d) {
      depth--;
    }
  }
  return false;
}

function parseObject(raw: string | Uint8Array): Json {
  if (nestsDeeperThan(raw, MAX_OVERLAY_DEPTH))
    throw new Rejection('malformed', `overlay nests deeper than ${MAX_OVERLAY_DEPTH} levels`);
  let text: string;
  try {
    text = typeof raw === 'string' ? raw : utf8.decode(raw);
  } catch {
    throw new Rejection('malformed', 'overlay is not valid UTF-8');
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    // The parser's message may quote the input; report only where it failed.
    const where = /position \d+(?: \(line \d+ column \d+\))?/.exec(errorMessage(error))?.[0];
    throw new Rejection('malformed', `overlay is not valid JSON${where ? ` (at ${where})` : ''}`);
  }
  if (!isObject(doc)) throw new Rejection('malformed', 'overlay must be a JSON object');
  return doc;
}

/** The payload fields every consumer needs before it can compare scope: network, local_site, candidates array. */
function checkPayloadMetadata(payload: Json, prefix: string): void {
  boundedName(payload['network'], `${prefix}network`, 'malformed');
  boundedName(payload['local_site'], `${prefix}local_site`, 'malformed');
  if (!Array.isArray(payload['candidates'])) throw new Rejection('malformed', `${prefix}candidates must be an array`);
  if (Object.hasOwn(payload, 'generated_at')) timestamp(payload['generated_at'], `${prefix}generated_at`);
}

function checkPayloadContent(payload: Json, prefix: string, rules: DialectRules): void {
  if (rules.readsSelectionPolicy && Object.hasOwn(payload, 'selection_policy')) {
    checkSelectionPolicy(payload['selection_policy'], `${prefix}selection_policy`, rules.selectionModes);
  }
  const candidates = payload['candidates'] as unknown[];
  if (candidates.length > MAX_CANDIDATES) {
    throw new Rejection(
      'invalid_candidate',
      `${prefix}candidates has ${candidates.length} entries, limit is ${MAX_CANDIDATES}`,
    );
  }
  const seen = new Set<string>();
  const groups = new Map<string, { grouped: boolean; last: number; admission: Map<number, unknown> }>();
  candidates.forEach((candidate, index) => {
    const at = `${prefix}candidates[${index}]`;
    if (!isObject(candidate)) throw new Rejection('invalid_candidate', `${at} must be an object`);
    checkCandidate(candidate, at, rules);
    const identity = JSON.stringify([candidate['kind'], candidate['name'], candidate['site'], candidate['cluster']]);
    if (seen.has(identity))
      throw new Rejection('invalid_candidate', `${at} duplicates an earlier (kind, name, site, cluster)`);
    seen.add(identity);
    if (rules.readsSelectionGroups) checkGroup(groups, candidate, at);
  });
}

function checkCandidate(c: Json, at: string, rules: DialectRules): void {
  if (typeof c['kind'] !== 'string' || !CANDIDATE_KINDS.has(c['kind'])) {
    throw new Rejection('invalid_candidate', `${at}.kind must be one of ${[...CANDIDATE_KINDS].join(', ')}`);
  }
  for (const key of ['name', 'site', 'cluster']) boundedName(c[key], `${at}.${key}`, 'invalid_candidate');
  if (typeof c['fresh'] !== 'boolean') throw new Rejection('invalid_candidate', `${at}.fresh must be a boolean`);
  if (Object.hasOwn(c, 'credential')) checkCredential(c['credential'], `${at}.credential`);
  if (Object.hasOwn(c, 'stable_id')) {
    const id = c['stable_id'];
    if (typeof id !== 'string' || Buffer.byteLength(id) > MAX_STABLE_ID_BYTES || !HEADER_VALUE.test(id)) {
      throw new Rejection(
        'invalid_candidate',
        `${at}.stable_id must be a header-safe string of 1-${MAX_STABLE_ID_BYTES} bytes`,
      );
    }
  }
  if (Object.hasOwn(c, 'admission_state') && !ADMISSION_STATES.has(c['admission_state'] as string)) {
    throw new Rejection(
      'invalid_candidate',
      `${at}.admission_state must be one of ${[...ADMISSION_STATES].join(', ')}`,
    );
  }
  if (Object.hasOwn(c, 'selection_tier')) {
    const tier = c['selection_tier'];
    if (typeof tier !== 'string' || Buffer.byteLength(tier) > MAX_TIER_BYTES) {
      throw new Rejection(
        'invalid_candidate',
        `${at}.selection_tier must be a string of at most ${MAX_TIER_BYTES} bytes`,
      );
    }
  }
  if (Object.hasOwn(c, 'score') && (typeof c['score'] !== 'number' || !Number.isFinite(c['score']))) {
    throw new Rejection('invalid_candidate', `${at}.score must be a finite number`);
  }
  if (Object.hasOwn(c, 'rank') && !isNonNegativeInteger(c['rank'])) {
    throw new Rejection('invalid_candidate', `${at}.rank must be a non-negative integer`);
  }
  // A consumer that does not read groups and weights (Praxis AI main) neither checks nor honours them.
  if (!rules.readsSelectionGroups) return;
  if (Object.hasOwn(c, 'selection_group') && !isNonNegativeInteger(c['selection_group'])) {
    throw new Rejection('invalid_candidate', `${at}.selection_group must be a non-negative integer`);
  }
  if (Object.hasOwn(c, 'traffic_weight')) {
    const weight = c['traffic_weight'];
    if (!Number.isSafeInteger(weight) || (weight as number) < MIN_WEIGHT || (weight as number) > MAX_WEIGHT) {
      throw new Rejection(
        'invalid_candidate',
        `${at}.traffic_weight must be an integer from ${MIN_WEIGHT} to ${MAX_WEIGHT}`,
      );
    }
  }
}

/** A credential is a reference only: any extra key (a `token`, a `value`) is refused without echoing its content. */
function checkCredential(credential: unknown, at: string): void {
  if (!isObject(credential)) throw new Rejection('invalid_candidate', `${at} must be an object`);
  const extra = Object.keys(credential).find((key) => !CREDENTIAL_KEYS.has(key));
  if (extra !== undefined)
    throw new Rejection('invalid_candidate', `${at} has key ${show(extra)}: only strategy and secretRef are allowed`);
  if (!CREDENTIAL_STRATEGIES.has(credential['strategy'] as string)) {
    throw new Rejection('invalid_candidate', `${at}.strategy must be one of ${[...CREDENTIAL_STRATEGIES].join(', ')}`);
  }
  const ref = credential['secretRef'];
  if (!isObject(ref)) throw new Rejection('invalid_candidate', `${at}.secretRef must be an object`);
  const extraRef = Object.keys(ref).find((key) => !SECRET_REF_KEYS.has(key));
  if (extraRef !== undefined) {
    throw new Rejection(
      'invalid_candidate',
      `${at}.secretRef has key ${show(extraRef)}: only name, namespace and key are allowed`,
    );
  }
  for (const key of SECRET_REF_KEYS) boundedName(ref[key], `${at}.secretRef.${key}`, 'invalid_candidate');
}

/**
 * Selection groups per capability (kind, name): all grouped or none, starting at 0, never decreasing and never
 * skipping, one admission state per group. Gateways pick "the first viable group", which only means something then.
 */
function checkGroup(
  groups: Map<string, { grouped: boolean; last: number; admission: Map<number, unknown> }>,
  c: Json,
  at: string,
): void {
  const capability = JSON.stringify([c['kind'], c['name']]);
  const grouped = Object.hasOwn(c, 'selection_group');
  const group = grouped ? (c['selection_group'] as number) : 0;
  const state = groups.get(capability);
  if (state === undefined) {
    if (grouped && group !== 0)
      throw new Rejection(
        'invalid_candidate',
        `${at}.selection_group must start at 0 for ${c['kind']} ${show(c['name'])}`,
      );
    groups.set(capability, { grouped, last: group, admission: new Map([[group, c['admission_state']]]) });
    return;
  }
  if (state.grouped !== grouped) {
    throw new Rejection(
      'invalid_candidate',
      `${at} mixes grouped and ungrouped candidates for ${c['kind']} ${show(c['name'])}`,
    );
  }
  if (!grouped) return;
  if (group !== state.last && group !== state.last + 1) {
    throw new Rejection(
      'invalid_candidate',
      `${at}.selection_group ${group} follows ${state.last}: groups must be contiguous and increasing`,
    );
  }
  state.last = group;
  if (!state.admission.has(group)) {
    state.admission.set(group, c['admission_state']);
  } else if (state.admission.get(group) !== c['admission_state']) {
    throw new Rejection('invalid_candidate', `${at}.admission_state differs from the rest of selection_group ${group}`);
  }
}

function checkSelectionPolicy(policy: unknown, at: string, modes: ReadonlySet<string>): void {
  if (!isObject(policy)) throw new Rejection('invalid_selection_policy', `${at} must be an object`);
  const extra = Object.keys(policy).find((key) => !SELECTION_POLICY_KEYS.has(key));
  if (extra !== undefined) throw new Rejection('invalid_selection_policy', `${at} has unknown key ${show(extra)}`);
  const mode = policy['mode'];
  if (typeof mode !== 'string')
    throw new Rejection('invalid_selection_policy', `${at}.mode must be one of ${[...modes].join(', ')}`);
  if (!modes.has(mode)) {
    throw new Rejection(
      'invalid_selection_policy',
      `${at}.mode: unknown variant ${show(mode)}, expected one of ${[...modes].join(', ')}`,
    );
  }
}

function objectField(doc: Json, key: string, prefix: string): Json {
  const value = doc[key];
  if (!isObject(value)) throw new Rejection('malformed', `${prefix}${key} must be an object`);
  return value;
}

function boundedName(value: unknown, at: string, reason: OverlayRejectReason): void {
  if (typeof value !== 'string' || value.trim() === '' || Buffer.byteLength(value) > MAX_NAME_BYTES) {
    throw new Rejection(reason, `${at} must be a non-blank string of 1-${MAX_NAME_BYTES} bytes`);
  }
}

function timestamp(value: unknown, at: string): void {
  if (typeof value !== 'string' || !RFC3339.test(value) || Number.isNaN(Date.parse(value))) {
    throw new Rejection('malformed', `${at} must be an RFC 3339 timestamp`);
  }
}

function mustEqual(left: unknown, right: unknown, leftName: string, rightName: string): void {
  if (left !== right)
    throw new Rejection('scope_mismatch', `${leftName} ${show(left)} differs from ${rightName} ${show(right)}`);
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonNegativeInteger(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/** A short, quoted rendering of a name for messages; long or odd values are cut so messages stay bounded. */
function show(value: unknown): string {
  const text = typeof value === 'string' ? value : typeof value;
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 61)}...` : text);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}
