import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ConsumerGateway } from '../../constructs/consumer-gateway.ts';
import { CONFIG_DIGEST_ANNOTATION } from '../../constructs/gateway-workload.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import type {
  GatewayConfig,
  IntelligentRouteFilter,
  LoadBalancerFilter,
} from '../../schemas/generated/gateway-config.ts';
import { chart, find, podSpec, synth, type Manifest } from './helpers.ts';

const base = { namespace: 'grid-system', network: 'demo', site: 'east' } as const;
const mtls = { mode: 'mutual_tls', sni: 'gateway.west.example.com' } as const;

function gatewayConfig(objects: Manifest[]): GatewayConfig {
  const data = (find(objects, 'ConfigMap', 'consumer-gateway-config') as unknown as { data: Record<string, string> })
    .data;
  return YAML.parse(data['praxis.yaml'] ?? '') as GatewayConfig;
}

function filter<T>(config: GatewayConfig, name: string): T {
  const found = config.filter_chains[0]?.filters.find((f) => f.filter === name);
  if (found === undefined) throw new Error(`no ${name}`);
  return found as T;
}

describe('ConsumerGateway', () => {
  it('synthesizes the whole consumer workload (snapshot)', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      ...base,
      upstreams: [{ cluster: 'west-llm', address: 'gateway.west.example.com:8443', transport: mtls }],
    });
    expect(synth(c)).toMatchSnapshot();
  });

  it('resolves its defaults into readonly fields', () => {
    const gw = new ConsumerGateway(chart(), 'consumer', base);
    expect([gw.name, gw.replicas, gw.listenerPort, gw.adminPort, gw.tlsSecretName, gw.reloadDebounceMs]).toEqual([
      'consumer-gateway',
      2,
      8080,
      9901,
      'consumer-gateway-tls',
      250,
    ]);
  });

  it('lists every upstream as a provider hop with an explicit mTLS cluster', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      ...base,
      upstreams: [
        { cluster: 'west-llm', address: 'gateway.west.example.com:8443', transport: mtls },
        {
          cluster: 'east-llm',
          address: 'provider-gateway.grid-system.svc.cluster.local:8443',
          transport: { mode: 'mutual_tls' },
        },
      ],
    });
    const config = gatewayConfig(synth(c));
    expect(filter<IntelligentRouteFilter>(config, 'intelligent_route').provider_hop_clusters).toEqual([
      'east-llm',
      'west-llm',
    ]);
    expect(filter<IntelligentRouteFilter>(config, 'intelligent_route').expected_overlay_scope).toEqual({
      network: 'demo',
      gateway: 'consumer-gateway',
      namespace: 'grid-system',
      local_site: 'east',
    });
    const clusters = filter<LoadBalancerFilter>(config, 'load_balancer').clusters;
    expect(clusters.map((cl) => [cl.name, cl.tls?.sni, cl.tls?.client_cert?.cert_path])).toEqual([
      ['east-llm', 'provider-gateway.grid-system.svc.cluster.local', '/etc/praxis/tls/tls.crt'],
      ['west-llm', 'gateway.west.example.com', '/etc/praxis/tls/tls.crt'],
    ]);
    expect(config.filter_chains[0]?.filters.map((f) => f.filter)).toEqual([
      'json_body_field',
      'openai_responses_format',
      'intelligent_route',
      'load_balancer',
    ]);
  });

  it('renders tls with a custom CA and plaintext transports as declared, and projects the CA Secret', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      ...base,
      upstreams: [
        {
          cluster: 'api',
          address: 'api.example.internal:443',
          transport: { mode: 'tls', sni: 'api.example.internal', caSecretRef: { name: 'api-ca' } },
        },
        { cluster: 'dev', address: '10.0.0.9:8080', transport: { mode: 'plaintext' } },
      ],
    });
    const objects = synth(c);
    const clusters = filter<LoadBalancerFilter>(gatewayConfig(objects), 'load_balancer').clusters;
    expect(clusters).toEqual([
      {
        name: 'api',
        endpoints: ['api.example.internal:443'],
        tls: { ca: { ca_path: '/etc/praxis/upstream-ca/api-ca/ca.crt' }, sni: 'api.example.internal', verify: true },
      },
      { name: 'dev', endpoints: ['10.0.0.9:8080'] },
    ]);
    const praxis = podSpec(find(objects, 'Deployment', 'consumer-gateway')).volumes?.find(
      (v) => v.name === 'praxis',
    ) as unknown as { projected: { sources: { secret?: { name: string } }[] } };
    expect(praxis.projected.sources.flatMap((s) => (s.secret === undefined ? [] : [s.secret.name]))).toEqual([
      'consumer-gateway-tls',
      'api-ca',
    ]);
  });

  it('applies addUpstream after construction and rolls the pods through the config digest', () => {
    const c = chart();
    const gw = new ConsumerGateway(c, 'consumer', {
      ...base,
      upstreams: [{ cluster: 'west-llm', address: 'gateway.west.example.com:8443', transport: mtls }],
    });
    const before = (
      find(synth(c), 'Deployment', 'consumer-gateway') as unknown as {
        spec: { template: { metadata: { annotations: Record<string, string> } } };
      }
    ).spec.template.metadata.annotations[CONFIG_DIGEST_ANNOTATION];
    gw.addUpstream({ cluster: 'north-llm', address: 'gateway.north.example.com:8443', transport: mtls });
    const objects = synth(c);
    expect(filter<IntelligentRouteFilter>(gatewayConfig(objects), 'intelligent_route').provider_hop_clusters).toEqual([
      'north-llm',
      'west-llm',
    ]);
    const after = (
      find(objects, 'Deployment', 'consumer-gateway') as unknown as {
        spec: { template: { metadata: { annotations: Record<string, string> } } };
      }
    ).spec.template.metadata.annotations[CONFIG_DIGEST_ANNOTATION];
    expect(after).toMatch(/^[0-9a-f]{64}$/);
    expect(after).not.toBe(before);
  });

  it('mounts no credential and no token in the gateway container', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      ...base,
      upstreams: [{ cluster: 'west-llm', address: 'gateway.west.example.com:8443', transport: mtls }],
    });
    const objects = synth(c);
    const pod = podSpec(find(objects, 'Deployment', 'consumer-gateway'));
    expect(pod.automountServiceAccountToken).toBe(false);
    const gateway = pod.containers.find((ct) => ct.name === 'gateway');
    expect(gateway?.volumeMounts?.map((m) => m.mountPath)).toEqual(['/etc/praxis', '/run/praxis-routing', '/tmp']);
    expect(JSON.stringify(objects)).not.toContain('/etc/praxis/credentials');
    expect(filter<LoadBalancerFilter>(gatewayConfig(objects), 'load_balancer')).toBeDefined();
    expect(gatewayConfig(objects).filter_chains[0]?.filters.some((f) => f.filter === 'credential_inject')).toBe(false);
  });

  it('throws at synth when a credential would be mounted on it', () => {
    const attempt = (): unknown =>
      new ConsumerGateway(chart(), 'consumer', {
        ...base,
        credentials: [{ name: 'openai-credential', namespace: 'grid-system', key: 'token' }],
      });
    expect(attempt).toThrow(GridSynthError);
    expect(attempt).toThrow(
      'test/consumer: credentials: a consumer gateway never mounts provider credentials (got Secret grid-system/openai-credential). Fix: declare the credential on the InferenceProvider (spec.auth.secretRef); the provider gateway of its site injects it',
    );
    const gw = new ConsumerGateway(chart(), 'consumer', base);
    expect(() => gw.mountCredential({ name: 'x', namespace: 'grid-system', key: 'token' })).toThrow(
      /consumer gateway never mounts provider credentials/u,
    );
  });

  it('rejects an endpoint without transport, naming the cluster and the fix', () => {
    const gw = new ConsumerGateway(chart(), 'consumer', base);
    expect(() => gw.addUpstream({ cluster: 'west-llm', address: 'gateway.west.example.com:8443' })).toThrow(
      'test/consumer: upstreams[cluster=west-llm].transport: endpoint gateway.west.example.com:8443 has no transport. Fix: set transport.mode to mutual_tls (provider gateways), tls (verified server TLS) or plaintext (explicitly unencrypted)',
    );
  });

  it('rejects a cluster declared twice', () => {
    const gw = new ConsumerGateway(chart(), 'consumer', {
      ...base,
      upstreams: [{ cluster: 'x', address: 'a.example.com:8443', transport: mtls }],
    });
    expect(() => gw.addUpstream({ cluster: 'x', address: 'b.example.com:8443', transport: mtls })).toThrow(
      /cluster x is declared twice/u,
    );
  });
});
