// The scale scenario run in simulated time, shared by the test (100 and 1,000 members) and the bench
// (5,000): N members join through one seed, a steady window measures traffic and false positives under loss, a
// crash measures detection and dissemination, a late joiner measures how fast news of a join spreads.
import { loopbackProfile, pushPullIntervalFor } from '../../../daemons/gossip-operator/swim/config.ts';
import type { WireVersion } from '../../../daemons/gossip-operator/swim/wire.ts';
import { SimGrid, wanDelay } from './virtual-grid.ts';

/** The timers of the memberlist comparison: the WAN profile / 10, so 500 ms probes and 50 ms gossip. */
export const SIM_TIMING = loopbackProfile(10);
export const LATE_JOINERS = 5;

export interface ScaleFigures {
  readonly n: number;
  readonly lossRate: number;
  readonly wire: WireVersion | 'latest';
  readonly start: 'join-storm' | 'converged';
  /** Virtual ms until all N list all N alive, joining 2 ms apart through one seed (join-storm start only). */
  readonly convergeMs: number | undefined;
  /** Steady state: bytes sent per member per second (UDP and push-pull) and datagrams per member per second. */
  readonly bytesPerMemberPerSec: number;
  readonly packetsPerMemberPerSec: number;
  readonly meanPacketBytes: number;
  /** Median framed push-pull message (request or response) in the steady window. */
  readonly pushPullBytes: number;
  /** Members declared dead / suspect while running, from the end of the join to the end of the run. */
  readonly falseDeaths: number;
  readonly falseSuspicions: number;
  /** A crash: virtual ms to the first member declaring it dead, and to all survivors knowing. */
  readonly detectMs: number | undefined;
  readonly deadKnownByAllMs: number | undefined;
  /** (all know - first declared) in gossip rounds: the dissemination of one death. */
  readonly deathRounds: number | undefined;
  /** LATE_JOINERS late joiners, one after another: median virtual ms and gossip rounds until every member lists
   * each alive, and the slowest (the join tail; undefined when one was never known by all within 60 s). */
  readonly joinKnownByAllMs: number | undefined;
  readonly joinRounds: number | undefined;
  readonly joinMaxMs: number | undefined;
  /** Wall-clock seconds the run took. */
  readonly wallSeconds: number;
}

export interface ScaleOptions {
  readonly seed?: number;
  readonly wire?: WireVersion;
  /** 'join-storm': all N join through one seed, 2 ms apart, and the time to converge is measured (O(N^2) packets,
   * so only for a few hundred members). 'converged': every member starts with the full member list. */
  readonly start?: 'join-storm' | 'converged';
}

export async function runScale(n: number, lossRate: number, options: ScaleOptions = {}): Promise<ScaleFigures> {
  const started = performance.now();
  const timing = SIM_TIMING;
  const { seed = 22, wire, start = 'converged' } = options;
  const grid = new SimGrid({
    size: n,
    timing,
    model: { lossRate, delayMs: wanDelay },
    seed,
    converged: start === 'converged',
    ...(wire === undefined ? {} : { wireVersion: wire }),
  });
  try {
    const convergeMs = start === 'converged' ? undefined : await grid.joinAll(2, 120_000);
    await grid.clock.advance(2_000);
    grid.falseDeaths = 0;
    grid.falseSuspicions = 0;

    // Steady window: one push-pull period for this N, so its share of the traffic is counted once on average.
    const windowMs = Math.max(6_000, pushPullIntervalFor(timing.pushPullIntervalMs, n));
    const bytes0 = grid.bytesSent();
    const packets0 = grid.packetsSent();
    const pp0 = grid.net.pushPullBytes.length;
    const d0 = grid.net.datagrams;
    const db0 = grid.net.datagramBytes;
    await grid.clock.advance(windowMs);
    const datagrams = grid.net.datagrams - d0;
    const datagramBytes = grid.net.datagramBytes - db0;
    const bytes = grid.bytesSent() - bytes0;
    const packets = grid.packetsSent() - packets0;
    const pp = grid.net.pushPullBytes.slice(pp0).sort((a, b) => a - b);

    // A crash.
    const victim = grid.members[n - 1]!;
    await grid.crash(victim);
    const survivors = n - 1;
    const detectMs = await grid.clock.until(() => (grid.knownDead.get(victim.name) ?? 0) > 0, 60_000, 5);
    const spreadMs =
      detectMs === undefined
        ? undefined
        : await grid.clock.until(() => grid.knownDead.get(victim.name) === survivors, 60_000, 5);

    // Late joiners, one at a time, each through a random running member.
    const joins: (number | undefined)[] = [];
    for (let j = 0; j < LATE_JOINERS; j++) {
      const joiner = grid.add(`late-joiner-${j}`);
      void joiner.join([grid.members[grid.pick(n - 1)]!.address]);
      // Everyone running knows it: the n - 1 survivors and the j joiners before it.
      joins.push(await grid.clock.until(() => grid.knownAlive.get(joiner.name) === n - 1 + j, 60_000, 5));
    }
    const known = joins.filter((x): x is number => x !== undefined).sort((a, b) => a - b);
    const joinKnownByAllMs = known.length === joins.length ? known[Math.floor(known.length / 2)] : undefined;
    const joinMaxMs = known.length === joins.length ? known[known.length - 1] : undefined;
    const deadKnownByAllMs = detectMs === undefined || spreadMs === undefined ? undefined : detectMs + spreadMs;
    return {
      n,
      lossRate,
      wire: wire ?? 'latest',
      start,
      convergeMs,
      bytesPerMemberPerSec: bytes / n / (windowMs / 1000),
      packetsPerMemberPerSec: packets / n / (windowMs / 1000),
      meanPacketBytes: datagrams > 0 ? datagramBytes / datagrams : 0,
      pushPullBytes: pp.length > 0 ? (pp[Math.floor(pp.length / 2)] as number) : 0,
      falseDeaths: grid.falseDeaths,
      falseSuspicions: grid.falseSuspicions,
      detectMs,
      deadKnownByAllMs,
      deathRounds: spreadMs === undefined ? undefined : spreadMs / timing.gossipIntervalMs,
      joinKnownByAllMs,
      joinRounds: joinKnownByAllMs === undefined ? undefined : joinKnownByAllMs / timing.gossipIntervalMs,
      joinMaxMs,
      wallSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    await grid.shutdown();
  }
}

/** One printed line per run. */
export function describeFigures(f: ScaleFigures): string {
  const ms = (v: number | undefined) => (v === undefined ? 'never' : `${Math.round(v)} ms`);
  const r = (v: number | undefined) => (v === undefined ? 'never' : v.toFixed(1));
  return (
    `[sim] N=${f.n} loss=${f.lossRate * 100}% wire=${f.wire}: ${f.start === 'converged' ? 'converged start' : `join storm converged in ${ms(f.convergeMs)}`}, ` +
    `${Math.round(f.bytesPerMemberPerSec)} B/member/s (${f.packetsPerMemberPerSec.toFixed(1)} datagrams of ${Math.round(f.meanPacketBytes)} B), ` +
    `push-pull ${f.pushPullBytes} B, false deaths ${f.falseDeaths}, suspicions of live members ${f.falseSuspicions}, ` +
    `crash detected ${ms(f.detectMs)}, known by all ${ms(f.deadKnownByAllMs)} (${r(f.deathRounds)} rounds after the first), ` +
    `late join known by all: median of ${LATE_JOINERS} ${ms(f.joinKnownByAllMs)} (${r(f.joinRounds)} rounds), max ${ms(f.joinMaxMs)}; ${f.wallSeconds.toFixed(1)} s wall`
  );
}
