// A grid compiled so its sites reach each other: the public operator Service and the provider gateway's exposure,
// the advertised addresses checked against what those Services open, seeds from the peers' gossip addresses, every
// Mutual peer pinned from the trust file, and the enrollment endpoint of a site that signs invites.
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { buildGrid, gridProblems } from '../../constructs/grid.ts';
import type { GridDeclaration, SiteDeclaration } from '../../constructs/grid-declaration.ts';
import { exampleGrid } from '../../constructs/example-grid.ts';
import { fakePin, fakeTrust, find, podSpec, simProvider, site, twoSiteGrid, type Manifest } from './helpers.ts';

function synthSite(declaration: GridDeclaration, name: string): Manifest[] {
  const built = buildGrid(Testing.app(), declaration);
  return Testing.synth(built.sites.find((s) => s.siteName === name)!) as Manifest[];
}

const spec = <T>(object: Manifest): T => (object as unknown as { spec: T }).spec;

describe('how a site is reached', () => {
  it('puts SWIM (UDP and TCP), signals and enrollment on the public Service, and admin and ingest only in-cluster', () => {
    const objects = synthSite(
      twoSiteGrid({
        a: {
          gossipService: {
            type: 'LoadBalancer',
            annotations: { 'external-dns.alpha.kubernetes.io/hostname': 'gossip.a.example.com' },
            loadBalancerSourceRanges: ['203.0.113.0/24'],
            externalTrafficPolicy: 'Local',
          },
          peerSignals: { advertise: 'gossip.a.example.com:7950' },
          gatewayAgeIngest: {},
          invites: [{ name: 'c', spec: { siteName: 'c' } }],
        },
      }),
      'a',
    );
    const publicService = find(objects, 'Service', 'gossip-operator-public') as unknown as {
      metadata: { annotations: Record<string, string> };
      spec: {
        type: string;
        ports: { name: string; port: number; protocol?: string }[];
        loadBalancerSourceRanges: string[];
        externalTrafficPolicy: string;
      };
    };
    expect(publicService.spec.type).toBe('LoadBalancer');
    expect(publicService.spec.ports.map((p) => `${p.name}/${p.port}/${p.protocol ?? 'TCP'}`)).toEqual([
      'gossip-udp/7946/UDP',
      'gossip-tcp/7946/TCP',
      'signals/7950/TCP',
      'enrollment/9443/TCP',
    ]);
    expect(publicService.metadata.annotations).toEqual({
      'external-dns.alpha.kubernetes.io/hostname': 'gossip.a.example.com',
    });
    expect(publicService.spec.loadBalancerSourceRanges).toEqual(['203.0.113.0/24']);
    expect(publicService.spec.externalTrafficPolicy).toBe('Local');
    // The admin port (metrics, dashboard) and the gateway ingest are never on the public Service.
    const inCluster = spec<{ type: string; ports: { name: string }[] }>(find(objects, 'Service', 'gossip-operator'));
    expect(inCluster.type).toBe('ClusterIP');
    expect(inCluster.ports.map((p) => p.name)).toContain('metrics');
    expect(inCluster.ports.map((p) => p.name)).toContain('gateway-age');
  });

  it('opens fixed node ports for a NodePort site and its provider gateway', () => {
    const objects = synthSite(
      twoSiteGrid({
        a: {
          gossipAddress: '198.51.100.7:30946',
          gossipService: { type: 'NodePort', nodePorts: { gossip: 30946 } },
          gatewayEndpoint: {
            address: '198.51.100.7:30443',
            tls: { mode: 'Mutual', serverName: 'gateway.a.example.com' },
          },
          providerGateway: {
            trustedPeers: [{ organization: 'test-consumers' }],
            exposure: { type: 'NodePort', nodePorts: { listener: 30443 } },
          },
        },
      }),
      'a',
    );
    const gossip = spec<{ type: string; ports: { name: string; nodePort?: number }[] }>(
      find(objects, 'Service', 'gossip-operator-public'),
    );
    expect(gossip.type).toBe('NodePort');
    expect(gossip.ports.map((p) => [p.name, p.nodePort])).toEqual([
      ['gossip-udp', 30946],
      ['gossip-tcp', 30946],
    ]);
    const gateway = spec<{ type: string; ports: { nodePort?: number }[] }>(
      find(objects, 'Service', 'provider-gateway'),
    );
    expect(gateway).toMatchObject({ type: 'NodePort', ports: [{ nodePort: 30443 }] });
  });

  it('seeds each site with the gossip addresses of the others unless it lists its own', () => {
    const seeds = (declaration: GridDeclaration) =>
      spec<{ seeds?: string[] }>(find(synthSite(declaration, 'a'), 'GridNetwork', 'net')).seeds;
    expect(seeds(twoSiteGrid())).toEqual(['gossip.b.example.com:7946']);
    expect(seeds(twoSiteGrid({ a: { seeds: ['seed.example.net:7946'] } }))).toEqual(['seed.example.net:7946']);
  });

  it('leaves a lone site without a public Service, seeds or pins, and asks nothing of it', () => {
    const lone: GridDeclaration = {
      network: { name: 'net' },
      sites: [
        {
          name: 'a',
          consumerGateway: {},
          providerGateway: { trustedPeers: [{ organization: 'x' }] },
          providers: [simProvider('pa', ['m1'])],
        },
      ],
    };
    expect(gridProblems(lone)).toEqual([]);
    const objects = synthSite(lone, 'a');
    expect(objects.some((o) => o.kind === 'Service' && o.metadata.name === 'gossip-operator-public')).toBe(false);
    expect(spec<{ seeds?: string[] }>(find(objects, 'GridNetwork', 'net')).seeds).toBeUndefined();
  });

  const refused: [string, Partial<SiteDeclaration>, string][] = [
    [
      'no gossip address',
      { gossipAddress: undefined },
      'a: gossipAddress: site a has a peer, but advertises no gossip address, so no other site can reach its SWIM port. Fix: set gossipAddress to the host:port of its gossipService (a load balancer name, or a node address with the node port)',
    ],
    [
      'no gossip Service',
      { gossipService: undefined },
      "a: gossipService: site a has peers, but its operator's SWIM port is on a ClusterIP Service that only its own cluster reaches. Fix: set gossipService { type: 'LoadBalancer' } (or NodePort with nodePorts.gossip); type: 'ClusterIP' only when the sites share one routed network",
    ],
    [
      'an advertised port the Service does not open',
      { gossipAddress: 'gossip.a.example.com:7000' },
      'a: gossipAddress: gossip.a.example.com:7000 names port 7000, but the LoadBalancer Service opens gossip on Service port 7946. Fix: advertise port 7946',
    ],
    [
      'a NodePort without the advertised node port',
      { gossipService: { type: 'NodePort' } },
      'a: gossipService.nodePorts.gossip: a NodePort Service without a node port for gossip, so gossip.a.example.com:7946 names a port nothing opens. Fix: set gossipService.nodePorts.gossip to the port in gossip.a.example.com:7946',
    ],
    [
      'a node port that is not the advertised one',
      { gossipAddress: 'n.example.com:30001', gossipService: { type: 'NodePort', nodePorts: { gossip: 30002 } } },
      'a: gossipAddress: n.example.com:30001 names port 30001, but the NodePort Service opens gossip on node port 30002. Fix: advertise port 30002, or set gossipService.nodePorts.gossip to 30001',
    ],
    [
      'a node port outside the range',
      { gossipService: { type: 'NodePort', nodePorts: { gossip: 8080 } } },
      'a: gossipService.nodePorts.gossip: 8080 is outside the node-port range 30000-32767. Fix: pick a port from 30000 to 32767 that no other Service of the cluster uses',
    ],
    [
      'a node port for a port the Service lacks',
      {
        gossipService: { type: 'NodePort', nodePorts: { gossip: 30946, signals: 30950 } },
        gossipAddress: 'n.example.com:30946',
      },
      'a: gossipService.nodePorts.signals: this Service has no signals port (it carries gossip). Fix: set node ports only for the ports the Service carries',
    ],
    [
      'node ports on a LoadBalancer',
      { gossipService: { type: 'LoadBalancer', nodePorts: { gossip: 30946 } } },
      'a: gossipService.nodePorts: node ports are set on a LoadBalancer Service. Fix: set type: NodePort, or drop nodePorts',
    ],
    [
      'source ranges that are not CIDRs',
      { gossipService: { type: 'LoadBalancer', loadBalancerSourceRanges: ['office'] } },
      'a: gossipService.loadBalancerSourceRanges: "office" is not a CIDR. Fix: use CIDRs such as 203.0.113.0/24',
    ],
    [
      'an unknown Service type',
      { gossipService: { type: 'Ingress' as never } },
      'a: gossipService.type: "Ingress" is not a Service type. Fix: use one of LoadBalancer, NodePort, ClusterIP',
    ],
    [
      'signals served but not advertised',
      { peerSignals: {} },
      'a: peerSignals.advertise: site a serves peer signals to other sites but advertises no address for them, so peers cannot poll it. Fix: set peerSignals.advertise to the host:port of the signals port on its gossipService',
    ],
    [
      'a ClusterIP provider gateway that peers probe and call',
      { providerGateway: { trustedPeers: [{ organization: 'test-consumers' }] } },
      "a: providerGateway.exposure: other sites probe and call site a's provider gateway at gateway.a.example.com:8443, but its Service is ClusterIP, which only its own cluster reaches. Fix: set providerGateway.exposure { type: 'LoadBalancer' } (or NodePort with nodePorts.listener); type: 'ClusterIP' only when the sites share one routed network",
    ],
    [
      'a gateway endpoint on another port',
      {
        gatewayEndpoint: {
          address: 'gateway.a.example.com:443',
          tls: { mode: 'Mutual', serverName: 'gateway.a.example.com' },
        },
      },
      'a: gatewayEndpoint.address: gateway.a.example.com:443 names port 443, but the LoadBalancer Service opens listener on Service port 8443. Fix: advertise port 8443',
    ],
  ];
  it.each(refused)('refuses %s, naming the site, the field and the fix', (_name, a, line) => {
    expect(gridProblems(twoSiteGrid({ a }))).toEqual([line]);
  });

  it('accepts an explicit ClusterIP for sites on one routed network', () => {
    expect(
      gridProblems(
        twoSiteGrid({
          a: {
            gossipService: { type: 'ClusterIP' },
            providerGateway: { trustedPeers: [{ organization: 'test-consumers' }], exposure: { type: 'ClusterIP' } },
          },
        }),
      ),
    ).toEqual([]);
  });
});

describe('pins of the peers', () => {
  it("renders each peer's pins from the trust file into the GridSite the other site has for it", () => {
    const objects = synthSite(twoSiteGrid(), 'a');
    expect(spec<{ trust?: unknown }>(find(objects, 'GridSite', 'net-b')).trust).toEqual({
      canonicalFingerprints: [fakePin('b')],
    });
    // Both pins during a renewal.
    const renewing = {
      ...twoSiteGrid(),
      trust: {
        ...fakeTrust('net', ['a']),
        sites: { a: { gatewayPins: [fakePin('a')] }, b: { gatewayPins: [fakePin('b'), fakePin('b2')] } },
      },
    };
    expect(spec<{ trust?: unknown }>(find(synthSite(renewing, 'a'), 'GridSite', 'net-b')).trust).toEqual({
      canonicalFingerprints: [fakePin('b'), fakePin('b2')],
    });
  });

  it('refuses a Mutual peer without a pin, a trust file of another network and a malformed one', () => {
    const noTrust = { ...twoSiteGrid(), trust: undefined };
    expect(gridProblems(noTrust)).toEqual([
      "b: trust: no certificate pin for site b's provider gateway (gateway.b.example.com:8443), so the other sites keep it Connecting (TrustMaterialMissing) and never route to it. Fix: run `agn pki init` and pass the trust file it writes as the declaration's trust: readGridTrust(new URL('./grid-trust.json', import.meta.url))",
      "a: trust: no certificate pin for site a's provider gateway (gateway.a.example.com:8443), so the other sites keep it Connecting (TrustMaterialMissing) and never route to it. Fix: run `agn pki init` and pass the trust file it writes as the declaration's trust: readGridTrust(new URL('./grid-trust.json', import.meta.url))",
    ]);
    const partial = { ...twoSiteGrid(), trust: fakeTrust('net', ['a']) };
    expect(gridProblems(partial)).toEqual([
      "b: trust: no certificate pin for site b's provider gateway (gateway.b.example.com:8443), so the other sites keep it Connecting (TrustMaterialMissing) and never route to it. Fix: run `agn pki init` again: it issues b's certificates and adds its pins to the trust file",
    ]);
    expect(gridProblems({ ...twoSiteGrid(), trust: fakeTrust('other', ['a', 'b']) })).toContain(
      'declaration: trust.network: the trust file is for network other, not net. Fix: pass the trust file of network net, or run `agn pki init` for it',
    );
    const malformed = {
      ...twoSiteGrid(),
      trust: { ...fakeTrust('net', ['a', 'b']), sites: { a: { gatewayPins: ['ABC'] } } },
    };
    expect(gridProblems(malformed)).toEqual([
      'declaration: trust: sites.a.gatewayPins.0 must match pattern "^[0-9a-f]{64}$". Fix: pass the grid-trust.json that `agn pki init` wrote, unedited',
    ]);
    const extra = { ...twoSiteGrid(), trust: { ...fakeTrust('net', ['a', 'b']), token: 'x' } as never };
    expect(gridProblems(extra)).toEqual([
      'declaration: trust: the trust file has an unknown key "token". Fix: pass the grid-trust.json that `agn pki init` wrote, unedited',
    ]);
  });

  it("takes a site's own trust, and refuses one that disagrees with the trust file", () => {
    const own = { canonicalFingerprints: [fakePin('own')] };
    const declared = twoSiteGrid({ b: { trust: own } });
    expect(gridProblems({ ...declared, trust: fakeTrust('net', ['a']) })).toEqual([]);
    expect(
      spec<{ trust?: unknown }>(
        find(synthSite({ ...declared, trust: fakeTrust('net', ['a']) }, 'a'), 'GridSite', 'net-b'),
      ).trust,
    ).toEqual(own);
    expect(gridProblems(declared)).toEqual([
      "b: trust: site b declares pins of its own that differ from its pins in the declaration's trust file. Fix: drop the site's trust (the trust file is kept by `agn pki`), or remove the site from the trust file",
    ]);
  });

  it('needs no pin for a Plaintext peer', () => {
    const plaintext = twoSiteGrid({
      b: { gatewayEndpoint: { address: 'gateway.b.example.com:8443', tls: { mode: 'Plaintext' } } },
    });
    expect(gridProblems({ ...plaintext, trust: fakeTrust('net', ['a']) })).toEqual([]);
  });
});

describe('enrollment and the Secrets a site names', () => {
  it('serves the enrollment endpoint wherever invites are declared, with the site certificate and the CA signer', () => {
    const objects = synthSite(twoSiteGrid({ a: { invites: [{ name: 'c', spec: { siteName: 'c' } }] } }), 'a');
    const operator = podSpec(find(objects, 'Deployment', 'gossip-operator'));
    const env = Object.fromEntries((operator.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(env['GRID_ENROLLMENT_ADDRESS']).toBe('0.0.0.0:9443');
    const secrets = (operator.volumes ?? []).flatMap((v) =>
      ((v['projected'] as { sources?: { secret?: { name: string } }[] } | undefined)?.sources ?? []).map(
        (s) => s.secret?.name,
      ),
    );
    expect(secrets).toEqual(expect.arrayContaining(['grid-site-cert', 'grid-ca-signer']));
    // Without invites, no endpoint.
    const plain = podSpec(find(synthSite(twoSiteGrid(), 'a'), 'Deployment', 'gossip-operator'));
    expect((plain.containers[0]?.env ?? []).some((e) => e.name === 'GRID_ENROLLMENT_ADDRESS')).toBe(false);
  });

  it("lists every Secret the example's sites name, with what each is for", () => {
    const built = buildGrid(Testing.app(), exampleGrid);
    const east = built.sites.find((s) => s.siteName === 'east')!;
    expect(
      east.secretNeeds.map(
        (n) =>
          `${n.name} ${n.purpose}${'role' in n ? `/${n.role}` : ''}${'simulated' in n ? (n.simulated ? '/simulated' : '/user') : ''}`,
      ),
    ).toEqual([
      'consumer-caller-keys caller-keys',
      'consumer-gateway-tls gateway-tls/consumer',
      'db-tools-credential provider-credential/user',
      'east-llm-a-credential provider-credential/simulated',
      'east-llm-b-credential provider-credential/simulated',
      'grid-ca grid-ca',
      'grid-ca-signer grid-ca-signer',
      'grid-dashboard-token dashboard-token',
      'grid-ingest-token ingest-token',
      'grid-site-cert site-certificate',
      'provider-gateway-tls gateway-tls/provider',
      'swim-key swim-key',
    ]);
    const provider = east.secretNeeds.find((n) => n.purpose === 'gateway-tls' && n.role === 'provider');
    expect(provider).toMatchObject({
      serverNames: [
        'gateway.east.grid.example.com',
        'provider-gateway.grid-system.svc.cluster.local',
        'provider-gateway.grid-system.svc',
        'provider-gateway.grid-system',
        'provider-gateway',
      ],
    });
    const consumer = east.secretNeeds.find((n) => n.purpose === 'gateway-tls' && n.role === 'consumer');
    expect(consumer).toMatchObject({ organizations: ['agn-demo-consumers'] });
  });
});

// The site() helper's defaults are what these cases change; keep them honest.
it("builds the helpers' two-site grid without a problem", () => {
  expect(gridProblems(twoSiteGrid())).toEqual([]);
  expect(site('x').gossipService).toEqual({ type: 'LoadBalancer' });
});
