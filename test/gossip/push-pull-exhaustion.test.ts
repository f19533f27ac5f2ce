// A slow-drip attack on the SWIM TCP port: 100 connections, each declaring a 4 MiB frame and sending one byte every 100
// ms. A transport that buffered what each declares would hold ~420 MB and close none; an inbound stream buffers at most
// maxOpeningBytes before its opening frame authenticates, unauthenticated streams are capped (the oldest evicted), and
// every stream has one deadline for the whole exchange; a real peer's push-pull succeeds during the attack.
import { connect, type Socket } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { parseAddress } from '../../daemons/gossip-operator/swim/address.ts';
import { allSeeAlive, startNode, stopAll, testTiming, waitFor, type TestNode } from './helpers.ts';

const nodes: TestNode[] = [];
const attackers: Socket[] = [];
afterEach(async () => {
  for (const s of attackers.splice(0)) s.destroy();
  await stopAll(nodes.splice(0));
});

const CONNECTIONS = 100;
const TRICKLE_MS = 100;
const DEADLINE_MS = 1_000;
const ATTACK_MS = 3_000;

/** Opens `n` connections that declare `declared` bytes and then send one byte every TRICKLE_MS. */
function attack(port: number, n: number, declared: number): { closed: () => number; stop: () => void } {
  let closed = 0;
  const timers: NodeJS.Timeout[] = [];
  for (let i = 0; i < n; i++) {
    const s = connect(port, '127.0.0.1');
    attackers.push(s);
    s.on('error', () => {});
    s.on('close', () => closed++);
    s.on('connect', () => {
      const prefix = Buffer.alloc(4);
      prefix.writeUInt32BE(declared);
      s.write(prefix);
      timers.push(setInterval(() => s.writable && s.write(Buffer.of(0x41)), TRICKLE_MS));
    });
  }
  return { closed: () => closed, stop: () => timers.forEach(clearInterval) };
}

test.each([
  ['a 4 MiB frame (as reported)', 4 * 1024 * 1024],
  ['a frame within the opening bound', 1_000],
])(
  '100 trickling connections declaring %s are closed, hold bounded memory, and a real push-pull still succeeds',
  async (_name, declared) => {
    const timing = testTiming({ pushPullTimeoutMs: DEADLINE_MS });
    const a = await startNode('a', timing);
    const b = await startNode('b', timing);
    nodes.push(a, b);
    await b.membership.join([a.membership.address]);
    await waitFor('a and b to converge', 5_000, () => allSeeAlive([a, b], ['a', 'b']));
    global.gc?.();
    const rssBefore = process.memoryUsage.rss();
    const port = parseAddress(a.membership.address)!.port;
    const started = Date.now();
    const wave = attack(port, CONNECTIONS, declared);
    let peak = { rss: 0, streams: 0, buffered: 0 };
    let exchanges = 0;
    while (Date.now() - started < ATTACK_MS) {
      await new Promise((r) => setTimeout(r, 100));
      const t = a.membership.stats().transport;
      peak = {
        rss: Math.max(peak.rss, process.memoryUsage.rss()),
        streams: Math.max(peak.streams, t.inboundStreams),
        buffered: Math.max(peak.buffered, t.inboundBufferedBytes),
      };
      if (Date.now() - started > 500 && exchanges === 0) exchanges = await b.membership.syncNow(); // the real peer, mid-attack
    }
    wave.stop();
    const { maxPendingStreams, maxInboundStreams, maxOpeningBytes } = a.membership.config;
    console.log(
      `[exhaustion] declared=${declared} closed=${wave.closed()}/${CONNECTIONS} peak_streams=${peak.streams} peak_unauthenticated_bytes=${peak.buffered} rss_growth_mb=${((peak.rss - rssBefore) / 1048576).toFixed(1)} real_exchange=${exchanges}`,
    );
    // Every attacking connection was closed by the member (the deadline is 1 s; the attack ran 3 s).
    expect(wave.closed()).toBe(CONNECTIONS);
    expect(peak.streams).toBeLessThanOrEqual(maxPendingStreams + maxInboundStreams);
    expect(peak.buffered).toBeLessThanOrEqual(maxPendingStreams * maxOpeningBytes);
    expect(peak.rss - rssBefore).toBeLessThan(64 * 1024 * 1024);
    expect(exchanges).toBe(1);
    const drops = a.membership.stats().drops;
    expect(drops.oversized + drops.stream_limit + drops.stream_deadline).toBeGreaterThan(0);
    // And the member still serves a good exchange afterwards.
    expect(await b.membership.syncNow()).toBe(1);
  },
);
