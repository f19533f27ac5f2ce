// Issue 22: the grid at scale, in simulated time. The real membership code runs on a virtual clock and an
// in-memory network with seeded loss and WAN-like delay (test/gossip/sim/), so the figures are the protocol's, not
// this machine's load, and a seed replays a run. Printed per run: convergence, steady traffic, push-pull size,
// false positives, detection and dissemination in gossip rounds. The 5,000-member run: npm run bench:gossip-sim.
import { describe, expect, test } from 'vitest';
import { WIRE_BINARY, WIRE_JSON } from '../../daemons/gossip-operator/swim/wire.ts';
import { describeFigures, runScale, SIM_TIMING, type ScaleFigures } from './sim/scenario.ts';

describe('gossip at scale in simulated time', () => {

  test.each([
    [100, 0.01],
    [100, 0.1],
  ])('N=%i at %f loss: converges, no false deaths, a crash is detected and known by all', async (n, loss) => {
    const f = await runScale(n, loss);
    console.log(describeFigures(f));
    expect(f.convergeMs, 'the grid converged').toBeDefined();
    expect(f.falseDeaths).toBe(0);
    // Suspicion (3 s) shrinking with confirmations, plus a probe period or two to notice: well inside 10 s.
    expect(f.detectMs).toBeDefined();
    expect(f.detectMs!).toBeLessThan(SIM_TIMING.suspicionTimeoutMs + 4 * SIM_TIMING.probeIntervalMs);
    expect(f.deadKnownByAllMs).toBeDefined();
    expect(f.joinKnownByAllMs).toBeDefined();
  });

  // 300 members take 7 s alone and up to 35 s on a loaded 2-core machine.
  test('dissemination grows as O(log N): from 100 to 300 members a death and the median join take under twice the rounds', { timeout: 120_000 }, async () => {
    const small = await runScale(100, 0.01);
    const large = await runScale(300, 0.01);
    console.log(describeFigures(large));
    expect(large.falseDeaths).toBe(0);
    // log(300)/log(100) = 1.24; linear growth would triple. One round of slack for the discrete rounds.
    expect(large.deathRounds!).toBeLessThan(2 * small.deathRounds! + 1);
    expect(large.joinRounds!).toBeLessThan(2 * small.joinRounds! + 1);
  });

  test('at N=64 the binary wire (3) sends at most three quarters of the JSON wire\'s (2) bytes', async () => {
    const json = await runScale(64, 0.01, 22, WIRE_JSON);
    const binary = await runScale(64, 0.01, 22, WIRE_BINARY);
    console.log(describeFigures(json));
    console.log(describeFigures(binary));
    expect(binary.bytesPerMemberPerSec).toBeLessThan(0.75 * json.bytesPerMemberPerSec);
    expect(binary.pushPullBytes).toBeLessThan(0.5 * json.pushPullBytes);
    expect(binary.falseDeaths + json.falseDeaths).toBe(0);
  });

  test('the same run twice gives the same figures (deterministic)', async () => {
    const a = await runScale(30, 0.05, 7);
    const b = await runScale(30, 0.05, 7);
    const strip = (f: ScaleFigures) => ({ ...f, wallSeconds: 0 });
    expect(strip(a)).toEqual(strip(b));
  });
});
