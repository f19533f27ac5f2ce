// Frames are bound to their recipient and acks to the member probed. An attacker on the path
// (here: a raw socket on a crashed member's port, holding the shared key to read and forge) cannot keep a dead
// member alive by reflecting the prober's own frames back to it, by replaying them to another member, or by
// answering with an ack from someone other than the member probed.
import { createSocket, type Socket } from 'node:dgram';
import { connect } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { parseAddress } from '../../daemons/gossip-operator/swim/address.ts';
import { encodePacket } from '../../daemons/gossip-operator/swim/codec.ts';
import { ANY_RECIPIENT, openFrame, sealFrame } from '../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { decodeWire } from '../../daemons/gossip-operator/swim/wire.ts';
import { allSeeAlive, sharedKey, startNode, stopAll, testTiming, waitFor, type TestNode } from './helpers.ts';

const nodes: TestNode[] = [];
let raw: Socket | undefined;
afterEach(async () => {
  await stopAll(nodes.splice(0));
  raw?.close();
  raw = undefined;
});

const ring = new KeyRing([sharedKey]);
const timing = testTiming({ probeIntervalMs: 200, probeTimeoutMs: 100, suspicionTimeoutMs: 600 });

interface Seen {
  readonly frame: Buffer;
  readonly packet: { from: string; msgs: { k: string; seq?: number }[] };
  readonly port: number;
}

/** Starts a and b (and optionally c), crashes b, and takes over b's UDP port with a raw socket. */
async function crashAndImpersonate(
  withC: boolean,
  onFrame: (seen: Seen, send: (frame: Buffer, port: number) => void) => void,
) {
  const a = await startNode('a', timing);
  const b = await startNode('b', timing);
  const c = withC ? await startNode('c', timing) : undefined;
  nodes.push(a, ...(c ? [c] : []));
  await b.membership.join([a.membership.address]);
  if (c) await c.membership.join([a.membership.address]);
  const names = c ? ['a', 'b', 'c'] : ['a', 'b'];
  await waitFor('the mesh to converge', 5_000, () => allSeeAlive(c ? [a, b, c] : [a, b], names));
  const bPort = parseAddress(b.membership.address)!.port;
  await b.membership.shutdown(); // a crash: no leave message
  const sock = createSocket('udp4');
  raw = sock;
  await new Promise<void>((r) => sock.bind(bPort, '127.0.0.1', () => r()));
  const send = (frame: Buffer, port: number) => sock.send(frame, port, '127.0.0.1');
  sock.on('message', (frame, rinfo) => {
    const opened = openFrame(ring, frame, ['b']);
    if (!opened.ok) return;
    const decoded = decodeWire(opened.version, opened.payload, 65_536);
    if (decoded.ok) onFrame({ frame, packet: decoded.packet as Seen['packet'], port: rinfo.port }, send);
  });
  return { a, c };
}

test('a frame reflected back to its sender, or replayed to another member, fails authentication', async () => {
  let aPort = 0;
  let cPort = 0;
  const { a, c } = await crashAndImpersonate(true, ({ frame, packet, port }, send) => {
    if (packet.from !== 'a') return;
    for (const m of packet.msgs) {
      // a pings the crashed b: answer with a ping "from b" carrying a's own sequence number, so a's ack to it
      // carries the number of a's pending probe ...
      if (m.k === 'ping') {
        const forged = encodePacket({ from: 'b', addr: '127.0.0.1:1', ts: Date.now() }, [
          JSON.stringify({ k: 'ping', seq: m.seq, target: 'a' }),
        ]);
        send(sealFrame(ring, forged, 'a'), port);
        send(frame, cPort); // ... and replay a's ping to c
      }
      // ... then reflect a's genuine ack straight back to a.
      if (m.k === 'ack') send(frame, aPort);
    }
  });
  aPort = parseAddress(a.membership.address)!.port;
  cPort = parseAddress(c!.membership.address)!.port;
  await waitFor(
    'a to declare b dead despite the reflected acks',
    8_000,
    () => a.membership.member('b')?.state === 'dead' || `b is ${a.membership.member('b')?.state}`,
  );
  expect(a.membership.stats().drops.decrypt_failed).toBeGreaterThan(0); // the reflections
  expect(c!.membership.stats().drops.decrypt_failed).toBeGreaterThan(0); // the replays to another member
});

test('an ack from a member other than the one probed does not keep a dead member alive', async () => {
  const { a } = await crashAndImpersonate(false, ({ packet, port }, send) => {
    if (packet.from !== 'a') return;
    for (const m of packet.msgs) {
      if (m.k !== 'ping') continue;
      const ack = encodePacket({ from: 'mallory', addr: '127.0.0.1:1', ts: Date.now() }, [
        JSON.stringify({ k: 'ack', seq: m.seq }),
      ]);
      send(sealFrame(ring, ack, 'a'), port);
    }
  });
  await waitFor(
    'a to declare b dead despite acks from mallory',
    8_000,
    () => a.membership.member('b')?.state === 'dead' || `b is ${a.membership.member('b')?.state}`,
  );
  expect(a.membership.stats().drops.unexpected_ack).toBeGreaterThan(0);
});

test('sequence numbers do not start at the same value on every member', async () => {
  const seen = new Set<number>();
  for (const name of ['s1', 's2', 's3']) {
    const n = await startNode(name, timing);
    nodes.push(n);
  }
  // Probe sequence numbers are internal; what a peer sees is the seq of pings, read here off the wire.
  const sock = createSocket('udp4');
  raw = sock;
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const addr = `127.0.0.1:${(sock.address() as { port: number }).port}`;
  sock.on('message', (frame) => {
    const opened = openFrame(ring, frame, ['x']);
    if (!opened.ok) return;
    const decoded = decodeWire(opened.version, opened.payload, 65_536);
    if (!decoded.ok) return;
    for (const m of (decoded.packet as Seen['packet']).msgs)
      if (m.k === 'ping' && m.seq !== undefined) seen.add(Math.floor(m.seq / 1_000_000));
  });
  // Announce a fake member "x" at the raw socket to each node, so each starts probing it.
  for (const n of nodes) {
    const alive = encodePacket({ from: 'x', addr, ts: Date.now() }, [
      JSON.stringify({ k: 'alive', name: 'x', addr, inc: 1 }),
    ]);
    sock.send(sealFrame(ring, alive, n.membership.name), parseAddress(n.membership.address)!.port, '127.0.0.1');
  }
  await waitFor('pings from all three members', 5_000, () => seen.size >= 3 || `${seen.size} distinct ranges`);
});

test('only a join may be addressed to any member; anything else on a stream must name its recipient', async () => {
  const a = await startNode('a', timing);
  nodes.push(a);
  const { port } = parseAddress(a.membership.address)!;
  const framed = (f: Buffer) => Buffer.concat([Buffer.from([0, 0, (f.length >> 8) & 0xff, f.length & 0xff]), f]);
  const exchange = (to: string, join: boolean) =>
    new Promise<'answered' | 'closed'>((resolve) => {
      const header = { from: 'z', addr: '127.0.0.1:1', ts: Date.now() };
      const request = sealFrame(
        ring,
        encodePacket(header, [JSON.stringify({ k: 'push-pull', join, members: [] })]),
        to,
      );
      const opening = sealFrame(
        ring,
        encodePacket(header, [JSON.stringify({ k: 'stream-open', bytes: request.length, join })]),
        to,
      );
      const s = connect(port, '127.0.0.1', () => s.end(Buffer.concat([framed(opening), framed(request)])));
      let got = 0;
      s.on('data', (d) => (got += d.length));
      s.on('error', () => {});
      s.on('close', () => resolve(got > 0 ? 'answered' : 'closed'));
    });
  expect(await exchange(ANY_RECIPIENT, true)).toBe('answered'); // a join to a seed not known by name
  expect(await exchange('a', false)).toBe('answered');
  const before = a.membership.stats().drops.bad_message;
  expect(await exchange(ANY_RECIPIENT, false)).toBe('closed');
  expect(a.membership.stats().drops.bad_message).toBe(before + 1);
  expect(await exchange('b', true)).toBe('closed'); // addressed to another member: fails authentication here
});
