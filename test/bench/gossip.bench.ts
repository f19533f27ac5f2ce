// Gossip benchmark: N members in one process on 127.0.0.1 (real UDP/TCP sockets, AES-256-GCM frames), with
// loopbackProfile(10): the WAN profile of docs/contract.md §5 with every protocol timer divided by 10 (500 ms probes,
// 50 ms gossip rounds, 3 s suspicion). For each N it prints:
//   join:  time from a new member's join() until all members list it alive (median and max of 5 trials)
//   death: time from killing a member (no leave message) until every survivor lists it dead (5 trials)
//   false deaths: live members declared dead by anyone during the run
//   bytes: UDP+TCP bytes sent per member per second over a quiet steady-state window
// and then the same for hashicorp/memberlist v0.7.0 with the same timers and procedure (test/bench/memberlist/,
// built with Go when `go` is on PATH; skipped with a message where it is not), and both side by side.
// Run: npm run bench:gossip   (npm run bench:gossip -- 8 32 picks sizes; GOSSIP_BENCH_SPEEDUP=25 another profile,
// ours only; GOSSIP_BENCH_MEMBERLIST=0 skips memberlist)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { benchArgs } from './bench-args.ts';
import { loopbackProfile, pushPullIntervalFor, type SwimConfig } from '../../daemons/gossip-operator/swim/config.ts';
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
const cli = benchArgs(
  'bench:gossip',
  'usage: npm run bench:gossip [-- N...]  (cluster sizes, each a whole number of at least 2; default 8 32 64)',
  {},
  { positionals: true },
);
const sizes = cli.positionals.map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 2))
  cli.fail(`cluster sizes are whole numbers of at least 2, got ${cli.positionals.join(' ')}`);
const NS = sizes.length > 0 ? sizes : [8, 32, 64];

async function startMember(name: string): Promise<Membership> {
  const config: SwimConfig = { ...timing, name };
  const transport = await UdpTransport.bind({ bindHost: '127.0.0.1', bindPort: 0, ...transportBounds(config) });
  return Membership.start({ config, transport, keyring: new KeyRing([key]) });
}

async function until(what: string, timeoutMs: number, check: () => boolean): Promise<number> {
  const t0 = performance.now();
  while (!check()) {
    if (performance.now() - t0 > timeoutMs)
      throw new Error(`bench: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now() - t0;
}

const aliveCount = (m: Membership) => m.members().filter((x) => x.state === 'alive').length;
const bytesSent = (ms: readonly Membership[]) => ms.reduce((s, m) => s + m.stats().transport.bytesSent, 0);

const TRIALS = 5;

interface Row {
  n: number;
  convergeMs: number;
  /** One sample per trial. */
  joinMs: number[];
  deathMs: number[];
  falseDeaths: number;
  bytesPerMemberPerSec: number;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const max = (xs: readonly number[]) => Math.max(...xs);

async function run(n: number): Promise<Row> {
  const members: Membership[] = [];
  const killed = new Set<string>();
  let falseDeaths = 0;
  const watch = (m: Membership) => {
    const seen = (v: { name: string; state: string }) => {
      if (v.state === 'dead' && !killed.has(v.name)) falseDeaths++;
    };
    m.on('update', seen);
    m.on('leave', seen);
    return m;
  };
  try {
    for (let i = 0; i < n; i++) members.push(watch(await startMember(`site-${i}`)));
    const tc = performance.now();
    await Promise.all(members.slice(1).map((m) => m.join([members[0]!.address])));
    await until(`${n} members to converge`, 60_000, () => members.every((m) => aliveCount(m) === n));
    const convergeMs = performance.now() - tc;

    // Quiet steady state: probes, acks and periodic push-pull only, after two push-pull periods (by then every
    // member has exchanged state at least once, and with it what wire version each member speaks).
    await new Promise((r) => setTimeout(r, 2 * pushPullIntervalFor(timing.pushPullIntervalMs, n)));
    const b0 = bytesSent(members);
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, STEADY_WINDOW_MS));
    const bytesPerMemberPerSec = (bytesSent(members) - b0) / n / ((performance.now() - w0) / 1000);

    const joinMs: number[] = [];
    const deathMs: number[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      // A new member joins through one seed (N + 1 members), then one member dies (back to N).
      const newcomer = watch(await startMember(`site-${n + trial}`));
      members.push(newcomer);
      const tj = performance.now();
      await newcomer.join([members[trial]!.address]);
      await until('the new member to be known by all', 60_000, () =>
        members.every((m) => m.member(newcomer.name)?.state === 'alive'),
      );
      joinMs.push(performance.now() - tj);
      await until('everyone to be known by the new member', 60_000, () => aliveCount(newcomer) === members.length);

      // A member dies without a word.
      const victim = members.splice(1 + Math.floor((members.length - 2) * ((trial + 1) / (TRIALS + 1))), 1)[0]!;
      killed.add(victim.name);
      const td = performance.now();
      await victim.shutdown();
      await until('the death to be known by all', 60_000, () =>
        members.every((m) => m.member(victim.name)?.state === 'dead'),
      );
      deathMs.push(performance.now() - td);
    }
    return { n, convergeMs, joinMs, deathMs, falseDeaths, bytesPerMemberPerSec };
  } finally {
    await Promise.all(members.map((m) => m.shutdown()));
  }
}

const started = performance.now();
console.log(
  `gossip bench: ${new Date().toISOString()}, node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB`,
);
console.log(
  `profile: loopback = WAN / ${SPEEDUP}: probe ${timing.probeIntervalMs} ms (timeout ${timing.probeTimeoutMs} ms), gossip ${timing.gossipIntervalMs} ms x ${timing.gossipFanout}, ` +
    `suspicion ${timing.suspicionTimeoutMs} ms (min ${Math.floor(timing.suspicionTimeoutMs / timing.suspicionShrinkDivisor)} ms), push-pull ${timing.pushPullIntervalMs} ms, indirect k=${timing.indirectChecks}`,
);
const rows: Row[] = [];
const line = (who: string, row: Row, gossipMs: number, probeMs: number) => {
  const j = median(row.joinMs);
  const d = median(row.deathMs);
  return (
    `${who} N=${String(row.n).padStart(3)}  new member known by all: median ${j.toFixed(0).padStart(5)} ms = ${(j / gossipMs).toFixed(1)} gossip rounds ` +
    `(max ${max(row.joinMs).toFixed(0)} ms of ${row.joinMs.length})  death known by all: median ${d.toFixed(0).padStart(5)} ms = ${(d / probeMs).toFixed(1)} probe periods ` +
    `(max ${max(row.deathMs).toFixed(0)} ms)  false deaths ${row.falseDeaths}  steady ${row.bytesPerMemberPerSec.toFixed(0).padStart(5)} B/member/s  [initial convergence ${row.convergeMs.toFixed(0)} ms]`
  );
};

// memberlist, built once up front (test/bench/memberlist/main.go says how its timers match ours).
const memberlistBinary = ((): string | undefined => {
  if (process.env.GOSSIP_BENCH_MEMBERLIST === '0' || SPEEDUP !== 10) {
    console.log('memberlist: skipped (GOSSIP_BENCH_MEMBERLIST=0 or a profile other than WAN / 10)');
    return undefined;
  }
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0) {
    console.log(
      'memberlist: skipped, no Go toolchain on PATH (the comparison needs `go` to build test/bench/memberlist)',
    );
    return undefined;
  }
  const out = join(mkdtempSync(join(tmpdir(), 'agn-memberlist-bench-')), 'memberlist-bench');
  try {
    execFileSync('go', ['build', '-o', out, '.'], {
      cwd: new URL('./memberlist/', import.meta.url),
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  } catch (err) {
    console.log(
      `memberlist: skipped, building test/bench/memberlist failed: ${err instanceof Error ? err.message : String(err)}`,
    );
    return undefined;
  }
  return out;
})();

interface MemberlistRow extends Row {
  suspicionMult: number;
  suspicionTimeoutMs: number;
}
const mlRows: MemberlistRow[] = [];
for (const n of NS) {
  const row = await run(n);
  rows.push(row);
  console.log(line('ours      ', row, timing.gossipIntervalMs, timing.probeIntervalMs));
  if (memberlistBinary) {
    try {
      const ml = JSON.parse(
        execFileSync(memberlistBinary, [String(n)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
      ) as MemberlistRow;
      mlRows.push(ml);
      console.log(
        `${line('memberlist', ml, timing.gossipIntervalMs, timing.probeIntervalMs)}  [suspicion ${ml.suspicionTimeoutMs.toFixed(0)} ms fixed, SuspicionMult ${ml.suspicionMult}]`,
      );
    } catch {
      // Its own message (e.g. a grid that did not converge in 60 s) went to stderr above; our rows still stand.
      console.log(
        `memberlist N=${String(n).padStart(3)}  no figures: the memberlist run failed (its message is above)`,
      );
    }
  }
}
if (mlRows.length > 0) {
  console.log('\nside by side (ours / memberlist), one run, back to back:');
  console.log(
    '| N | join median ms | join max ms (trials) | death median ms | false deaths | bytes per member per second |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const ours of rows) {
    const ml = mlRows.find((r) => r.n === ours.n);
    if (!ml) continue;
    const f = (a: number, b: number) => `${a.toFixed(0)} / ${b.toFixed(0)}`;
    console.log(
      `| ${ours.n} | ${f(median(ours.joinMs), median(ml.joinMs))} | ${f(max(ours.joinMs), max(ml.joinMs))} (${ours.joinMs.length}) | ${f(median(ours.deathMs), median(ml.deathMs))} | ` +
        `${ours.falseDeaths} / ${ml.falseDeaths} | ${f(ours.bytesPerMemberPerSec, ml.bytesPerMemberPerSec)} |`,
    );
  }
}
console.log(`log2(N) for reference: ${NS.map((n) => `N=${n}: ${Math.log2(n).toFixed(1)}`).join(', ')}`);
console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`);
console.log(
  JSON.stringify({
    timing: {
      probeIntervalMs: timing.probeIntervalMs,
      gossipIntervalMs: timing.gossipIntervalMs,
      suspicionTimeoutMs: timing.suspicionTimeoutMs,
    },
    rows,
    memberlist: mlRows,
  }),
);
