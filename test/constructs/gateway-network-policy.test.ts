// The gateway NetworkPolicy that justifies allow_public_admin, and the synth-time Praxis AI check of rendered
// configs: a config our gateway or Praxis AI would refuse at startup fails synth with the key and its path.
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ConsumerGateway } from '../../constructs/consumer-gateway.ts';
import { gatewayConfigProblems } from '../../constructs/gateway-config-schema.ts';
import { validateGrid } from '../../constructs/grid.ts';
import { renderProviderGatewayConfig } from '../../constructs/provider-gateway-config.ts';
import { ProviderGateway } from '../../constructs/provider-gateway.ts';
import type { GatewayConfig } from '../../schemas/generated/gateway-config.ts';
import { chart, find, synth } from './helpers.ts';

type Json = Record<string, unknown> & {
  spec: { ingress: { from?: unknown[]; ports: { port: number }[] }[]; podSelector: unknown; policyTypes: string[] };
};

const provider = (scrapers?: { cidrs: string[] }) => {
  const c = chart();
  new ProviderGateway(c, 'provider', {
    namespace: 'grid-system',
    site: 'west',
    trustedPeers: [{ organization: 'consumers' }],
    backends: [{ name: 'backend', endpoint: 'sim.grid-system.svc.cluster.local:8080' }],
    routes: [{ candidateId: 'aaaaaaaa', model: 'm1', backendCluster: 'backend' }],
    ...(scrapers === undefined ? {} : { metricsScrapers: scrapers }),
  });
  return c;
};

describe('gateway NetworkPolicy', () => {
  it('opens only the listener to every source; the admin port is left to the node', () => {
    const objects = synth(provider());
    const policy = find(objects, 'NetworkPolicy', 'provider-gateway') as unknown as Json;
    const deployment = find(objects, 'Deployment', 'provider-gateway') as unknown as { spec: { selector: unknown } };
    expect(policy.spec.podSelector).toEqual(deployment.spec.selector);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress).toEqual([{ ports: [{ port: 8443, protocol: 'TCP' }] }]);
    const config = YAML.parse(
      (find(objects, 'ConfigMap', 'provider-gateway-config') as unknown as { data: Record<string, string> }).data[
        'praxis.yaml'
      ]!,
    ) as GatewayConfig;
    expect(config.admin).toEqual({ address: '0.0.0.0:9901' });
    expect(config.insecure_options).toEqual({ allow_public_admin: true });
  });

  it('admits declared scrapers to the admin port, and to overlay-sync on a consumer', () => {
    const policy = find(
      synth(provider({ cidrs: ['10.42.0.0/16'] })),
      'NetworkPolicy',
      'provider-gateway',
    ) as unknown as Json;
    expect(policy.spec.ingress[1]).toEqual({
      from: [{ ipBlock: { cidr: '10.42.0.0/16' } }],
      ports: [{ port: 9901, protocol: 'TCP' }],
    });
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      namespace: 'grid-system',
      network: 'demo',
      site: 'east',
      metricsScrapers: { cidrs: ['10.42.0.0/16', '2001:db8::/32'] },
      upstreams: [
        {
          cluster: 'west-llm',
          address: 'gateway.west.example.com:8443',
          transport: { mode: 'mutual_tls', sni: 'gateway.west.example.com' },
        },
      ],
    });
    const consumer = find(synth(c), 'NetworkPolicy', 'consumer-gateway') as unknown as Json;
    expect(consumer.spec.ingress[0]).toEqual({ ports: [{ port: 8080, protocol: 'TCP' }] });
    expect(consumer.spec.ingress[1]!.ports.map((p) => p.port)).toEqual([9901, 9091]);
    expect(consumer.spec.ingress[1]!.from).toHaveLength(2);
  });

  it('refuses scraper CIDRs that would read differently than they look', () => {
    expect(() => validateGrid(provider({ cidrs: [] }))).toThrow(/metricsScrapers\.cidrs: no CIDR is listed/u);
    expect(() => validateGrid(provider({ cidrs: ['10.42.1.0/16'] }))).toThrow(
      /metricsScrapers\.cidrs\[0\]: "10\.42\.1\.0\/16" has host bits set/u,
    );
  });
});

describe('synth-time Praxis AI check', () => {
  const input = {
    listenerPort: 8443,
    adminPort: 9901,
    providerId: 'west',
    trustedPeers: [{ organization: 'consumers' }],
    backends: [{ name: 'backend', endpoint: 'sim:8080' }],
    shutdownTimeoutSecs: 5,
  };

  it('passes what the compiler renders: explicit paths on every route, no extension key', () => {
    const config = renderProviderGatewayConfig({
      ...input,
      routes: [{ candidateId: 'aaaaaaaa', model: 'm1', backendCluster: 'backend' }],
    });
    expect(gatewayConfigProblems(config)).toEqual([]);
    const route = (
      config.filter_chains[0]!.filters.find((f) => f.filter === 'provider_route') as { routes: { paths: string[] }[] }
    ).routes[0]!;
    expect(route.paths).toEqual(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
  });

  it('refuses a repeated candidate_id and an extension key, naming where', () => {
    const repeated = renderProviderGatewayConfig({
      ...input,
      routes: [
        { candidateId: 'aaaaaaaa', model: 'm1', backendCluster: 'backend' },
        { candidateId: 'aaaaaaaa', model: 'm2', backendCluster: 'backend' },
      ],
    });
    expect(gatewayConfigProblems(repeated)).toEqual([
      {
        pointer: '/filter_chains/0/filters/3/routes/1/candidate_id',
        message: "provider_route: duplicate candidate_id 'aaaaaaaa' (routes[0] has it)",
      },
    ]);
    const extended = renderProviderGatewayConfig({
      ...input,
      routes: [{ candidateId: 'aaaaaaaa', model: 'm1', backendCluster: 'backend' }],
    });
    extended.listeners[0]!.max_body_bytes = 4096;
    expect(gatewayConfigProblems(extended)).toEqual([
      {
        pointer: '/listeners/0/max_body_bytes',
        message: expect.stringMatching(/extension key of this gateway: Praxis AI refuses it/u),
      },
    ]);
  });
});
