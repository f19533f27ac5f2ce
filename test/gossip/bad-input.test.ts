// Hostile and broken input against a live member on real sockets: every packet is dropped, counted by reason,
// logged once per reason, and neither crashes the member nor changes its state.
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { connect } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { encodePacket } from '../../daemons/gossip-operator/swim/codec.ts';
import { sealFrame } from '../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { parseAddress } from '../../daemons/gossip-operator/swim/address.ts';
import { allSeeAlive, sharedKey, startNode, stopAll, testTiming, waitFor, type TestNode } from './helpers.ts';

const nodes: TestNode[] = [];
let raw: Socket | undefined;
afterEach(async () => {
  await stopAll(nodes.splice(0));
  raw?.close();
  raw = undefined;
});

test('garbage, truncated, replayed, oversized, stale, wrong-key and malformed packets are dropped and counted', async () => {
  const logged: { reason: string; msg: string }[] = [];
  const logger = {
    warn: (obj: object, msg: string) => logged.push({ reason: (obj as { reason: string }).reason, msg }),
  };
  // This test is about packets, not failure detection: a calm timing keeps a scheduling stall on a loaded machine
  // from suspecting b, so "nothing changed" below can only fail because of the hostile packets.
  const calm = testTiming({ probeIntervalMs: 1_000, probeTimeoutMs: 500, suspicionTimeoutMs: 5_000 });
  const a = await startNode('a', calm, { logger });
  const b = await startNode('b', calm);
  nodes.push(a, b);
  await b.membership.join([a.membership.address]);
  await waitFor('a and b to converge', 5_000, () => allSeeAlive([a, b], ['a', 'b']));
  const before = {
    members: a.membership.members().map((m) => [m.name, m.state, m.incarnation]),
    inc: a.membership.incarnation,
  };

  const events: string[] = [];
  a.membership.drops.on('drop', (e) => events.push(e.reason));
  raw = createSocket('udp4');
  await new Promise<void>((r) => raw!.bind(0, '127.0.0.1', () => r()));
  const target = parseAddress(a.membership.address)!;
  const send = (buf: Buffer) => raw!.send(buf, target.port, target.host);
  const ring = new KeyRing([sharedKey]);
  const header = () => ({ from: 'intruder', addr: '127.0.0.1:9', ts: Date.now() });
  const valid = (msgs: string[], h = header()) => sealFrame(ring, encodePacket(h, msgs), 'a');

  const replayed = valid([JSON.stringify({ k: 'ping', seq: 1, target: 'nobody' })]);
  const cases: [string, Buffer][] = [
    ['bad_frame', randomBytes(100)],
    ['bad_frame', Buffer.from('GRIX\x01aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')],
    ['decrypt_failed', valid([]).subarray(0, 40)],
    [
      'decrypt_failed',
      sealFrame(
        new KeyRing([randomBytes(32)]),
        encodePacket(header(), [JSON.stringify({ k: 'alive', name: 'ghost', addr: '127.0.0.1:9', inc: 9 })]),
        'a',
      ),
    ],
    [
      'plaintext_rejected',
      sealFrame(
        undefined,
        encodePacket(header(), [JSON.stringify({ k: 'alive', name: 'ghost', addr: '127.0.0.1:9', inc: 9 })]),
        'a',
      ),
    ],
    ['oversized', Buffer.concat([Buffer.from('GRID\x01'), randomBytes(3_000)])],
    [
      'stale_packet',
      valid([JSON.stringify({ k: 'alive', name: 'ghost', addr: '127.0.0.1:9', inc: 9 })], {
        ...header(),
        ts: Date.now() - 3_600_000,
      }),
    ],
    ['bad_json', sealFrame(ring, Buffer.from('{"v":1,"from":'), 'a')],
    [
      'unsupported_version',
      sealFrame(ring, Buffer.from(JSON.stringify({ v: 9, from: 'x', addr: 'y:1', ts: Date.now(), msgs: [] })), 'a'),
    ],
    ['bad_packet', sealFrame(ring, Buffer.from(JSON.stringify({ v: 1, addr: 'x:1', ts: Date.now(), msgs: [] })), 'a')],
    ['bad_message', valid([JSON.stringify({ k: 'alive', name: 'ghost', addr: '127.0.0.1:9', inc: -1 })])],
    ['unknown_kind', valid([JSON.stringify({ k: 'teleport', to: 'mars' })])],
    ['bad_message', valid([JSON.stringify({ k: 'push-pull', join: true, members: [] })])],
    ['ok', replayed],
    ['replayed', replayed],
    ['replayed', replayed],
  ];
  for (const [, buf] of cases) send(buf);
  // A burst of the same garbage must be counted every time but logged once.
  for (let i = 0; i < 20; i++) send(randomBytes(50));

  const expected = new Map<string, number>();
  for (const [reason] of cases) if (reason !== 'ok') expected.set(reason, (expected.get(reason) ?? 0) + 1);
  expected.set('bad_frame', (expected.get('bad_frame') ?? 0) + 20);
  await waitFor('every bad packet to be counted', 5_000, () => {
    const d = a.membership.stats().drops as Record<string, number>;
    for (const [reason, n] of expected) if (d[reason] !== n) return `${reason}: ${d[reason]} of ${n}`;
    return true;
  });
  // Every drop is also an event (what the operator maps onto its prom-client counter).
  expect(events.filter((r) => expected.has(r)).length).toBe([...expected.values()].reduce((x, y) => x + y, 0));
  // One log line per reason, none carrying key material.
  for (const reason of expected.keys()) expect(logged.filter((l) => l.reason === reason)).toHaveLength(1);
  expect(JSON.stringify(logged)).not.toContain(sharedKey.toString('hex'));

  // Nothing changed, and the member still works.
  expect(a.membership.members().map((m) => [m.name, m.state, m.incarnation])).toEqual(before.members);
  expect(a.membership.incarnation).toBe(before.inc);
  expect(a.membership.member('ghost')).toBeUndefined();
  const c = await startNode('c', calm);
  nodes.push(c);
  await c.membership.join([a.membership.address]);
  await waitFor('a still to admit a real member', 5_000, () => allSeeAlive([a, b, c], ['a', 'b', 'c']));
});

test('push-pull streams: oversized length prefixes and garbage are cut off without harm', async () => {
  const a = await startNode('a');
  nodes.push(a);
  const target = parseAddress(a.membership.address)!;
  const talk = (payload: Buffer) =>
    new Promise<string>((resolve) => {
      const s = connect(target.port, target.host, () => s.write(payload));
      let got = 0;
      s.on('data', (d) => (got += d.length));
      s.on('error', () => resolve('error'));
      s.on('close', () => resolve(got > 0 ? 'answered' : 'closed'));
    });
  const huge = Buffer.alloc(4);
  huge.writeUInt32BE(0xffffffff);
  expect(await talk(huge)).toBe('closed');
  const junk = Buffer.concat([Buffer.from([0, 0, 0, 10]), randomBytes(10)]);
  expect(await talk(junk)).toBe('closed');
  await waitFor(
    'stream drops to be counted',
    3_000,
    () =>
      (a.membership.stats().drops.bad_frame >= 1 && a.membership.stats().drops.oversized >= 1) ||
      JSON.stringify(a.membership.stats().drops),
  );
  expect(a.membership.members().map((m) => m.name)).toEqual(['a']);
});

test('a member with another key never joins, and both count the failures', async () => {
  const a = await startNode('a');
  const b = await startNode('b', undefined, { keyring: new KeyRing([randomBytes(32)]) });
  nodes.push(a, b);
  const r = await b.membership.join([a.membership.address]);
  expect(r.contacted).toBe(0);
  expect(b.membership.joined).toBe(false);
  await waitFor(
    'a to count decrypt failures',
    3_000,
    () => a.membership.stats().drops.decrypt_failed >= 1 || 'none yet',
  );
  expect(a.membership.members().map((m) => m.name)).toEqual(['a']);
  expect(b.membership.members().map((m) => m.name)).toEqual(['b']);
});
