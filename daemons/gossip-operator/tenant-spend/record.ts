/**
 * Records one gateway spend report into GridNetwork status.gatewaySpendReports and gatewaySpendRetired (the ledger of
 * ledger.ts; its own field manager), read fresh for every report so a restart, a concurrent writer or an
 * administrator's edit is applied to what is there now.
 * Served by the gateway ingest listener beside the age reports (one listener, one NetworkPolicy, one client), which
 * also answers GET /v1/tenant-budgets from the same status for the gateways' budget_enforce.
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { checkGatewaySpendReport } from '../../../schemas/signals/validate.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import { patchStatusFresh } from '../controllers/status-write.ts';
import { GRID_NETWORK } from '../kinds.ts';
import {
  applySpendReport,
  readSpendLedger,
  spendLedgerPatch,
  type SpendLedgerLimits,
  type SpendOutcome,
} from './ledger.ts';

export const GATEWAY_SPEND_FIELD_MANAGER = 'grid-operator-gateway-spend';
export const GATEWAY_SPEND_REPORTS_PATH = '/v1/gateway-spend-reports';
export const MAX_SPEND_REPORT_BYTES = 64 * 1024;
/** GET: the GridNetwork's converged status.budgetStatus, for the consumer gateways' budget_enforce. */
export const TENANT_BUDGETS_PATH = '/v1/tenant-budgets';

const STATUS_CODE: Record<SpendOutcome, number> = {
  recorded: 202,
  final_recorded: 202,
  reinstated: 202,
  duplicate: 200,
  spend_decreased: 409,
  epoch_retired: 410,
};

export interface RecordSpendOptions extends SpendLedgerLimits {
  /** Wall clock (ms): the receipt time that orders live epochs for retirement. */
  readonly now: () => number;
}

export async function recordSpendReport(
  store: ResourceStore,
  body: unknown,
  options: RecordSpendOptions,
): Promise<{ status: number; body: Record<string, unknown>; outcome?: SpendOutcome }> {
  const checked = checkGatewaySpendReport(body);
  if (!checked.ok) return { status: 400, body: { error: checked.error } };
  const networks = ((await store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[]).sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : 1,
  );
  const name = networks[0]?.metadata.name;
  if (name === undefined) return { status: 503, body: { error: 'no GridNetwork to record the report into' } };
  let applied: ReturnType<typeof applySpendReport> | undefined;
  const now = options.now();
  const written = await patchStatusFresh<GridNetworkResource>(
    store,
    GRID_NETWORK,
    { name },
    GATEWAY_SPEND_FIELD_MANAGER,
    (fresh) => {
      const before = readSpendLedger(fresh.status);
      applied = applySpendReport(before, checked.value, now, options);
      return applied.ledger === before ? undefined : spendLedgerPatch(applied.ledger);
    },
  );
  if (written.object === undefined || applied === undefined)
    return { status: 503, body: { error: `GridNetwork ${name} disappeared before the report was recorded` } };
  const { outcome, watermark } = applied;
  return {
    status: STATUS_CODE[outcome],
    outcome,
    body: { outcome, ...(watermark === undefined ? {} : { watermark }) },
  };
}

/** The converged budget status (tenantId, capUsd, spendUsd, spendRatio per tracked tenant); no key, no epoch. */
export async function tenantBudgets(store: ResourceStore): Promise<{ status: number; body: Record<string, unknown> }> {
  const networks = ((await store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[]).sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : 1,
  );
  const network = networks[0];
  if (network === undefined) return { status: 503, body: { error: 'no GridNetwork' } };
  return { status: 200, body: { network: network.metadata.name, budgets: network.status?.budgetStatus ?? [] } };
}
