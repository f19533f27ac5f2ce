// The site name ledger on the local store: names are recorded once, kept across store restarts and concurrent
// writers, a recorded name with no GridSite is "deleted", and the SiteInvite controller mints no token for it
// unless spec.allowDeletedName is set. A malformed ledger is reported and never stops the controller.
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { OperatorContext } from '../../daemons/gossip-operator/context.ts';
import { SiteInviteController } from '../../daemons/gossip-operator/controllers/site-invite.ts';
import { ANNOTATION_SITE_ID, CONFIG_MAP, GRID_SITE, SECRET, SITE_INVITE } from '../../daemons/gossip-operator/kinds.ts';
import {
  checkDeletedSiteName,
  parseSiteNameLedger,
  readSiteNameLedger,
  recordSiteNames,
} from '../../daemons/gossip-operator/site-name-ledger.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { type LocalStore, openLocalStore } from '../../daemons/shared/resource-store/local-store.ts';
import type { KubeObject } from '../../daemons/shared/resource-store/types.ts';
import { inviteTokenSecretName, siteNameLedgerConfigMapName } from '../../schemas/object-names.ts';
import { tempDir } from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const NAMESPACE = 'grid-system';
const LEDGER = { name: siteNameLedgerConfigMapName('site-a'), namespace: NAMESPACE };
const NOW = Date.parse('2026-03-01T10:00:00Z');

function configMap(data: unknown): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: LEDGER.name, namespace: NAMESPACE, resourceVersion: '7' },
    data,
  };
}

function gridSite(name: string, annotations?: Record<string, string>): KubeObject {
  return {
    apiVersion: GRID_SITE.apiVersion,
    kind: 'GridSite',
    metadata: { name, ...(annotations !== undefined ? { annotations } : {}) },
    spec: { gridNetworkRef: 'production' },
  };
}

describe('site name ledger', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function store(dir: string): Promise<LocalStore> {
    const s = await openLocalStore({ stateDir: dir });
    cleanups.push(() => s.close());
    return s;
  }

  async function stateDir(): Promise<string> {
    const dirs = await tempDir('site-name-ledger');
    cleanups.push(() => dirs.remove());
    return dirs.path;
  }

  function controller(s: LocalStore): { controller: SiteInviteController; lines: string[] } {
    const lines: string[] = [];
    const logger = createLogger({
      name: 'ledger-test',
      destination: new Writable({
        write: (c: Buffer, _e, cb) => {
          lines.push(c.toString());
          cb();
        },
      }),
    });
    const ctx = {
      store: s,
      logger,
      config: { namespace: NAMESPACE, site: 'site-a' },
      now: () => NOW,
    } as unknown as OperatorContext;
    return { controller: new SiteInviteController(ctx), lines };
  }

  const invite = (s: LocalStore, name: string, spec: Record<string, unknown>) =>
    s.apply(
      SITE_INVITE,
      { apiVersion: SITE_INVITE.apiVersion, kind: 'SiteInvite', metadata: { name }, spec },
      { fieldManager: 'test' },
    );
  const ready = async (s: LocalStore, name: string): Promise<Json> => {
    const i: Json = await s.get(SITE_INVITE, { name });
    return i.status.conditions.find((c: Json) => c.type === 'Ready');
  };

  it('parses every malformed part into a problem naming the ConfigMap and key, never a throw', () => {
    const good = parseSiteNameLedger(
      configMap({
        east2: '2026-01-01T00:00:00Z',
        west1: 'yesterday',
        East_3: '2026-01-01T00:00:00Z',
        ['x'.repeat(70)]: '2026-01-01T00:00:00Z',
      }),
      LEDGER,
    );
    expect([...good.names]).toEqual([
      ['east2', '2026-01-01T00:00:00Z'],
      ['west1', undefined],
    ]);
    expect(good.problems).toEqual([
      `ConfigMap grid-system/grid-site-names-site-a key "west1": "yesterday" is not an RFC 3339 time; the name is still treated as recorded`,
      `ConfigMap grid-system/grid-site-names-site-a key "East_3": not a site name (a DNS label: 1-63 lowercase letters, digits or -); ignored`,
      `ConfigMap grid-system/grid-site-names-site-a key "${'x'.repeat(63)}": not a site name (a DNS label: 1-63 lowercase letters, digits or -); ignored`,
    ]);
    expect(good.resourceVersion).toBe('7');
    for (const data of ['a string', ['east2'], 42, null]) {
      const bad = parseSiteNameLedger(configMap(data), LEDGER);
      expect(bad.names.size).toBe(0);
      expect(bad.problems).toEqual([
        'ConfigMap grid-system/grid-site-names-site-a: data is not a map of site names to times; no name is read from it',
      ]);
    }
    const numeric = parseSiteNameLedger(configMap({ east2: 12 }), LEDGER);
    expect(numeric.names.has('east2')).toBe(true);
    expect(numeric.problems[0]).toContain('key "east2": the value is not a string');
    expect(parseSiteNameLedger(undefined, LEDGER)).toMatchObject({ problems: [], resourceVersion: undefined });
  });

  it('records a name once, keeps entries it cannot read, and loses none to a concurrent writer on the same state', async () => {
    const dir = await stateDir();
    const a = await store(dir);
    const b = await store(dir);
    expect(await recordSiteNames(a, LEDGER, ['east2'], NOW)).toEqual(['east2']);
    expect(await recordSiteNames(a, LEDGER, ['east2'], NOW + 60_000)).toEqual([]);
    await a.apply(
      CONFIG_MAP,
      {
        ...configMap({ ...((await a.get(CONFIG_MAP, LEDGER)) as Json).data, Bad_Key: 'kept' }),
        metadata: { name: LEDGER.name, namespace: NAMESPACE },
      },
      { fieldManager: 'admin' },
    );
    // Two replicas on one state directory, each recording its names in turn while the other does too.
    const names = Array.from({ length: 8 }, (_, i) => `site-${i}`);
    const chain = async (replica: LocalStore, own: readonly string[]) => {
      for (const name of own) await recordSiteNames(replica, LEDGER, [name], NOW);
    };
    await Promise.all([chain(a, names.slice(0, 4)), chain(b, names.slice(4))]);
    const ledger = await readSiteNameLedger(b, LEDGER);
    expect([...ledger.names.keys()].sort()).toEqual(['east2', ...names].sort());
    expect(ledger.names.get('east2')).toBe('2026-03-01T10:00:00Z');
    expect(ledger.raw['Bad_Key']).toBe('kept');

    // Both start from no ledger at all: the first write is as conditional as the others.
    const fresh = { name: siteNameLedgerConfigMapName('site-b'), namespace: NAMESPACE };
    await Promise.all([recordSiteNames(a, fresh, ['x1'], NOW), recordSiteNames(b, fresh, ['y1'], NOW)]);
    expect([...(await readSiteNameLedger(a, fresh)).names.keys()].sort()).toEqual(['x1', 'y1']);
    // Names that are also Object.prototype members are recorded like any other, and then count as deleted.
    expect(await recordSiteNames(a, LEDGER, ['constructor', 'tostring'], NOW)).toEqual(['constructor', 'tostring']);
    expect((await checkDeletedSiteName(a, LEDGER, 'constructor')).deleted).toBe(true);
  });

  it('calls a recorded name with no GridSite deleted, also after a restart, and a stub standing for it present', async () => {
    const dir = await stateDir();
    const first = await store(dir);
    await first.apply(GRID_SITE, gridSite('east2'), { fieldManager: 'test' });
    await recordSiteNames(first, LEDGER, ['east2'], NOW);
    expect((await checkDeletedSiteName(first, LEDGER, 'east2')).deleted).toBe(false);
    expect((await checkDeletedSiteName(first, LEDGER, 'never-seen')).deleted).toBe(false);
    await first.delete(GRID_SITE, { name: 'east2' });
    await first.close();

    const restarted = await store(dir);
    expect(await checkDeletedSiteName(restarted, LEDGER, 'east2')).toEqual({
      deleted: true,
      firstSeen: '2026-03-01T10:00:00Z',
      problems: [],
    });
    // An auto-discovered stub carries the site id in an annotation; its Kubernetes name differs.
    await restarted.apply(GRID_SITE, gridSite('production-east2', { [ANNOTATION_SITE_ID]: 'east2' }), {
      fieldManager: 'test',
    });
    expect((await checkDeletedSiteName(restarted, LEDGER, 'east2')).deleted).toBe(false);
  });

  it('mints no token for a deleted name, says which field to set, and issues one with allowDeletedName', async () => {
    const dir = await stateDir();
    const s = await store(dir);
    await recordSiteNames(s, LEDGER, ['east2'], NOW);
    const { controller: invites, lines } = controller(s);

    await invite(s, 'east2-again', { siteName: 'east2' });
    await invites.reconcile('east2-again');
    expect(await ready(s, 'east2-again')).toMatchObject({ status: 'False', reason: 'SiteNameDeleted' });
    const message: string = (await ready(s, 'east2-again')).message;
    expect(message).toContain('site east2 was deleted from the grid (first seen 2026-03-01T10:00:00Z)');
    expect(message).toContain('spec.allowDeletedName: true');
    expect(((await s.get(SITE_INVITE, { name: 'east2-again' })) as Json).status.tokenId).toBeUndefined();
    expect(await s.get(SECRET, { name: inviteTokenSecretName('east2-again'), namespace: NAMESPACE })).toBeUndefined();

    // A restarted controller on the same state still refuses.
    await s.close();
    const again = await store(dir);
    await controller(again).controller.reconcile('east2-again');
    expect(
      await again.get(SECRET, { name: inviteTokenSecretName('east2-again'), namespace: NAMESPACE }),
    ).toBeUndefined();
    expect(await ready(again, 'east2-again')).toMatchObject({ reason: 'SiteNameDeleted' });

    const reuse = controller(again);
    await invite(again, 'east2-reuse', { siteName: 'east2', allowDeletedName: true });
    await reuse.controller.reconcile('east2-reuse');
    const reused: Json = await again.get(SITE_INVITE, { name: 'east2-reuse' });
    expect(reused.status.tokenId).toMatch(/^[0-9a-f]{16}$/);
    expect(await again.get(SECRET, { name: inviteTokenSecretName('east2-reuse'), namespace: NAMESPACE })).toBeDefined();
    expect(reused.status.conditions.find((c: Json) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'TokenIssued',
    });
    expect(reused.status.conditions.find((c: Json) => c.type === 'SiteNameReused')).toMatchObject({
      status: 'True',
      reason: 'DeletedNameReused',
    });
    expect(reuse.lines.some((l) => l.includes('invite reuses the name of a deleted site'))).toBe(true);

    // The GridSite comes back: the refused invite is issued on its next reconcile (the GridSite watch queues it).
    await again.apply(GRID_SITE, gridSite('east2'), { fieldManager: 'test' });
    await controller(again).controller.reconcile('east2-again');
    expect(await ready(again, 'east2-again')).toMatchObject({ status: 'True', reason: 'TokenIssued' });
    expect(lines.every((l) => !l.includes('"level":50'))).toBe(true);
  });

  it('queues the invites of a site name when a GridSite of that name (or a stub standing for it) changes', async () => {
    const s = await store(await stateDir());
    const { controller: invites } = controller(s);
    await invite(s, 'a', { siteName: 'east2' });
    await invite(s, 'b', { siteName: 'west1' });
    await invites.reconcile('a');
    await invites.reconcile('b');
    const map = invites.watches[0]?.map;
    expect(map?.(gridSite('east2'))).toEqual(['a']);
    expect(map?.(gridSite('production-west1', { [ANNOTATION_SITE_ID]: 'west1' }))).toEqual(['b']);
    expect(map?.(gridSite('north'))).toEqual([]);
  });

  it('keeps reconciling when the ledger is malformed, and logs what is wrong once per problem', async () => {
    const s = await store(await stateDir());
    await s.apply(
      CONFIG_MAP,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: LEDGER.name, namespace: NAMESPACE },
        data: { east2: 'not-a-time', Upper_Case: 'x' },
      },
      { fieldManager: 'admin' },
    );
    const { controller: invites, lines } = controller(s);
    await invite(s, 'east2', { siteName: 'east2' });
    await invite(s, 'west1', { siteName: 'west1' });
    await expect(invites.reconcile('east2')).resolves.toEqual({});
    await invites.reconcile('west1');
    // The key still records east2 (fail closed); west1 was never recorded and gets its token.
    expect(await ready(s, 'east2')).toMatchObject({ status: 'False', reason: 'SiteNameDeleted' });
    expect(((await s.get(SITE_INVITE, { name: 'west1' })) as Json).status.tokenId).toBeDefined();
    const warnings = lines.filter((l) => l.includes('site name ledger entry is malformed'));
    expect(warnings.some((l) => l.includes('key \\"east2\\": \\"not-a-time\\" is not an RFC 3339 time'))).toBe(true);
    expect(warnings.some((l) => l.includes('key \\"Upper_Case\\": not a site name'))).toBe(true);
  });
});
