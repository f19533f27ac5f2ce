// Pure object transformations the local store uses to behave like the API server for apply and status
// patches. Kept free of I/O so the rules can be read (and tested) in one place.

import type { KubeObject, ObjectMeta } from './types.ts';

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7386 JSON merge patch: objects merge recursively, `null` deletes, everything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      result[key] = mergePatch(result[key], value);
    }
  }
  return result;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((key) => Object.hasOwn(b, key) && deepEqual(a[key], b[key]));
  }
  return false;
}

// Metadata the server owns: an apply never sets these, it only gets them back.
const SYSTEM_METADATA = ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields'] as const;

/** Everything except metadata and status: what `metadata.generation` tracks. */
function desiredState(object: Record<string, unknown>): Record<string, unknown> {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = object;
  return rest;
}

export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  subresource?: string;
}

/**
 * Local approximation of server-side apply. Top-level fields the applied object sets (`data`, `spec`, …)
 * replace the stored ones; labels and annotations merge key by key; `status` and system metadata are kept.
 * Returns `undefined` when the result equals what is stored, so the caller skips the write and the
 * resourceVersion stays put, as on a real API server. Field ownership conflicts are not modelled: every
 * daemon owns disjoint objects or subresources.
 */
export function applyObject(
  existing: KubeObject | undefined,
  applied: KubeObject,
  fieldManager: string,
): KubeObject | undefined {
  const appliedMeta: ObjectMeta = { ...applied.metadata };
  for (const key of SYSTEM_METADATA) delete appliedMeta[key];
  const next: Record<string, unknown> = existing === undefined ? {} : structuredClone(desiredState(existing));
  for (const [key, value] of Object.entries(desiredState(applied))) next[key] = structuredClone(value);
  const baseMeta: ObjectMeta =
    existing === undefined ? { name: applied.metadata.name } : structuredClone(existing.metadata);
  const metadata: ObjectMeta = { ...baseMeta, ...appliedMeta };
  if (existing?.metadata.labels !== undefined || appliedMeta.labels !== undefined) {
    metadata.labels = { ...existing?.metadata.labels, ...appliedMeta.labels };
  }
  if (existing?.metadata.annotations !== undefined || appliedMeta.annotations !== undefined) {
    metadata.annotations = { ...existing?.metadata.annotations, ...appliedMeta.annotations };
  }
  metadata.managedFields = withManager(existing?.metadata.managedFields, { manager: fieldManager, operation: 'Apply' });
  const result: KubeObject = { apiVersion: applied.apiVersion, kind: applied.kind, metadata, ...next };
  if (existing !== undefined && existing['status'] !== undefined)
    result['status'] = structuredClone(existing['status']);
  if (existing !== undefined && deepEqual(result, existing)) return undefined;
  const specChanged = existing === undefined || !deepEqual(desiredState(existing), next);
  metadata.generation = (existing?.metadata.generation ?? 0) + (specChanged ? 1 : 0);
  return result;
}

/** Status subresource merge patch; `undefined` when nothing changes. Never touches generation. */
export function patchObjectStatus(
  existing: KubeObject,
  status: Record<string, unknown>,
  fieldManager: string,
): KubeObject | undefined {
  const nextStatus = mergePatch(existing['status'], status);
  if (deepEqual(nextStatus, existing['status'])) return undefined;
  const result = structuredClone(existing);
  result['status'] = nextStatus;
  result.metadata.managedFields = withManager(existing.metadata.managedFields, {
    manager: fieldManager,
    operation: 'Update',
    subresource: 'status',
  });
  return result;
}

function withManager(current: unknown, entry: ManagedFieldsEntry): ManagedFieldsEntry[] {
  const entries = Array.isArray(current) ? (current as ManagedFieldsEntry[]) : [];
  const same = (e: ManagedFieldsEntry): boolean => e.manager === entry.manager && e.subresource === entry.subresource;
  if (entries.some(same)) return entries.map((e) => ({ ...e }));
  return [...entries.map((e) => ({ ...e })), entry];
}

export function managers(object: KubeObject): string[] {
  const entries = Array.isArray(object.metadata.managedFields)
    ? (object.metadata.managedFields as ManagedFieldsEntry[])
    : [];
  return entries.map((e) => e.manager);
}
