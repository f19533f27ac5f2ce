import { describe, expect, it } from 'vitest';
import { delegatedCaSecrets, generatedConfigNames, generatingConfig } from '../../schemas/generated-config.ts';
import type { GridNetworkSpec, PraxisConfig } from '../../schemas/generated/gridnetworks.ts';

const delegated: PraxisConfig = {
  generate: true,
  configMapName: 'praxis-edge',
  clusterEndpoints: [
    { cluster: 'a', address: 'a:443', transport: { mode: 'tls', sni: 'a', caSecretRef: { name: 'ca-a' } } },
    {
      cluster: 'b',
      address: 'b:443',
      transport: { mode: 'tls', sni: 'b', caSecretRef: { name: 'ca-a', key: 'other.crt' } },
    },
    { cluster: 'c', address: 'c:443', transport: { mode: 'tls', sni: 'c' } },
    { cluster: 'd', address: 'd:443', transport: { mode: 'mutual_tls', sni: 'd' } },
  ],
  mountReconciliation: { enabled: true, deploymentName: 'inference-gw' },
};

describe('generated consumer config predicate (shared by the daemon and the compiler)', () => {
  it('honours the deprecated consumerConfig and enabled names, and nothing else generates', () => {
    expect(generatingConfig({ name: 'g', namespace: 'n', praxisConfig: { generate: true } })).toEqual({
      generate: true,
    });
    expect(generatingConfig({ name: 'g', namespace: 'n', consumerConfig: { enabled: true } })).toEqual({
      enabled: true,
    });
    expect(
      generatingConfig({ name: 'g', namespace: 'n', praxisConfig: { generate: false, enabled: true } }),
    ).toBeUndefined();
    expect(generatingConfig({ name: 'g', namespace: 'n', praxisConfig: {} })).toBeUndefined();
    expect(generatingConfig({ name: 'g', namespace: 'n' })).toBeUndefined();
  });

  it('names the ConfigMaps, Deployments and CA Secrets of consumerGateways, or of gatewayRefs when consumerGateways is absent', () => {
    const legacy: GridNetworkSpec = {
      gatewayRefs: [
        {
          name: 'g',
          namespace: 'n',
          consumerConfig: { enabled: true, mountReconciliation: { enabled: true, deploymentName: 'd' } },
        },
      ],
    };
    expect(generatedConfigNames(legacy)).toEqual({
      praxisConfigMaps: ['praxis-consumer-config'],
      delegatedDeployments: ['d'],
      delegatingGateways: [{ name: 'g', namespace: 'n', caSecrets: [] }],
    });
    const both: GridNetworkSpec = {
      consumerGateways: [{ name: 'edge', namespace: 'gw', praxisConfig: delegated }],
      gatewayRefs: legacy.gatewayRefs ?? [],
    };
    expect(generatedConfigNames(both)).toEqual({
      praxisConfigMaps: ['praxis-edge'],
      delegatedDeployments: ['inference-gw'],
      delegatingGateways: [{ name: 'edge', namespace: 'gw', caSecrets: ['ca-a'] }],
    });
    // Delegation without a Deployment name is an Error in the daemon, which then reads nothing: no grant.
    const unnamed: GridNetworkSpec = {
      consumerGateways: [
        { name: 'edge', namespace: 'gw', praxisConfig: { ...delegated, mountReconciliation: { enabled: true } } },
      ],
    };
    expect(generatedConfigNames(unnamed)).toEqual({
      praxisConfigMaps: ['praxis-edge'],
      delegatedDeployments: [],
      delegatingGateways: [],
    });
    expect(delegatedCaSecrets(delegated)).toEqual(['ca-a']);
  });
});
