// Fuzz suite: 2 000 generated push-pull streams against a live member in its own process, over real
// TCP on loopback, 16 at a time: garbage, hostile length prefixes, opening frames that are forged, misaddressed,
// replayed, oversized or lying about the request length, garbage and valid requests after a good opening, byte-at-
// a-time writers, and streams that stall until the member's deadline. Afterwards the member must be alive, hold no
// stream, admit a real member, with RSS, descriptors and event-loop delay within BOUNDS and no key bytes in its
// output. Seeded: GOSSIP_FUZZ_SEED=<n> reproduces a run.
import { connect } from 'node:net';
import { afterAll, expect, test } from 'vitest';
import { parseAddress } from '../../../daemons/gossip-operator/swim/address.ts';
import { encodePacket } from '../../../daemons/gossip-operator/swim/codec.ts';
import { ANY_RECIPIENT, sealFrame } from '../../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../../daemons/gossip-operator/swim/keyring.ts';
import { startNode, stopAll, testTiming, type TestNode } from '../helpers.ts';
import { checkAfterRun, FuzzedMember, summary } from './harness.ts';
import { fuzzSeed, Rng } from './rng.ts';

const STREAMS = 2_000;
const CONCURRENCY = 16;

let member: FuzzedMember | undefined;
const nodes: TestNode[] = [];
afterAll(async () => {
  await stopAll(nodes);
  await member?.stop();
});

const prefix = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};
const framed = (f: Buffer) => Buffer.concat([prefix(f.length), f]);

interface Plan {
  readonly writes: Buffer[];
  /** Keep the connection open after writing (the member's deadline must close it). */
  readonly stall: boolean;
}

function plan(rng: Rng, ring: KeyRing, openings: Buffer[]): Plan {
  const header = () => ({
    from: rng.pick(['peer', `fz-${rng.int(50)}`, 'target']),
    addr: `127.0.0.1:${1 + rng.int(65_535)}`,
    ts: rng.int(30) === 0 ? 1 : Date.now(),
  });
  const to = () => (rng.int(8) === 0 ? rng.pick(['peer', 'targe', ANY_RECIPIENT]) : 'target');
  const request = (join: boolean) =>
    sealFrame(
      ring,
      encodePacket(header(), [
        JSON.stringify(
          rng.int(4) === 0
            ? { k: 'push-pull', join, members: rng.value() }
            : {
                k: 'push-pull',
                join,
                members: [
                  {
                    name: `fz-${rng.int(50)}`,
                    addr: `127.0.0.1:${1 + rng.int(65_535)}`,
                    inc: rng.int(3),
                    state: rng.pick(['alive', 'suspect', 'dead', 'left', 'zombie']),
                  },
                ],
                user: rng.value(),
              },
        ),
      ]),
      to(),
    );
  const opening = (bytes: number, join: boolean) => {
    const o = sealFrame(
      ring,
      encodePacket(header(), [
        JSON.stringify(
          rng.int(6) === 0
            ? { k: rng.pick(['stream-open', 'push-pull', 'ping']), bytes: rng.value(), join: rng.value() }
            : { k: 'stream-open', bytes, join },
        ),
      ]),
      to(),
    );
    if (openings.length < 32) openings.push(o);
    return o;
  };
  let stall = false;
  const one = (): Buffer[] => {
    switch (rng.int(10)) {
      case 0:
        return [rng.bytes(rng.int(3_000))];
      case 1:
        return [
          prefix(rng.pick([0, 1, 1_025, 4 * 1024 * 1024, 0xffffffff, rng.int(2 ** 32)])),
          rng.bytes(rng.int(100)),
        ];
      case 2: {
        const body = rng.bytes(1 + rng.int(2_000));
        return [framed(opening(body.length, rng.int(2) === 0)), framed(body)];
      }
      case 3: {
        const join = rng.int(2) === 0;
        const req = request(join);
        const declared = rng.pick([req.length, req.length - 1, req.length + 1, 4 * 1024 * 1024 + 1]);
        return [framed(opening(declared, join)), framed(req)];
      }
      case 4:
        return openings.length > 0 ? [framed(rng.pick(openings)), framed(request(true))] : [rng.bytes(10)];
      case 5: {
        const o = framed(opening(10, true));
        return [...o].map((b) => Buffer.of(b)); // one byte per write
      }
      case 6: {
        if (rng.int(10) === 0) {
          // A good opening, then half the request, then nothing: only the member's deadline ends this stream.
          const req = request(true);
          stall = true;
          return [framed(opening(req.length, true)), framed(req).subarray(0, 4 + (req.length >> 1))];
        }
        const f = framed(opening(100, true));
        const at = 4 + rng.int(f.length - 4);
        f.writeUInt8(f.readUInt8(at) ^ (1 << rng.int(8)), at);
        return [f];
      }
      default: {
        const join = rng.int(2) === 0;
        const req = request(join);
        return [framed(opening(req.length, join)), framed(req)];
      }
    }
  };
  const writes = one();
  return { writes, stall };
}

/** Runs one stream; resolves with what happened to it. Never rejects. */
function run(port: number, p: Plan): Promise<'answered' | 'closed'> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let got = 0;
    const guard = setTimeout(() => s.destroy(), 5_000); // the member's deadline is 1 s; this only bounds a bug
    s.on('error', () => {});
    s.on('data', (d) => (got += d.length));
    s.on('close', () => {
      clearTimeout(guard);
      resolve(got > 0 ? 'answered' : 'closed');
    });
    s.on('connect', () => {
      for (const w of p.writes) s.write(w);
      if (!p.stall) s.end();
    });
  });
}

test(`${STREAMS} generated push-pull streams leave the member alive, bounded and silent about its key`, async () => {
  const seed = fuzzSeed();
  const rng = new Rng(seed);
  member = await FuzzedMember.start();
  const ring = new KeyRing([member.key]);
  const before = await member.stats();
  const { port } = parseAddress(member.address)!;
  const openings: Buffer[] = [];
  const outcomes = { answered: 0, closed: 0 };
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < STREAMS) {
        next++;
        outcomes[await run(port, plan(rng, ring, openings))]++;
      }
    }),
  );
  const elapsedMs = Date.now() - started;

  const fresh = await startNode('fresh', testTiming(), { keyring: ring });
  nodes.push(fresh);
  const joined = await fresh.membership.join([member.address]);
  expect(joined.contacted, `a fresh member joins after the run (reproduce: GOSSIP_FUZZ_SEED=${seed})`).toBe(1);
  const after = await member.settledStats();
  console.log(
    summary(
      'push-pull-streams',
      seed,
      { streams: STREAMS, answered: outcomes.answered, closed: outcomes.closed, elapsed_ms: elapsedMs },
      before,
      after,
    ),
  );
  checkAfterRun(seed, member, before, after);
  expect(outcomes.answered + outcomes.closed).toBe(STREAMS);
  expect(outcomes.answered, `some valid requests were answered (reproduce: GOSSIP_FUZZ_SEED=${seed})`).toBeGreaterThan(
    0,
  );
  expect(after.inboundBufferedBytes).toBe(0);
});
