import type { ObjectRef, ResourceKind } from './types.ts';

/**
 * Stable failure codes of the resource store. `not_found` and `conflict` mirror the API server's 404/409;
 * `invalid` is bad input caught before any I/O (a name that is no DNS label, a missing namespace);
 * `gone` is a 410 on a watch or list; `unavailable` is transport failure or a 5xx; `manifest` is a
 * manifest file the local store cannot read.
 */
export type ResourceStoreErrorCode =
  | 'not_found'
  | 'conflict'
  | 'invalid'
  | 'gone'
  | 'unavailable'
  | 'forbidden'
  | 'manifest';

export class ResourceStoreError extends Error {
  readonly code: ResourceStoreErrorCode;
  readonly statusCode: number | undefined;

  constructor(code: ResourceStoreErrorCode, message: string, options?: { statusCode?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ResourceStoreError';
    this.code = code;
    this.statusCode = options?.statusCode;
  }
}

/** `ConfigMap grid-system/grid-overlay-a-b` — how every message names an object. */
export function describeRef(kind: ResourceKind, ref: ObjectRef): string {
  return kind.namespaced ? `${kind.kind} ${ref.namespace ?? '<no namespace>'}/${ref.name}` : `${kind.kind} ${ref.name}`;
}

// DNS-1123 subdomain, which also keeps names safe as file names in the local store (no `/`, no `..`).
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export function checkRef(kind: ResourceKind, ref: ObjectRef): void {
  if (!NAME.test(ref.name) || ref.name.includes('..')) {
    throw new ResourceStoreError(
      'invalid',
      `${kind.kind} name ${JSON.stringify(ref.name)} is not a DNS-1123 subdomain`,
    );
  }
  if (kind.namespaced) {
    if (ref.namespace === undefined || !NAME.test(ref.namespace) || ref.namespace.includes('.')) {
      throw new ResourceStoreError(
        'invalid',
        `${kind.kind} ${ref.name}: namespace ${JSON.stringify(ref.namespace ?? '')} is missing or not a DNS-1123 label`,
      );
    }
  }
}
