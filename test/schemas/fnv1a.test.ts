import { describe, expect, it } from 'vitest';
import { fnv1a32Hex, stableId } from '../../schemas/fnv1a.ts';

describe('FNV-1a 32 (docs/contract.md §2.2)', () => {
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

  /** The reference: FNV-1a over TextEncoder's bytes, which is what the hash is defined on. */
  function referenceHex(input: string): string {
    let h = 0x811c9dc5;
    for (const b of new TextEncoder().encode(input)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    return h.toString(16).padStart(8, '0');
  }

  it.each([
    ['ASCII', 'inference_model/sim-model-v1/east/provider-east'],
    ['two-byte (é, ß)', 'modèle-größe'],
    ['three-byte (CJK, U+FFFF edge)', '模型\uffff\u0800'],
    ['four-byte (astral emoji)', 'tool-\u{1f680}-x'],
    ['lone high surrogate mid-string', 'a\ud800b'],
    ['lone low surrogate', '\udc00z'],
    ['high surrogate at the end', 'end\udbff'],
    ['reversed pair', '\udc00\ud800'],
    ['control characters and NUL', 'a\u0000\u001f\u007f\u0080'],
  ])('matches the TextEncoder reference for %s', (_label, input) => {
    expect(fnv1a32Hex(input)).toBe(referenceHex(input));
  });

  it('matches the TextEncoder reference on 5 000 random strings over every UTF-16 range', () => {
    // Deterministic LCG so a failure reproduces; code units drawn from ASCII, 2-byte, 3-byte and surrogate ranges.
    let state = 12345;
    const next = (): number => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state;
    };
    const ranges: [number, number][] = [
      [0, 0x80],
      [0x80, 0x800],
      [0x800, 0xd800],
      [0xd800, 0xe000],
      [0xe000, 0x10000],
    ];
    for (let n = 0; n < 5000; n++) {
      let text = '';
      const length = next() % 12;
      for (let i = 0; i < length; i++) {
        const [low, high] = ranges[next() % ranges.length] as [number, number];
        text += String.fromCharCode(low + (next() % (high - low)));
      }
      expect(fnv1a32Hex(text), JSON.stringify(text)).toBe(referenceHex(text));
    }
  });

  it('stable_id equals the hash of the joined fields for every kind of character', () => {
    for (const [name, site, cluster] of [
      ['m', 'east', 'c'],
      ['modèle/\u{1f680}', 'site-ü', 'tool/x'],
      ['lone\ud800', '\udc00', ''],
    ] as const) {
      expect(stableId('mcp_tool', name, site, cluster)).toBe(referenceHex(`mcp_tool/${name}/${site}/${cluster}`));
    }
  });
});
