// Wire version 3: tagged binary that decodes into the very objects the JSON wire gives, skips fields
// and kinds from newer versions, refuses malformed input as a drop reason, bounds inflation, and is measurably
// smaller. The byte figures printed here are what the SWIM code sends (frame overhead included).
import { deflateRawSync } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import {
  COMPRESS_ABOVE_BYTES,
  decodeBinaryPacket,
  encodeBinaryMessage,
  encodeBinaryPacket,
} from '../../daemons/gossip-operator/swim/binary-codec.ts';
import { checkMessage, WIRE_MAJOR, type SwimMessage } from '../../daemons/gossip-operator/swim/codec.ts';
import { frameOverhead } from '../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { buildPushPull } from '../../daemons/gossip-operator/swim/push-pull.ts';
import {
  decodeWire,
  encodeWire,
  PeerWireVersions,
  WIRE_BINARY,
  WIRE_JSON,
  WireMessage,
} from '../../daemons/gossip-operator/swim/wire.ts';

const header = { from: 'site-east-1', addr: '10.20.30.40:7946', ts: 1_764_600_000_000 };
const ring = new KeyRing([Buffer.alloc(32, 7)]);

const samples: SwimMessage[] = [
  { k: 'ping', seq: 2 ** 47 + 12_345, target: 'site-west-2' },
  { k: 'ack', seq: 9_007_199_254_740_991 },
  { k: 'nack', seq: 0 },
  { k: 'ping-req', seq: 77, target: 'site-west-2', targetAddr: '[2001:db8::1]:7946' },
  { k: 'alive', name: 'site-north-3', addr: '10.0.0.3:7946', inc: 4 },
  { k: 'suspect', name: 'site-north-3', inc: 4, by: 'site-east-1' },
  { k: 'dead', name: 'site-north-3', inc: 4, by: 'site-north-3' },
  {
    k: 'user',
    data: {
      v: 1,
      record: { key: 'production/east/vllm', revision: 12, sig: 'AAAA', nested: [1, 'two', null, { ü: true }] },
    },
  },
  {
    k: 'push-pull',
    join: true,
    members: [
      { name: 'a', addr: '10.0.0.1:7946', inc: 0, state: 'alive' },
      { name: 'b', addr: '10.0.0.2:7946', inc: 3, state: 'left' },
    ],
    user: { records: ['x', 'y'] },
  },
  { k: 'push-pull', join: false, members: [] },
  { k: 'push-pull', join: false, members: [{ name: 'a', addr: '10.0.0.1:7946', inc: 2, state: 'suspect', w: 3 }] },
  { k: 'stream-open', bytes: 4_000_000, join: false },
];

function roundTrip(msgs: SwimMessage[], compress = false) {
  const payload = encodeBinaryPacket(header, WIRE_BINARY, msgs.map(encodeBinaryMessage), compress);
  return decodeBinaryPacket(payload, WIRE_MAJOR, 1 << 20);
}

/** One varint field (type 0) and one bytes field (type 2), plus fixed-width ones, with tags no version knows. */
const key = (tag: number, type: number) => [(((tag << 3) | type) & 0x7f) | 0x80, (tag << 3) >> 7]; // two-byte varint keys
const unknownFields = Buffer.from([
  ...key(20, 0),
  0x96,
  0x01,
  ...key(21, 2),
  3,
  1,
  2,
  3,
  ...key(22, 1),
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  8,
  ...key(23, 5),
  1,
  2,
  3,
  4,
]);

describe('wire version 3 codec', () => {
  test('every message kind decodes to the object the JSON wire carries, and passes the same schema', () => {
    const r = roundTrip(samples);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    // The header's addr is not written in version 3 (no receiver reads it).
    expect(r.packet).toEqual({ v: WIRE_MAJOR, from: header.from, ts: header.ts, w: WIRE_BINARY, msgs: samples });
    for (const m of r.packet.msgs) expect(checkMessage(m).ok).toBe(true);
    // The same packet through the JSON wire gives the same object, plus the addr the previous release requires.
    const viaJson = decodeWire(
      WIRE_JSON,
      encodeWire(
        WIRE_JSON,
        header,
        WIRE_BINARY,
        samples.map((m) => new WireMessage(m)),
        false,
      ),
      1 << 20,
    );
    expect(viaJson.ok && viaJson.packet).toEqual({ ...r.packet, addr: header.addr });
  });

  test('fields of a newer version are skipped; a kind of a newer version is an unknown_kind, not a broken packet', () => {
    const ping = Buffer.concat([encodeBinaryMessage({ k: 'ping', seq: 5, target: 't' }), unknownFields]);
    const future = Buffer.from([(1 << 3) | 0, 99, (2 << 3) | 0, 1]);
    const payload = encodeBinaryPacket(header, 4, [ping, future], false);
    const r = decodeBinaryPacket(Buffer.concat([payload, unknownFields]), WIRE_MAJOR, 4096);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.packet.w).toBe(4);
    expect(r.packet.msgs[0]).toEqual({ k: 'ping', seq: 5, target: 't' });
    const unknown = checkMessage(r.packet.msgs[1]!);
    expect(unknown.ok === false && unknown.reason).toBe('unknown_kind');
  });

  test('push-pull above the threshold is deflated inside the frame, and inflation is bounded', () => {
    const members = Array.from({ length: 64 }, (_, i) => ({
      name: `site-${i}`,
      addr: `10.0.${i >> 8}.${i & 255}:7946`,
      incarnation: i % 3,
      state: 'alive' as const,
      stateChangedAtMs: 0,
    }));
    const pp = buildPushPull(members, false, {
      records: members.map((m) => ({ key: `production/${m.name}/vllm`, revision: 3 })),
    });
    const plain = encodeBinaryPacket(header, WIRE_BINARY, [encodeBinaryMessage(pp)], false);
    const packed = encodeBinaryPacket(header, WIRE_BINARY, [encodeBinaryMessage(pp)], true);
    expect(plain.length).toBeGreaterThan(COMPRESS_ABOVE_BYTES);
    expect(packed[0]).toBe(1);
    expect(packed.length).toBeLessThan(plain.length / 2);
    const r = decodeBinaryPacket(packed, WIRE_MAJOR, plain.length);
    expect(r.ok && r.packet.msgs[0]).toEqual(pp);
    const bomb = decodeBinaryPacket(packed, WIRE_MAJOR, plain.length - 2);
    expect(bomb.ok === false && bomb.reason).toBe('oversized');
    // A datagram-sized payload is never compressed.
    expect(encodeBinaryPacket(header, WIRE_BINARY, [encodeBinaryMessage(samples[0]!)], true)[0]).toBe(0);
  });

  const tagged = encodeBinaryPacket(header, undefined, [encodeBinaryMessage(samples[4]!)], false);
  test.each([
    ['empty payload', Buffer.alloc(0), 'bad_packet'],
    ['unknown flags', Buffer.concat([Buffer.of(7), tagged.subarray(1)]), 'bad_packet'],
    ['truncated', tagged.subarray(0, tagged.length - 3), 'bad_packet'],
    ['length past the end', Buffer.from([0, (1 << 3) | 2, 50, 65]), 'bad_packet'],
    ['varint above 2^53', Buffer.from([0, (3 << 3) | 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), 'bad_packet'],
    [
      'endless varint',
      Buffer.from([0, (3 << 3) | 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
      'bad_packet',
    ],
    ['unskippable field type', Buffer.from([0, (9 << 3) | 3]), 'bad_packet'],
    ['varint where a name belongs', Buffer.from([0, (1 << 3) | 0, 5]), 'bad_packet'],
    ['message without a kind', Buffer.from([0, (4 << 3) | 2, 2, (2 << 3) | 0, 1]), 'bad_packet'],
    [
      'user data that is not JSON',
      Buffer.from([0, (4 << 3) | 2, 5, (1 << 3) | 0, 7, (9 << 3) | 2, 1, 0x7b]),
      'bad_packet',
    ],
    ['deflate garbage', Buffer.from([1, 1, 2, 3, 4, 5]), 'bad_packet'],
    ['inflation bomb', Buffer.concat([Buffer.of(1), deflateRawSync(Buffer.alloc(1 << 20))]), 'oversized'],
  ])('%s -> %s', (_n, payload, reason) => {
    const r = decodeBinaryPacket(payload, WIRE_MAJOR, 64 * 1024);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe(reason);
  });

  test('a packet missing its sender decodes but fails the shared schema check', () => {
    const r = decodeWire(WIRE_BINARY, Buffer.from([0, (2 << 3) | 2, 3, 0x61, 0x3a, 0x31, (3 << 3) | 0, 1]), 4096);
    expect(r.ok === false && r.reason).toBe('bad_packet');
  });
});

describe('bytes on the wire, version 2 (JSON) against 3 (binary)', () => {
  const overhead = frameOverhead(ring);
  const frameBytes = (version: typeof WIRE_JSON | typeof WIRE_BINARY, msgs: SwimMessage[], stream = false) =>
    overhead +
    encodeWire(
      version,
      header,
      WIRE_BINARY,
      msgs.map((m) => new WireMessage(m)),
      stream,
    ).length;

  test('a probe round and a piggybacked packet shrink by at least a third', () => {
    const ping: SwimMessage[] = [{ k: 'ping', seq: 2 ** 47 + 12_345, target: 'site-west-2' }];
    const ack: SwimMessage[] = [{ k: 'ack', seq: 2 ** 47 + 12_345 }];
    const gossip: SwimMessage[] = [
      samples[0]!,
      samples[4]!,
      samples[5]!,
      { k: 'alive', name: 'site-south-4', addr: '10.0.0.4:7946', inc: 1 },
    ];
    const rows = [
      ['ping', ping],
      ['ack', ack],
      ['ping + 3 piggybacked updates', gossip],
    ] as const;
    for (const [name, msgs] of rows) {
      const json = frameBytes(WIRE_JSON, [...msgs]);
      const bin = frameBytes(WIRE_BINARY, [...msgs]);
      console.log(
        `[wire] ${name}: ${json} bytes as version 2, ${bin} as version 3 (${Math.round((100 * bin) / json)}%)`,
      );
      expect(bin).toBeLessThan((json * 2) / 3);
    }
  });

  test.each([8, 64, 1_000])('push-pull of %i members shrinks at least by half', (n) => {
    const members = Array.from({ length: n }, (_, i) => ({
      name: `site-${String(i).padStart(4, '0')}`,
      addr: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:7946`,
      incarnation: i % 5,
      state: 'alive' as const,
      stateChangedAtMs: 0,
    }));
    const pp = buildPushPull(members, false, undefined);
    const json = frameBytes(WIRE_JSON, [pp], true);
    const bin = frameBytes(WIRE_BINARY, [pp], true);
    console.log(
      `[wire] push-pull members N=${n}: ${json} bytes as version 2, ${bin} as version 3 (${Math.round((100 * bin) / json)}%)`,
    );
    expect(bin).toBeLessThan(json / 2);
  });
});

// Push-pull entries carry what the sender knows of each member's wire version, so a member learned by
// push-pull is spoken to in version 3 from the first packet; what a member declares itself always wins.
describe('wire versions learned second hand', () => {
  test("an entry's w is taken only for a peer not heard from, capped at what we speak", () => {
    const peers = new PeerWireVersions(WIRE_BINARY, 16);
    peers.heardOf('a', 3);
    expect(peers.versionFor('a')).toBe(WIRE_BINARY);
    peers.heard('b', undefined); // b itself said: JSON only
    peers.heardOf('b', 3);
    expect(peers.versionFor('b')).toBe(WIRE_JSON);
    peers.heardOf('c', 200); // a version nobody speaks yet: the highest both speak
    expect(peers.versionFor('c')).toBe(WIRE_BINARY);
    peers.heard('a', undefined); // a rolled back: its own word replaces the second-hand claim
    expect(peers.versionFor('a')).toBe(WIRE_JSON);
    const old = new PeerWireVersions(WIRE_JSON, 16); // a member pinned to 2 never speaks 3, whatever it is told
    old.heardOf('a', 3);
    expect(old.versionFor('a')).toBe(WIRE_JSON);
  });

  test('push-pull entries carry w where it is known, through the binary wire and back', () => {
    const members = [
      { name: 'self', addr: '10.0.0.1:1', incarnation: 0, state: 'alive' as const, stateChangedAtMs: 0 },
      { name: 'b', addr: '10.0.0.2:1', incarnation: 1, state: 'alive' as const, stateChangedAtMs: 0 },
    ];
    const pp = buildPushPull(members, false, undefined, (name) => (name === 'self' ? 3 : undefined));
    expect(pp.members).toEqual([
      { name: 'self', addr: '10.0.0.1:1', inc: 0, state: 'alive', w: 3 },
      { name: 'b', addr: '10.0.0.2:1', inc: 1, state: 'alive' },
    ]);
    const m = new WireMessage(pp);
    const decoded = decodeWire(
      WIRE_BINARY,
      encodeWire(WIRE_BINARY, { from: 'self', addr: '10.0.0.1:1', ts: 1 }, WIRE_BINARY, [m], true),
      1 << 20,
    );
    expect(decoded.ok && decoded.packet.msgs[0]).toEqual(pp);
  });
});
