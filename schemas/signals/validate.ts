/**
 * Runtime validators of the signal wire formats (peer-signals, gateway-age-report, gateway-spend-report),
 * compiled from the schemas themselves so the JSON Schema stays the only definition. Each returns one message
 * naming the field, never the whole input.
 */
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import peerSignalsSchema from './peer-signals.schema.json' with { type: 'json' };
import gatewayAgeSchema from './gateway-age-report.schema.json' with { type: 'json' };
import gatewaySpendSchema from './gateway-spend-report.schema.json' with { type: 'json' };
import type { GatewaySpendReportRequest } from '../generated/gateway-spend-report.ts';
import type { PeerSignalRow, PeerSignalsDocument } from '../generated/peer-signals.ts';
import type { GatewayAgeReportRequest } from '../generated/gateway-age-report.ts';

/** Ages outside [0, MAX_PLAUSIBLE_AGE_MS] are skew: no live signals loop keeps a sample for a day, and a wall-clock
 * timestamp (about 1.7e12) or a seconds/microseconds mix-up sent as an age lands far outside it. */
export const MAX_PLAUSIBLE_AGE_MS = 86_400_000;

export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

const ajv = new Ajv({ strict: false, allErrors: false });
ajv.addSchema(peerSignalsSchema);
ajv.addSchema(gatewayAgeSchema);
ajv.addSchema(gatewaySpendSchema);

const envelopeOnly = ajv.compile({
  type: 'object',
  required: peerSignalsSchema.required,
  properties: {
    ...peerSignalsSchema.properties,
    rows: { type: 'array', maxItems: peerSignalsSchema.properties.rows.maxItems },
  },
});
const validateRow = ajv.getSchema(
  `${peerSignalsSchema.$id}#/definitions/PeerSignalRow`,
) as ValidateFunction<PeerSignalRow>;
const validateReport = ajv.getSchema(gatewayAgeSchema.$id) as ValidateFunction<GatewayAgeReportRequest>;
const validateSpendReport = ajv.getSchema(gatewaySpendSchema.$id) as ValidateFunction<GatewaySpendReportRequest>;

function describe(where: string, errors: readonly ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  return `${where}${e?.instancePath ?? ''} ${e?.message ?? 'is invalid'}`.slice(0, 240);
}

/**
 * The document envelope only: its rows stay unknown values, checked one by one with checkPeerSignalRow so a bad
 * row costs that row, not the peer's whole answer.
 */
export function checkPeerSignalsEnvelope(
  value: unknown,
): Checked<Omit<PeerSignalsDocument, 'rows'> & { rows: unknown[] }> {
  if (!envelopeOnly(value)) return { ok: false, error: describe('document', envelopeOnly.errors) };
  return { ok: true, value: value as Omit<PeerSignalsDocument, 'rows'> & { rows: unknown[] } };
}

export function checkPeerSignalRow(value: unknown, index: number): Checked<PeerSignalRow> {
  if (!validateRow(value)) return { ok: false, error: describe(`rows[${index}]`, validateRow.errors) };
  return { ok: true, value };
}

/** The age rule of a row that passed the schema: false means skew. */
export function plausibleAge(ageMs: number): boolean {
  return Number.isSafeInteger(ageMs) && ageMs >= 0 && ageMs <= MAX_PLAUSIBLE_AGE_MS;
}

export function checkGatewayAgeReport(value: unknown): Checked<GatewayAgeReportRequest> {
  if (!validateReport(value)) return { ok: false, error: describe('report', validateReport.errors) };
  return { ok: true, value };
}

export function checkGatewaySpendReport(value: unknown): Checked<GatewaySpendReportRequest> {
  if (!validateSpendReport(value)) return { ok: false, error: describe('report', validateSpendReport.errors) };
  return { ok: true, value };
}
