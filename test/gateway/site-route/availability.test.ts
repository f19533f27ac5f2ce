// Measured site availability, rule by rule: each row cites the sentence of the reference (praxis-proxy/grid
// docs/site-selection.md, docs/routing.md §7b) it implements.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_AVAILABILITY,
  availabilitySettings,
  freshRho,
  hasRoom,
  isFull,
  isRelieved,
  learn,
  weights,
} from '../../../daemons/gateway/site-route/availability.ts';
import type { SiteLearned } from '../../../daemons/gateway/site-route/availability.ts';
import type { SiteSample } from '../../../daemons/gateway/site-route/site-view.ts';

const S = DEFAULT_AVAILABILITY;
const sample = (atMs: number, inFlight?: number, waiting?: number, readyEndpoints?: number): SiteSample => ({
  site: 'a',
  atMs,
  ...(inFlight === undefined ? {} : { inFlight }),
  ...(waiting === undefined ? {} : { waiting }),
  ...(readyEndpoints === undefined ? {} : { readyEndpoints }),
});
const fold = (samples: SiteSample[], settings = S): SiteLearned | undefined =>
  samples.reduce<SiteLearned | undefined>((l, s) => learn(l, s, settings), undefined);

describe('availability settings', () => {
  it('has the reference defaults: "Nothing needs setting. Every field below has a default, and the one switch is shedding"', () => {
    expect(availabilitySettings(undefined)).toEqual({
      smoothing: 0.3,
      ceiling_half_life_ms: 600_000,
      ceiling_floor: 8,
      explore_floor: 0.25,
      full_after_ms: 5000,
      room_after_ms: 2000,
      queue_full: 1,
      shedding: false,
    });
    expect(availabilitySettings({ shedding: true }).shedding).toBe(true);
  });
});

describe('learned ceiling and saturation', () => {
  it.each([
    [
      '"learns each site\'s ceiling as the most it has held with nothing waiting"',
      [sample(0, 20, 0), sample(1000, 12, 0)],
      20,
    ],
    ['"Teaching stops on any whole request waiting"', [sample(0, 20, 0), sample(1000, 40, 3)], 20],
    [
      '"Teaching stops on any whole request waiting" (a fraction is not a whole request)',
      [sample(0, 20, 0), sample(1000, 30, 0.5)],
      30,
    ],
    ['ceiling_floor: "The least a ceiling can be, so a quiet site does not read as full"', [sample(0, 2, 0)], 8],
    [
      'ceiling_half_life_ms: "How long a learned ceiling takes to halve once load falls away"',
      [sample(0, 40, 0), sample(600_000, 0, 0)],
      20,
    ],
    [
      'a missing in-flight teaches nothing (missing signal is neutral, never zero)',
      [sample(0, 20, 0), sample(1000, undefined, 0)],
      20,
    ],
  ] as const)('%s', (_rule, samples, ceiling) => {
    // Samples 1 s apart: the 10-minute half-life moves a ceiling by about 0.1 % between them.
    expect(fold([...samples])?.ceiling).toBeCloseTo(ceiling, 1);
  });

  it.each([
    [
      '"reads saturation (rho) as in-flight over that ceiling"',
      [sample(0, 20, 0), sample(0, 10, 0)],
      0.5 * 0.3 + 1 * 0.7,
    ],
    [
      'smoothing: "How far one new sample moves saturation toward the new reading"',
      [sample(0, 16, 0), sample(0, 8, 0)],
      1 * 0.7 + 0.5 * 0.3,
    ],
    [
      'in-flight over the ceiling reads above 1 once work queues behind it',
      [sample(0, 10, 0), sample(0, 30, 20)],
      1 * 0.7 + 3 * 0.3,
    ],
  ] as const)('%s', (_rule, samples, rho) => {
    expect(fold([...samples])?.rho).toBeCloseTo(rho, 9);
  });

  it('"A site has room while rho is below 1"; an unmeasured site has no room (it is not read as idle)', () => {
    expect(hasRoom(fold([sample(0, 7, 0)]))).toBe(true);
    expect(hasRoom(fold([sample(0, 10, 0), sample(1, 40, 30), sample(2, 40, 30)]))).toBe(false);
    expect(hasRoom(undefined)).toBe(false);
    expect(hasRoom(fold([sample(0, undefined, 3, 2)]))).toBe(false);
  });

  it('keeps readiness from the newest sample that carried it; "Zero reads as not ready"', () => {
    expect(fold([sample(0, 5, 0, 0)])?.readyEndpoints).toBe(0);
    expect(fold([sample(0, 5, 0, 2), sample(1, 5, 0)])?.readyEndpoints).toBe(2);
  });

  it('ignores a negative or non-finite reading as missing', () => {
    expect(fold([sample(0, 20, 0), sample(1, Number.NaN, -1)])?.ceiling).toBe(20);
  });
});

describe('fullness and relief', () => {
  const full = (t: number): SiteSample => sample(t, 30, 10, 1);
  const calm = (t: number): SiteSample => sample(t, 5, 0, 1);
  it.each([
    [
      '"at its ceiling with work waiting for full_after_ms": not yet at 4.9 s',
      [calm(0), sample(0, 10, 0, 1), full(1000)],
      5_900,
      false,
    ],
    [
      '"at its ceiling with work waiting for full_after_ms": full at 5 s',
      [sample(0, 10, 0, 1), full(1000)],
      6_000,
      true,
    ],
    ['one calm sample ends the spell', [sample(0, 10, 0, 1), full(1000), calm(3000), full(4000)], 8_000, false],
    [
      'queue_full: "Queued work per serving unit at which a site counts as full" (2 waiting over 4 endpoints is under 1)',
      [sample(0, 10, 0, 4), sample(1000, 12, 2, 4)],
      10_000,
      false,
    ],
  ] as const)('%s', (_rule, samples, now, expected) => {
    expect(isFull(fold([...samples]), now, S)).toBe(expected);
  });

  it('a site that publishes no queue cannot be judged full or relieved', () => {
    const l = fold([sample(0, 30)]);
    expect(isFull(l, 60_000, S)).toBeUndefined();
    expect(isRelieved(l, 60_000, S)).toBeUndefined();
  });

  it.each([
    ['still congested: not relieved', [sample(0, 10, 0, 1), sample(1000, 30, 10, 1)], 9_000, false],
    [
      '"routes again once no sample ... has shown that for room_after_ms": 1.9 s after the last congested sample',
      [sample(0, 10, 0, 1), sample(1000, 30, 10, 1), sample(2000, 5, 0, 1)],
      2_900,
      false,
    ],
    [
      '"routes again once no sample ... has shown that for room_after_ms": 2 s after',
      [sample(0, 10, 0, 1), sample(1000, 30, 10, 1), sample(2000, 5, 0, 1)],
      3_000,
      true,
    ],
    ['never congested', [sample(0, 5, 0, 1)], 1, true],
  ] as const)('%s', (_rule, samples, now, expected) => {
    expect(isRelieved(fold([...samples]), now, S)).toBe(expected);
  });
});

describe('draw weights', () => {
  it('explore_floor: "The least share of the largest ceiling a measured site weighs, so an unproven site can prove more"', () => {
    const big = fold([sample(0, 100, 0)]);
    const small = fold([sample(0, 10, 0)]);
    expect(weights([big, small], S)).toEqual([100, 25]);
    expect(weights([big, small], { ...S, explore_floor: 0 })).toEqual([100, 10]);
  });
  it('an unmeasured site weighs the mean of the measured (neutral), or 1 when none is measured', () => {
    expect(weights([fold([sample(0, 100, 0)]), fold([sample(0, 20, 0)]), undefined], S)).toEqual([100, 25, 62.5]);
    expect(weights([undefined, undefined], S)).toEqual([1, 1]);
  });
});

describe('fresh rho (local_load)', () => {
  // Ceiling 20, rho 0.5 from a sample of 10 in flight with nothing waiting.
  const half = fold([sample(0, 20, 0), sample(0, 10, 0)], { ...S, smoothing: 1 });
  it.each([
    ["nothing dispatched since the sample: the sample's rho", 0, 0.5],
    ['10 dispatched since, over the same ceiling', 10, 1],
    ["5 of the sample's own finished since", -5, 0.25],
    ['more finished than the sample showed: never below 0', -50, 0],
  ])('%s', (_case, since, expected) => {
    expect(half!.ceiling).toBe(20);
    expect(freshRho(half, since)).toBe(expected);
  });
  it('an unmeasured site stays unmeasured (missing is neutral, never read as idle or busy)', () => {
    expect(freshRho(undefined, 5)).toBeUndefined();
    expect(freshRho(fold([sample(0, undefined, 3)]), 5)).toBeUndefined();
  });
});
