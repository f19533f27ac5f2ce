import { describe, expect, it } from 'vitest';
import { decideStubGc } from '../../../daemons/gossip-operator/controllers/site-discovery.ts';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const iso = (msAgo: number) => new Date(NOW - msAgo).toISOString().replace(/\.\d{3}Z$/, 'Z');
const stubs = (n: number, absentMsAgo?: number) =>
  Array.from({ length: n }, (_, i) => ({
    name: `grid-s${i}`,
    siteId: `s${i}`,
    ...(absentMsAgo !== undefined ? { absentSince: iso(absentMsAgo) } : {}),
  }));

describe('auto-discovered GridSite garbage collection', () => {
  it('starts the absence clock when gossip stops vouching and clears it when the site returns', () => {
    const d = decideStubGc(
      [
        { name: 'grid-a', siteId: 'a' },
        { name: 'grid-b', siteId: 'b', absentSince: iso(1000) },
      ],
      (s) => s === 'b',
      NOW,
      3600,
      true,
    );
    expect(d.absentSince.get('grid-a')).toBe('2026-06-01T12:00:00Z');
    expect(d.absentSince.get('grid-b')).toBeNull();
    expect(d.delete).toEqual([]);
  });

  it('deletes a stub once its absence is at least the TTL old', () => {
    const d = decideStubGc(
      [
        { name: 'grid-a', siteId: 'a', absentSince: iso(3600_000) },
        { name: 'grid-b', siteId: 'b', absentSince: iso(3599_000) },
        ...stubs(3).map((s) => ({ ...s })),
      ],
      (s) => s.startsWith('s'),
      NOW,
      3600,
      true,
    );
    expect(d.delete).toEqual(['grid-a']);
    expect(d.braked).toBe(false);
  });

  it('judges nobody absent during the verification window after start', () => {
    const d = decideStubGc(stubs(3), () => false, NOW, 3600, false);
    expect(d.absentSince.size).toBe(0);
    expect(d.delete).toEqual([]);
  });

  it('deletes none when more than half the stubs and more than 8 would go (partition brake)', () => {
    const nine = decideStubGc(stubs(10, 7200_000), () => false, NOW, 3600, true);
    expect(nine.braked).toBe(true);
    expect(nine.delete).toEqual([]);
    // 8 of 10: more than half but not more than 8 — a small grid may lose most of its stubs.
    const eight = decideStubGc(
      [...stubs(8, 7200_000), { name: 'grid-x', siteId: 'x' }, { name: 'grid-y', siteId: 'y' }],
      (s) => s === 'x' || s === 'y',
      NOW,
      3600,
      true,
    );
    expect(eight.braked).toBe(false);
    expect(eight.delete).toHaveLength(8);
    // 9 of 20: more than 8 but not more than half.
    const half = decideStubGc(
      [...stubs(9, 7200_000), ...Array.from({ length: 11 }, (_, i) => ({ name: `grid-live${i}`, siteId: `live${i}` }))],
      (s) => s.startsWith('live'),
      NOW,
      3600,
      true,
    );
    expect(half.braked).toBe(false);
    expect(half.delete).toHaveLength(9);
  });

  it('ignores an unparsable absentSince instead of deleting', () => {
    const d = decideStubGc([{ name: 'grid-a', siteId: 'a', absentSince: 'yesterday' }], () => false, NOW, 1, true);
    expect(d.delete).toEqual([]);
  });
});
