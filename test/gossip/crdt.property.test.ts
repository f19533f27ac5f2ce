// Property tests (fast-check) for the CRDT merges: the LWW record set, the StateStore as a whole (arrival order
// must not matter), and the tenant spend G-Counter.
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  gCounterValue,
  mergeGCounters,
  mergeTenantSpend,
  type GCounter,
} from '../../daemons/gossip-operator/state/g-counter.ts';
import { mergeRecordSets, type Versioned } from '../../daemons/gossip-operator/state/lww.ts';
import { signRecord, type SignedStateRecord } from '../../daemons/gossip-operator/state/records.ts';
import { StateStore } from '../../daemons/gossip-operator/state/state-store.ts';
import { FakeClock } from './fake-clock.ts';
import { body, provider, siteInfo, siteKeys } from './state-fixtures.ts';

const record = fc.record({
  key: fc.constantFrom('n/a', 'n/a/p1', 'n/b', 'n/b/p1', 'n/b/p2'),
  revision: fc.integer({ min: 0, max: 5 }),
  writer: fc.constantFrom('w1', 'w2'),
  body: fc.constantFrom('x', 'y', 'z'),
});
const recordSet = fc
  .array(record, { maxLength: 12 })
  .map((rs) => rs.reduce((m, r) => mergeRecordSets(m, new Map([[r.key, r]])), new Map<string, Versioned>()));
const canon = (m: ReadonlyMap<string, Versioned>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));

describe('LWW record set merge', () => {
  test('commutative', () => {
    fc.assert(
      fc.property(recordSet, recordSet, (a, b) => {
        expect(canon(mergeRecordSets(a, b))).toEqual(canon(mergeRecordSets(b, a)));
      }),
    );
  });
  test('associative', () => {
    fc.assert(
      fc.property(recordSet, recordSet, recordSet, (a, b, c) => {
        expect(canon(mergeRecordSets(mergeRecordSets(a, b), c))).toEqual(
          canon(mergeRecordSets(a, mergeRecordSets(b, c))),
        );
      }),
    );
  });
  test('idempotent', () => {
    fc.assert(
      fc.property(recordSet, (a) => {
        expect(canon(mergeRecordSets(a, a))).toEqual(canon(a));
      }),
    );
  });
  test('the winner has the greatest (revision, writer) of its key', () => {
    fc.assert(
      fc.property(fc.array(record, { minLength: 1, maxLength: 12 }), (rs) => {
        const merged = rs.reduce((m, r) => mergeRecordSets(m, new Map([[r.key, r]])), new Map<string, Versioned>());
        for (const r of rs) {
          const w = merged.get(r.key)!;
          expect(w.revision > r.revision || (w.revision === r.revision && w.writer >= r.writer)).toBe(true);
        }
      }),
    );
  });
});

describe('StateStore: arrival order does not matter', () => {
  // A pool of real signed records (signing is the slow part, so it is done once).
  const clock = new FakeClock();
  const keys = { a: siteKeys(), b: siteKeys() };
  const pool: SignedStateRecord[] = [];
  for (const site of ['a', 'b'] as const) {
    for (let rev = 1; rev <= 3; rev++) {
      for (const writer of ['w1', 'w2']) {
        pool.push(
          signRecord(
            body('n', site, clock.now() - 100 + rev, {
              writer,
              site_info: siteInfo({ tenant_spend_usd: { t: rev * 10 + (writer === 'w2' ? 1 : 0) } }),
            }),
            keys[site].privateKey,
          ),
        );
        pool.push(
          signRecord(
            body('n', site, clock.now() - 100 + rev, {
              writer,
              kind: 'provider',
              key: `n/${site}/p`,
              provider: provider('p', { capacity_weight: rev }),
              site_info: undefined,
            }),
            keys[site].privateKey,
          ),
        );
      }
    }
  }
  const fresh = () =>
    new StateStore({ network: 'n', localSite: 'local', resolveSigner: (s) => keys[s as 'a' | 'b']?.publicKey, clock });
  const snapshot = (s: StateStore) => ({
    records: s.records().map((r) => [r.key, r.revision, r.writer]),
    spend: s.tenantSpendTotals(),
  });

  test('any permutation, with duplicates, converges to the same view', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray(pool, { minLength: 1 }), fc.infiniteStream(fc.nat()), (subset, rnd) => {
        const it = rnd[Symbol.iterator]();
        const reordered = [...subset, ...subset]
          .map((r) => ({ r, k: it.next().value as number }))
          .sort((x, y) => x.k - y.k)
          .map((x) => x.r);
        const s1 = fresh();
        const s2 = fresh();
        for (const r of subset) s1.apply(r, 'x');
        for (const r of reordered) s2.apply(r, 'y');
        expect(snapshot(s2)).toEqual(snapshot(s1));
      }),
      { numRuns: 60 },
    );
  });
});

const counter: fc.Arbitrary<GCounter> = fc.dictionary(
  fc.constantFrom('east', 'west', 'north', 'south'),
  fc.integer({ min: 0, max: 1_000 }),
);

describe('G-Counter', () => {
  test('commutative', () => {
    fc.assert(
      fc.property(counter, counter, (a, b) => {
        expect(mergeGCounters(a, b)).toEqual(mergeGCounters(b, a));
      }),
    );
  });
  test('associative', () => {
    fc.assert(
      fc.property(counter, counter, counter, (a, b, c) => {
        expect(mergeGCounters(mergeGCounters(a, b), c)).toEqual(mergeGCounters(a, mergeGCounters(b, c)));
      }),
    );
  });
  test('idempotent', () => {
    fc.assert(
      fc.property(counter, (a) => {
        expect(mergeGCounters(a, a)).toEqual(mergeGCounters(a, {}));
      }),
    );
  });
  test('the merged value never decreases', () => {
    fc.assert(
      fc.property(counter, counter, (a, b) => {
        const v = gCounterValue(mergeGCounters(a, b));
        expect(v).toBeGreaterThanOrEqual(gCounterValue(a));
        expect(v).toBeGreaterThanOrEqual(gCounterValue(b));
      }),
    );
  });
  test('per-tenant spend merges likewise', () => {
    const spend = fc.dictionary(fc.constantFrom('tenant-a', 'tenant-b'), counter);
    fc.assert(
      fc.property(spend, spend, spend, (a, b, c) => {
        expect(mergeTenantSpend(a, b)).toEqual(mergeTenantSpend(b, a));
        expect(mergeTenantSpend(mergeTenantSpend(a, b), c)).toEqual(mergeTenantSpend(a, mergeTenantSpend(b, c)));
        expect(mergeTenantSpend(a, a)).toEqual(mergeTenantSpend(a, {}));
      }),
    );
  });
});
