import { fnv1a32Hex } from '../fnv1a.ts';

/** Kubernetes object names are DNS labels here: at most 63 characters. */
export const MAX_CONFIGMAP_NAME_LENGTH = 63;
const PREFIX = 'grid-overlay-';
const PART_LENGTH = 20;

/**
 * Name of the overlay ConfigMap for one (network, gateway) (docs/contract.md §2.1). Long pairs are truncated and made
 * unique again with the FNV-1a hash of the full pair, so two gateways whose names share a 20-character prefix never
 * collide.
 */
export function overlayConfigMapName(network: string, gateway: string): string {
  const plain = `${PREFIX}${network}-${gateway}`;
  if (plain.length <= MAX_CONFIGMAP_NAME_LENGTH) return plain;
  return `${PREFIX}${network.slice(0, PART_LENGTH)}-${gateway.slice(0, PART_LENGTH)}-${fnv1a32Hex(`${network}/${gateway}`)}`;
}
