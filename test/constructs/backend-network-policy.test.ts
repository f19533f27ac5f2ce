import { describe, expect, it } from 'vitest';
import { BackendNetworkPolicy } from '../../constructs/backend-network-policy.ts';
import { workloadLabels } from '../../constructs/labels.ts';
import { chart, find, synth } from './helpers.ts';

interface PolicyJson {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: { from: { podSelector: { matchLabels: Record<string, string> } }[]; ports: unknown[] }[];
  };
}

function build(): { c: ReturnType<typeof chart>; policy: BackendNetworkPolicy } {
  const c = chart();
  const policy = new BackendNetworkPolicy(c, 'policy', {
    namespace: 'grid-system',
    name: 'backend-east-llm-a',
    backendLabels: workloadLabels('inference-backend', 'sim-east-llm-a'),
    port: 8080,
    providerGatewayLabels: workloadLabels('provider-gateway', 'provider-gateway'),
    operatorLabels: workloadLabels('gossip-operator', 'gossip-operator'),
  });
  return { c, policy };
}

describe('BackendNetworkPolicy', () => {
  it('admits only the provider gateway and the operator, on the backend port (snapshot)', () => {
    const objects = synth(build().c);
    expect(objects).toMatchSnapshot();
    const policy = find(objects, 'NetworkPolicy', 'backend-east-llm-a') as unknown as PolicyJson;
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const peers = policy.spec.ingress.flatMap((rule) =>
      rule.from.map((peer) => peer.podSelector.matchLabels['app.kubernetes.io/name']),
    );
    expect(peers).toEqual(['provider-gateway', 'gossip-operator']);
    expect(peers).not.toContain('consumer-gateway');
    for (const rule of policy.spec.ingress) expect(rule.ports).toEqual([{ port: 8080, protocol: 'TCP' }]);
  });

  it('accepts another peer after construction', () => {
    const { c, policy } = build();
    policy.allowFrom('Scraper', { 'app.kubernetes.io/name': 'prometheus' });
    const json = find(synth(c), 'NetworkPolicy', 'backend-east-llm-a') as unknown as PolicyJson;
    expect(json.spec.ingress).toHaveLength(3);
  });
});
