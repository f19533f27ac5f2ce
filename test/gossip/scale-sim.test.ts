// The grid at scale, in simulated time. The real membership code runs on a virtual clock and an
// in-memory network with seeded loss and WAN-like delay (test/gossip/sim/), so the figures are the protocol's, not
// this machine's load, and a seed replays a run. Printed per run: steady traffic, push-pull size, false
// positives, detection and dissemination in gossip rounds. Grids start converged (every member holding the full
// member list, as after a join storm), except the join-storm test, because a storm costs O(N^2) packets.
// The 5,000-member run: npm run bench:gossip-sim.
import { describe, expect, test } from 'vitest';
import { WIRE_BINARY, WIRE_JSON } from '../../daemons/gossip-operator/swim/wire.ts';
import { describeFigures, runScale, SIM_TIMING, type ScaleFigures } from './sim/scenario.ts';

describe('gossip at scale in simulated time', () => {
  test('a join storm of 100 members through one seed converges, with no false deaths', async () => {
    const f = await runScale(100, 0.01, { start: 'join-storm' });
    console.log(describeFigures(f));
    expect(f.convergeMs, 'the grid converged').toBeDefined();
    expect(f.falseDeaths).toBe(0);
    expect(f.joinMaxMs).toBeDefined();
  });

  test.each([
    [100, 0.01],
    [100, 0.1],
  ])('N=%i at %f loss: no false deaths, a crash is detected and known by all', async (n, loss) => {
    const f = await runScale(n, loss);
    console.log(describeFigures(f));
    expect(f.falseDeaths).toBe(0);
    // Suspicion (3 s) shrinking with confirmations, plus a probe period or two to notice.
    expect(f.detectMs).toBeDefined();
    expect(f.detectMs!).toBeLessThan(SIM_TIMING.suspicionTimeoutMs + 4 * SIM_TIMING.probeIntervalMs);
    expect(f.deadKnownByAllMs).toBeDefined();
    expect(f.joinKnownByAllMs).toBeDefined();
  });

  // 1,000 members: about 15 s of CPU on this machine, more when it is loaded.
  test('dissemination grows as O(log N): 100 and 1,000 members', { timeout: 150_000 }, async () => {
    const runs = [await runScale(100, 0.01), await runScale(1000, 0.01)];
    for (const f of runs) console.log(describeFigures(f));
    const [small, large] = runs as [ScaleFigures, ScaleFigures];
    for (const f of runs) {
      expect(f.falseDeaths, `N=${f.n}`).toBe(0);
      expect(f.detectMs, `N=${f.n}`).toBeDefined();
      // Every late joiner is known by all within a second (the join tail).
      expect(f.joinMaxMs, `N=${f.n}`).toBeLessThan(1_000);
    }
    // log(1000)/log(100) = 1.5; linear growth would multiply by 10. One round of slack for the discrete rounds.
    expect(large.deathRounds!).toBeLessThan(2 * small.deathRounds! + 1);
    expect(large.joinRounds!).toBeLessThan(2 * small.joinRounds! + 1);
    // Per-member load stays flat: probes are O(1) per member; push-pull grows with N but its interval stretches.
    expect(large.bytesPerMemberPerSec).toBeLessThan(3 * small.bytesPerMemberPerSec);
  });

  test("at N=64 the binary wire (3) sends at most three quarters of the JSON wire's (2) bytes", async () => {
    const json = await runScale(64, 0.01, { wire: WIRE_JSON });
    const binary = await runScale(64, 0.01, { wire: WIRE_BINARY });
    console.log(describeFigures(json));
    console.log(describeFigures(binary));
    expect(binary.bytesPerMemberPerSec).toBeLessThan(0.75 * json.bytesPerMemberPerSec);
    expect(binary.pushPullBytes).toBeLessThan(0.5 * json.pushPullBytes);
    expect(binary.falseDeaths + json.falseDeaths).toBe(0);
  });

  test('the same run twice gives the same figures (deterministic)', async () => {
    const a = await runScale(30, 0.05, { seed: 7, start: 'join-storm' });
    const b = await runScale(30, 0.05, { seed: 7, start: 'join-storm' });
    const strip = (f: ScaleFigures) => ({ ...f, wallSeconds: 0 });
    expect(strip(a)).toEqual(strip(b));
  });
});
