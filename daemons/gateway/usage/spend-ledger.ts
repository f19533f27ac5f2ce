// The spend this gateway process has recorded per tenant since it started: cumulative USD, only ever growing.
// The reporter sends the whole cumulative map with a sequence number, so a lost or repeated report cannot lose or
// double spend (the operator keeps the highest sequence per gateway process). Pure.

export class SpendLedger {
  readonly #spend = new Map<string, number>();
  #sequence = 0;

  add(tenant: string, usd: number): void {
    if (!Number.isFinite(usd) || usd <= 0) return;
    this.#spend.set(tenant, (this.#spend.get(tenant) ?? 0) + usd);
    this.#sequence++;
  }

  /** Increases with every recorded spend: a report with a higher sequence supersedes a lower one. */
  get sequence(): number {
    return this.#sequence;
  }

  snapshot(): Readonly<Record<string, number>> {
    return Object.fromEntries([...this.#spend].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}
