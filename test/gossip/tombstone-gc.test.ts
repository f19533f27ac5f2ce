// Tombstone garbage collection in the CRDT view (state-store.ts): a deleted key's tombstone is dropped after
// tombstoneRetentionMs, its revision raising the origin's collected floor, so a stale live copy still in flight
// cannot resurrect the key and memory stays bounded under endless add/delete churn.
import { describe, expect, test } from 'vitest';
import { LocalPublisher } from '../../daemons/gossip-operator/state/publisher.ts';
import { signRecord, type SignedStateRecord } from '../../daemons/gossip-operator/state/records.ts';
import { defaultStateLimits, StateStore } from '../../daemons/gossip-operator/state/state-store.ts';
import type { RevisionStore } from '../../daemons/gossip-operator/state/revision-store.ts';
import { FakeClock } from './fake-clock.ts';
import { body, provider, siteKeys } from './state-fixtures.ts';

const NET = 'production';
const keys = { east: siteKeys(), local: siteKeys() };
const resolver = (site: string) => (site in keys ? keys[site as keyof typeof keys].publicKey : undefined);
const HOUR = 3_600_000;

function store(clock: FakeClock, limits = {}): StateStore {
  return new StateStore({ network: NET, localSite: 'local', resolveSigner: resolver, clock, limits });
}

const live = (name: string, revision: number): SignedStateRecord =>
  signRecord(
    body(NET, 'east', revision, {
      kind: 'provider',
      key: `${NET}/east/${name}`,
      provider: provider(name),
      site_info: undefined,
    }),
    keys.east.privateKey,
  );
const tomb = (name: string, revision: number): SignedStateRecord =>
  signRecord(
    body(NET, 'east', revision, {
      kind: 'provider',
      key: `${NET}/east/${name}`,
      tombstone: true,
      site_info: undefined,
    }),
    keys.east.privateKey,
  );

class MemoryRevisions implements RevisionStore {
  value = 0;
  async load(): Promise<number> {
    return this.value;
  }
  async save(revision: number): Promise<void> {
    this.value = revision;
  }
}

describe('tombstone garbage collection', () => {
  test('the default retention is far longer than every window a live copy can be in flight', () => {
    const limits = defaultStateLimits();
    // push-pull round (30 s), suspect→dead→forgotten (30 s + 300 s), revision look-ahead (10 min)
    expect(limits.tombstoneRetentionMs).toBeGreaterThanOrEqual(10 * (30_000 + 330_000 + limits.maxRevisionAheadMs));
  });

  test('keeps a tombstone for the retention, refusing the stale live copy, then collects it', () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    const s = store(clock);
    expect(s.apply(live('vllm-a', t0), 'east')).toBe('merged');
    expect(s.apply(tomb('vllm-a', t0 + 1), 'east')).toBe('merged');
    expect(s.remoteProviders()).toEqual([]);
    clock.advance(24 * HOUR - 1);
    s.sweep();
    expect(s.tombstoneCount()).toBe(1);
    // A replay of the old live copy within the bound loses to the tombstone.
    expect(s.apply(live('vllm-a', t0), 'west')).toBe('stale');
    clock.advance(1);
    s.sweep();
    expect(s.tombstoneCount()).toBe(0);
    expect(s.get(`${NET}/east/vllm-a`)).toBeUndefined();
  });

  test('a collected key is not resurrected by a stale copy, but a newer publish of it is accepted', () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    const s = store(clock, { tombstoneRetentionMs: HOUR });
    s.apply(live('vllm-a', t0), 'east');
    s.apply(live('vllm-b', t0 + 1), 'east');
    s.apply(tomb('vllm-a', t0 + 2), 'east');
    clock.advance(HOUR);
    s.sweep();
    expect(s.tombstoneCount()).toBe(0);
    // A member partitioned since before the delete pushes its old copy: refused, counted, the view unchanged.
    expect(s.apply(live('vllm-a', t0), 'partitioned-peer')).toBe('tombstone_collected');
    expect(s.drops.count('tombstone_collected')).toBe(1);
    expect(s.remoteProviders().map((p) => p.key)).toEqual([`${NET}/east/vllm-b`]);
    // The untouched live record of the same origin stays, and the origin's next revisions still merge.
    expect(s.apply(live('vllm-b', t0 + 3), 'east')).toBe('merged');
    expect(s.apply(live('vllm-a', clock.now()), 'east')).toBe('merged');
    expect(
      s
        .remoteProviders()
        .map((p) => p.key)
        .sort(),
    ).toEqual([`${NET}/east/vllm-a`, `${NET}/east/vllm-b`]);
  });

  test("retention runs on this member's clock from when it stored the tombstone, not from the origin's revision", () => {
    const clock = new FakeClock();
    const s = store(clock, { tombstoneRetentionMs: HOUR });
    // The origin's clock is 5 minutes behind: its revision looks old, the tombstone is new here.
    s.apply(tomb('vllm-a', clock.now() - 5 * 60_000), 'east');
    clock.advance(HOUR - 1);
    s.sweep();
    expect(s.tombstoneCount()).toBe(1);
  });

  test('memory stays bounded under endless add/delete churn, and the origin never fills up', () => {
    const clock = new FakeClock();
    const s = store(clock, { tombstoneRetentionMs: HOUR / 2, maxRecordsPerOrigin: 64 });
    let peak = 0;
    for (let i = 0; i < 800; i += 1) {
      const name = `p-${i}`;
      expect(s.apply(live(name, clock.now()), 'east')).toBe('merged');
      clock.advance(30_000);
      expect(s.apply(tomb(name, clock.now()), 'east')).toBe('merged');
      clock.advance(30_000);
      s.sweep();
      peak = Math.max(peak, s.tombstoneCount());
    }
    // One minute per key, 30 minutes of retention: at most ~30 tombstones at any time, against 800 deletes and a
    // per-origin cap of 64 records that the tombstones alone would otherwise have filled.
    expect(peak).toBeLessThanOrEqual(31);
    expect(s.drops.count('origin_records_full')).toBe(0);
  });

  test('this site re-asserts a collected deletion of its own provider when an old copy comes back', async () => {
    const clock = new FakeClock();
    const s = store(clock, { tombstoneRetentionMs: HOUR });
    const publisher = await LocalPublisher.open({
      store: s,
      writer: 'op-0',
      privateKey: keys.local.privateKey,
      revisions: new MemoryRevisions(),
      broadcast: () => true,
      clock,
    });
    const errors: unknown[] = [];
    const stop = publisher.reassertCollectedDeletions(
      () => false,
      (e) => errors.push(e),
    );
    const old = await publisher.publishProvider(provider('vllm-a'));
    clock.advance(1_000);
    const deleted = await publisher.withdrawProvider('vllm-a');
    const deletedAt = (JSON.parse(deleted.body) as { revision: number }).revision;
    clock.advance(HOUR);
    s.sweep();
    expect(s.get(`${NET}/local/vllm-a`)).toBeUndefined();
    // A member that joined after the collection could take the old copy from a partitioned peer: answer with a
    // fresh tombstone above every copy.
    expect(s.apply(old, 'partitioned-peer')).toBe('tombstone_collected');
    await publisher.publishSite({
      gateway_address: 'x:1',
      capabilities: { inference: true, agent_tools: false, agent_to_agent: false },
      tenant_spend_usd: {},
    });
    const now = s.get(`${NET}/local/vllm-a`);
    expect(now?.tombstone).toBe(true);
    expect(now!.revision).toBeGreaterThan(deletedAt);
    expect(errors).toEqual([]);
    stop();
  });

  test('the revision floor survives collection: a restarted publisher that lost its disk stays above it', async () => {
    const clock = new FakeClock();
    const s = store(clock, { tombstoneRetentionMs: HOUR });
    const first = await LocalPublisher.open({
      store: s,
      writer: 'op-0',
      privateKey: keys.local.privateKey,
      revisions: new MemoryRevisions(),
      broadcast: () => true,
      clock,
    });
    await first.publishProvider(provider('vllm-a'));
    const deleted = await first.withdrawProvider('vllm-a');
    const deletedAt = (JSON.parse(deleted.body) as { revision: number }).revision;
    clock.advance(HOUR);
    s.sweep();
    expect(s.records()).toEqual([]);
    const second = await LocalPublisher.open({
      store: s,
      writer: 'op-1',
      privateKey: keys.local.privateKey,
      revisions: new MemoryRevisions(),
      broadcast: () => true,
      clock: new FakeClock(clock.now() - 2 * HOUR),
    });
    const next = await second.publishProvider(provider('vllm-c'));
    expect((JSON.parse(next.body) as { revision: number }).revision).toBeGreaterThan(deletedAt);
  });
});
