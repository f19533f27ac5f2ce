// Entry point: the interface, the two implementations, and the one function daemons use to pick one.

import { KubernetesStore, type KubernetesStoreOptions } from './kubernetes-store.ts';
import { openLocalStore, type LocalStoreOptions } from './local-store.ts';
import type { ResourceKind, ResourceStore } from './types.ts';

export type * from './types.ts';
export { ResourceStoreError, type ResourceStoreErrorCode } from './errors.ts';
export { LocalStore, openLocalStore, MANIFEST_FIELD_MANAGER, type LocalStoreOptions } from './local-store.ts';
export { KubernetesStore, type KubernetesStoreOptions } from './kubernetes-store.ts';

export type StoreSelection =
  | ({ readonly backend: 'local' } & LocalStoreOptions)
  | ({ readonly backend: 'kubernetes' } & KubernetesStoreOptions);

export async function createResourceStore(selection: StoreSelection): Promise<ResourceStore> {
  if (selection.backend === 'local') return openLocalStore(selection);
  return new KubernetesStore(selection);
}

/** Built-in kinds the daemons read or write; CRD kinds are described next to their schemas. */
export const CONFIG_MAP: ResourceKind = { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true };
export const SECRET: ResourceKind = { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true };
export const LEASE: ResourceKind = {
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  plural: 'leases',
  namespaced: true,
};
