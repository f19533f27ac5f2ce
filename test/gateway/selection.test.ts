// The routing decision as a pure function: table tests with a seeded random source and a fake clock.
import { describe, expect, it } from 'vitest';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { AffinityTable } from '../../daemons/gateway/routing/affinity.ts';
import { REQUEST_ID_PATTERN, createRequestIdGenerator } from '../../daemons/gateway/routing/request-id.ts';
import { selectCandidate } from '../../daemons/gateway/routing/selection.ts';
import type { SelectionDeps } from '../../daemons/gateway/routing/selection.ts';
import { buildSnapshot } from '../../daemons/gateway/routing/snapshot.ts';
import { candidate, payload } from './helpers.ts';

/** mulberry32: a small seeded PRNG so random modes are reproducible. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function deps(overrides: Partial<SelectionDeps> = {}): SelectionDeps {
  return { random: seeded(1), nowMs: () => 1_000_000, isExcluded: () => false, ...overrides };
}

const snap = (candidates: OverlayCandidate[], mode?: 'deterministic' | 'roundRobin' | 'random' | 'weightedRandom') =>
  buildSnapshot(payload(candidates, mode), 'r'.repeat(64), 'envelope', 0);

const pick = (s: ReturnType<typeof snap>, d: SelectionDeps, name = 'm', sessionKey?: string): string => {
  const out = selectCandidate(s, { kind: 'inference_model', name, ...(sessionKey === undefined ? {} : { sessionKey }) }, d);
  return out.kind === 'selected' ? out.candidate.candidate.site : out.kind;
};

describe('selectCandidate', () => {
  it('answers no_candidate for a model the overlay does not list (404)', () => {
    expect(pick(snap([candidate('m', 'a', 'ca')]), deps(), 'other')).toBe('no_candidate');
  });

  it('answers all_excluded when every candidate is closed to new requests or excluded (503)', () => {
    const s = snap([candidate('m', 'a', 'ca', { admission_state: 'existing_only' }), candidate('m', 'b', 'cb', { selection_group: 0 })].map((c) => ({ ...c, selection_group: 0 })));
    expect(pick(s, deps({ isExcluded: (c) => c.candidate.site === 'b' }))).toBe('all_excluded');
  });

  it.each([
    ['deterministic', ['a', 'a', 'a', 'a']],
    ['roundRobin', ['a', 'b', 'a', 'b']],
  ] as const)('%s over one group [a, b] picks %j for 4 requests', (mode, expected) => {
    const s = snap([candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 })], mode);
    const d = deps();
    expect([1, 2, 3, 4].map(() => pick(s, d))).toEqual(expected);
  });

  it('deterministic is the default when the overlay sets no selection_policy', () => {
    const s = snap([candidate('m', 'a', 'ca'), candidate('m', 'b', 'cb')]);
    expect(s.mode).toBe('deterministic');
    expect(pick(s, deps())).toBe('a');
  });

  it('keeps round-robin cursors per snapshot: a new accepted snapshot starts again at the first member', () => {
    const list = [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 })];
    const first = snap(list, 'roundRobin');
    expect(pick(first, deps())).toBe('a');
    expect(pick(snap(list, 'roundRobin'), deps())).toBe('a');
    expect(pick(first, deps())).toBe('b');
  });

  it('uses the first viable group and falls back to the next when a group is excluded or existing_only', () => {
    const s = snap(
      [
        candidate('m', 'a', 'ca', { selection_group: 0 }),
        candidate('m', 'b', 'cb', { selection_group: 1, admission_state: 'existing_only' }),
        candidate('m', 'c', 'cc', { selection_group: 2 }),
      ],
      'roundRobin',
    );
    expect(pick(s, deps())).toBe('a');
    expect(pick(s, deps({ isExcluded: (c) => c.candidate.site === 'a' }))).toBe('c');
  });

  it('random is uniform inside the group and never leaves it', () => {
    const s = snap(
      [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 }), candidate('m', 'z', 'cz', { selection_group: 1 })],
      'random',
    );
    const d = deps({ random: seeded(7) });
    const counts: Record<string, number> = {};
    for (let i = 0; i < 1000; i++) {
      const site = pick(s, d);
      counts[site] = (counts[site] ?? 0) + 1;
    }
    expect(counts['z']).toBeUndefined();
    expect(counts['a']).toBeGreaterThan(400);
    expect(counts['b']).toBeGreaterThan(400);
  });

  it('weightedRandom follows traffic_weight within a chi-square bound over 1200 picks', () => {
    const weights = { a: 50, b: 30, c: 20 };
    const s = snap(
      Object.entries(weights).map(([site, w]) => candidate('m', site, `c${site}`, { selection_group: 0, traffic_weight: w })),
      'weightedRandom',
    );
    const d = deps({ random: seeded(42) });
    const n = 1200;
    const counts: Record<string, number> = { a: 0, b: 0, c: 0 };
    for (let i = 0; i < n; i++) counts[pick(s, d)]! += 1;
    const chi = Object.entries(weights).reduce((sum, [site, w]) => {
      const expected = (n * w) / 100;
      return sum + (counts[site]! - expected) ** 2 / expected;
    }, 0);
    // df = 2: P(chi2 > 13.8) = 0.001. A uniform pick would score ~178 here.
    expect(chi).toBeLessThan(13.8);
  });

  it('offers the other viable members of the same group, never another group, as retry alternates', () => {
    const s = snap(
      [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 }), candidate('m', 'z', 'cz', { selection_group: 1 })],
      'deterministic',
    );
    const out = selectCandidate(s, { kind: 'inference_model', name: 'm' }, deps());
    expect(out.kind === 'selected' && out.alternates.map((c) => c.candidate.site)).toEqual(['b']);
  });

  describe('session affinity', () => {
    const list = [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 })];

    it('keeps a session on its candidate across round-robin turns', () => {
      const s = snap(list, 'roundRobin');
      const d = deps({ affinity: new AffinityTable(3600) });
      const first = pick(s, d, 'm', 'session-1');
      expect([1, 2, 3].map(() => pick(s, d, 'm', 'session-1'))).toEqual([first, first, first]);
      expect(pick(s, d, 'm', 'session-2')).not.toBe(first);
    });

    it('keeps a bound session on an existing_only candidate, but sends new sessions elsewhere', () => {
      const d = deps({ affinity: new AffinityTable(3600) });
      expect(pick(snap(list, 'deterministic'), d, 'm', 's')).toBe('a');
      const drained = snap([{ ...list[0]!, admission_state: 'existing_only' }, list[1]!], 'deterministic');
      expect(pick(drained, d, 'm', 's')).toBe('a');
      expect(pick(drained, d, 'm', 'new-session')).toBe('b');
    });

    it('fails a session over when its candidate is excluded, and rebinds it', () => {
      const table = new AffinityTable(3600);
      const s = snap(list, 'deterministic');
      expect(pick(s, deps({ affinity: table }), 'm', 's')).toBe('a');
      expect(pick(s, deps({ affinity: table, isExcluded: (c) => c.candidate.site === 'a' }), 'm', 's')).toBe('b');
      expect(pick(s, deps({ affinity: table }), 'm', 's')).toBe('b');
    });

    it('expires a binding at its absolute TTL from the time it was made', () => {
      let now = 0;
      const table = new AffinityTable(10);
      const s = snap(list, 'roundRobin');
      const d = deps({ affinity: table, nowMs: () => now });
      expect(pick(s, d, 'm', 's')).toBe('a');
      now = 9_999;
      expect(pick(s, d, 'm', 's')).toBe('a');
      now = 10_000;
      expect(pick(s, d, 'm', 's')).toBe('b');
    });
  });
});

describe('AffinityTable', () => {
  it('never holds more than max_entries bindings, evicting the oldest', () => {
    const table = new AffinityTable(3600, 3);
    for (let i = 0; i < 10; i++) table.bind(`k${i}`, `id${i}`, 0);
    expect(table.size).toBe(3);
    expect(table.lookup('k0', 1)).toBeUndefined();
    expect(table.lookup('k9', 1)).toBe('id9');
  });

  it('rejects a TTL above 86400 s or a cap above 10 000', () => {
    expect(() => new AffinityTable(86_401)).toThrow(/ttl_secs/);
    expect(() => new AffinityTable(60, 10_001)).toThrow(/max_entries/);
  });
});

describe('request id', () => {
  it('is 32 lowercase hex: microseconds, process tag, counter', () => {
    const next = createRequestIdGenerator({ nowMicros: () => 0x1234, processTag: 0xbeef });
    const a = next();
    const b = next();
    expect(a).toMatch(REQUEST_ID_PATTERN);
    expect(a).toBe('0000000000001234beef000000000000');
    expect(b).toBe('0000000000001234beef000000000001');
  });

  it('writes the microsecond timestamp as 16 hex digits across its whole range', () => {
    const seeds = [0, 1, 0xff, 0x100, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 48 - 1, 2 ** 48, 1_764_633_600_123_456, Number.MAX_SAFE_INTEGER];
    const random = seeded(7);
    for (let i = 0; i < 2000; i++) seeds.push(Math.floor(random() * 2 ** 21) * 2 ** 32 + Math.floor(random() * 2 ** 32));
    for (const micros of seeds) {
      const id = createRequestIdGenerator({ nowMicros: () => micros, processTag: 0x0a0b })();
      expect(id).toMatch(REQUEST_ID_PATTERN);
      expect(id).toBe(`${micros.toString(16).padStart(16, '0')}0a0b000000000000`);
    }
    // A clock before the epoch reads as 0.
    expect(createRequestIdGenerator({ nowMicros: () => -5, processTag: 1 })()).toBe('00000000000000000001000000000000');
  });

  it('keeps every id exact while one generator crosses the 2^24 boundaries of its clock and its counter', () => {
    // The generator caches the hex of each number's high part: it must follow the clock both ways (a clock step back)
    // and the counter past 2^24 requests.
    const clock = [2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 - 1, 2 ** 48 + 2 ** 24 - 1, 2 ** 48 + 2 ** 24, 5];
    let at = 0;
    const next = createRequestIdGenerator({ nowMicros: () => clock[at++ % clock.length]!, processTag: 0xbeef });
    for (let i = 0; i < clock.length; i++) {
      expect(next()).toBe(`${clock[i]!.toString(16).padStart(16, '0')}beef${i.toString(16).padStart(12, '0')}`);
    }
    for (let i = clock.length; i < 2 ** 24 - 1; i++) next();
    for (const counter of [2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1]) {
      const id = next();
      expect(id.slice(20)).toBe(counter.toString(16).padStart(12, '0'));
    }
  });
});
