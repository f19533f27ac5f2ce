// The ceiling `bench:gateway-workers` reads its two-worker ratio against.
import { describe, expect, it } from 'vitest';
import { ratioCeiling } from './gateway-workers.bench.ts';

describe('ratioCeiling', () => {
  it('is the CPUs over the cores one worker and its load generator used', () => {
    // A pair measured by `npm run bench:gateway-workers` on a 2-core machine: the gateway 0.99 of a core, the load
    // generator and upstream 0.54; the pair measured 1.27x.
    expect(ratioCeiling({ gatewayCores: 0.99, loadGenCores: 0.54 }, 2)).toBeCloseTo(1.307, 3);
    // A free load generator leaves two whole cores to two workers.
    expect(ratioCeiling({ gatewayCores: 1, loadGenCores: 0 }, 2)).toBe(2);
  });

  it('is below 1.7 on 2 cores once the load generator takes over 0.18 of a core beside a busy worker', () => {
    expect(ratioCeiling({ gatewayCores: 1, loadGenCores: 0.18 }, 2)).toBeGreaterThan(1.69);
    expect(ratioCeiling({ gatewayCores: 1, loadGenCores: 0.2 }, 2)).toBeLessThan(1.7);
  });

  it('grows with the cores', () => {
    expect(ratioCeiling({ gatewayCores: 1, loadGenCores: 0.6 }, 4)).toBe(2.5);
  });
});
