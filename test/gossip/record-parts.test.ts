import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  MAX_RECORD_PARTS,
  PartAssembler,
  partId,
  splitRecord,
  type RecordPart,
} from '../../daemons/gossip-operator/state/record-parts.ts';
import { signRecord, type StateRecordBody } from '../../daemons/gossip-operator/state/records.ts';

const { privateKey } = generateKeyPairSync('ed25519');
const record = (pem: string) =>
  signRecord(
    {
      schema_version: '1.0',
      kind: 'site',
      network: 'demo',
      site: 'east',
      key: 'demo/east',
      revision: 1,
      writer: 'w',
      site_info: {
        gateway_address: '127.0.0.1:1',
        public_cert_pem: pem,
        capabilities: { inference: true, agent_tools: false, agent_to_agent: false },
        tenant_spend_usd: {},
      },
    } as StateRecordBody,
    privateKey,
  );
const pem = `-----BEGIN CERTIFICATE-----\n${'MIIByjCCAXGgAwIBAgIQJUU7Ti8CgRov/bOox5wyCjAKBggqhkjOPQQDAjA1MRow\n'.repeat(20)}-----END CERTIFICATE-----\n"é€😀`;
const bytesOf = (part: RecordPart) => Buffer.byteLength(JSON.stringify({ k: 'user', data: { v: 1, part } }));

describe('record parts', () => {
  test('a record is cut into parts that each fit, and put back together exactly, in any order and with repeats', () => {
    const rec = record(pem);
    const parts = splitRecord(rec, (p) => bytesOf(p) <= 1_000)!;
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.length).toBeLessThanOrEqual(MAX_RECORD_PARTS);
    for (const p of parts) expect(bytesOf(p)).toBeLessThanOrEqual(1_000);
    const assembler = new PartAssembler();
    const shuffled = [...parts].reverse();
    for (const p of shuffled.slice(0, -1)) expect(assembler.add(p).kind).toBe('incomplete');
    expect(assembler.add(shuffled[0]).kind).toBe('incomplete'); // a retransmission changes nothing
    const done = assembler.add(shuffled.at(-1));
    expect(done).toEqual({ kind: 'complete', record: rec });
    expect(assembler.pending).toBe(0);
  });

  test('a record needing more than MAX_RECORD_PARTS packets is left to push-pull', () => {
    expect(splitRecord(record(pem.repeat(8)), (p) => bytesOf(p) <= 1_000)).toBeUndefined();
    expect(splitRecord(record(pem), () => false)).toBeUndefined();
  });

  test.each([
    ['not an object', 'x'],
    ['n of 1', { id: 'a', i: 0, n: 1, body: '', signer: 's', sig: 'x' }],
    ['n above the bound', { id: 'a', i: 0, n: MAX_RECORD_PARTS + 1, body: '', signer: 's', sig: 'x' }],
    ['i outside n', { id: 'a', i: 2, n: 2, body: '' }],
    ['part 0 without a signature', { id: 'a', i: 0, n: 2, body: '' }],
    ['an over-long id', { id: 'a'.repeat(65), i: 1, n: 2, body: '' }],
  ])('a part of the wrong shape (%s) is refused', (_name, raw) => {
    expect(new PartAssembler().add(raw).kind).toBe('bad');
  });

  test('parts that disagree, or a signature that is not the one the id names, are refused', () => {
    const a = new PartAssembler();
    expect(a.add({ id: 'x', i: 1, n: 3, body: 'b' }).kind).toBe('incomplete');
    expect(a.add({ id: 'x', i: 2, n: 2, body: 'c' }).kind).toBe('bad');
    expect(a.add({ id: 'y', i: 1, n: 2, body: 'b' }).kind).toBe('incomplete');
    expect(a.add({ id: 'y', i: 0, n: 2, body: 'a', signer: 's', sig: 'not-y' })).toEqual({
      kind: 'bad',
      detail: 'parts of y do not belong to the signature they carry',
    });
    expect(partId('sig')).toHaveLength(22);
  });

  test('incomplete records are bounded: the oldest is evicted', () => {
    const a = new PartAssembler(4);
    for (let i = 0; i < 100; i++) a.add({ id: `id-${i}`, i: 1, n: 2, body: 'x'.repeat(1_000) });
    expect(a.pending).toBe(4);
  });
});
