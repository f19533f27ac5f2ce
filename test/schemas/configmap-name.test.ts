import { describe, expect, it } from 'vitest';
import { fnv1a32Hex } from '../../schemas/fnv1a.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';

describe('overlay ConfigMap name (docs/contract.md §2.1)', () => {
  it('is grid-overlay-{network}-{gateway} when that fits in 63 characters', () => {
    expect(overlayConfigMapName('production', 'inference-gw')).toBe('grid-overlay-production-inference-gw');
    const exactly63 = overlayConfigMapName('n'.repeat(24), 'g'.repeat(25));
    expect(exactly63).toHaveLength(63);
    expect(exactly63).toBe(`grid-overlay-${'n'.repeat(24)}-${'g'.repeat(25)}`);
  });

  it('truncates each part to 20 characters and appends the FNV-1a of network/gateway when longer', () => {
    const network = 'n'.repeat(24);
    const gateway = 'g'.repeat(26);
    const name = overlayConfigMapName(network, gateway);
    expect(name).toBe(`grid-overlay-${'n'.repeat(20)}-${'g'.repeat(20)}-${fnv1a32Hex(`${network}/${gateway}`)}`);
    expect(name.length).toBeLessThanOrEqual(63);
  });

  it('keeps two long gateways with a common prefix apart', () => {
    const a = overlayConfigMapName('production-network-eu-west', 'consumer-gateway-blue-1');
    const b = overlayConfigMapName('production-network-eu-west', 'consumer-gateway-blue-2');
    expect(a).not.toBe(b);
  });
});
