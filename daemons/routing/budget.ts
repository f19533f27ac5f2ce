/**
 * Tenant budget status (GridNetwork status.budgetStatus): the converged cross-site spend of each tenant the
 * GridNetwork's budgetPolicy declares. A status signal only; nothing here degrades traffic.
 */
import type { BudgetStatus, TenantBudget } from '../../schemas/generated/gridnetworks.ts';

export type { BudgetStatus, TenantBudget };

/** One tenant's G-Counter: spend in USD recorded by each originating site (one slot per site). */
export type TenantSpendCounter = Readonly<Record<string, number>>;

/** A slot that is negative or not finite carries no spend: a malformed peer cannot lower or poison the total. */
function slotValue(value: number): number {
  return Number.isFinite(value) && value > 0 ? value : 0;
}

/** The G-Counter's value: the sum of its site slots. */
export function counterTotal(counter: TenantSpendCounter | undefined): number {
  if (counter === undefined) return 0;
  let total = 0;
  for (const site of Object.keys(counter)) total += slotValue(counter[site] as number);
  return total;
}

/**
 * spendRatio = spendUsd / capUsd clamped to [0, 1], so a zero cap or float overflow never puts a non-finite number
 * into status (1 = at or over the cap). Tenants with counters but no policy entry are not reported.
 */
export function budgetStatus(
  tenants: readonly Readonly<TenantBudget>[] | undefined,
  counters: Readonly<Record<string, TenantSpendCounter>>,
): BudgetStatus[] {
  if (tenants === undefined) return [];
  return tenants.map(({ tenantId, capUsd }) => {
    const cap = Number.isFinite(capUsd) && capUsd > 0 ? capUsd : 0;
    const spendUsd = counterTotal(Object.hasOwn(counters, tenantId) ? counters[tenantId] : undefined);
    const ratio = cap > 0 ? spendUsd / cap : spendUsd > 0 ? 1 : 0;
    return { tenantId, capUsd: cap, spendUsd, spendRatio: Math.min(1, Math.max(0, ratio)) };
  });
}
