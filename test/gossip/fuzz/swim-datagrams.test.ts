// Fuzz suite: 10 000 generated SWIM datagrams against a live member in its own process, over real UDP
// on loopback: garbage, broken frames, and frames sealed with the right key around hostile packets (every message
// kind with wrong, huge or missing fields, wrong recipients, reflections, replays, stale clocks). Afterwards the
// member must be alive and admit a real member, with RSS, descriptors and event-loop delay within BOUNDS and no
// key bytes in its output. Seeded: GOSSIP_FUZZ_SEED=<n> reproduces a run.
import { createSocket } from 'node:dgram';
import { afterAll, expect, test } from 'vitest';
import { parseAddress } from '../../../daemons/gossip-operator/swim/address.ts';
import { encodePacket, MESSAGE_KINDS } from '../../../daemons/gossip-operator/swim/codec.ts';
import { ANY_RECIPIENT, sealFrame } from '../../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../../daemons/gossip-operator/swim/keyring.ts';
import { startNode, stopAll, testTiming, waitFor, type TestNode } from '../helpers.ts';
import { checkAfterRun, FuzzedMember, summary } from './harness.ts';
import { fuzzSeed, Rng } from './rng.ts';

const DATAGRAMS = 10_000;
const BATCH = 50;

let member: FuzzedMember | undefined;
const nodes: TestNode[] = [];
afterAll(async () => {
  await stopAll(nodes);
  await member?.stop();
});

/** One message of a known or unknown kind; fields are right, wrong, huge or missing at random. */
function message(rng: Rng): Record<string, unknown> {
  const k = rng.int(10) === 0 ? rng.string() : rng.pick(MESSAGE_KINDS);
  const good = {
    seq: rng.int(2 ** 31),
    target: rng.pick(['target', 'peer', `fz-${rng.int(50)}`]),
    targetAddr: `127.0.0.1:${1 + rng.int(65_535)}`,
    name: rng.pick(['target', 'peer', `fz-${rng.int(50)}`]),
    addr: `127.0.0.1:${1 + rng.int(65_535)}`,
    inc: rng.int(5),
    by: rng.pick(['peer', 'fz-1', 'target']),
    data: rng.value(),
    join: rng.int(2) === 0,
    members: [],
    bytes: rng.int(5_000_000),
  };
  const m: Record<string, unknown> = { k };
  for (const [field, value] of Object.entries(good)) {
    const roll = rng.int(10);
    if (roll < 6) m[field] = value;
    else if (roll < 9) {
      // Wrong types and values, kept mostly under a packet so they reach decoding rather than the size check.
      const v = rng.value();
      m[field] = JSON.stringify(v).length > 300 ? rng.string() : v;
    }
    // else: missing
  }
  return m;
}

function datagram(rng: Rng, ring: KeyRing, sent: Buffer[]): Buffer {
  const header = () => ({
    from: rng.int(20) === 0 ? 'target' : rng.pick(['peer', `fz-${rng.int(50)}`]),
    addr: `127.0.0.1:${1 + rng.int(65_535)}`,
    ts: rng.int(20) === 0 ? rng.int(2 ** 40) : Date.now(),
  });
  const sealed = (to = 'target') =>
    sealFrame(
      ring,
      encodePacket(
        header(),
        Array.from({ length: 1 + rng.int(4) }, () => JSON.stringify(message(rng))),
      ),
      to,
    );
  switch (rng.int(12)) {
    case 0:
      return rng.bytes(rng.int(1_500));
    case 1:
      return Buffer.concat([Buffer.from('GRID'), Buffer.of(rng.int(256)), rng.bytes(rng.int(200))]);
    case 2:
      return sealed(rng.pick(['peer', ANY_RECIPIENT, 'targe', 'target\u0000']));
    case 3: {
      const f = sealed();
      const at = rng.int(f.length);
      f.writeUInt8(f.readUInt8(at) ^ (1 << rng.int(8)), at);
      return f;
    }
    case 4:
      return sealFrame(ring, Buffer.from(JSON.stringify(rng.value())), 'target');
    case 5:
      return sealFrame(
        ring,
        encodePacket(header(), [JSON.stringify({ k: 'user', data: 'y'.repeat(1_400 + rng.int(4_000)) })]),
        'target',
      );
    case 6:
      return sent.length > 0 ? rng.pick(sent) : sealed();
    case 7:
      return sealFrame(undefined, encodePacket(header(), [JSON.stringify(message(rng))]), 'target');
    case 8:
      return sealed().subarray(0, rng.int(60));
    default:
      return sealed();
  }
}

test(`${DATAGRAMS} generated SWIM datagrams leave the member alive, bounded and silent about its key`, async () => {
  const seed = fuzzSeed();
  const rng = new Rng(seed);
  member = await FuzzedMember.start();
  const ring = new KeyRing([member.key]);
  const peer = await startNode('peer', testTiming(), { keyring: ring });
  nodes.push(peer);
  await peer.membership.join([member.address]);
  await waitFor(
    'the peer to see the member alive',
    5_000,
    () => peer.membership.member('target')?.state === 'alive' || 'not yet',
  );
  const before = await member.stats();

  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const { port } = parseAddress(member.address)!;
  const sent: Buffer[] = [];
  const started = Date.now();
  for (let n = 0; n < DATAGRAMS; n += BATCH) {
    for (let i = 0; i < BATCH; i++) {
      const d = datagram(rng, ring, sent);
      if (sent.length < 64) sent.push(d);
      sock.send(d, port, '127.0.0.1');
    }
    await new Promise((r) => setTimeout(r, 5)); // lets the kernel buffer drain: the member, not the socket, is under test
  }
  const elapsedMs = Date.now() - started;
  sock.close();
  await new Promise((r) => setTimeout(r, 500));

  // A real member still gets in: a fresh node joins through the fuzzed one.
  const fresh = await startNode('fresh', testTiming(), { keyring: ring });
  nodes.push(fresh);
  const joined = await fresh.membership.join([member.address]);
  expect(joined.contacted, `a fresh member joins after the run (reproduce: GOSSIP_FUZZ_SEED=${seed})`).toBe(1);
  const after = await member.settledStats();
  console.log(
    summary(
      'swim-datagrams',
      seed,
      { sent: DATAGRAMS, received: after.packetsReceived - before.packetsReceived, elapsed_ms: elapsedMs },
      before,
      after,
    ),
  );
  checkAfterRun(seed, member, before, after);
  expect(after.packetsReceived - before.packetsReceived).toBeGreaterThan(DATAGRAMS / 2); // the traffic did reach it
});
