/**
 * The runtime check of a grid trust file (grid-trust.schema.json), compiled from the schema itself. One message
 * naming the field, never the whole input.
 */
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import gridTrustSchema from './grid-trust.schema.json' with { type: 'json' };
import type { GridTrust } from '../generated/grid-trust.ts';

export type CheckedTrust =
  | { readonly ok: true; readonly value: GridTrust }
  | { readonly ok: false; readonly error: string };

const validate = new Ajv({ strict: false, allErrors: false }).compile(gridTrustSchema) as ValidateFunction<GridTrust>;

export function checkGridTrust(value: unknown): CheckedTrust {
  if (validate(value)) return { ok: true, value };
  const e = validate.errors?.[0];
  const where =
    e?.instancePath === undefined || e.instancePath === ''
      ? 'the trust file'
      : e.instancePath.slice(1).replace(/\//gu, '.');
  const detail =
    e?.keyword === 'additionalProperties'
      ? `has an unknown key "${String((e.params as { additionalProperty?: unknown }).additionalProperty)}"`
      : (e?.message ?? 'is invalid');
  return { ok: false, error: `${where} ${detail}`.slice(0, 240) };
}
