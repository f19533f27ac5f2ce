// Gossip benchmark: N members in one process on 127.0.0.1 (real UDP/TCP sockets, AES-256-GCM frames), with
// loopbackProfile(10): the WAN profile of SPEC §5 with every protocol timer divided by 10 (500 ms probes, 50 ms
// gossip rounds, 3 s suspicion). For each N it prints:
//   join:  time from a new member's join() until all members list it alive (median and max of 3 trials)
//   death: time from killing a member (no leave message) until every survivor lists it dead (3 trials)
//   bytes: UDP+TCP bytes sent per member per second over a quiet steady-state window
// Run: npm run bench:gossip   (npm run bench:gossip -- 8 32 picks sizes; GOSSIP_BENCH_SPEEDUP=25 another profile)
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { loopbackProfile, type SwimConfig } from '../../daemons/gossip-operator/swim/config.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { Membership } from '../../daemons/gossip-operator/swim/membership.ts';
import { transportBounds, UdpTransport } from '../../daemons/gossip-operator/swim/udp-transport.ts';

// WAN / 10 keeps 64 members in one process (one event loop, 2 cores) well below saturation; WAN / 25 (the
// test profile) saturates it during join storms and measures the event loop instead of the protocol.
const SPEEDUP = Number(process.env.GOSSIP_BENCH_SPEEDUP ?? 10);
const timing = loopbackProfile(SPEEDUP);
const key = randomBytes(32);
// Two push-pull periods at N = 64 (pushPullIntervalFor doubles the 3 s interval above 32 members).
const STEADY_WINDOW_MS = 12_000;
const sizes = process.argv.slice(2).map(Number).filter((n) => Number.isInteger(n) && n > 1);
const NS = sizes.length > 0 ? sizes : [8, 32, 64];

async function startMember(name: string): Promise<Membership> {
  const config: SwimConfig = { ...timing, name };
  const transport = await UdpTransport.bind({ bindHost: '127.0.0.1', bindPort: 0, ...transportBounds(config) });
  return Membership.start({ config, transport, keyring: new KeyRing([key]) });
}

async function until(what: string, timeoutMs: number, check: () => boolean): Promise<number> {
  const t0 = performance.now();
  while (!check()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`bench: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now() - t0;
}

const aliveCount = (m: Membership) => m.members().filter((x) => x.state === 'alive').length;
const bytesSent = (ms: readonly Membership[]) => ms.reduce((s, m) => s + m.stats().transport.bytesSent, 0);

const TRIALS = 3;

interface Row {
  n: number;
  convergeMs: number;
  /** One sample per trial. */
  joinMs: number[];
  deathMs: number[];
  bytesPerMemberPerSec: number;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const max = (xs: readonly number[]) => Math.max(...xs);

async function run(n: number): Promise<Row> {
  const members: Membership[] = [];
  try {
    for (let i = 0; i < n; i++) members.push(await startMember(`site-${i}`));
    const tc = performance.now();
    await Promise.all(members.slice(1).map((m) => m.join([members[0]!.address])));
    await until(`${n} members to converge`, 60_000, () => members.every((m) => aliveCount(m) === n));
    const convergeMs = performance.now() - tc;

    // Quiet steady state: probes, acks and periodic push-pull only.
    await new Promise((r) => setTimeout(r, 2 * timing.probeIntervalMs));
    const b0 = bytesSent(members);
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, STEADY_WINDOW_MS));
    const bytesPerMemberPerSec = (bytesSent(members) - b0) / n / ((performance.now() - w0) / 1000);

    const joinMs: number[] = [];
    const deathMs: number[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      // A new member joins through one seed (N + 1 members), then one member dies (back to N).
      const newcomer = await startMember(`site-${n + trial}`);
      members.push(newcomer);
      const tj = performance.now();
      await newcomer.join([members[trial]!.address]);
      await until('the new member to be known by all', 60_000, () => members.every((m) => m.member(newcomer.name)?.state === 'alive'));
      joinMs.push(performance.now() - tj);
      await until('everyone to be known by the new member', 60_000, () => aliveCount(newcomer) === members.length);

      // A member dies without a word.
      const victim = members.splice(1 + Math.floor((members.length - 2) * ((trial + 1) / (TRIALS + 1))), 1)[0]!;
      const td = performance.now();
      await victim.shutdown();
      await until('the death to be known by all', 60_000, () => members.every((m) => m.member(victim.name)?.state === 'dead'));
      deathMs.push(performance.now() - td);
    }
    return { n, convergeMs, joinMs, deathMs, bytesPerMemberPerSec };
  } finally {
    await Promise.all(members.map((m) => m.shutdown()));
  }
}

const started = performance.now();
console.log(`gossip bench: ${new Date().toISOString()}, node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB`);
console.log(
  `profile: loopback = WAN / ${SPEEDUP}: probe ${timing.probeIntervalMs} ms (timeout ${timing.probeTimeoutMs} ms), gossip ${timing.gossipIntervalMs} ms x ${timing.gossipFanout}, ` +
    `suspicion ${timing.suspicionTimeoutMs} ms (min ${Math.floor(timing.suspicionTimeoutMs / timing.suspicionShrinkDivisor)} ms), push-pull ${timing.pushPullIntervalMs} ms, indirect k=${timing.indirectChecks}`,
);
const rows: Row[] = [];
for (const n of NS) {
  const row = await run(n);
  rows.push(row);
  const j = median(row.joinMs);
  const d = median(row.deathMs);
  console.log(
    `N=${String(n).padStart(3)}  new member known by all: median ${j.toFixed(0).padStart(5)} ms = ${(j / timing.gossipIntervalMs).toFixed(1)} gossip rounds ` +
      `(max ${max(row.joinMs).toFixed(0)} ms)  death known by all: median ${d.toFixed(0).padStart(5)} ms = ${(d / timing.probeIntervalMs).toFixed(1)} probe periods ` +
      `(max ${max(row.deathMs).toFixed(0)} ms)  steady ${row.bytesPerMemberPerSec.toFixed(0).padStart(5)} B/member/s  [initial convergence ${row.convergeMs.toFixed(0)} ms]`,
  );
}
console.log(`log2(N) for reference: ${NS.map((n) => `N=${n}: ${Math.log2(n).toFixed(1)}`).join(', ')}`);
console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`);
console.log(JSON.stringify({ timing: { probeIntervalMs: timing.probeIntervalMs, gossipIntervalMs: timing.gossipIntervalMs, suspicionTimeoutMs: timing.suspicionTimeoutMs }, rows }));
