// The routing decision as a pure function: table tests with a seeded random source and a fake clock.
import { describe, expect, it } from 'vitest';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { AffinityTable } from '../../daemons/gateway/routing/affinity.ts';
import { REQUEST_ID_PATTERN, createRequestIdGenerator } from '../../daemons/gateway/routing/request-id.ts';
import { CandidateLoad, endLoad, type LoadHolder } from '../../daemons/gateway/routing/candidate-load.ts';
import { ROUND_ROBIN_SKIP_GAP, selectCandidate } from '../../daemons/gateway/routing/selection.ts';
import type { SelectionDeps } from '../../daemons/gateway/routing/selection.ts';
import { buildSnapshot } from '../../daemons/gateway/routing/snapshot.ts';
import { candidate, payload } from './helpers.ts';
import { seededRandom as seeded } from '../../daemons/shared/seeded-random.ts';

function deps(overrides: Partial<SelectionDeps> = {}): SelectionDeps {
  return { random: seeded(1), nowMs: () => 1_000_000, isExcluded: () => false, ...overrides };
}

const snap = (candidates: OverlayCandidate[], mode?: 'deterministic' | 'roundRobin' | 'random' | 'weightedRandom') =>
  buildSnapshot(payload(candidates, mode), 'r'.repeat(64), 'envelope', 0);

const pick = (s: ReturnType<typeof snap>, d: SelectionDeps, name = 'm', sessionKey?: string): string => {
  const out = selectCandidate(
    s,
    { kind: 'inference_model', name, ...(sessionKey === undefined ? {} : { sessionKey }) },
    d,
  );
  return out.kind === 'selected' ? out.candidate.candidate.site : out.kind;
};

describe('selectCandidate', () => {
  it('answers no_candidate for a model the overlay does not list (404)', () => {
    expect(pick(snap([candidate('m', 'a', 'ca')]), deps(), 'other')).toBe('no_candidate');
  });

  it('answers all_excluded when every candidate is closed to new requests or excluded (503)', () => {
    const s = snap(
      [
        candidate('m', 'a', 'ca', { admission_state: 'existing_only' }),
        candidate('m', 'b', 'cb', { selection_group: 0 }),
      ].map((c) => ({ ...c, selection_group: 0 })),
    );
    expect(pick(s, deps({ isExcluded: (c) => c.candidate.site === 'b' }))).toBe('all_excluded');
  });

  it.each([
    ['deterministic', ['a', 'a', 'a', 'a']],
    ['roundRobin', ['a', 'b', 'a', 'b']],
  ] as const)('%s over one group [a, b] picks %j for 4 requests', (mode, expected) => {
    const s = snap(
      [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 })],
      mode,
    );
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
      [
        candidate('m', 'a', 'ca', { selection_group: 0 }),
        candidate('m', 'b', 'cb', { selection_group: 0 }),
        candidate('m', 'z', 'cz', { selection_group: 1 }),
      ],
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
      Object.entries(weights).map(([site, w]) =>
        candidate('m', site, `c${site}`, { selection_group: 0, traffic_weight: w }),
      ),
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
      [
        candidate('m', 'a', 'ca', { selection_group: 0 }),
        candidate('m', 'b', 'cb', { selection_group: 0 }),
        candidate('m', 'z', 'cz', { selection_group: 1 }),
      ],
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

/** A random source that answers `values` in order (and fails the test if asked for more). */
function scripted(values: readonly number[]): () => number {
  let next = 0;
  return () => {
    if (next >= values.length) throw new Error(`random source asked for draw ${next + 1} of ${values.length}`);
    return values[next++]!;
  };
}

describe('selectCandidate with local_load', () => {
  const three = [
    candidate('m', 'a', 'ca', { selection_group: 0, traffic_weight: 5 }),
    candidate('m', 'b', 'cb', { selection_group: 0, traffic_weight: 3 }),
    candidate('m', 'c', 'cc', { selection_group: 0, traffic_weight: 2 }),
  ];
  /** Each pick as site:alternates, for 20 requests from seed 5. */
  const picks = (mode: 'deterministic' | 'roundRobin' | 'random' | 'weightedRandom', d: SelectionDeps): string[] => {
    const s = snap(three, mode);
    return Array.from({ length: 20 }, () => {
      const out = selectCandidate(s, { kind: 'inference_model', name: 'm' }, d);
      return out.kind === 'selected'
        ? `${out.candidate.candidate.site}:${out.alternates.map((c) => c.candidate.site).join('')}`
        : out.kind;
    });
  };

  // Off, every mode makes exactly the picks of docs/contract.md §3.1, alternates included: these are the sequences the
  // selection made for seed 5 with no local_load code in it, so turning the extension off leaves a Praxis AI config's
  // routing as it was.
  it.each([
    ['deterministic', 'a:bc '.repeat(20)],
    ['roundRobin', 'a:bc b:ca c:ab '.repeat(7)],
    ['random', 'c:ab c:ab a:bc b:ca a:bc b:ca c:ab b:ca c:ab a:bc c:ab c:ab b:ca a:bc b:ca a:bc c:ab a:bc c:ab c:ab'],
    [
      'weightedRandom',
      'b:ca b:ca a:bc b:ca a:bc b:ca b:ca a:bc c:ab a:bc b:ca b:ca b:ca a:bc a:bc a:bc c:ab a:bc b:ca b:ca',
    ],
  ] as const)('off: %s makes the same 20 picks for seed 5 as without the extension', (mode, expected) => {
    expect(picks(mode, deps({ random: seeded(5) }))).toEqual(expected.trim().split(' ').slice(0, 20));
  });

  it('off: roundRobin over [a, b] is a, b, a, b (docs/contract.md §3.1) and reports no local_load path', () => {
    const s = snap(
      [candidate('m', 'a', 'ca', { selection_group: 0 }), candidate('m', 'b', 'cb', { selection_group: 0 })],
      'roundRobin',
    );
    const d = deps();
    const out = [1, 2, 3, 4].map(() => selectCandidate(s, { kind: 'inference_model', name: 'm' }, d));
    expect(out.map((o) => (o.kind === 'selected' ? o.candidate.candidate.site : o.kind))).toEqual(['a', 'b', 'a', 'b']);
    expect(out.map((o) => (o.kind === 'selected' ? o.path : o.kind))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  /** A burst: each pick is counted against its candidate and none finishes, as when requests arrive faster than they end. */
  function burst(
    mode: 'roundRobin' | 'random' | 'weightedRandom',
    list: typeof three,
    already: Record<string, number>,
    random: () => number,
    n: number,
  ) {
    const load = new CandidateLoad();
    const s = snap(list, mode);
    const cellOf = (site: string) => {
      const c = list.find((x) => x.site === site)!;
      return load.cell(c.stable_id!, c.cluster, c.site);
    };
    const holders: LoadHolder[] = [];
    for (const [site, count] of Object.entries(already)) {
      for (let i = 0; i < count; i++) {
        const h: LoadHolder = { load: undefined };
        load.begin(h, cellOf(site));
        holders.push(h);
      }
    }
    const d = deps({ random, load: { inFlight: (c) => load.inFlight(c.stableId, c.candidate.cluster) } });
    const sites: string[] = [];
    const paths: (string | undefined)[] = [];
    for (let i = 0; i < n; i++) {
      const out = selectCandidate(s, { kind: 'inference_model', name: 'm' }, d);
      if (out.kind !== 'selected') throw new Error(out.kind);
      sites.push(out.candidate.candidate.site);
      paths.push(out.path);
      const h: LoadHolder = { load: undefined };
      load.begin(h, load.cell(out.candidate.stableId, out.candidate.candidate.cluster, out.candidate.candidate.site));
      holders.push(h);
    }
    return { sites, paths, load, holders, inFlight: (site: string) => cellOf(site).inFlight };
  }

  const ab = [
    candidate('m', 'a', 'ca', { selection_group: 0, traffic_weight: 1 }),
    candidate('m', 'b', 'cb', { selection_group: 0, traffic_weight: 1 }),
  ];
  // Pairs of draws; over [a, b] of equal weight a draw below 0.5 is a, at or above it b.
  const draws = [0.2, 0.7, 0.3, 0.1, 0.6, 0.4, 0.9, 0.8, 0.1, 0.6, 0.45, 0.55];

  it('on: weightedRandom moves a burst off the candidate that already carries 6 in flight (two choices, ties to the first draw)', () => {
    const on = burst('weightedRandom', ab, { a: 6 }, scripted(draws), 6);
    // (a,b) b lighter; (a,a) one candidate; (b,a) b is the lighter first draw; (b,b); (a,b) b at 3 < a at 6; (a,b) b at 4.
    expect(on.sites).toEqual(['b', 'a', 'b', 'b', 'b', 'b']);
    expect(on.paths).toEqual(['second_draw', 'first_draw', 'first_draw', 'first_draw', 'second_draw', 'second_draw']);
    // Off, the same source (one draw a request) sends half of the burst to the loaded candidate.
    const off = snap(ab, 'weightedRandom');
    const d = deps({ random: scripted(draws) });
    expect([1, 2, 3, 4, 5, 6].map(() => pick(off, d))).toEqual(['a', 'b', 'a', 'a', 'b', 'a']);
  });

  it('on: random (uniform) compares raw in-flight counts, whatever traffic_weight says', () => {
    const weighted = [
      candidate('m', 'a', 'ca', { selection_group: 0, traffic_weight: 100 }),
      candidate('m', 'b', 'cb', { selection_group: 0, traffic_weight: 1 }),
    ];
    // (a, b): a at 3 against b at 2, so b; under weightedRandom b's 2 in flight over weight 1 would be the heavier.
    expect(burst('random', weighted, { a: 3, b: 2 }, scripted([0.2, 0.7]), 1).sites).toEqual(['b']);
  });

  it('on: weightedRandom weighs in-flight against traffic_weight', () => {
    const weighted = [
      candidate('m', 'a', 'ca', { selection_group: 0, traffic_weight: 3 }),
      candidate('m', 'b', 'cb', { selection_group: 0, traffic_weight: 1 }),
    ];
    // Draws 0.1 -> a and 0.9 -> b (a holds 3/4 of the weight). a: 6 over 3 = 2 per weight; b: 1 over 1, lighter.
    expect(burst('weightedRandom', weighted, { a: 6, b: 1 }, scripted([0.1, 0.9]), 1).sites).toEqual(['b']);
    // b at 3 over 1 is heavier than a at 6 over 3: a stays.
    expect(burst('weightedRandom', weighted, { a: 6, b: 3 }, scripted([0.1, 0.9]), 1).sites).toEqual(['a']);
    // Exactly equal shares (a 6 over 3, b 2 over 1) go to the first draw, both ways round.
    expect(burst('weightedRandom', weighted, { a: 6, b: 2 }, scripted([0.1, 0.9]), 1).sites).toEqual(['a']);
    expect(burst('weightedRandom', weighted, { a: 6, b: 2 }, scripted([0.9, 0.1]), 1).sites).toEqual(['b']);
  });

  it('on: weightedRandom never picks a weight-0 member, however idle it is', () => {
    const zero = [
      candidate('m', 'a', 'ca', { selection_group: 0, traffic_weight: 1 }),
      candidate('m', 'b', 'cb', { selection_group: 0, traffic_weight: 0 }),
    ];
    const on = burst('weightedRandom', zero, { a: 50 }, seeded(3), 40);
    expect(new Set(on.sites)).toEqual(new Set(['a']));
  });

  it('on: roundRobin keeps the rotation unless a member is at least 2 behind, then takes the least loaded', () => {
    expect(ROUND_ROBIN_SKIP_GAP).toBe(2);
    // a starts with 4 in flight (slow), b with none; nothing finishes during the burst. Cursor a: a 4 against b 0,
    // skipped; cursor b (1); cursor a: a 4 against b 2, skipped; cursor b (3); cursor a: 4 against 4, kept; cursor b.
    const on = burst('roundRobin', ab, { a: 4 }, seeded(1), 6);
    expect(on.sites).toEqual(['b', 'b', 'b', 'b', 'a', 'b']);
    expect(on.paths).toEqual(['skipped', 'cursor', 'skipped', 'cursor', 'cursor', 'cursor']);
    // A gap of one is round-robin's own: the rotation stands.
    expect(burst('roundRobin', ab, { a: 1 }, seeded(1), 4).sites).toEqual(['a', 'b', 'a', 'b']);
  });

  it('on: roundRobin ties among lighter members go to the next in rotation order after the cursor', () => {
    const abc = three.map((c) => ({ ...c }));
    // Cursor a (5 in flight); b and c both at 0: b, the next after a.
    expect(burst('roundRobin', abc, { a: 5 }, seeded(1), 1).sites).toEqual(['b']);
  });

  it('on: with nothing in flight every mode picks as it would off (roundRobin a, b, a, b; deterministic first)', () => {
    const load = new CandidateLoad();
    const d = (mode: 'roundRobin' | 'deterministic') => {
      const s = snap(ab, mode);
      const dd = deps({ load: { inFlight: (c) => load.inFlight(c.stableId, c.candidate.cluster) } });
      return [1, 2, 3, 4].map(() => pick(s, dd));
    };
    expect(d('roundRobin')).toEqual(['a', 'b', 'a', 'b']);
    expect(d('deterministic')).toEqual(['a', 'a', 'a', 'a']);
  });

  it('on: deterministic stays on the first member however many requests it carries, and reports no path', () => {
    const load = new CandidateLoad();
    const first = load.cell(ab[0]!.stable_id!, 'ca', 'a');
    for (let i = 0; i < 1000; i++) load.begin({ load: undefined }, first);
    const s = snap(ab, 'deterministic');
    const out = selectCandidate(
      s,
      { kind: 'inference_model', name: 'm' },
      deps({ load: { inFlight: (c) => load.inFlight(c.stableId, c.candidate.cluster) } }),
    );
    expect(out.kind === 'selected' && [out.candidate.candidate.site, out.path]).toEqual(['a', undefined]);
  });

  it('on: never leaves the first viable group, however loaded it is', () => {
    const grouped = [...ab, candidate('m', 'z', 'cz', { selection_group: 1 })];
    const on = burst('weightedRandom', grouped, { a: 100, b: 100 }, seeded(9), 20);
    expect(on.sites.filter((site) => site === 'z')).toEqual([]);
  });

  it('on: alternates still follow the chosen member, wrapping round', () => {
    const load = new CandidateLoad();
    const a = three[0]!;
    for (let i = 0; i < 4; i++) load.begin({ load: undefined }, load.cell(a.stable_id!, a.cluster, a.site));
    const out = selectCandidate(
      snap(three, 'roundRobin'),
      { kind: 'inference_model', name: 'm' },
      deps({ load: { inFlight: (c) => load.inFlight(c.stableId, c.candidate.cluster) } }),
    );
    expect(
      out.kind === 'selected' &&
        `${out.candidate.candidate.site}:${out.alternates.map((c) => c.candidate.site).join('')}`,
    ).toBe('b:ca');
  });

  it('on: a burst ends back at zero in flight once every request ends', () => {
    const on = burst('weightedRandom', ab, { a: 6 }, scripted(draws), 6);
    expect(on.inFlight('a') + on.inFlight('b')).toBe(12);
    for (const h of on.holders) endLoad(h);
    for (const h of on.holders) endLoad(h);
    expect([on.inFlight('a'), on.inFlight('b')]).toEqual([0, 0]);
  });
});

describe('CandidateLoad', () => {
  it('counts begin and end, moves a failed-over request, and ends each request once', () => {
    const load = new CandidateLoad();
    const a = load.cell('id-a', 'ca', 'west');
    const b = load.cell('id-b', 'cb', 'east');
    const request: LoadHolder = { load: undefined };
    load.begin(request, a);
    expect([load.inFlight('id-a', 'ca'), load.inFlight('id-b', 'cb')]).toEqual([1, 0]);
    // A failover: the old candidate ends, the new one begins.
    load.begin(request, b);
    expect([load.inFlight('id-a', 'ca'), load.inFlight('id-b', 'cb')]).toEqual([0, 1]);
    // Beginning the same cell again (a retry on another endpoint of the same cluster) counts nothing twice.
    load.begin(request, b);
    expect(load.inFlight('id-b', 'cb')).toBe(1);
    endLoad(request);
    endLoad(request);
    expect([load.inFlight('id-a', 'ca'), load.inFlight('id-b', 'cb')]).toEqual([0, 0]);
    expect(load.byCluster()).toEqual(
      new Map([
        ['ca', 0],
        ['cb', 0],
      ]),
    );
  });

  it('counts a stable_id reused for another cluster apart, so the metric names the cluster the requests went to', () => {
    const load = new CandidateLoad();
    load.begin({ load: undefined }, load.cell('same', 'ca', 'west'));
    load.begin({ load: undefined }, load.cell('same', 'cb', 'west'));
    load.begin({ load: undefined }, load.cell('same', 'cb', 'west'));
    expect([load.inFlight('same', 'ca'), load.inFlight('same', 'cb'), load.inFlight('same', 'cc')]).toEqual([1, 2, 0]);
    expect(load.byCluster()).toEqual(
      new Map([
        ['ca', 1],
        ['cb', 2],
      ]),
    );
  });

  it('drops idle cells once overlays have named MAX_IDLE_CELLS candidates, never one a request still holds', () => {
    const load = new CandidateLoad();
    const held: LoadHolder = { load: undefined };
    load.begin(held, load.cell('busy', 'ca', 'west'));
    for (let i = 0; i < 5000; i++) load.cell(`idle-${i}`, 'cb', 'west');
    expect(load.size).toBeLessThanOrEqual(4096);
    expect(load.inFlight('busy', 'ca')).toBe(1);
    endLoad(held);
    expect(load.inFlight('busy', 'ca')).toBe(0);
  });

  it('tells grid_site_route what changed at a site since its newest sample', () => {
    const load = new CandidateLoad();
    const holders = Array.from({ length: 3 }, (): LoadHolder => ({ load: undefined }));
    for (const h of holders) load.begin(h, load.cell('c-east', 'c-east', 'east'));
    expect(load.sinceSample('east')).toBe(3);
    load.sampled('east');
    expect(load.sinceSample('east')).toBe(0);
    endLoad(holders[0]!);
    expect(load.sinceSample('east')).toBe(-1);
    load.begin({ load: undefined }, load.cell('c-east-2', 'c-east-2', 'east'));
    expect([load.sinceSample('east'), load.sinceSample('west')]).toEqual([0, 0]);
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
    const seeds = [
      0,
      1,
      0xff,
      0x100,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 48 - 1,
      2 ** 48,
      1_764_633_600_123_456,
      Number.MAX_SAFE_INTEGER,
    ];
    const random = seeded(7);
    for (let i = 0; i < 2000; i++)
      seeds.push(Math.floor(random() * 2 ** 21) * 2 ** 32 + Math.floor(random() * 2 ** 32));
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
