import { describe, expect, it } from 'vitest';
import { budgetStatus, counterTotal, type TenantSpendCounter } from '../../daemons/routing/budget.ts';

describe('budget status', () => {
  // "For every tenant declared in budgetPolicy, budgetStatus[] reports tenantId,
  // capUsd (copied from the policy), spendUsd (the converged cross-site total), spendRatio (spendUsd / capUsd)".
  it('sums the G-Counter slots of every site and divides by the cap', () => {
    const status = budgetStatus(
      [
        { tenantId: 'tenant-a', capUsd: 100 },
        { tenantId: 'tenant-b', capUsd: 250 },
      ],
      { 'tenant-a': { east: 20, west: 5 }, 'tenant-b': { west: 50 }, 'tenant-z': { east: 999 } },
    );
    expect(status).toEqual([
      { tenantId: 'tenant-a', capUsd: 100, spendUsd: 25, spendRatio: 0.25 },
      { tenantId: 'tenant-b', capUsd: 250, spendUsd: 50, spendRatio: 0.2 },
    ]);
  });

  it.each([
    ['over the cap clamps to 1', 100, { east: 150 }, 150, 1],
    ['zero cap with spend is 1, not Infinity', 0, { east: 1 }, 1, 1],
    ['zero cap without spend is 0, not NaN', 0, {}, 0, 0],
    ['no counter yet', 10, undefined, 0, 0],
    [
      'negative and non-finite slots carry no spend',
      10,
      { a: -5, b: Number.NaN, c: Number.POSITIVE_INFINITY, d: 2 },
      2,
      0.2,
    ],
  ] as const)('%s', (_label, capUsd, counter, spendUsd, spendRatio) => {
    const counters: Record<string, TenantSpendCounter> = counter === undefined ? {} : { t: counter };
    expect(budgetStatus([{ tenantId: 't', capUsd }], counters)).toEqual([
      { tenantId: 't', capUsd, spendUsd, spendRatio },
    ]);
  });

  it('reports nothing when budgetPolicy is absent ("absent means no tenants are tracked")', () => {
    expect(budgetStatus(undefined, { t: { east: 5 } })).toEqual([]);
    expect(counterTotal(undefined)).toBe(0);
  });

  it('does not read inherited keys as tenants', () => {
    expect(budgetStatus([{ tenantId: 'constructor', capUsd: 1 }], {})[0]?.spendUsd).toBe(0);
  });
});
