// What overlay-sync delivers: the routing overlay (docs/contract.md §4) or the serving config (schemas/serving/) of one
// gateway. Both are content-addressed documents in one ConfigMap and go through the same watch, the same atomic write
// and the same last-known-good rules; only the validator, the default ConfigMap name and the data key differ.
import type { OverlayRejectReason } from '../../schemas/overlay/reasons.ts';
import type { OverlayScope } from '../../schemas/overlay/types.ts';
import { validateOverlay } from '../../schemas/overlay/validate.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import {
  SERVING_DATA_KEY,
  servingConfigMapName,
  validateServing,
  type ServingRejectReason,
} from '../../schemas/serving/serving-config.ts';

export const SYNCED_CONTRACTS = ['overlay', 'serving'] as const;
export type SyncedContract = (typeof SYNCED_CONTRACTS)[number];

export type RejectReason = OverlayRejectReason | ServingRejectReason;

export type ContractVerdict =
  | { readonly ok: true; readonly revision: string }
  | { readonly ok: false; readonly reason: RejectReason; readonly message: string };

export interface ContractDefaults {
  readonly dataKey: string;
  readonly output: string;
  configMapName(network: string, gateway: string): string;
}

export const CONTRACT_DEFAULTS: Readonly<Record<SyncedContract, ContractDefaults>> = {
  overlay: {
    dataKey: 'routing-overlay.json',
    output: '/run/praxis-routing/routing-overlay.json',
    configMapName: overlayConfigMapName,
  },
  serving: {
    dataKey: SERVING_DATA_KEY,
    output: `/run/grid-serving/${SERVING_DATA_KEY}`,
    configMapName: servingConfigMapName,
  },
};

/** The validator of one contract, bound to this daemon's limit and expected scope. */
export function contractValidator(
  contract: SyncedContract,
  options: { maxBytes: number; expectedScope: Readonly<Partial<OverlayScope>> },
): (raw: Uint8Array) => ContractVerdict {
  if (contract === 'serving') {
    return (raw) => {
      const result = validateServing(raw, options);
      return result.ok
        ? { ok: true, revision: result.revision }
        : { ok: false, reason: result.reason, message: result.message };
    };
  }
  return (raw) => {
    const result = validateOverlay(raw, { ...options, allowLegacy: false });
    if (!result.ok) return { ok: false, reason: result.reason, message: result.message };
    // Unreachable with allowLegacy false; kept so a misconfiguration cannot write an unversioned file.
    if (result.format !== 'envelope')
      return {
        ok: false,
        reason: 'malformed',
        message: 'bare payload without envelope; overlay-sync requires the versioned envelope',
      };
    return { ok: true, revision: result.revision };
  };
}
