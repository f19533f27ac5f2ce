/**
 * The site's tenant spend, from its consumer gateways' reports (schemas/signals/gateway-spend-report.schema.json).
 * Each gateway process (epoch) reports its cumulative spend per tenant with a sequence; the ledger keeps the newest
 * report per epoch, so a repeated, reordered or replayed report changes nothing, and the site's spend is the sum
 * over epochs. The records live in GridNetwork status.gatewaySpendReports, so an operator restart reads them back
 * and counts nothing twice. Spend is cumulative since the grid began: no window, no reset, no expiry (a tenant's
 * budget is a lifetime cap; raising capUsd is how a budget is renewed). Pure.
 */
import type { GatewaySpendReport } from '../../../schemas/generated/gridnetworks.ts';
import type { GatewaySpendReportRequest } from '../../../schemas/generated/gateway-spend-report.ts';

export const MAX_SPEND_EPOCHS = 128;

export type SpendOutcome = 'recorded' | 'duplicate' | 'spend_decreased' | 'capacity';

export function applySpendReport(
  records: readonly GatewaySpendReport[],
  report: GatewaySpendReportRequest,
): { records: readonly GatewaySpendReport[]; outcome: SpendOutcome } {
  const existing = records.find((r) => r.epoch === report.epoch);
  if (existing === undefined && records.length >= MAX_SPEND_EPOCHS) return { records, outcome: 'capacity' };
  if (existing !== undefined && report.sequence <= existing.sequence) return { records, outcome: 'duplicate' };
  const spend = Object.entries(report.spend_usd)
    .filter((entry): entry is [string, number] => entry[1] !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([tenantId, usd]) => ({ tenantId, usd }));
  // Cumulative within an epoch: a tenant missing or lower than recorded means a confused reporter, never a refund.
  for (const before of existing?.spend ?? []) {
    const now = spend.find((s) => s.tenantId === before.tenantId);
    if (now === undefined || now.usd < before.usd) return { records, outcome: 'spend_decreased' };
  }
  const next: GatewaySpendReport = { epoch: report.epoch, ...(report.replica === undefined ? {} : { replica: report.replica }), sequence: report.sequence, spend };
  const others = records.filter((r) => r.epoch !== report.epoch);
  return { records: [...others, next].sort((a, b) => (a.epoch < b.epoch ? -1 : 1)), outcome: 'recorded' };
}

/** This site's spend per tenant: the sum over gateway processes (its G-Counter slot value). */
export function siteSpend(records: readonly GatewaySpendReport[] | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const record of records ?? []) {
    for (const { tenantId, usd } of record.spend) if (Number.isFinite(usd) && usd > 0) out[tenantId] = (out[tenantId] ?? 0) + usd;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
