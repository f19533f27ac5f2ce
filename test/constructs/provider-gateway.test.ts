import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ProviderGateway } from '../../constructs/provider-gateway.ts';
import { validateGrid } from '../../constructs/grid.ts';
import type {
  CredentialInjectFilter,
  GatewayConfig,
  ProviderRouteFilter,
} from '../../schemas/generated/gateway-config.ts';
import { chart, find, podSpec, synth, type Manifest } from './helpers.ts';

const base = { namespace: 'grid-system', site: 'west', trustedPeers: [{ organization: 'consumers' }] } as const;
const credential = { name: 'openai-credential', namespace: 'grid-system', key: 'token' } as const;

function config(objects: Manifest[]): GatewayConfig {
  const data = (find(objects, 'ConfigMap', 'provider-gateway-config') as unknown as { data: Record<string, string> })
    .data;
  return YAML.parse(data['praxis.yaml'] ?? '') as GatewayConfig;
}

function build(): { c: ReturnType<typeof chart>; gw: ProviderGateway } {
  const c = chart();
  const gw = new ProviderGateway(c, 'provider', {
    ...base,
    backends: [{ name: 'backend-openai', endpoint: 'api.openai.com:443', tls: { sni: 'api.openai.com' } }],
    routes: [{ candidateId: '73f63e41', model: 'gpt-4o-mini', backendCluster: 'backend-openai', credential }],
  });
  return { c, gw };
}

describe('ProviderGateway', () => {
  it('synthesizes the provider workload (snapshot)', () => {
    expect(synth(build().c)).toMatchSnapshot();
  });

  it('puts peer_identity_trust first and requires client certificates', () => {
    const cfg = config(synth(build().c));
    expect(cfg.filter_chains[0]?.filters.map((f) => f.filter)).toEqual([
      'peer_identity_trust',
      'json_body_field',
      'openai_responses_format',
      'provider_route',
      'credential_inject',
      'load_balancer',
    ]);
    expect(cfg.listeners[0]?.tls?.client_cert_mode).toBe('require');
  });

  it('mounts each route credential once, as a file under /etc/praxis/credentials, and references it by name only', () => {
    const { c } = build();
    const objects = synth(c);
    const cfg = config(objects);
    const inject = cfg.filter_chains[0]?.filters.find(
      (f) => f.filter === 'credential_inject',
    ) as CredentialInjectFilter;
    expect(inject.credentials).toEqual([
      {
        strategy: 'bearer_token',
        name: 'openai-credential',
        namespace: 'grid-system',
        key: 'token',
        file: '/etc/praxis/credentials/openai-credential/token',
      },
    ]);
    const praxis = podSpec(find(objects, 'Deployment', 'provider-gateway')).volumes?.find(
      (v) => v.name === 'praxis',
    ) as unknown as { projected: { sources: unknown[] } };
    expect(praxis.projected.sources).toContainEqual({
      secret: { name: 'openai-credential', items: [{ key: 'token', path: 'credentials/openai-credential/token' }] },
    });
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false);
  });

  it('applies addRoute/addBackend after construction', () => {
    const { c, gw } = build();
    gw.addBackend({ name: 'backend-sim', endpoint: 'sim-west.grid-system.svc.cluster.local:8080' });
    gw.addRoute({
      candidateId: '5fc57e96',
      model: 'sim-model-v1',
      backendCluster: 'backend-sim',
      credential: { name: 'sim-credential', namespace: 'grid-system', key: 'token' },
    });
    const objects = synth(c);
    const route = config(objects).filter_chains[0]?.filters.find(
      (f) => f.filter === 'provider_route',
    ) as ProviderRouteFilter;
    expect(route.routes.map((r) => [r.candidate_id, r.model, r.cluster])).toEqual([
      ['73f63e41', 'gpt-4o-mini', 'backend-openai'],
      ['5fc57e96', 'sim-model-v1', 'backend-sim'],
    ]);
    expect(gw.credentials.map((cr) => cr.name)).toEqual(['openai-credential', 'sim-credential']);
  });

  it('mounts no service-account token and no overlay volume', () => {
    const pod = podSpec(find(synth(build().c), 'Deployment', 'provider-gateway'));
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.serviceAccountName).toBeUndefined();
    expect(pod.volumes?.map((v) => v.name)).toEqual(['praxis', 'tmp']);
  });

  it('rejects a credential outside its namespace and a duplicate candidate', () => {
    const { gw } = build();
    expect(() =>
      gw.addRoute({
        candidateId: 'aaaaaaaa',
        model: 'x',
        backendCluster: 'backend-openai',
        credential: { ...credential, namespace: 'other' },
      }),
    ).toThrow(
      'test/provider: routes[candidate_id=aaaaaaaa].credential.secretRef.namespace: Secret other/openai-credential is outside the gateway namespace grid-system, so it cannot be mounted. Fix: create the credential Secret in grid-system and reference it there',
    );
    expect(() =>
      gw.addRoute({ candidateId: '73f63e41', model: 'gpt-4o-mini', backendCluster: 'backend-openai' }),
    ).toThrow(/candidate_id 73f63e41 is routed twice/u);
  });

  it('fails validation when a route names an undeclared backend or the gateway has no routes', () => {
    const { c, gw } = build();
    gw.addRoute({ candidateId: 'bbbbbbbb', model: 'y', backendCluster: 'missing' });
    expect(() => validateGrid(c)).toThrow(
      'test/provider: routes[candidate_id=bbbbbbbb].cluster: backend cluster missing is not declared. Fix: add the backend with addBackend() or point the route at a declared backend',
    );
    const empty = chart();
    new ProviderGateway(empty, 'provider', base);
    expect(() => validateGrid(empty)).toThrow(
      /praxis\.yaml\/filter_chains\/0\/filters\/3\/routes: must NOT have fewer than 1 items/u,
    );
  });
});
