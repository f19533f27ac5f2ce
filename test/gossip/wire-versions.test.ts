// The wire is versioned and negotiated per peer (docs/contract.md §5: mixed versions interoperate). Members pinned to
// wire version 2 stand in for the previous release: their frames are the JSON of that release, byte for byte, and they
// refuse version 3. Upgraded members must speak 3 among themselves and 2 with the rest, signed state records must
// verify either way, and a frame from a version nobody speaks yet is refused cleanly.
import { createSocket } from 'node:dgram';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { GossipState, withOwnKey } from '../../daemons/gossip-operator/state/gossip-state.ts';
import { LocalPublisher } from '../../daemons/gossip-operator/state/publisher.ts';
import { FileRevisionStore } from '../../daemons/gossip-operator/state/revision-store.ts';
import { StateStore } from '../../daemons/gossip-operator/state/state-store.ts';
import { parseAddress } from '../../daemons/gossip-operator/swim/address.ts';
import { encodePacket } from '../../daemons/gossip-operator/swim/codec.ts';
import { openFrame, sealFrame } from '../../daemons/gossip-operator/swim/crypto.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { WIRE_BINARY, WIRE_JSON, type WireVersion } from '../../daemons/gossip-operator/swim/wire.ts';
import { allSeeAlive, sharedKey, startNode, testTiming, waitFor, type TestNode } from './helpers.ts';
import { provider, siteKeys, type SiteKeys } from './state-fixtures.ts';

interface Site extends TestNode {
  readonly state: GossipState;
  readonly store: StateStore;
  readonly publisher: LocalPublisher;
}

const keys = new Map<string, SiteKeys>();
const trust = (site: string) => keys.get(site)?.publicKey;
let dir: string;
const sites = new Set<Site>();
const others = new Set<TestNode>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agn-wire-versions-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all([...sites, ...others].map((s) => s.membership.shutdown()));
  for (const s of sites) s.state.detach();
  sites.clear();
  others.clear();
});

const timing = testTiming({ pushPullIntervalMs: 400 });

async function startSite(name: string, wireVersion: WireVersion, bindPort?: number): Promise<Site> {
  const k = keys.get(name) ?? siteKeys();
  keys.set(name, k);
  const store = new StateStore({
    network: 'production',
    localSite: name,
    resolveSigner: withOwnKey(name, k.publicKey, trust),
  });
  const state = new GossipState(store);
  const node = await startNode(name, timing, {
    delegate: state,
    wireVersion,
    ...(bindPort === undefined ? {} : { bindPort }),
  });
  state.attach(node.membership, undefined, 60_000);
  const publisher = await LocalPublisher.open({
    store,
    writer: `${name}-op`,
    privateKey: k.privateKey,
    revisions: new FileRevisionStore(join(dir, `${name}.rev`)),
    broadcast: state.broadcast,
  });
  const site = { ...node, state, store, publisher };
  sites.add(site);
  return site;
}

const recordKeys = (s: Site) =>
  s.store
    .records()
    .map((r) => `${r.key}@${r.revision}`)
    .sort()
    .join(' ');

test('old (wire 2) and new (wire 3) members gossip together: membership, signed records, failure detection', async () => {
  const names = ['old-1', 'new-1', 'old-2', 'new-2', 'new-3'];
  const all: Site[] = [];
  for (const name of names) all.push(await startSite(name, name.startsWith('old') ? WIRE_JSON : WIRE_BINARY));
  // Seeds of both kinds: an old member seeds the first half, a new one the rest.
  await Promise.all(all.slice(1).map((s, i) => s.membership.join([all[i < 2 ? 0 : 1]!.membership.address])));
  await waitFor('the mixed mesh to converge', 8_000, () => allSeeAlive(all, names));

  // Every site publishes a small record (a broadcast) and one too large for a packet (push-pull, compressed in 3).
  for (const s of all) {
    await s.publisher.publishProvider(provider(`${s.membership.name}-small`));
    await s.publisher.publishProvider(
      provider(`${s.membership.name}-big`, {
        models: Array.from({ length: 120 }, (_, i) => `family/model-${i}-instruct`),
      }),
    );
  }
  await waitFor(
    'every site to hold every signed record',
    10_000,
    () =>
      all.every((s) => s.store.records().length === 2 * names.length) ||
      all.map((s) => s.store.records().length).join(','),
  );
  const reference = recordKeys(all[0]!);
  for (const s of all) expect(recordKeys(s)).toBe(reference);
  for (const s of all)
    expect(
      s.store.get(
        `production/${s.membership.name === 'old-1' ? 'new-1' : 'old-1'}/${s.membership.name === 'old-1' ? 'new-1' : 'old-1'}-big`,
      )?.parsed.provider?.models,
    ).toHaveLength(120);

  for (const s of all) {
    const { wire, drops } = s.membership.stats();
    const old = s.membership.name.startsWith('old');
    // Old members only ever see version 2 (nothing refused); new ones speak 3 among themselves and 2 to old ones.
    expect(drops.unsupported_version, `${s.membership.name} refused a frame version`).toBe(0);
    expect(
      drops.bad_frame + drops.bad_packet + drops.bad_json + drops.decrypt_failed,
      `${s.membership.name} dropped frames`,
    ).toBe(0);
    expect(drops.delegate_error, `${s.membership.name} failed to merge state`).toBe(0);
    if (old) {
      expect(wire.received[WIRE_BINARY]).toBe(0);
      expect(wire.sent[WIRE_BINARY]).toBe(0);
    } else {
      expect(wire.received[WIRE_BINARY]).toBeGreaterThan(0);
      expect(wire.received[WIRE_JSON]).toBeGreaterThan(0);
    }
  }
  console.log(
    `[wire] mixed grid frames sent (v2/v3): ${all.map((s) => `${s.membership.name} ${s.membership.stats().wire.sent[WIRE_JSON]}/${s.membership.stats().wire.sent[WIRE_BINARY]}`).join(', ')}`,
  );

  // Failure detection across versions: a new member dies, then an old one; both are declared dead by all.
  for (const victim of ['new-2', 'old-2']) {
    const v = all.find((s) => s.membership.name === victim)!;
    await v.membership.shutdown();
    sites.delete(v);
    all.splice(all.indexOf(v), 1);
    await waitFor(
      `${victim} declared dead by all`,
      8_000,
      () =>
        all.every((s) => s.membership.member(victim)?.state === 'dead') ||
        all.map((s) => `${s.membership.name}:${s.membership.member(victim)?.state}`).join(','),
    );
  }
});

test('a rolling upgrade and a roll back: peers follow what each member declares', async () => {
  const a = await startSite('a', WIRE_BINARY);
  const b = await startSite('b', WIRE_JSON);
  await b.membership.join([a.membership.address]);
  await waitFor('a and b', 5_000, () => allSeeAlive([a, b], ['a', 'b']));
  const bPort = parseAddress(b.membership.address)!.port;

  // Upgrade b in place (same name and port): a speaks 3 to it from b's first packet on.
  await b.membership.shutdown();
  sites.delete(b);
  const b2 = await startSite('b', WIRE_BINARY, bPort);
  await b2.membership.join([a.membership.address]);
  await waitFor(
    'b upgraded to receive version 3 from a',
    5_000,
    () => b2.membership.stats().wire.received[WIRE_BINARY] > 0 || 'not yet',
  );
  await waitFor('a and upgraded b', 5_000, () => allSeeAlive([a, b2], ['a', 'b']));

  // Roll b back: a must go back to 2 for it; b stays alive over many probe periods.
  await b2.membership.shutdown();
  sites.delete(b2);
  const b3 = await startSite('b', WIRE_JSON, bPort);
  await b3.membership.join([a.membership.address]);
  await waitFor('a and rolled-back b', 5_000, () => allSeeAlive([a, b3], ['a', 'b']));
  const refusedBefore = b3.membership.stats().drops.unsupported_version;
  await new Promise((r) => setTimeout(r, 15 * timing.probeIntervalMs));
  expect(a.membership.member('b')?.state).toBe('alive');
  expect(b3.membership.member('a')?.state).toBe('alive');
  // At most the frames a sent before b's first packet reached it are refused; none after.
  expect(b3.membership.stats().drops.unsupported_version).toBe(refusedBefore);
  expect(b3.membership.stats().wire.received[WIRE_JSON]).toBeGreaterThan(0);
});

test("a member pinned to wire 2 writes the previous release's JSON frames exactly", async () => {
  const ring = new KeyRing([sharedKey]);
  const old = await startNode('old', timing, { wireVersion: WIRE_JSON });
  others.add(old);
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const addr = `127.0.0.1:${(sock.address() as { port: number }).port}`;
  const frames: Buffer[] = [];
  sock.on('message', (f) => frames.push(f));
  try {
    // Announce "x" (a member of the previous release: no `w` in its header) so old probes it.
    const alive = encodePacket({ from: 'x', addr, ts: Date.now() }, [
      JSON.stringify({ k: 'alive', name: 'x', addr, inc: 1 }),
    ]);
    sock.send(sealFrame(ring, alive, 'old'), parseAddress(old.membership.address)!.port, '127.0.0.1');
    await waitFor('a frame from old', 3_000, () => frames.length > 0 || 'none yet');
    const f = frames[0]!;
    expect(f[4]).toBe(WIRE_JSON);
    const opened = openFrame(ring, f, ['x']);
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    const text = opened.payload.toString('utf8');
    // The previous release's header, field for field, and no `w`.
    expect(text).toMatch(/^\{"v":1,"from":"old","addr":"127\.0\.0\.1:\d+","ts":\d+,"msgs":\[/);
  } finally {
    sock.close();
  }
});

test('a frame of an unknown future version is refused cleanly: counted, logged once, the member carries on', async () => {
  const warnings: object[] = [];
  const n = await startNode('n', timing, { logger: { warn: (o) => warnings.push(o) } });
  const peer = await startNode('peer', timing);
  others.add(n);
  others.add(peer);
  const ring = new KeyRing([sharedKey]);
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  try {
    const port = parseAddress(n.membership.address)!.port;
    const packet = encodePacket(
      { from: 'future', addr: '127.0.0.1:9', ts: Date.now() },
      [JSON.stringify({ k: 'alive', name: 'future', addr: '127.0.0.1:9', inc: 1 })],
      9,
    );
    for (let i = 0; i < 5; i++) sock.send(sealFrame(ring, packet, 'n', undefined, 9), port, '127.0.0.1');
    await waitFor(
      'the refusals to be counted',
      3_000,
      () =>
        n.membership.stats().drops.unsupported_version === 5 ||
        `${n.membership.stats().drops.unsupported_version} counted`,
    );
    expect(n.membership.member('future')).toBeUndefined();
    expect(warnings.filter((w) => (w as { reason?: string }).reason === 'unsupported_version')).toHaveLength(1);
    expect(JSON.stringify(warnings)).toContain('wire version 9');
    // Still a working member: a real one joins and both see each other.
    await peer.membership.join([n.membership.address]);
    await waitFor('n and peer', 5_000, () => allSeeAlive([n, peer], ['n', 'peer']));
  } finally {
    sock.close();
  }
});
