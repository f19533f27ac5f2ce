// Issue 22: the grid at scale, in simulated time. The real membership code runs on a virtual clock and an
// in-memory network with seeded loss and WAN-like delay (test/gossip/sim/), so the figures are the protocol's, not
// this machine's load, and a seed replays a run. Printed per run: convergence, steady traffic, push-pull size,
// false positives, detection and dissemination in gossip rounds. The 5,000-member run: npm run bench:gossip-sim.
import { describe, expect, test } from 'vitest';
import { runScale, SIM_TIMING, type ScaleFigures } from './sim/scenario.ts';

export function describeFigures(f: ScaleFigures): string {
  const ms = (v: number | undefined) => (v === undefined ? 'never' : `${Math.round(v)} ms`);
  const r = (v: number | undefined) => (v === undefined ? 'never' : v.toFixed(1));
  return (
    `[sim] N=${f.n} loss=${f.lossRate * 100}% wire=${f.wire}: converge ${ms(f.convergeMs)}, ` +
    `${Math.round(f.bytesPerMemberPerSec)} B/member/s (${f.packetsPerMemberPerSec.toFixed(1)} datagrams of ${Math.round(f.meanPacketBytes)} B), ` +
    `push-pull ${f.pushPullBytes} B, false deaths ${f.falseDeaths}, suspicions of live members ${f.falseSuspicions}, ` +
    `crash detected ${ms(f.detectMs)}, known by all ${ms(f.deadKnownByAllMs)} (${r(f.deathRounds)} rounds after the first), ` +
    `late join known by all ${ms(f.joinKnownByAllMs)} (${r(f.joinRounds)} rounds); ${f.wallSeconds.toFixed(1)} s wall`
  );
}

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

  test('the same run twice gives the same figures (deterministic)', async () => {
    const a = await runScale(30, 0.05, 7);
    const b = await runScale(30, 0.05, 7);
    const strip = (f: ScaleFigures) => ({ ...f, wallSeconds: 0 });
    expect(strip(a)).toEqual(strip(b));
  });
});
