// The ResourceStore contract as a reusable suite: the local store runs it here, and the real API-server
// suite (test/cluster/) can run it against KubernetesStore unchanged:
//
//   resourceStoreContract({ name: 'kubernetes', namespace, statusKind: GRID_NETWORK_KIND,
//     open: async () => new KubernetesStore({ kubeconfigPath }) });
//
// `open` is called twice per test, for a writer and a separate watcher, as two daemons would be.

import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { CONFIG_MAP, ResourceStoreError } from '../../daemons/shared/resource-store/index.ts';
import type { KubeObject, ResourceKind, ResourceStore, WatchEvent } from '../../daemons/shared/resource-store/types.ts';

export interface ContractOptions {
  readonly name: string;
  /** An existing namespace the suite may create ConfigMaps in. */
  readonly namespace: string;
  /** A cluster-scoped kind with a status subresource (the GridNetwork CRD on a real server). */
  readonly statusKind: ResourceKind;
  readonly open: () => Promise<ResourceStore>;
  /** Extra cleanup after each test (e.g. removing a temp directory). */
  readonly cleanup?: () => Promise<void>;
}

async function poll<T>(
  read: () => T | Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function resourceStoreContract(options: ContractOptions): void {
  describe(`ResourceStore contract (${options.name})`, () => {
    const stores: ResourceStore[] = [];
    const created: { kind: ResourceKind; name: string; namespace?: string }[] = [];
    const suffix = (): string => randomBytes(3).toString('hex');
    const open = async (): Promise<ResourceStore> => {
      const store = await options.open();
      stores.push(store);
      return store;
    };
    const cm = (name: string, data: Record<string, string>): KubeObject => {
      created.push({ kind: CONFIG_MAP, name, namespace: options.namespace });
      return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: options.namespace }, data };
    };
    const OP = { fieldManager: 'contract-test', force: true };

    afterEach(async () => {
      const store = stores[0];
      if (store !== undefined) {
        for (const object of created.splice(0)) await store.delete(object.kind, object).catch(() => false);
      }
      await Promise.all(stores.splice(0).map((s) => s.close()));
      await options.cleanup?.();
    });

    it('apply creates and updates with increasing resourceVersions; an identical apply changes nothing', async () => {
      const store = await open();
      const name = `contract-a-${suffix()}`;
      const v1 = await store.apply(CONFIG_MAP, cm(name, { k: '1' }), OP);
      const v2 = await store.apply(CONFIG_MAP, cm(name, { k: '2' }), OP);
      expect(BigInt(v2.metadata.resourceVersion!)).toBeGreaterThan(BigInt(v1.metadata.resourceVersion!));
      expect(v2.metadata.uid).toBe(v1.metadata.uid);
      const v3 = await store.apply(CONFIG_MAP, cm(name, { k: '2' }), OP);
      expect(v3.metadata.resourceVersion).toBe(v2.metadata.resourceVersion);
      expect(await store.get(CONFIG_MAP, { namespace: options.namespace, name })).toMatchObject({ data: { k: '2' } });
      expect(await store.get(CONFIG_MAP, { namespace: options.namespace, name: `${name}-missing` })).toBeUndefined();
      const one = await store.list(CONFIG_MAP, { namespace: options.namespace, name });
      expect(one.items.map((o) => o.metadata.name)).toEqual([name]);
      expect(BigInt(one.resourceVersion)).toBeGreaterThanOrEqual(BigInt(v2.metadata.resourceVersion!));
    });

    it('patches status through the status subresource without touching generation', async () => {
      const store = await open();
      const name = `contract-s-${suffix()}`;
      created.push({ kind: options.statusKind, name });
      const object: KubeObject = {
        apiVersion: options.statusKind.apiVersion,
        kind: options.statusKind.kind,
        metadata: { name },
        spec: {},
      };
      const applied = await store.apply(options.statusKind, object, OP);
      const patched = await store.patchStatus(options.statusKind, { name }, { phase: 'Active' }, OP);
      expect(patched['status']).toMatchObject({ phase: 'Active' });
      expect(patched.metadata.generation).toBe(applied.metadata.generation);
      const error = await store
        .patchStatus(options.statusKind, { name: `${name}-missing` }, { phase: 'x' }, OP)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ResourceStoreError);
      expect((error as ResourceStoreError).code).toBe('not_found');
    });

    it('a status patch with a resourceVersion precondition applies only at that version, else fails with conflict', async () => {
      const store = await open();
      const name = `contract-rv-${suffix()}`;
      created.push({ kind: options.statusKind, name });
      const object: KubeObject = {
        apiVersion: options.statusKind.apiVersion,
        kind: options.statusKind.kind,
        metadata: { name },
        spec: {},
      };
      const applied = await store.apply(options.statusKind, object, OP);
      const first = await store.patchStatus(
        options.statusKind,
        { name },
        { phase: 'Pending' },
        { ...OP, resourceVersion: applied.metadata.resourceVersion! },
      );
      expect(first['status']).toMatchObject({ phase: 'Pending' });
      expect(first.metadata.resourceVersion).not.toBe(applied.metadata.resourceVersion);
      // A writer still holding the version it read before `first` must not overwrite it.
      const stale = await store
        .patchStatus(
          options.statusKind,
          { name },
          { phase: 'Active' },
          { ...OP, resourceVersion: applied.metadata.resourceVersion! },
        )
        .catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(ResourceStoreError);
      expect((stale as ResourceStoreError).code).toBe('conflict');
      expect((stale as ResourceStoreError).statusCode).toBe(409);
      expect((await store.get(options.statusKind, { name }))?.['status']).toMatchObject({ phase: 'Pending' });
      // The precondition is not stored: a patch without one still applies.
      const plain = await store.patchStatus(options.statusKind, { name }, { phase: 'Active' }, OP);
      expect(plain['status']).toMatchObject({ phase: 'Active' });
      const missing = await store
        .patchStatus(options.statusKind, { name: `${name}-missing` }, { phase: 'x' }, { ...OP, resourceVersion: '1' })
        .catch((e: unknown) => e);
      expect((missing as ResourceStoreError).code).toBe('not_found');
    });

    it('a watch on one named object sees ADDED, MODIFIED and DELETED made through another store', async () => {
      const writer = await open();
      const reader = await open();
      const name = `contract-w-${suffix()}`;
      const other = `contract-o-${suffix()}`;
      await writer.apply(CONFIG_MAP, cm(name, { v: '0' }), OP);
      const events: WatchEvent[] = [];
      const synced: number[] = [];
      const watch = reader.watch(CONFIG_MAP, {
        namespace: options.namespace,
        name,
        onEvent: (e) => events.push(e),
        onSynced: (i) => synced.push(i.length),
      });
      try {
        await poll(
          () => synced.length,
          (n) => n >= 1,
          'initial sync',
        );
        expect(events.map((e) => e.type)).toEqual(['ADDED']);
        await writer.apply(CONFIG_MAP, cm(other, { v: '1' }), OP);
        await writer.apply(CONFIG_MAP, cm(name, { v: '1' }), OP);
        await poll(
          () => events.length,
          (n) => n >= 2,
          'MODIFIED',
        );
        expect(events[1]).toMatchObject({ type: 'MODIFIED', object: { data: { v: '1' } } });
        expect(await writer.delete(CONFIG_MAP, { namespace: options.namespace, name })).toBe(true);
        expect(await writer.delete(CONFIG_MAP, { namespace: options.namespace, name })).toBe(false);
        await poll(
          () => events.length,
          (n) => n >= 3,
          'DELETED',
        );
        expect(events[2]).toMatchObject({ type: 'DELETED', object: { metadata: { name } } });
        expect(events.every((e) => e.object.metadata.name === name)).toBe(true);
      } finally {
        await watch.close();
      }
    });

    it('a watch started from a resourceVersion reports only later changes', async () => {
      const store = await open();
      const first = await store.apply(CONFIG_MAP, cm(`contract-r1-${suffix()}`, { v: '0' }), OP);
      const later = `contract-r2-${suffix()}`;
      const events: string[] = [];
      const watch = store.watch(CONFIG_MAP, {
        namespace: options.namespace,
        resourceVersion: first.metadata.resourceVersion!,
        onEvent: (e) => events.push(`${e.type} ${e.object.metadata.name}`),
      });
      try {
        await store.apply(CONFIG_MAP, cm(later, { v: '0' }), OP);
        await poll(
          () => events,
          (e) => e.includes(`ADDED ${later}`),
          'the later object',
        );
        expect(events.some((e) => e.endsWith(first.metadata.name))).toBe(false);
      } finally {
        await watch.close();
      }
    });

    it('rejects an invalid name before any I/O, naming the kind and the name', async () => {
      const store = await open();
      await expect(store.get(CONFIG_MAP, { namespace: options.namespace, name: 'Not_Valid' })).rejects.toMatchObject({
        code: 'invalid',
        message: 'ConfigMap name "Not_Valid" is not a DNS-1123 subdomain',
      });
    });
  });
}
