import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { frameOverhead, openFrame, ReplayGuard, sealFrame } from '../../daemons/gossip-operator/swim/crypto.ts';
import { checkKeyBytes, KeyRing, KeyRingError, parseHexKey } from '../../daemons/gossip-operator/swim/keyring.ts';

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const payload = Buffer.from('{"v":1}');

describe('AES-256-GCM frame', () => {
  test('layout is "GRID" | 2 | 12-byte nonce | ciphertext | 16-byte tag', () => {
    const nonce = randomBytes(12);
    const f = sealFrame(new KeyRing([k1]), payload, 'b', nonce);
    expect(f.subarray(0, 4).toString()).toBe('GRID');
    expect(f[4]).toBe(2);
    expect(f.subarray(5, 17).equals(nonce)).toBe(true);
    expect(f.length).toBe(4 + 1 + 12 + payload.length + 16);
    expect(frameOverhead(new KeyRing([k1]))).toBe(33);
    expect(f.includes(payload)).toBe(false);
  });

  test('round trip, with a fresh random nonce per frame', () => {
    const ring = new KeyRing([k1]);
    const a = sealFrame(ring, payload, 'b');
    const b = sealFrame(ring, payload, 'b');
    expect(a.subarray(5, 17).equals(b.subarray(5, 17))).toBe(false);
    const r = openFrame(ring, a, ['b']);
    expect(r.ok && r.payload.equals(payload)).toBe(true);
  });

  const ring = new KeyRing([k1]);
  const good = sealFrame(ring, payload, 'b');
  test.each([
    ['wrong key', sealFrame(new KeyRing([k2]), payload, 'b'), 'decrypt_failed'],
    ['flipped ciphertext bit', Buffer.from(good.map((b, i) => (i === 20 ? b ^ 1 : b))), 'decrypt_failed'],
    [
      'version byte flipped to another known version (authenticated header)',
      Buffer.from(good.map((b, i) => (i === 4 ? 3 : b))),
      'decrypt_failed',
    ],
    ['version byte of a future version', Buffer.from(good.map((b, i) => (i === 4 ? 7 : b))), 'unsupported_version'],
    ['version byte of the retired version 1', Buffer.from(good.map((b, i) => (i === 4 ? 1 : b))), 'bad_frame'],
    ['truncated tag', good.subarray(0, good.length - 3), 'decrypt_failed'],
    ['header only', good.subarray(0, 10), 'decrypt_failed'],
    ['garbage', randomBytes(64), 'bad_frame'],
    ['empty', Buffer.alloc(0), 'bad_frame'],
    ['plaintext while a key is configured', sealFrame(undefined, payload, 'b'), 'plaintext_rejected'],
  ])('%s is refused (%s)', (_name, frame, reason) => {
    const r = openFrame(ring, frame, ['b']);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe(reason);
  });

  test('the recipient is authenticated: a frame opens only for the member it was sealed for', () => {
    const f = sealFrame(ring, payload, 'b');
    expect(openFrame(ring, f, ['a'])).toEqual({ ok: false, reason: 'decrypt_failed' });
    expect(openFrame(ring, f, ['bb'])).toEqual({ ok: false, reason: 'decrypt_failed' });
    const r = openFrame(ring, f, ['a', 'b']);
    expect(r.ok && r.recipient).toBe('b');
    // A frame to "any member" (a join to an unnamed seed) opens only where the caller allows that.
    const any = sealFrame(ring, payload, '');
    expect(openFrame(ring, any, ['b'])).toEqual({ ok: false, reason: 'decrypt_failed' });
    expect(openFrame(ring, any, ['b', '']).ok).toBe(true);
  });

  test('a retired version-1 frame (no bound recipient) is refused', () => {
    const f = sealFrame(ring, payload, 'b');
    expect(openFrame(ring, Buffer.from(f.map((x, i) => (i === 4 ? 1 : x))), ['b'])).toEqual({
      ok: false,
      reason: 'bad_frame',
    });
  });

  test('a node without a key refuses encrypted frames and accepts plaintext ones', () => {
    expect(openFrame(undefined, good, ['b'])).toEqual({ ok: false, reason: 'encrypted_unexpected' });
    const r = openFrame(undefined, sealFrame(undefined, payload, 'b'), ['b']);
    expect(r.ok && r.payload.equals(payload)).toBe(true);
  });
});

describe('KeyRing rotation', () => {
  test('install new key, switch primary, retire old: each step interoperates', () => {
    const a = new KeyRing([k1]);
    const b = new KeyRing([k1]);
    a.add(k2); // step 1 on a: accepts k2, still sends k1
    expect(openFrame(b, sealFrame(a, payload, 'b'), ['b']).ok).toBe(true);
    b.use(k2); // step 2 on b: sends k2, accepts k1
    expect(openFrame(a, sealFrame(b, payload, 'b'), ['b']).ok).toBe(true);
    expect(openFrame(b, sealFrame(a, payload, 'b'), ['b']).ok).toBe(true);
    a.use(k2);
    a.remove(k1); // step 3: old key retired
    b.remove(k1);
    expect(openFrame(a, sealFrame(new KeyRing([k1]), payload, 'b'), ['b'])).toEqual({
      ok: false,
      reason: 'decrypt_failed',
    });
    expect(openFrame(a, sealFrame(b, payload, 'b'), ['b']).ok).toBe(true);
  });

  test('the primary cannot be removed', () => {
    expect(() => new KeyRing([k1]).remove(k1)).toThrow('cannot remove the primary key');
  });

  test('key parsing errors give the size, never the key', () => {
    const secretish = 'ab'.repeat(31);
    expect(() => parseHexKey(secretish, 'GRID_SWIM_ENCRYPT_KEY')).toThrow(KeyRingError);
    try {
      parseHexKey(secretish, 'GRID_SWIM_ENCRYPT_KEY');
    } catch (e) {
      expect((e as Error).message).toBe(
        'GRID_SWIM_ENCRYPT_KEY: SWIM key must be 64 hex characters (32 bytes); got 62 characters',
      );
      expect((e as Error).message).not.toContain(secretish);
    }
    expect(parseHexKey(k1.toString('hex'), 'env').equals(k1)).toBe(true);
    expect(() => checkKeyBytes(Buffer.alloc(31), 'Secret praxis-system/swim-key key "key"')).toThrow(
      'Secret praxis-system/swim-key key "key": SWIM key must be exactly 32 bytes; got 31',
    );
    expect(() => new KeyRing([])).toThrow('at least one key');
  });
});

describe('ReplayGuard', () => {
  test('a nonce is accepted once inside the window', () => {
    const g = new ReplayGuard(1_000, 100);
    const n = randomBytes(12);
    expect(g.check(n, 5_000, 5_000)).toBe('ok');
    expect(g.check(n, 5_000, 5_500)).toBe('replayed');
    expect(g.check(randomBytes(12), 5_000, 5_500)).toBe('ok');
  });

  test('timestamps outside the window are stale either way', () => {
    const g = new ReplayGuard(1_000, 100);
    expect(g.check(randomBytes(12), 1_000, 2_001)).toBe('stale_packet');
    expect(g.check(randomBytes(12), 3_001, 2_000)).toBe('stale_packet');
  });

  test('memory stays bounded under a flood', () => {
    const g = new ReplayGuard(60_000, 50);
    const first = randomBytes(12);
    g.check(first, 0, 0);
    for (let i = 0; i < 500; i++) g.check(randomBytes(12), 0, 0);
    // The oldest nonce was evicted to respect the bound (documented trade-off).
    expect(g.check(first, 0, 0)).toBe('ok');
  });
});
