// CRDT site state carried by SWIM between real sockets: convergence, push-pull for records too large for a
// packet, partitions, origin authentication and network scoping end to end.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { GossipState, withOwnKey } from '../../daemons/gossip-operator/state/gossip-state.ts';
import { LocalPublisher } from '../../daemons/gossip-operator/state/publisher.ts';
import { signRecord } from '../../daemons/gossip-operator/state/records.ts';
import { FileRevisionStore } from '../../daemons/gossip-operator/state/revision-store.ts';
import { StateStore, type StateLimits } from '../../daemons/gossip-operator/state/state-store.ts';
import { allSeeAlive, startNode, testTiming, waitFor, type TestNode } from './helpers.ts';
import { body, provider, siteInfo, siteKeys, type SiteKeys } from './state-fixtures.ts';

interface Site extends TestNode {
  readonly state: GossipState;
  readonly store: StateStore;
  readonly publisher: LocalPublisher;
}

const keys = new Map<string, SiteKeys>();
const trust = (site: string) => keys.get(site)?.publicKey; // stands in for the GridSite trust pin
let dir: string;
const sites = new Set<Site>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agn-gossip-state-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all([...sites].map((s) => s.membership.shutdown()));
  for (const s of sites) s.state.detach();
  sites.clear();
});

async function startSite(
  name: string,
  network = 'production',
  timing = testTiming(),
  limits: Partial<StateLimits> = {},
  sweepIntervalMs = 60_000,
): Promise<Site> {
  const k = keys.get(name) ?? siteKeys();
  keys.set(name, k);
  const store = new StateStore({
    network,
    localSite: name,
    resolveSigner: withOwnKey(name, k.publicKey, trust),
    limits,
  });
  const state = new GossipState(store);
  const node = await startNode(name, timing, { delegate: state });
  state.attach(node.membership, undefined, sweepIntervalMs);
  const publisher = await LocalPublisher.open({
    store,
    writer: `${name}-op`,
    privateKey: k.privateKey,
    revisions: new FileRevisionStore(join(dir, `${name}-${network}.rev`)),
    broadcast: state.broadcast,
  });
  const site = { ...node, state, store, publisher };
  sites.add(site);
  return site;
}

const keysOf = (s: Site) =>
  s.store
    .records()
    .map((r) => `${r.key}@${r.revision}`)
    .join(' ');

describe('gossiped site state', () => {
  test("three sites converge on each other's site and provider records and tenant spend", async () => {
    const all = [await startSite('east'), await startSite('west'), await startSite('north')];
    await Promise.all(all.slice(1).map((s) => s.membership.join([all[0]!.membership.address])));
    await waitFor('membership', 5_000, () => allSeeAlive(all, ['east', 'west', 'north']));
    for (const [i, s] of all.entries()) {
      await s.publisher.publishSite(
        siteInfo({
          gateway_address: `${s.membership.name}.example:8443`,
          tenant_spend_usd: { 'tenant-a': 10 * (i + 1) },
        }),
      );
      await s.publisher.publishProvider(provider(`${s.membership.name}-vllm`));
    }
    await waitFor(
      'every site to hold 6 records',
      5_000,
      () => all.every((s) => s.store.records().length === 6) || all.map(keysOf).join(' | '),
    );
    const reference = keysOf(all[0]!);
    for (const s of all) {
      expect(keysOf(s)).toBe(reference);
      expect(
        s.store
          .remoteProviders()
          .map((p) => p.site)
          .sort(),
      ).toEqual(['east', 'north', 'west'].filter((x) => x !== s.membership.name));
      expect(s.store.tenantSpendTotals()).toEqual({ 'tenant-a': 60 });
    }
    // A withdrawal is a tombstone that wins everywhere.
    await all[0]!.publisher.withdrawProvider('east-vllm');
    await waitFor('tombstone to spread', 5_000, () =>
      all.every((s) => s.store.get('production/east/east-vllm')?.tombstone === true),
    );
  });

  test('a record too large for one packet reaches peers through an immediate push-pull', async () => {
    // Periodic push-pull is pushed out of reach, so only the publish-triggered exchange can deliver it in time.
    const timing = testTiming({ pushPullIntervalMs: 60_000 });
    const a = await startSite('east', 'production', timing);
    const b = await startSite('west', 'production', timing);
    await b.membership.join([a.membership.address]);
    await waitFor('membership', 5_000, () => allSeeAlive([a, b], ['east', 'west']));
    const big = provider('big', { models: Array.from({ length: 200 }, (_, i) => `model-family/model-${i}-instruct`) });
    const signed = await a.publisher.publishProvider(big);
    expect(Buffer.byteLength(JSON.stringify(signed))).toBeGreaterThan(testTiming().maxPacketBytes);
    expect(a.membership.stats().drops.broadcast_too_large).toBe(1);
    await waitFor(
      'push-pull to carry the large record',
      3_000,
      () => b.store.get('production/east/big')?.parsed.provider?.models.length === 200,
    );
  });

  test('a partition heals and the states converge', async () => {
    const timing = testTiming({ announceIntervalMs: 300, pushPullIntervalMs: 400 });
    const all = [
      await startSite('east', 'production', timing),
      await startSite('west', 'production', timing),
      await startSite('north', 'production', timing),
      await startSite('south', 'production', timing),
    ];
    const seeds = [all[0]!.membership.address, all[2]!.membership.address];
    await Promise.all(all.map((s) => s.membership.join(seeds)));
    await waitFor('membership', 5_000, () => allSeeAlive(all, ['east', 'west', 'north', 'south']));
    const [l, r] = [all.slice(0, 2), all.slice(2)];
    for (const x of l)
      for (const y of r) {
        x.transport.blocked.add(y.membership.address);
        y.transport.blocked.add(x.membership.address);
      }
    // Each half publishes while cut off from the other.
    for (const s of all) await s.publisher.publishProvider(provider(`${s.membership.name}-p`));
    await waitFor('each half to converge internally', 5_000, () => all.every((s) => s.store.records().length === 2));
    for (const s of all) expect(s.store.records()).toHaveLength(2);
    for (const s of all) s.transport.blocked.clear();
    await waitFor('states to converge after healing', 10_000, () => {
      const views = all.map(keysOf);
      return (views.every((v) => v === views[0]) && all[0]!.store.records().length === 4) || views.join(' | ');
    });
  });

  test("a key holder cannot speak for another site, and another network's records never leak in", async () => {
    const east = await startSite('east');
    const west = await startSite('west');
    const mallory = await startSite('mallory'); // holds the SWIM key and a trusted key of its own
    const stagingSite = await startSite('stage-1', 'staging');
    for (const s of [west, mallory, stagingSite]) await s.membership.join([east.membership.address]);
    await waitFor('membership', 5_000, () =>
      allSeeAlive([east, west, mallory, stagingSite], ['east', 'west', 'mallory', 'stage-1']),
    );

    // Forged: claims to be east, signed with mallory's key (signer says east). Revisions are ahead of east's
    // own so they are not merely stale: they must be stopped by the signature and origin checks.
    const forgedBody = JSON.stringify(
      body('production', 'east', Date.now() + 60_000, { site_info: siteInfo({ gateway_address: 'evil.example:443' }) }),
    );
    const { sign } = await import('node:crypto');
    const forged = {
      signer: 'east',
      body: forgedBody,
      sig: sign(null, Buffer.from(forgedBody), keys.get('mallory')!.privateKey).toString('base64'),
    };
    // Honest signature, dishonest claim: mallory signs as itself a record about east.
    const mislabelled = signRecord(body('production', 'east', Date.now() + 60_000), keys.get('mallory')!.privateKey);
    const mislabelledAsMallory = { ...mislabelled, signer: 'mallory' };
    // Forgeries are not merged, so nobody re-gossips them: mallory keeps re-sending until every peer has seen them.
    const sendForgeries = () => {
      mallory.membership.broadcast('forged-1', { v: 1, rec: forged });
      mallory.membership.broadcast('forged-2', { v: 1, rec: mislabelledAsMallory });
    };
    sendForgeries();
    await stagingSite.publisher.publishSite(siteInfo({ gateway_address: 'staging.example:1' }));
    await east.publisher.publishSite(siteInfo());

    await waitFor(
      "west to see east's genuine record",
      5_000,
      () => west.store.get('production/east')?.parsed.site_info?.gateway_address === 'egress.site.example:8443',
    );
    await waitFor('drops to be counted', 5_000, () => {
      sendForgeries();
      return (
        [east, west].every(
          (s) =>
            s.store.drops.count('bad_signature') >= 1 &&
            s.store.drops.count('origin_mismatch') >= 1 &&
            s.store.drops.count('wrong_network') >= 1,
        ) || JSON.stringify([east, west].map((s) => s.store.drops.snapshot()))
      );
    });
    for (const s of [east, west, mallory]) {
      expect(s.store.origins()).not.toContain('stage-1');
      expect(s.store.sites().get('east')?.gateway_address ?? 'egress.site.example:8443').toBe(
        'egress.site.example:8443',
      );
    }
    expect(stagingSite.store.origins()).toEqual(['stage-1']);
  });

  test('the tenant spend of a departed site never expires; its records stay', async () => {
    const east = await startSite('east', 'production', testTiming(), {}, 100);
    const west = await startSite('west', 'production', testTiming(), {}, 100);
    await west.membership.join([east.membership.address]);
    await waitFor('membership', 5_000, () => allSeeAlive([east, west], ['east', 'west']));
    await east.publisher.publishSite(siteInfo({ tenant_spend_usd: { 'tenant-a': 5 } }));
    await west.publisher.publishSite(siteInfo({ tenant_spend_usd: { 'tenant-a': 7 } }));
    await waitFor(
      'spend to converge',
      5_000,
      () => east.store.tenantSpendTotals()['tenant-a'] === 12 || JSON.stringify(east.store.tenantSpendTotals()),
    );
    await west.membership.leave();
    await west.membership.shutdown();
    sites.delete(west);
    west.state.detach();
    await waitFor('west to leave', 5_000, () => east.membership.member('west')?.state === 'left');
    // Sweeps run every 100 ms here: after many of them the departed site's spend is still counted.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(east.store.tenantSpendTotals()['tenant-a']).toBe(12);
    expect(east.store.get('production/west')).toBeDefined();
  });
});
