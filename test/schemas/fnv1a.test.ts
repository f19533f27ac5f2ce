import { describe, expect, it } from 'vitest';
import { fnv1a32Hex, stableId } from '../../schemas/fnv1a.ts';

describe('FNV-1a 32 (SPEC §2.2)', () => {
  it.each([
    ['', '811c9dc5'],
    ['a', 'e40c292c'],
    ['foobar', 'bf9cf968'],
  ])('fnv1a32Hex(%j) = %s', (input, expected) => {
    expect(fnv1a32Hex(input)).toBe(expected);
  });

  it('hashes UTF-8 bytes, not UTF-16 units', () => {
    // "é" is one UTF-16 unit but two UTF-8 bytes (C3 A9); hashing the bytes by hand must agree.
    let h = 0x811c9dc5;
    for (const b of [0xc3, 0xa9]) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    expect(fnv1a32Hex('é')).toBe(h.toString(16).padStart(8, '0'));
  });

  it('always yields 8 lowercase hex digits (leading zeros kept)', () => {
    for (let i = 0; i < 2000; i++) expect(fnv1a32Hex(`candidate-${i}`)).toMatch(/^[0-9a-f]{8}$/);
  });

  it('stable_id is the hash of kind/name/site/cluster', () => {
    expect(stableId('inference_model', 'sim-model-v1', 'east', 'provider-east')).toBe(
      fnv1a32Hex('inference_model/sim-model-v1/east/provider-east'),
    );
    expect(stableId('inference_model', 'm', 'east', 'c')).not.toBe(stableId('mcp_tool', 'm', 'east', 'c'));
  });
});
