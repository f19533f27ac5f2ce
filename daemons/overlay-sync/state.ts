// The pure core of overlay-sync: what one observation of the ConfigMap means (assess) and how it moves the
// daemon's state (transition). No I/O and no clock of its own: the shell passes the time in.

import type { ContractVerdict, RejectReason } from './contracts.ts';

export type SyncState = 'cold' | 'ready' | 'ready_degraded';

/** Why the ConfigMap gave nothing to validate. Used as the `reason` label and as `degraded_reason`. */
export type MissingReason = 'configmap_absent' | 'configmap_deleted' | 'data_key_missing';

/**
 * What one observation came to. `outcome` and `reason` are the labels of
 * `grid_overlay_sync_events_total`; rejected reasons are the catalogue of docs/contract.md §2.4.
 */
export type Assessment =
  | { readonly outcome: 'accepted'; readonly reason: 'new_revision'; readonly revision: string }
  | { readonly outcome: 'unchanged'; readonly reason: 'same_revision'; readonly revision: string }
  | { readonly outcome: 'rejected'; readonly reason: RejectReason; readonly message: string }
  | { readonly outcome: 'missing'; readonly reason: MissingReason; readonly message: string };

/** `write_failed` is the one degraded reason that is not about the ConfigMap's content. */
export type DegradedReason = RejectReason | MissingReason | 'write_failed';

export type Observation =
  | { readonly kind: 'payload'; readonly raw: Uint8Array }
  | { readonly kind: 'missing'; readonly reason: MissingReason; readonly message: string };

/**
 * Maps an observation to its assessment. The payload is validated by the shared contract validator of what this
 * daemon delivers (contracts.ts, bound to its options); for the overlay a bare legacy payload is never accepted.
 */
export function assess(
  observation: Observation,
  writtenRevision: string | undefined,
  validate: (raw: Uint8Array) => ContractVerdict,
): Assessment {
  if (observation.kind === 'missing')
    return { outcome: 'missing', reason: observation.reason, message: observation.message };
  const result = validate(observation.raw);
  if (!result.ok) return { outcome: 'rejected', reason: result.reason, message: result.message };
  if (result.revision === writtenRevision)
    return { outcome: 'unchanged', reason: 'same_revision', revision: result.revision };
  return { outcome: 'accepted', reason: 'new_revision', revision: result.revision };
}

export interface SyncStatus {
  readonly state: SyncState;
  /** Revision of the file on disk (restored at start or written since). */
  readonly writtenRevision: string | undefined;
  readonly writtenAt: string | undefined;
  readonly writtenBytes: number | undefined;
  readonly writtenSource: 'restored' | 'configmap' | undefined;
  readonly observedRevision: string | undefined;
  readonly observedResourceVersion: string | undefined;
  readonly observedAt: string | undefined;
  readonly lastOutcome: Assessment['outcome'] | undefined;
  readonly lastReason: string | undefined;
  readonly degradedReason: DegradedReason | undefined;
  readonly degradedMessage: string | undefined;
}

export const COLD: SyncStatus = {
  state: 'cold',
  writtenRevision: undefined,
  writtenAt: undefined,
  writtenBytes: undefined,
  writtenSource: undefined,
  observedRevision: undefined,
  observedResourceVersion: undefined,
  observedAt: undefined,
  lastOutcome: undefined,
  lastReason: undefined,
  degradedReason: undefined,
  degradedMessage: undefined,
};

function stateFor(hasFile: boolean, degraded: boolean): SyncState {
  if (!hasFile) return 'cold';
  return degraded ? 'ready_degraded' : 'ready';
}

/** A valid file found at start becomes the last-known-good: ready before any ConfigMap was seen. */
export function restored(status: SyncStatus, revision: string, bytes: number, at: string): SyncStatus {
  return {
    ...status,
    state: 'ready',
    writtenRevision: revision,
    writtenAt: at,
    writtenBytes: bytes,
    writtenSource: 'restored',
  };
}

export interface ObservationResult {
  readonly assessment: Assessment;
  readonly resourceVersion: string | undefined;
  readonly at: string;
  /** For `accepted`: whether the atomic write succeeded, and its size. */
  readonly write?: { readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly message: string };
}

/**
 * The state after one observation. Anything but a good observation keeps the file (last-known-good) and
 * only marks the daemon degraded; it never takes readiness away once a valid file exists.
 */
export function transition(status: SyncStatus, result: ObservationResult): SyncStatus {
  const { assessment, at } = result;
  const observed = {
    observedAt: at,
    observedResourceVersion: result.resourceVersion,
    lastOutcome: assessment.outcome,
    lastReason: assessment.reason,
  };
  switch (assessment.outcome) {
    case 'accepted': {
      if (result.write?.ok === true) {
        return {
          ...status,
          ...observed,
          state: 'ready',
          observedRevision: assessment.revision,
          writtenRevision: assessment.revision,
          writtenAt: at,
          writtenBytes: result.write.bytes,
          writtenSource: 'configmap',
          degradedReason: undefined,
          degradedMessage: undefined,
        };
      }
      const message = result.write?.ok === false ? result.write.message : 'write not attempted';
      return {
        ...status,
        ...observed,
        state: stateFor(status.writtenRevision !== undefined, true),
        observedRevision: assessment.revision,
        degradedReason: 'write_failed',
        degradedMessage: message,
      };
    }
    case 'unchanged':
      return {
        ...status,
        ...observed,
        state: 'ready',
        observedRevision: assessment.revision,
        degradedReason: undefined,
        degradedMessage: undefined,
      };
    case 'rejected':
    case 'missing':
      return {
        ...status,
        ...observed,
        state: stateFor(status.writtenRevision !== undefined, true),
        observedRevision: undefined,
        degradedReason: assessment.reason,
        degradedMessage: assessment.message,
      };
  }
}
