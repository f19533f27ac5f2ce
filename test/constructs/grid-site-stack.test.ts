import { describe, expect, it } from 'vitest';
import { App, Testing } from 'cdk8s';
import YAML from 'yaml';
import {
  GridSiteStack,
  backendFromEndpoint,
  peerGridSiteName,
  referencedSecrets,
} from '../../constructs/grid-site-stack.ts';
import { buildGrid } from '../../constructs/grid.ts';
import { synthFailure } from './synth-failure.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import { discoveredSiteK8sName } from '../../daemons/routing/sites.ts';
import type { GatewayConfig, LoadBalancerFilter, ProviderRouteFilter } from '../../schemas/generated/gateway-config.ts';
import type { GridDeclaration } from '../../constructs/grid-declaration.ts';
import { find, podSpec, simProvider, site, twoSiteGrid, type Manifest } from './helpers.ts';

function stacks(declaration: GridDeclaration): Record<string, Manifest[]> {
  const app = Testing.app();
  const built = buildGrid(app, declaration);
  return Object.fromEntries(built.sites.map((stack) => [stack.siteName, Testing.synth(stack) as Manifest[]]));
}

function gatewayConfig(objects: Manifest[], name: string): GatewayConfig {
  return YAML.parse(
    (find(objects, 'ConfigMap', `${name}-config`) as unknown as { data: Record<string, string> }).data['praxis.yaml'] ??
      '',
  ) as GatewayConfig;
}

describe('GridSiteStack', () => {
  it('compiles a combined site (snapshot)', () => {
    expect(stacks(twoSiteGrid())['a']).toMatchSnapshot();
  });

  it('writes candidate_id = stable_id at synth time for every local (model, provider)', () => {
    const objects = stacks(twoSiteGrid())['b'] ?? [];
    const route = gatewayConfig(objects, 'provider-gateway').filter_chains[0]?.filters.find(
      (f) => f.filter === 'provider_route',
    ) as ProviderRouteFilter;
    expect(route.routes.map((r) => [r.model, r.candidate_id, r.cluster])).toEqual([
      ['m1', stableId('inference_model', 'm1', 'b', 'pb'), 'backend-pb'],
      ['m2', stableId('inference_model', 'm2', 'b', 'pb'), 'backend-pb'],
    ]);
    expect(route.routes.every((r) => /^[0-9a-f]{8}$/u.test(r.candidate_id))).toBe(true);
  });

  it('gives the consumer an explicit mTLS cluster for every provider of the grid, local and remote', () => {
    const objects = stacks(twoSiteGrid())['a'] ?? [];
    const lb = gatewayConfig(objects, 'consumer-gateway').filter_chains[0]?.filters.find(
      (f) => f.filter === 'load_balancer',
    ) as LoadBalancerFilter;
    expect(lb.clusters.map((cl) => [cl.name, cl.endpoints, cl.tls?.sni, cl.tls?.client_cert !== undefined])).toEqual([
      ['pa', ['provider-gateway.grid-system.svc.cluster.local:8443'], 'gateway.a.example.com', true],
      ['pb', ['gateway.b.example.com:8443'], 'gateway.b.example.com', true],
    ]);
  });

  it('mounts credentials only on the provider gateway and the simulated backend that checks them', () => {
    const objects = stacks(twoSiteGrid())['a'] ?? [];
    const mounting = objects
      .filter((o) => o.kind === 'Deployment')
      .filter((o) => JSON.stringify(podSpec(o).volumes ?? []).includes('pa-credential'))
      .map((o) => o.metadata.name);
    expect(mounting).toEqual(['sim-pa', 'provider-gateway']);
    const consumer = JSON.stringify([
      find(objects, 'Deployment', 'consumer-gateway'),
      find(objects, 'ConfigMap', 'consumer-gateway-config'),
    ]);
    expect(consumer).not.toContain('credential');
  });

  it("declares its GridNetwork, own GridSite, peer GridSites under the operator's discovery name, and providers", () => {
    const objects = stacks(twoSiteGrid())['a'] ?? [];
    expect(
      objects.filter((o) => o.apiVersion === 'grid.praxis.fast/v1alpha1').map((o) => `${o.kind}/${o.metadata.name}`),
    ).toEqual(['GridNetwork/net', 'GridSite/a', 'GridSite/net-b', 'InferenceProvider/pa']);
    expect(peerGridSiteName('My.Net', 'West_2')).toBe(discoveredSiteK8sName('My.Net', 'West_2'));
    const network = find(objects, 'GridNetwork', 'net') as unknown as {
      spec: { consumerGateways: unknown[]; tls: Record<string, { name: string }> };
    };
    expect(network.spec.consumerGateways).toEqual([
      { name: 'consumer-gateway', namespace: 'grid-system', siteName: 'a' },
    ]);
    expect(network.spec.tls['swimKeySecretRef']?.name).toBe('swim-key');
    const role = find(objects, 'Role', 'gossip-operator') as unknown as {
      rules: { resources: string[]; resourceNames?: string[] }[];
    };
    expect(role.rules.find((r) => r.resources.includes('secrets'))?.resourceNames).toEqual([
      'grid-ca',
      'grid-site-cert',
      'pa-credential',
      'swim-key',
    ]);
  });

  it('derives backends from endpoint URLs and finds every referenced Secret', () => {
    expect(backendFromEndpoint('x', 'https://api.openai.com')).toEqual({
      name: 'x',
      endpoint: 'api.openai.com:443',
      tls: { sni: 'api.openai.com' },
    });
    expect(backendFromEndpoint('x', 'http://vllm.inference.svc:8000/v1')).toEqual({
      name: 'x',
      endpoint: 'vllm.inference.svc:8000',
    });
    expect(
      referencedSecrets({
        auth: { secretRef: { name: 'a', namespace: 'n' } },
        tls: { caSecretRef: { name: 'b', namespace: 'n' }, caConfigMapRef: { name: 'c', namespace: 'n' } },
      }),
    ).toEqual([
      { name: 'a', namespace: 'n' },
      { name: 'b', namespace: 'n' },
    ]);
  });

  describe('bad input fails with one message naming path, field and fix', () => {
    it('an endpoint without transport', () => {
      const grid = twoSiteGrid({ b: { gatewayEndpoint: { address: 'gateway.b.example.com:8443' } } });
      expect(synthFailure(() => stacks(grid))).toBe(
        'b: gatewayEndpoint.tls.mode: endpoint gateway.b.example.com:8443 has no transport. Fix: set gatewayEndpoint.tls.mode to Mutual (with serverName) for a provider gateway, or Plaintext for a local test endpoint',
      );
    });

    it('a remote site with providers but no endpoint', () => {
      const grid = twoSiteGrid({ b: { gatewayEndpoint: undefined } });
      expect(synthFailure(() => stacks(grid))).toBe(
        'b: gatewayEndpoint: site b offers providers but declares no gatewayEndpoint, so the consumer gateway of a cannot reach them. Fix: set gatewayEndpoint { address: host:port of its provider gateway, tls: { mode: Mutual, serverName } }',
      );
    });

    it('a credential on the consumer gateway', () => {
      const grid = twoSiteGrid({
        a: { consumerGateway: { credentials: [{ name: 'pa-credential', namespace: 'grid-system', key: 'token' }] } },
      });
      expect(synthFailure(() => stacks(grid))).toBe(
        'a/consumer-gateway: credentials: a consumer gateway never mounts provider credentials (got Secret grid-system/pa-credential). Fix: declare the credential on the InferenceProvider (spec.auth.secretRef); the provider gateway of its site injects it',
      );
    });

    it('providers without a provider gateway', () => {
      const grid = twoSiteGrid({ b: { providerGateway: undefined } });
      expect(synthFailure(() => stacks(grid))).toContain(
        'b: providerGateway: site b declares providers but no provider gateway to front them. Fix: add providerGateway with the trustedPeers (consumer identities) allowed to call them',
      );
    });

    it('a stable_id collision', () => {
      // Two model names whose FNV-1a ids collide on site b, cluster pb (found by search; FNV-32 has 2^32 values).
      const seen = new Map<string, string>();
      let pair: [string, string] | undefined;
      for (let i = 0; pair === undefined; i++) {
        const id = stableId('inference_model', `m${i}`, 'b', 'pb');
        const other = seen.get(id);
        if (other !== undefined) pair = [other, `m${i}`];
        seen.set(id, `m${i}`);
      }
      const [first, second] = pair;
      const id = stableId('inference_model', first, 'b', 'pb');
      const grid = twoSiteGrid({ b: { providers: [simProvider('pb', [first, second])] } });
      expect(synthFailure(() => stacks(grid))).toBe(
        `b/providers/pb: spec.models[name=${second}]: stable_id ${id} of inference_model/${second}/b/pb collides with inference_model/${first}/b/pb (b/providers/pb). Fix: rename the model, or set spec.routingClusterRef to a different cluster name, so the FNV-1a ids differ`,
      );
    });

    it('the same candidate declared twice and a cluster served by two sites', () => {
      const twice = twoSiteGrid({
        b: { providers: [simProvider('pb', ['m1']), simProvider('pc', ['m1'], { routingClusterRef: 'pb' })] },
      });
      expect(synthFailure(() => stacks(twice))).toBe(
        'b/providers/pc: spec.models[name=m1]: model m1 on cluster pb of site b is already declared by b/providers/pb. Fix: serve the model from one provider per cluster, or give one provider its own spec.routingClusterRef',
      );
      const shared = twoSiteGrid({ b: { providers: [simProvider('pa', ['m1'])] } });
      expect(synthFailure(() => stacks(shared))).toBe(
        'b/providers/pa: name: cluster pa is also served by site a (a/providers/pa); a consumer maps a cluster to one provider gateway. Fix: give this provider a distinct name or spec.routingClusterRef',
      );
    });

    it('a missing required field of a real (not simulated) provider', () => {
      const grid = twoSiteGrid({
        b: {
          providers: [
            {
              name: 'pb',
              backendPodLabels: { app: 'vllm' },
              spec: { providerKind: 'self_hosted', backendKind: 'local', models: [{ name: 'm1' }] },
            },
          ],
        },
      });
      expect(synthFailure(() => stacks(grid))).toBe(
        'b/providers/pb: spec.endpoint: required field is missing. Fix: add endpoint to the declaration',
      );
    });

    it('duplicate model names in a provider, reported once by the InferenceProvider schema', () => {
      const grid = twoSiteGrid({ b: { providers: [simProvider('pb', ['m1', 'm1'])] } });
      expect(synthFailure(() => stacks(grid))).toBe(
        'b/providers/pb: spec.models[1]: duplicate entry (name "m1"): already at index 0. Fix: give every entry of spec.models a distinct name',
      );
    });

    it('a bad provider spec, reported at the provider construct', () => {
      const grid = twoSiteGrid({ b: { providers: [simProvider('pb', ['m1'], { capacityWeight: 0 })] } });
      expect(synthFailure(() => stacks(grid))).toBe(
        'b/providers/pb: spec.capacityWeight: must be >= 1 (got 0). Fix: set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)',
      );
    });

    it('duplicate site names', () => {
      const grid: GridDeclaration = { network: { name: 'net' }, sites: [site('a'), site('a')] };
      expect(synthFailure(() => buildGrid(new App({ outdir: '/nonexistent' }), grid))).toBe(
        'a: name: site a is declared twice. Fix: give every site a distinct name',
      );
    });
  });

  it('is usable alone for a single-site grid', () => {
    const app = Testing.app();
    const stack = new GridSiteStack(app, 'solo', {
      network: { name: 'net' },
      site: site('solo', { consumerGateway: {}, providers: [simProvider('p', ['m'])] }),
    });
    const objects = Testing.synth(stack) as Manifest[];
    expect(stack.peerSites).toEqual([]);
    expect(objects.filter((o) => o.kind === 'GridSite').map((o) => o.metadata.name)).toEqual(['solo']);
  });
});

describe('GridSiteStack: generated consumer config (praxisConfig) and the operator Role', () => {
  type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
  const rules = (objects: Manifest[]) =>
    (find(objects, 'Role', 'gossip-operator') as unknown as { rules: Rule[] }).rules;
  const named = (objects: Manifest[], resource: string, verb: string) =>
    rules(objects)
      .filter((r) => r.resources.includes(resource) && r.verbs.includes(verb))
      .flatMap((r) => r.resourceNames ?? ['<all>'])
      .sort();
  const SERVING_NAME = 'grid-serving-net-consumer-gateway';
  const praxisConfig = {
    generate: true,
    enableProjectedCredentials: true,
    configMapName: 'praxis-edge',
    clusterEndpoints: [
      {
        cluster: 'api',
        address: 'api.example.internal:443',
        transport: { mode: 'tls' as const, sni: 'api.example.internal', caSecretRef: { name: 'api-ca' } },
      },
    ],
    mountReconciliation: { enabled: true, deploymentName: 'inference-gw' },
  };

  it('carries praxisConfig into the GridNetwork entry and grants its ConfigMap, Deployment and the Secrets the mount check GETs', () => {
    const objects = stacks(twoSiteGrid({ a: { consumerGateway: { praxisConfig } } }))['a'] ?? [];
    const network = find(objects, 'GridNetwork', 'net') as unknown as {
      spec: { consumerGateways: { praxisConfig?: unknown }[] };
    };
    expect(network.spec.consumerGateways[0]?.praxisConfig).toEqual(praxisConfig);
    // The one other delete: the deployed gateway's serving config name, for removal once gridServing is off.
    expect(named(objects, 'configmaps', 'delete')).toEqual(['<all>', SERVING_NAME]);
    expect(named(objects, 'deployments', 'patch')).toEqual(['inference-gw']);
    // api-ca: a transport.caSecretRef (no namespace: the gateway namespace); pb-credential: a remote candidate's
    // credential reference in the gateway namespace. Both are GETed before mounting; neither had a grant before.
    const secrets = named(objects, 'secrets', 'get');
    expect(secrets).toEqual(expect.arrayContaining(['api-ca', 'pa-credential', 'pb-credential', 'grid-site-cert']));
    // The consumer gateway construct itself knows nothing of praxisConfig: its own config is rendered here.
    expect(JSON.stringify(find(objects, 'ConfigMap', 'consumer-gateway-config'))).not.toContain('praxis-edge');
  });

  it('grants nothing for generated configs when praxisConfig is absent or not generating, and no mount Secrets without delegation', () => {
    const none = stacks(twoSiteGrid())['a'] ?? [];
    expect(named(none, 'deployments', 'patch')).toEqual([]);
    expect(named(none, 'configmaps', 'delete')).toEqual([SERVING_NAME]);
    const off =
      stacks(twoSiteGrid({ a: { consumerGateway: { praxisConfig: { ...praxisConfig, generate: false } } } }))['a'] ??
      [];
    expect(named(off, 'configmaps', 'delete')).toEqual([SERVING_NAME]);
    const undelegated =
      stacks(
        twoSiteGrid({ a: { consumerGateway: { praxisConfig: { ...praxisConfig, mountReconciliation: undefined } } } }),
      )['a'] ?? [];
    expect(named(undelegated, 'configmaps', 'delete')).toEqual(['<all>', SERVING_NAME]);
    expect(named(undelegated, 'secrets', 'get')).not.toContain('api-ca');
    expect(named(undelegated, 'secrets', 'get')).not.toContain('pb-credential');
  });

  it("refuses a generated config aimed at the stack's own consumer gateway ConfigMap or Deployment", () => {
    const message = synthFailure(() =>
      stacks(
        twoSiteGrid({
          a: {
            consumerGateway: {
              praxisConfig: {
                ...praxisConfig,
                configMapName: 'consumer-gateway-config',
                mountReconciliation: { enabled: true, deploymentName: 'consumer-gateway' },
              },
            },
          },
        }),
      ),
    );
    expect(message).toContain(
      "a: consumerGateway.praxisConfig.configMapName: consumer-gateway-config is the ConfigMap of this stack's own consumer gateway",
    );
    expect(message).toContain(
      "a: consumerGateway.praxisConfig.mountReconciliation.deploymentName: consumer-gateway is the Deployment of this stack's own consumer gateway",
    );
  });

  it('lets a praxisConfig that does not generate name those objects: the operator never writes them', () => {
    const clashing = {
      ...praxisConfig,
      configMapName: 'consumer-gateway-config',
      mountReconciliation: { enabled: true, deploymentName: 'consumer-gateway' },
    };
    const objects =
      stacks(twoSiteGrid({ a: { consumerGateway: { praxisConfig: { ...clashing, generate: false } } } }))['a'] ?? [];
    expect(find(objects, 'GridNetwork', 'net')).toBeDefined();
  });
});

describe('GridSiteStack: external consumers (a Praxis AI gateway the site runs itself)', () => {
  type Rule = { resources: string[]; verbs: string[]; resourceNames?: string[] };
  const overlayGrants = (objects: Manifest[]) =>
    (find(objects, 'Role', 'gossip-operator') as unknown as { rules: Rule[] }).rules
      .filter((r) => r.resources.includes('configmaps') && r.verbs.includes('patch'))
      .flatMap((r) => r.resourceNames ?? [])
      .filter((name) => name.startsWith('grid-overlay-'));

  it('adds a consumer entry with its dialect and grants its overlay ConfigMap; nothing is deployed for it', () => {
    const objects =
      stacks(twoSiteGrid({ a: { externalConsumers: [{ name: 'praxis-ai', dialect: 'praxis-main' }] } }))['a'] ?? [];
    const network = find(objects, 'GridNetwork', 'net') as unknown as {
      spec: { consumerGateways: Record<string, unknown>[] };
    };
    expect(network.spec.consumerGateways).toEqual([
      // The deployed consumer is our gateway: dialect agn, the schema default, so not written.
      { name: 'consumer-gateway', namespace: 'grid-system', siteName: 'a' },
      { name: 'praxis-ai', namespace: 'grid-system', siteName: 'a', dialect: 'praxis-main' },
    ]);
    expect(overlayGrants(objects).sort()).toEqual(['grid-overlay-net-consumer-gateway', 'grid-overlay-net-praxis-ai']);
    expect(objects.filter((o) => o.metadata.name.includes('praxis-ai') && o.kind !== 'GridNetwork')).toEqual([]);
  });

  it('works on a site without a consumer gateway of its own', () => {
    const objects =
      stacks(twoSiteGrid({ b: { externalConsumers: [{ name: 'praxis-ai', dialect: 'praxis-groups' }] } }))['b'] ?? [];
    const network = find(objects, 'GridNetwork', 'net') as unknown as {
      spec: { consumerGateways: Record<string, unknown>[] };
    };
    expect(network.spec.consumerGateways).toEqual([
      { name: 'praxis-ai', namespace: 'grid-system', siteName: 'b', dialect: 'praxis-groups' },
    ]);
    expect(overlayGrants(objects)).toEqual(['grid-overlay-net-praxis-ai']);
  });

  it('refuses an external consumer named like another consumer of the site (one overlay ConfigMap each)', () => {
    const message = synthFailure(() =>
      stacks(
        twoSiteGrid({
          a: {
            externalConsumers: [
              { name: 'consumer-gateway', dialect: 'praxis-main' },
              { name: 'p', dialect: 'agn' },
              { name: 'p', dialect: 'praxis-groups' },
            ],
          },
        }),
      ),
    );
    expect(message).toContain(
      'a: externalConsumers[consumer-gateway].name: consumer-gateway is already the name of another consumer gateway of this site',
    );
    expect(message).toContain('a: externalConsumers[p].name: p is already the name');
  });

  it('refuses a dialect the GridNetwork schema does not know, at the GridNetwork', () => {
    const message = synthFailure(() =>
      stacks(twoSiteGrid({ a: { externalConsumers: [{ name: 'praxis-ai', dialect: 'praxis' as never }] } })),
    );
    expect(message).toMatch(
      /spec\.consumerGateways\[1\]\.dialect: must be one of "agn", "praxis-main", "praxis-groups" \(got "praxis"\)/,
    );
  });
});
