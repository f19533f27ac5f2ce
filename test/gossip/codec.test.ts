import { describe, expect, test } from 'vitest';
import { BroadcastQueue } from '../../daemons/gossip-operator/swim/broadcast-queue.ts';
import {
  checkMessage,
  decodePacket,
  encodePacket,
  MESSAGE_KINDS,
  packetEnvelopeBytes,
} from '../../daemons/gossip-operator/swim/codec.ts';
import { WIRE_BINARY, WIRE_JSON, WireMessage } from '../../daemons/gossip-operator/swim/wire.ts';

const header = { from: 'site-a', addr: '127.0.0.1:7946', ts: 1_700_000_000_000 };

describe('SWIM codec', () => {
  test('encodes a self-describing packet whose size is predictable', () => {
    const msgs = [JSON.stringify({ k: 'ping', seq: 1, target: 'site-b' }), JSON.stringify({ k: 'ack', seq: 2 })];
    const buf = encodePacket(header, msgs);
    expect(buf.length).toBe(packetEnvelopeBytes(header) + msgs.reduce((n, m) => n + m.length, 0) + 1);
    const r = decodePacket(buf);
    expect(r.ok).toBe(true);
    if (r.ok)
      expect(r.packet).toEqual({
        v: 1,
        ...header,
        msgs: [
          { k: 'ping', seq: 1, target: 'site-b' },
          { k: 'ack', seq: 2 },
        ],
      });
  });

  test('fields from a newer minor version are ignored, not fatal', () => {
    const r = decodePacket(
      Buffer.from(JSON.stringify({ v: 1, ...header, zone: 'x', msgs: [{ k: 'ping', seq: 3, target: 'a', hint: 9 }] })),
    );
    expect(r.ok).toBe(true);
    if (r.ok) expect(checkMessage(r.packet.msgs[0]!).ok).toBe(true);
  });

  test.each([
    ['not JSON', Buffer.from('\x00\x01garbage'), 'bad_json'],
    ['truncated JSON', encodePacket(header, ['{"k":"ack","seq":1}']).subarray(0, 30), 'bad_json'],
    ['newer major', Buffer.from(JSON.stringify({ v: 2, ...header, msgs: [] })), 'unsupported_version'],
    ['missing from', Buffer.from(JSON.stringify({ v: 1, addr: 'x:1', ts: 1, msgs: [] })), 'bad_packet'],
    ['msgs not an array', Buffer.from(JSON.stringify({ v: 1, ...header, msgs: {} })), 'bad_packet'],
    ['array root', Buffer.from('[1,2]'), 'bad_packet'],
  ])('%s -> %s', (_n, buf, reason) => {
    const r = decodePacket(buf);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe(reason);
  });

  test.each([
    [{ k: 'ping', seq: -1, target: 'a' }, 'bad_message'],
    [{ k: 'ping', seq: 1 }, 'bad_message'],
    [{ k: 'alive', name: 'a', addr: 'x:1', inc: 1.5 }, 'bad_message'],
    [{ k: 'dead', name: '', inc: 1, by: 'b' }, 'bad_message'],
    [{ k: 'teleport', x: 1 }, 'unknown_kind'],
  ])('message %j -> %s', (msg, reason) => {
    const r = checkMessage(msg);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe(reason);
  });

  test('kinds are the append-only list', () => {
    expect(MESSAGE_KINDS).toEqual([
      'ping',
      'ack',
      'nack',
      'ping-req',
      'alive',
      'suspect',
      'dead',
      'user',
      'push-pull',
      'stream-open',
    ]);
  });
});

describe('BroadcastQueue', () => {
  const ack = (seq: number) => new WireMessage({ k: 'ack', seq });
  const seqs = (ms: WireMessage[]) => ms.map((m) => (m.message as { seq: number }).seq);

  test('newer broadcast with the same key replaces the older one', () => {
    const q = new BroadcastQueue(10, 1_000);
    q.enqueue('m:a', ack(1));
    q.enqueue('m:a', ack(2));
    expect(q.size).toBe(1);
    expect(seqs(q.take(1_000, WIRE_JSON, 3))).toEqual([2]);
  });

  test('each broadcast leaves after `limit` transmits; least-sent go first', () => {
    const q = new BroadcastQueue(10, 1_000);
    q.enqueue('a', ack(1));
    expect(seqs(q.take(1_000, WIRE_JSON, 2))).toEqual([1]);
    q.enqueue('b', ack(2));
    expect(seqs(q.take(1_000, WIRE_BINARY, 2))).toEqual([2, 1]);
    expect(seqs(q.take(1_000, WIRE_JSON, 2))).toEqual([2]);
    expect(q.size).toBe(0);
  });

  test('respects the byte budget of the wire version and refuses what fits no version', () => {
    const q = new BroadcastQueue(10, 30);
    expect(q.enqueue('big', new WireMessage({ k: 'user', data: { x: 'x'.repeat(20) } }))).toBe('too_large');
    q.enqueue('a', ack(1));
    q.enqueue('b', ack(2));
    const jsonCost = ack(1).cost(WIRE_JSON);
    const binaryCost = ack(1).cost(WIRE_BINARY);
    expect(binaryCost).toBeLessThan(jsonCost);
    expect(q.take(jsonCost + binaryCost, WIRE_JSON, 5)).toHaveLength(1);
    q.enqueue('a', ack(1));
    expect(q.take(2 * binaryCost, WIRE_BINARY, 5)).toHaveLength(2);
  });

  test('is bounded: overflow evicts the most-sent broadcast', () => {
    const q = new BroadcastQueue(2, 100);
    q.enqueue('a', ack(1));
    q.take(100, WIRE_JSON, 10);
    q.enqueue('b', ack(2));
    expect(q.enqueue('c', ack(3))).toBe('evicted_other');
    expect(seqs(q.take(100, WIRE_JSON, 10)).sort()).toEqual([2, 3]);
  });
});
