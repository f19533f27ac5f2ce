// The draw among a model's sites, rule by rule (reference praxis-proxy/grid docs/site-selection.md, "Site choice"),
// and the statistical check: over seeded draws the shares match the documented weights (chi-square, alpha 0.05).
import { describe, expect, it } from 'vitest';
import { pickByCapacity, pickWithRoom, shouldShed } from '../../../daemons/gateway/site-route/site-choice.ts';
import type { SiteOption } from '../../../daemons/gateway/site-route/site-choice.ts';
import { betweenTwoShares, chiSquare, seeded, twoChoicesShares } from './fixtures.ts';

const option = (site: string, weight: number, rho: number | undefined, queue?: number, full?: boolean): SiteOption => ({
  site,
  weight,
  rho,
  queue,
  full,
});

function tally(n: number, draw: () => number, sites: number): number[] {
  const counts = Array<number>(sites).fill(0);
  for (let i = 0; i < n; i++) counts[draw()]!++;
  return counts;
}

describe('pickWithRoom', () => {
  it('"one is taken"', () => {
    expect(pickWithRoom([option('a', 10, 0.9)], seeded(1))).toEqual({ index: 0, path: 'only_one' });
  });

  it('"three or more are picked two by ceiling taking the lower rho": the busiest of three is never taken', () => {
    const room = [option('a', 10, 0.2), option('b', 10, 0.5), option('c', 10, 0.9)];
    const random = seeded(7);
    const counts = tally(1000, () => pickWithRoom(room, random).index, 3);
    expect(counts[2]).toBe(0);
    expect(pickWithRoom(room, random).path).toBe('two_choices');
  });

  it('an exact rho tie goes to the first draw', () => {
    // Draw 0.1 lands on a, then 0.9 lands on c among b and c: tied rho, a is kept.
    const draws = [0.1, 0.9];
    expect(
      pickWithRoom([option('a', 10, 0.5), option('b', 10, 0.5), option('c', 10, 0.5)], () => draws.shift()!).index,
    ).toBe(0);
  });

  it.each([
    ['equal ceilings, different rho', [10, 10, 10], [0.2, 0.5, 0.8]],
    ['a large site at high rho and two small idle ones', [40, 10, 10], [0.9, 0.1, 0.3]],
    ['four sites', [30, 20, 10, 5], [0.6, 0.3, 0.1, 0.0]],
  ] as const)('chi-square over 3000 seeded two-choices draws matches the documented shares: %s', (_name, w, rho) => {
    const room = w.map((weight, i) => option(`s${i}`, weight, rho[i]));
    const random = seeded(42);
    const counts = tally(3000, () => pickWithRoom(room, random).index, w.length);
    const result = chiSquare(counts, twoChoicesShares(w, rho));
    expect(
      result.passes,
      `chi-square ${result.statistic.toFixed(2)} >= ${result.critical} for ${JSON.stringify(counts)}`,
    ).toBe(true);
  });

  it.each([
    ['"two are picked between weighted by ceiling over 1 + rho"', [30, 10], [0.5, 0.1]],
    ['equal sites split evenly', [10, 10], [0.3, 0.3]],
    ['a share is bounded to 0.1..0.9 (the reference TWO_SITE_SHARE)', [100, 1], [0, 0.9]],
  ] as const)('chi-square over 2000 seeded pair draws: %s', (_name, w, rho) => {
    const room = [option('a', w[0], rho[0]), option('b', w[1], rho[1])];
    const random = seeded(9);
    const counts = tally(2000, () => pickWithRoom(room, random).index, 2);
    expect(pickWithRoom(room, random).path).toBe('between_two');
    const result = chiSquare(counts, betweenTwoShares(w, rho));
    expect(
      result.passes,
      `chi-square ${result.statistic.toFixed(2)} >= ${result.critical} for ${JSON.stringify(counts)}`,
    ).toBe(true);
  });

  it('the chi-square check can fail: plain ceiling shares are rejected for a pair whose rho differ', () => {
    const room = [option('a', 30, 2 / 3), option('b', 10, 0)];
    const random = seeded(9);
    const counts = tally(2000, () => pickWithRoom(room, random).index, 2);
    expect(chiSquare(counts, [0.75, 0.25]).passes).toBe(false);
  });
});

describe('pickByCapacity', () => {
  it('"With no site that has room, the pick is by ceiling among the sites not full, tied on the best queue depth"', () => {
    const healthy = [
      option('a', 50, 1.2, 3, true),
      option('b', 10, 1.1, 1, false),
      option('c', 30, 1.1, 1, false),
      option('d', 90, 1.3, 2, false),
    ];
    const random = seeded(3);
    const counts = tally(2000, () => pickByCapacity(healthy, random), 4);
    expect(counts[0]).toBe(0);
    expect(counts[3]).toBe(0);
    const result = chiSquare([counts[1]!, counts[2]!], [0.25, 0.75]);
    expect(result.passes, JSON.stringify(counts)).toBe(true);
  });
  it('with every site full, the full ones are the field; a site without a queue reading sorts after every site with one', () => {
    const random = seeded(4);
    expect(pickByCapacity([option('a', 10, 1.5, undefined, true), option('b', 10, 1.5, 4, true)], random)).toBe(1);
    expect(
      tally(200, () => pickByCapacity([option('a', 10, undefined), option('b', 10, undefined)], random), 2).every(
        (c) => c > 50,
      ),
    ).toBe(true);
  });
});

describe('shouldShed', () => {
  const site = (full: boolean | undefined, relieved: boolean | undefined) => ({ full, relieved });
  it.each([
    [
      'shedding is off by default: "availability.shedding is the one switch, off by default"',
      false,
      [site(true, false)],
      false,
      false,
    ],
    [
      '"a model sheds once every healthy site serving it has been at its ceiling with work waiting for full_after_ms"',
      false,
      [site(true, false), site(true, false)],
      true,
      true,
    ],
    ['one site not full: no shedding', false, [site(true, false), site(false, false)], true, false],
    [
      'a shed model stays shed while no site is relieved (no flap on a dip)',
      true,
      [site(false, false), site(true, false)],
      true,
      true,
    ],
    [
      '"routes again once no sample from a site has shown that for room_after_ms"',
      true,
      [site(false, true), site(true, false)],
      true,
      false,
    ],
    [
      'a site that cannot be judged (no queue published) takes the overflow',
      false,
      [site(true, false), site(undefined, undefined)],
      true,
      false,
    ],
    ['no healthy site: nothing to shed (that is a 503)', false, [], true, false],
  ] as const)('%s', (_rule, previously, sites, on, expected) => {
    expect(shouldShed(previously, sites, on)).toBe(expected);
  });
});
