// Validation, signing and verification of state records (schemas/gossip/gossip-state-record.schema.json).
// The origin signs the exact body text with its Ed25519 site key, so verification needs no canonical form and
// fields an older peer does not know are forwarded byte for byte.
import { sign, verify, type KeyObject } from 'node:crypto';
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import schema from '../../../schemas/gossip/gossip-state-record.schema.json' with { type: 'json' };
import type {
  ProviderState,
  SignedStateRecord,
  SiteInfo,
  StateRecordBody,
} from '../../../schemas/generated/gossip-state-record.ts';
import type { StateDropReason } from './reasons.ts';

export type { ProviderState, SignedStateRecord, SiteInfo, StateRecordBody };

/** Major version of the record body this build speaks. 1.0: kinds "site" and "provider". */
export const RECORD_MAJOR = 1;
export const RECORD_SCHEMA_VERSION = '1.0';

const ajv = new Ajv({ allErrors: false, strict: false });
ajv.addSchema(schema);
const validateSigned = ajv.getSchema(schema.$id) as ValidateFunction<SignedStateRecord>;
const validateBody = ajv.getSchema(`${schema.$id}#/definitions/StateRecordBody`) as ValidateFunction<StateRecordBody>;

export function siteKey(network: string, site: string): string {
  return `${network}/${site}`;
}

export function providerKey(network: string, site: string, provider: string): string {
  return `${network}/${site}/${provider}`;
}

export type CheckResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: StateDropReason; readonly detail: string };

/** Structure of one record as received; the body is parsed and checked for version, shape and key/origin. */
export function checkRecord(
  raw: unknown,
  maxBodyBytes: number,
): CheckResult<{ signed: SignedStateRecord; body: StateRecordBody }> {
  if (!validateSigned(raw)) {
    const e = validateSigned.errors?.[0];
    return { ok: false, reason: 'bad_record', detail: `record${e?.instancePath ?? ''} ${e?.message ?? 'invalid'}` };
  }
  if (Buffer.byteLength(raw.body) > maxBodyBytes) {
    return {
      ok: false,
      reason: 'oversized_record',
      detail: `body of ${Buffer.byteLength(raw.body)} bytes from ${raw.signer} (max ${maxBodyBytes})`,
    };
  }
  let body: unknown;
  try {
    body = JSON.parse(raw.body);
  } catch {
    return { ok: false, reason: 'bad_record', detail: `body from ${raw.signer} is not JSON` };
  }
  const version =
    typeof body === 'object' && body !== null ? (body as { schema_version?: unknown }).schema_version : undefined;
  if (typeof version === 'string' && Number(version.split('.')[0]) > RECORD_MAJOR) {
    return {
      ok: false,
      reason: 'unsupported_major',
      detail: `schema_version ${version.slice(0, 16)} from ${raw.signer}`,
    };
  }
  if (!validateBody(body)) {
    const e = validateBody.errors?.[0];
    return {
      ok: false,
      reason: 'bad_record',
      detail: `body${e?.instancePath ?? ''} from ${raw.signer}: ${e?.message ?? 'invalid'}`,
    };
  }
  const shape = checkKind(body);
  if (shape) return { ok: false, reason: shape.reason, detail: `${shape.detail} (record ${body.key.slice(0, 200)})` };
  return { ok: true, value: { signed: raw, body } };
}

function checkKind(b: StateRecordBody): { reason: StateDropReason; detail: string } | undefined {
  if (b.kind === 'site') {
    if (b.key !== siteKey(b.network, b.site))
      return { reason: 'origin_mismatch', detail: 'site record key is not {network}/{site}' };
    if (!b.tombstone && !b.site_info) return { reason: 'bad_record', detail: 'site record without site_info' };
    return undefined;
  }
  const prefix = `${siteKey(b.network, b.site)}/`;
  if (!b.key.startsWith(prefix) || b.key.length === prefix.length || b.key.slice(prefix.length).includes('/')) {
    return { reason: 'origin_mismatch', detail: `${b.kind} record key is not {network}/{site}/{name}` };
  }
  if (b.kind === 'provider' && !b.tombstone) {
    if (!b.provider) return { reason: 'bad_record', detail: 'provider record without provider' };
    if (b.key !== providerKey(b.network, b.site, b.provider.name))
      return { reason: 'origin_mismatch', detail: 'provider record key does not name the provider' };
  }
  // Other kinds come from a newer minor version: kept and forwarded opaquely, never interpreted.
  return undefined;
}

/** Signs `body` with the site key. Refuses bodies that would leak a private key. */
export function signRecord(body: StateRecordBody, privateKey: KeyObject): SignedStateRecord {
  if (body.site_info?.public_cert_pem !== undefined && containsPrivateKey(body.site_info.public_cert_pem)) {
    throw new Error(
      `site ${body.site}: public_cert_pem contains a PRIVATE KEY block; publish only the public certificate`,
    );
  }
  const text = JSON.stringify(body);
  return { signer: body.site, body: text, sig: sign(null, Buffer.from(text), privateKey).toString('base64') };
}

export function verifyRecord(signed: SignedStateRecord, publicKey: KeyObject): boolean {
  try {
    return verify(null, Buffer.from(signed.body), publicKey, Buffer.from(signed.sig, 'base64'));
  } catch {
    return false; // wrong key type or malformed key: not a valid signature
  }
}

export function containsPrivateKey(pem: string): boolean {
  return /PRIVATE KEY/.test(pem);
}
