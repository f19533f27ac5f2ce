// The local resource store on real temp directories: what the embedded grid's daemons rely on when two
// processes (here: two store instances) share one state directory.

import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CONFIG_MAP,
  openLocalStore,
  ResourceStoreError,
  SECRET,
  type LocalStore,
} from '../../daemons/shared/resource-store/index.ts';
import type { KubeObject, ResourceKind } from '../../daemons/shared/resource-store/types.ts';
import { makeTempDir, poll } from '../overlay-sync/helpers.ts';
import { resourceStoreContract } from './contract.ts';

const GRID_NETWORK: ResourceKind = {
  apiVersion: 'grid.praxis.fast/v1alpha1',
  kind: 'GridNetwork',
  plural: 'gridnetworks',
  namespaced: false,
};
const OP = { fieldManager: 'grid-operator' };

let contractDir: Awaited<ReturnType<typeof makeTempDir>> | undefined;
resourceStoreContract({
  name: 'local',
  namespace: 'grid-system',
  statusKind: GRID_NETWORK,
  open: async () => {
    contractDir ??= await makeTempDir('store-contract');
    return openLocalStore({ stateDir: join(contractDir.path, 'state') });
  },
  cleanup: async () => {
    await contractDir?.remove();
    contractDir = undefined;
  },
});

function cm(name: string, data: Record<string, string>, namespace = 'grid-system'): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
}

describe('local resource store', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  const stores: LocalStore[] = [];
  const open = async (extra: { manifestsDir?: string; onProblem?: (m: string) => void } = {}): Promise<LocalStore> => {
    const store = await openLocalStore({ stateDir: join(dir.path, 'state'), ...extra });
    stores.push(store);
    return store;
  };

  beforeEach(async () => {
    dir = await makeTempDir('local-store');
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await dir.remove();
  });

  it('patches status through the status subresource and reports a missing object by name', async () => {
    const store = await open();
    const net: KubeObject = {
      apiVersion: GRID_NETWORK.apiVersion,
      kind: 'GridNetwork',
      metadata: { name: 'glb-demo' },
      spec: { seeds: [] },
    };
    const applied = await store.apply(GRID_NETWORK, net, OP);
    const patched = await store.patchStatus(
      GRID_NETWORK,
      { name: 'glb-demo' },
      { phase: 'Active', connectedSites: 2 },
      OP,
    );
    expect(patched['status']).toEqual({ phase: 'Active', connectedSites: 2 });
    expect(BigInt(patched.metadata.resourceVersion!)).toBeGreaterThan(BigInt(applied.metadata.resourceVersion!));
    expect(patched.metadata.generation).toBe(applied.metadata.generation);
    // A later spec apply keeps the status.
    const reapplied: KubeObject = await store.apply(GRID_NETWORK, { ...net, spec: { seeds: ['10.0.0.1'] } }, OP);
    expect(reapplied['status']).toEqual({ phase: 'Active', connectedSites: 2 });
    const error = await store.patchStatus(GRID_NETWORK, { name: 'nope' }, { phase: 'x' }, OP).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceStoreError);
    expect(error).toMatchObject({ code: 'not_found', message: 'patch status: GridNetwork nope not found' });
    await expect(store.apply(CONFIG_MAP, cm('../escape', {}), OP)).rejects.toMatchObject({ code: 'invalid' });
  });

  it('gives every write of two concurrent writers a distinct resourceVersion and leaves no temp files', async () => {
    const a = await open();
    const b = await open();
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? a : b).apply(CONFIG_MAP, cm(`obj-${i}`, { i: String(i) }), OP),
      ),
    );
    const list = await a.list(CONFIG_MAP, {});
    const rvs = list.items.map((o) => o.metadata.resourceVersion);
    expect(new Set(rvs).size).toBe(40);
    expect(list.resourceVersion).toBe('40');
    const files = await readdir(join(dir.path, 'state', 'objects', 'core', 'ConfigMap', 'grid-system'));
    expect(files.filter((f) => f.startsWith('.'))).toEqual([]);
    expect(files).toHaveLength(40);
    expect((await readdir(join(dir.path, 'state'))).sort()).toEqual(['journal', 'objects', 'resource-version']);
  });

  it('imports a manifest directory, follows edits, prunes removed objects and names bad documents', async () => {
    const manifests = join(dir.path, 'dist');
    await mkdir(manifests, { recursive: true });
    await writeFile(
      join(manifests, 'grid.yaml'),
      [
        'apiVersion: grid.praxis.fast/v1alpha1\nkind: GridNetwork\nmetadata:\n  name: glb-demo\nspec:\n  seeds: []',
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gw-config\n  namespace: grid-system\ndata:\n  praxis.yaml: "a: 1"',
      ].join('\n---\n'),
    );
    await writeFile(join(manifests, 'broken.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n');
    const problems: string[] = [];
    const store = await open({ manifestsDir: manifests, onProblem: (m) => problems.push(m) });
    expect(await store.get(GRID_NETWORK, { name: 'glb-demo' })).toMatchObject({ spec: { seeds: [] } });
    expect(problems.some((p) => p.startsWith('broken.yaml document 0: invalid YAML'))).toBe(true);

    const events: string[] = [];
    const watch = store.watch(CONFIG_MAP, {
      namespace: 'grid-system',
      onEvent: (e) => events.push(`${e.type} ${e.object.metadata.name}`),
    });
    try {
      await poll(
        () => events.length,
        (n) => n === 1,
        'initial ADDED',
      );
      await writeFile(
        join(manifests, 'grid.yaml'),
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gw-config\n  namespace: grid-system\ndata:\n  praxis.yaml: "a: 2"\n',
      );
      await poll(
        () => events,
        (e) => e.includes('MODIFIED gw-config'),
        'manifest edit picked up',
      );
      // The broken file blocks pruning (a half-edited file must not delete anything)…
      expect(await store.get(GRID_NETWORK, { name: 'glb-demo' })).toBeDefined();
      // …and once it is fixed, the GridNetwork that no manifest declares any more is pruned.
      await rm(join(manifests, 'broken.yaml'));
      await poll(
        () => store.get(GRID_NETWORK, { name: 'glb-demo' }),
        (o) => o === undefined,
        'prune of the removed GridNetwork',
      );
      expect(await store.get(CONFIG_MAP, { namespace: 'grid-system', name: 'gw-config' })).toMatchObject({
        data: { 'praxis.yaml': 'a: 2' },
      });
    } finally {
      await watch.close();
    }
  });

  it('reports a hand-corrupted state file by path instead of crashing the watcher', async () => {
    const store = await open();
    await store.apply(CONFIG_MAP, cm('a', { v: '0' }), OP);
    const path = join(dir.path, 'state', 'objects', 'core', 'ConfigMap', 'grid-system', 'a.json');
    await writeFile(path, '{ not json');
    await expect(store.get(CONFIG_MAP, { namespace: 'grid-system', name: 'a' })).rejects.toThrow(
      `state file ${path} is not valid JSON`,
    );
    const restarts: string[] = [];
    const watch = store.watch(CONFIG_MAP, {
      namespace: 'grid-system',
      onEvent: () => undefined,
      onRestart: (r) => restarts.push(r),
    });
    try {
      await poll(
        () => restarts.length,
        (n) => n >= 1,
        'watch error report',
      );
      expect(restarts[0]).toBe('error');
      expect(JSON.parse(await readFile(join(dir.path, 'state', 'resource-version'), 'utf8'))).toBe(1);
    } finally {
      await watch.close();
    }
  });

  it('writes Secret objects owner-only (file 0600, directories 0700) and tightens ones an earlier version left wider', async () => {
    const store = await open();
    const secret: KubeObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'provider-token', namespace: 'grid-system' },
      type: 'Opaque',
      data: { token: Buffer.from('s3cret-token-bytes').toString('base64') },
    };
    await store.apply(SECRET, secret, OP);
    await store.apply(CONFIG_MAP, cm('plain', { v: '1' }), OP);
    const objects = join(dir.path, 'state', 'objects', 'core');
    const mode = async (path: string) => (await stat(path)).mode & 0o777;
    expect(await mode(join(objects, 'Secret', 'grid-system', 'provider-token.json'))).toBe(0o600);
    expect(await mode(join(objects, 'Secret', 'grid-system'))).toBe(0o700);
    expect(await mode(join(objects, 'Secret'))).toBe(0o700);
    // Other kinds keep the ordinary modes: nothing private in a ConfigMap.
    expect(await mode(join(objects, 'ConfigMap', 'grid-system', 'plain.json'))).toBe(0o644);
    // An update replaces the file; the replacement is 0600 too.
    await store.apply(
      SECRET,
      { ...secret, data: { token: Buffer.from('rotated-token-bytes').toString('base64') } },
      OP,
    );
    expect(await mode(join(objects, 'Secret', 'grid-system', 'provider-token.json'))).toBe(0o600);
    // A state directory from an earlier version (world-readable Secret files) is tightened when a store opens it.
    await chmod(join(objects, 'Secret', 'grid-system', 'provider-token.json'), 0o644);
    await chmod(join(objects, 'Secret', 'grid-system'), 0o755);
    await chmod(join(objects, 'Secret'), 0o755);
    await open();
    expect(await mode(join(objects, 'Secret', 'grid-system', 'provider-token.json'))).toBe(0o600);
    expect(await mode(join(objects, 'Secret', 'grid-system'))).toBe(0o700);
    expect(await mode(join(objects, 'Secret'))).toBe(0o700);
  });
});
