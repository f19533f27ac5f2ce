import { sign } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { LocalPublisher } from '../../daemons/gossip-operator/state/publisher.ts';
import { signRecord, type SignedStateRecord } from '../../daemons/gossip-operator/state/records.ts';
import { FileRevisionStore, nextRevision } from '../../daemons/gossip-operator/state/revision-store.ts';
import { StateStore } from '../../daemons/gossip-operator/state/state-store.ts';
import { FakeClock } from './fake-clock.ts';
import { body, provider, siteInfo, siteKeys } from './state-fixtures.ts';

const NET = 'production';
const keys = { east: siteKeys(), west: siteKeys(), rogue: siteKeys(), local: siteKeys(), north: siteKeys() };
const resolver = (site: string) => (site in keys ? keys[site as keyof typeof keys].publicKey : undefined);

function store(clock = new FakeClock(), limits = {}): StateStore {
  return new StateStore({
    network: NET,
    localSite: 'local',
    resolveSigner: (s) => (s === 'rogue' ? undefined : resolver(s)),
    clock,
    limits,
  });
}

const now = new FakeClock().now();

describe('StateStore gate', () => {
  test('a record signed by its origin is merged and exposed', () => {
    const s = store();
    expect(s.apply(signRecord(body(NET, 'east', now), keys.east.privateKey), 'east')).toBe('merged');
    const p = signRecord(
      body(NET, 'east', now + 1, {
        kind: 'provider',
        key: `${NET}/east/vllm-a`,
        provider: provider('vllm-a'),
        site_info: undefined,
      }),
      keys.east.privateKey,
    );
    expect(s.apply(p, 'west')).toBe('merged');
    expect(s.remoteProviders()).toEqual([
      expect.objectContaining({ key: `${NET}/east/vllm-a`, site: 'east', revision: now + 1 }),
    ]);
    expect(s.sites().get('east')?.gateway_address).toBe('egress.site.example:8443');
  });

  const forged = (): SignedStateRecord => {
    // west signs a record claiming to be east's: a key holder speaking for another site
    const b = body(NET, 'east', now + 5);
    const text = JSON.stringify(b);
    return { signer: 'east', body: text, sig: sign(null, Buffer.from(text), keys.west.privateKey).toString('base64') };
  };

  test.each<[string, string, () => unknown]>([
    ['garbage', 'bad_record', () => ({ hello: 1 })],
    ['null', 'bad_record', () => null],
    ['body not JSON', 'bad_record', () => ({ signer: 'east', body: '{nope', sig: `${'A'.repeat(86)}==` })],
    ['another network', 'wrong_network', () => signRecord(body('staging', 'east', now), keys.east.privateKey)],
    ['forged origin (signature by another site)', 'bad_signature', forged],
    [
      'signer is not the claimed origin',
      'origin_mismatch',
      () => ({ ...signRecord(body(NET, 'east', now), keys.west.privateKey), signer: 'west' }),
    ],
    [
      'key names another site',
      'origin_mismatch',
      () => signRecord(body(NET, 'east', now, { key: `${NET}/west` }), keys.east.privateKey),
    ],
    [
      'provider key names another provider',
      'origin_mismatch',
      () =>
        signRecord(
          body(NET, 'east', now, { kind: 'provider', key: `${NET}/east/x`, provider: provider('y') }),
          keys.east.privateKey,
        ),
    ],
    ['unknown signer', 'unknown_signer', () => signRecord(body(NET, 'rogue', now), keys.rogue.privateKey)],
    [
      'revision far in the future',
      'revision_jump',
      () => signRecord(body(NET, 'east', now + 3_600_000), keys.east.privateKey),
    ],
    [
      'future major version',
      'unsupported_major',
      () => signRecord(body(NET, 'east', now, { schema_version: '2.0' }), keys.east.privateKey),
    ],
    [
      'missing required field',
      'bad_record',
      () => signRecord({ ...body(NET, 'east', now), writer: undefined } as never, keys.east.privateKey),
    ],
    [
      'metrics out of range',
      'bad_record',
      () =>
        signRecord(
          body(NET, 'east', now, {
            kind: 'provider',
            key: `${NET}/east/p`,
            provider: provider('p', { metrics: { healthy: true, error_rate: 7 } }),
          }),
          keys.east.privateKey,
        ),
    ],
    [
      'oversized body',
      'oversized_record',
      () =>
        signRecord(
          body(NET, 'east', now, {
            site_info: siteInfo({ gateway_address: 'x'.repeat(300), public_cert_pem: 'C'.repeat(16_000) }),
          }),
          keys.east.privateKey,
        ),
    ],
  ])('%s is dropped as %s and changes nothing', (_name, reason, make) => {
    const s = store(new FakeClock(), { maxRecordBodyBytes: 8_192 });
    expect(s.apply(make(), 'peer')).toBe(reason);
    expect(s.records()).toEqual([]);
    expect(s.drops.count(reason as never)).toBe(1);
  });

  test('a PEM containing a private key is discarded (and cannot be published)', () => {
    const s = store();
    const pem = '-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n';
    const b = body(NET, 'east', now, { site_info: siteInfo({ public_cert_pem: pem }) });
    expect(() => signRecord(b, keys.east.privateKey)).toThrow('contains a PRIVATE KEY block');
    const text = JSON.stringify(b);
    const raw = {
      signer: 'east',
      body: text,
      sig: sign(null, Buffer.from(text), keys.east.privateKey).toString('base64'),
    };
    expect(s.apply(raw, 'east')).toBe('private_key_pem');
    expect(s.records()).toEqual([]);
  });

  test('last writer wins on (revision, writer); replays and older records are stale', () => {
    const s = store();
    const r1 = signRecord(body(NET, 'east', now, { writer: 'op-a' }), keys.east.privateKey);
    const r1b = signRecord(body(NET, 'east', now, { writer: 'op-b' }), keys.east.privateKey);
    const r0 = signRecord(body(NET, 'east', now - 10), keys.east.privateKey);
    expect(s.apply(r1, 'x')).toBe('merged');
    expect(s.apply(r1, 'x')).toBe('stale');
    expect(s.apply(r0, 'x')).toBe('stale');
    expect(s.apply(r1b, 'x')).toBe('merged');
    expect(s.get(`${NET}/east`)?.writer).toBe('op-b');
  });

  test('a record kind from a newer minor version is kept and forwarded, not interpreted', () => {
    const s = store();
    const b = {
      ...body(NET, 'east', now, { kind: 'a2a-agent', key: `${NET}/east/agent-1`, site_info: undefined }),
      agent: { card: 'x' },
    };
    const signed = signRecord(b, keys.east.privateKey);
    expect(s.apply(signed, 'x')).toBe('merged');
    expect(s.signedRecords()).toEqual([signed]);
    expect(s.remoteProviders()).toEqual([]);
  });

  test('bounds: records per origin and origins retained', () => {
    const s = store(new FakeClock(), { maxRecordsPerOrigin: 2, maxOrigins: 1 });
    const prov = (n: string, r: number) =>
      signRecord(
        body(NET, 'east', r, {
          kind: 'provider',
          key: `${NET}/east/${n}`,
          provider: provider(n),
          site_info: undefined,
        }),
        keys.east.privateKey,
      );
    expect(s.apply(prov('a', now), 'x')).toBe('merged');
    expect(s.apply(prov('b', now), 'x')).toBe('merged');
    expect(s.apply(prov('c', now), 'x')).toBe('origin_records_full');
    expect(s.apply(prov('a', now + 1), 'x')).toBe('merged'); // updating an existing key is fine
    expect(s.apply(signRecord(body(NET, 'west', now), keys.west.privateKey), 'x')).toBe('origins_full');
    s.markDeparted('east', now);
    expect(s.apply(signRecord(body(NET, 'west', now), keys.west.privateKey), 'x')).toBe('merged'); // departed origin evicted
    expect(s.origins()).toEqual(['west']);
  });

  test("tenant spend: a G-Counter slot per site; a departed site's spend never expires, not even when its origin is evicted", () => {
    const clock = new FakeClock();
    const s = store(clock, { maxOrigins: 2 });
    const spend = (site: 'east' | 'west', rev: number, usd: number) =>
      signRecord(
        body(NET, site, rev, { site_info: siteInfo({ tenant_spend_usd: { 'tenant-a': usd } }) }),
        keys[site].privateKey,
      );
    s.apply(spend('east', now, 10), 'x');
    s.apply(spend('west', now, 5), 'x');
    s.apply(spend('east', now + 1, 12), 'x');
    expect(s.tenantSpendTotals()).toEqual({ 'tenant-a': 17 });
    s.markDeparted('west', clock.now());
    clock.advance(365 * 86_400_000);
    s.sweep();
    expect(s.tenantSpendTotals()).toEqual({ 'tenant-a': 17 });
    // A third origin evicts the departed one: its records go, its spend stays in the total.
    expect(s.apply(signRecord(body(NET, 'north', now), keys.north.privateKey), 'x')).toBe('merged');
    expect(s.origins()).not.toContain('west');
    expect(s.tenantSpendTotals()).toEqual({ 'tenant-a': 17 });
    s.markPresent('west');
    expect(s.tenantSpendTotals()).toEqual({ 'tenant-a': 17 });
  });
});

describe('revisions across restarts', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agn-rev-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test.each([
    { hw: 0, now: 1_000, want: 1_000 },
    { hw: 5_000, now: 1_000, want: 5_001 },
    { hw: 999, now: 1_000, want: 1_000 },
  ])('nextRevision(hw=$hw, now=$now) = $want', ({ hw, now: n, want }) => {
    expect(nextRevision(hw, n)).toBe(want);
  });

  test('FileRevisionStore round-trips and refuses a corrupt file with its path', async () => {
    const f = new FileRevisionStore(join(dir, 'rev'));
    expect(await f.load()).toBe(0);
    await f.save(42);
    expect(await new FileRevisionStore(join(dir, 'rev')).load()).toBe(42);
    await writeFile(join(dir, 'rev'), 'forty-two');
    await expect(f.load()).rejects.toThrow(
      `${join(dir, 'rev')}: revision high-water mark must be a non-negative integer`,
    );
  });

  test('a restarted publisher stays above its previous revisions even when the clock went back', async () => {
    const clock = new FakeClock(2_000_000);
    const path = join(dir, 'rev');
    const open = async () => {
      const s = new StateStore({ network: NET, localSite: 'local', resolveSigner: resolver, clock });
      const p = await LocalPublisher.open({
        store: s,
        writer: 'op-0',
        privateKey: keys.local.privateKey,
        revisions: new FileRevisionStore(path),
        broadcast: () => true,
        clock,
      });
      return { s, p };
    };
    const first = await open();
    const revs: number[] = [];
    for (let i = 0; i < 3; i++) revs.push(JSON.parse((await first.p.publishProvider(provider('p'))).body).revision);
    expect(revs).toEqual([2_000_000, 2_000_001, 2_000_002]);
    const clockBack = new FakeClock(1_900_000); // 100 s back, within maxRevisionAheadMs
    Object.assign(clock, { now: () => clockBack.now() });
    const second = await open();
    const after = JSON.parse((await second.p.publishSite(siteInfo())).body).revision;
    expect(after).toBe(2_000_003);
    expect(Number((await readFile(path, 'utf8')).trim())).toBe(2_000_003);
    // Concurrent publishes never share a revision.
    const many = await Promise.all([0, 1, 2, 3].map((i) => second.p.publishProvider(provider(`q${i}`))));
    expect(new Set(many.map((m) => JSON.parse(m.body).revision)).size).toBe(4);
  });
});

test('fields unknown to this version are accepted and forwarded byte for byte', () => {
  const s = store();
  const b = { ...body(NET, 'east', now), site_info: { ...siteInfo(), region_hint: 'eu-west' }, future_field: { x: 1 } };
  const signed = signRecord(b as never, keys.east.privateKey);
  expect(s.apply(signed, 'x')).toBe('merged');
  expect(s.signedRecords()[0]!.body).toBe(signed.body);
  expect(s.sites().get('east')?.gateway_address).toBe('egress.site.example:8443');
});
