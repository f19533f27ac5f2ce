// The operator's NetworkPolicy (constructs/operator-network-policy.ts) on a real API server: server-side applied
// with strict field validation, stored as rendered (a rule without `from` stays without it, meaning any source),
// and an address the synth check refuses is refused by the server too. This control plane has no nodes and no CNI,
// so whether traffic is actually admitted or dropped is not tested here; the selectors are checked against the
// rendered pod labels in test/constructs/operator-network-policy.test.ts.
import { Testing } from 'cdk8s';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GossipOperator } from '../../constructs/gossip-operator.ts';
import { statusMessage } from '../../daemons/shared/resource-store/kube-http.ts';
import { adminKubeConfig, uniqueName } from './kube.ts';
import { APPLY_FIELD_MANAGER, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';

function rendered(namespace: string): Manifest['object'][] {
  const chart = Testing.chart();
  new GossipOperator(chart, 'operator', {
    namespace,
    network: 'demo',
    site: 'east',
    overlayConfigMaps: [],
    referencedSecrets: [],
    peerSignals: { from: { cidrs: ['203.0.113.0/24', '2001:db8::/32'] } },
    gatewayAgeIngest: {
      gateways: [
        { component: 'consumer-gateway', name: 'consumer-gateway' },
        { component: 'provider-gateway', name: 'edge', namespace: 'gateways' },
        { podLabels: { app: 'praxis' } },
      ],
    },
    enrollment: { siteCertificateSecret: 'grid-site-cert', gridCaSecret: 'grid-ca-signing' },
  });
  return Testing.synth(chart) as Manifest['object'][];
}

describe('the operator NetworkPolicy on the API server', () => {
  let client: RawClient;
  let namespace: string;
  let policy: Manifest['object'];

  beforeAll(async () => {
    client = new RawClient(adminKubeConfig());
    namespace = uniqueName('netpol');
    const objects = rendered(namespace);
    const ns = objects.find((o) => o.kind === 'Namespace');
    const found = objects.find((o) => o.kind === 'NetworkPolicy');
    if (ns === undefined || found === undefined) throw new Error('the operator rendered no Namespace or NetworkPolicy');
    policy = found;
    const res = await client.apply(ns, APPLY_FIELD_MANAGER);
    if (res.status !== 200 && res.status !== 201)
      throw new Error(`namespace: HTTP ${res.status}: ${statusMessage(res)}`);
  });

  afterAll(async () => {
    // Best effort: without a controller manager the namespace stays Terminating, its name is random anyway.
    if (client !== undefined && namespace !== undefined)
      await client.request('DELETE', `/api/v1/namespaces/${namespace}`);
  });

  it('accepts the rendered policy with strict field validation and stores its spec unchanged', async () => {
    const res = await client.apply(policy, APPLY_FIELD_MANAGER);
    expect(res.status, statusMessage(res)).toBeLessThan(300);
    const stored = await client.request('GET', await client.objectPath(policy));
    expect(stored.status).toBe(200);
    const spec = (stored.body as { spec: { ingress: { from?: unknown; ports: unknown }[] } }).spec;
    expect(spec).toEqual(policy['spec']);
    // The SWIM/admin rule and the enrollment rule keep no `from`: any source, not an empty list.
    expect(spec.ingress.filter((rule) => rule.from === undefined)).toHaveLength(2);
    // Re-applying the same object changes nothing.
    const again = await client.apply(policy, APPLY_FIELD_MANAGER);
    expect((again.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion).toBe(
      (stored.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    );
  });

  it('refuses what the synth check refuses: a prefix longer than the address', async () => {
    const spec = structuredClone(policy['spec']) as { ingress: { from?: { ipBlock?: { cidr: string } }[] }[] };
    const withFrom = spec.ingress.find((rule) => rule.from?.[0]?.ipBlock !== undefined);
    if (withFrom?.from?.[0]?.ipBlock === undefined) throw new Error('no ipBlock rule rendered');
    withFrom.from[0].ipBlock.cidr = '203.0.113.0/33';
    const bad = { ...policy, metadata: { ...policy.metadata, name: 'gossip-operator-bad' }, spec };
    const res = await client.apply(bad, APPLY_FIELD_MANAGER);
    expect(res.status).toBe(422);
    expect(statusMessage(res)).toContain('ipBlock.cidr');
  });

  it('stores a CIDR with host bits set as written, which is why the synth check refuses it (a likely typo)', async () => {
    const spec = structuredClone(policy['spec']) as { ingress: { from?: { ipBlock?: { cidr: string } }[] }[] };
    const withFrom = spec.ingress.find((rule) => rule.from?.[0]?.ipBlock !== undefined);
    if (withFrom?.from?.[0]?.ipBlock === undefined) throw new Error('no ipBlock rule rendered');
    withFrom.from[0].ipBlock.cidr = '203.0.113.9/24';
    const res = await client.apply(
      { ...policy, metadata: { ...policy.metadata, name: 'gossip-operator-host-bits' }, spec },
      APPLY_FIELD_MANAGER,
    );
    expect(res.status, statusMessage(res)).toBe(201);
    expect(JSON.stringify((res.body as { spec: unknown }).spec)).toContain('"cidr":"203.0.113.9/24"');
  });
});
