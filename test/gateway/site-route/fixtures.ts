// Shared by the grid_site_route tests: a seeded random source, an in-memory SiteView (the contract's data, set by the
// test), and the chi-square check the statistical rows use.
import type { ServingEntry, SiteSample, SiteView } from '../../../daemons/gateway/site-route/site-view.ts';

/** The shared seeded source (mulberry32), so draws are reproducible. */
export { seededRandom as seeded } from '../../../daemons/shared/seeded-random.ts';

export function entry(site: string, overrides: Partial<ServingEntry> = {}): ServingEntry {
  return {
    site,
    provider: `p-${site}`,
    models: ['m'],
    cluster: `c-${site}`,
    admission: 'all',
    ready: true,
    local: false,
    ...overrides,
  };
}

/** A SiteView whose serving config and samples the test sets; `publish` delivers a sample like the poller does. */
export class MemorySiteView implements SiteView {
  entriesList: ServingEntry[];
  readonly samples = new Map<string, SiteSample>();
  readonly #listeners = new Set<(sample: SiteSample) => void>();
  rev: string | undefined = 'r1';

  constructor(entries: ServingEntry[]) {
    this.entriesList = entries;
  }
  revision(): string | undefined {
    return this.rev;
  }
  models(): readonly string[] {
    return [...new Set(this.entriesList.flatMap((e) => e.models))];
  }
  entries(model: string): readonly ServingEntry[] {
    return this.entriesList.filter((e) => e.models.includes(model));
  }
  sample(site: string): SiteSample | undefined {
    return this.samples.get(site);
  }
  onSample(listener: (sample: SiteSample) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  publish(sample: SiteSample): void {
    this.samples.set(sample.site, sample);
    for (const listener of this.#listeners) listener(sample);
  }
}

/** Upper 5 % points of the chi-square distribution, by degrees of freedom. */
const CHI_SQUARE_95: Record<number, number> = { 1: 3.841, 2: 5.991, 3: 7.815, 4: 9.488 };

/** Pearson's statistic of observed counts against expected shares, and whether it passes at alpha 0.05. */
export function chiSquare(
  observed: readonly number[],
  shares: readonly number[],
): { statistic: number; critical: number; passes: boolean } {
  const total = observed.reduce((a, b) => a + b, 0);
  let statistic = 0;
  let categories = 0;
  for (let i = 0; i < observed.length; i++) {
    const expected = shares[i]! * total;
    // A share of 0 is a category that must stay empty: one observation there fails the check outright.
    if (expected === 0) {
      if (observed[i]! > 0) statistic = Number.POSITIVE_INFINITY;
      continue;
    }
    categories++;
    statistic += (observed[i]! - expected) ** 2 / expected;
  }
  const critical = CHI_SQUARE_95[categories - 1]!;
  return { statistic, critical, passes: statistic < critical };
}

/**
 * The documented two-choices shares, computed apart from the code under test: two distinct draws by weight, the lower
 * rho taken, an exact tie going to the first draw.
 */
export function twoChoicesShares(weights: readonly number[], rhos: readonly number[]): number[] {
  const total = weights.reduce((a, b) => a + b, 0);
  const shares = weights.map(() => 0);
  for (let a = 0; a < weights.length; a++) {
    for (let b = 0; b < weights.length; b++) {
      if (a === b) continue;
      const p = (weights[a]! / total) * (weights[b]! / (total - weights[a]!));
      shares[rhos[b]! < rhos[a]! ? b : a]! += p;
    }
  }
  return shares;
}

/** "two are picked between weighted by ceiling over 1 + rho", each share bounded to 0.1..0.9. */
export function betweenTwoShares(
  weights: readonly [number, number],
  rhos: readonly [number, number],
): [number, number] {
  const rate = (i: 0 | 1): number => weights[i] / (1 + rhos[i]);
  const first = Math.min(0.9, Math.max(0.1, rate(0) / (rate(0) + rate(1))));
  return [first, 1 - first];
}
