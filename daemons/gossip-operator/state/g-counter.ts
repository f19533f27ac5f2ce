// Grow-only counter (G-Counter): one slot per site, each written only by its site. Merge takes the pointwise
// maximum, so it is commutative, associative and idempotent; the value is the sum of the slots. Tenant spend is
// one G-Counter per tenant. Pure functions over plain data.

export type GCounter = Readonly<Record<string, number>>;

export function gCounterValue(c: GCounter): number {
  let sum = 0;
  for (const v of Object.values(c)) sum += v;
  return sum;
}

export function mergeGCounters(a: GCounter, b: GCounter): GCounter {
  const out: Record<string, number> = { ...a };
  for (const [slot, v] of Object.entries(b)) out[slot] = Math.max(out[slot] ?? 0, v);
  return sortedKeys(out);
}

/** Raises `slot` to `value` (a slot never decreases). */
export function setSlot(c: GCounter, slot: string, value: number): GCounter {
  return mergeGCounters(c, { [slot]: value });
}

/** Per-tenant counters. */
export type TenantSpend = Readonly<Record<string, GCounter>>;

export function mergeTenantSpend(a: TenantSpend, b: TenantSpend): TenantSpend {
  const out: Record<string, GCounter> = { ...a };
  for (const [tenant, c] of Object.entries(b)) out[tenant] = mergeGCounters(out[tenant] ?? {}, c);
  return sortedKeys(out);
}

function sortedKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
}
