// Config loading: schema validation with errors that name the key and its path, and the rules only code can
// check (references, one role per process, filter order, the provider boundary of docs/contract.md §3.2).
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfigText, resolveConfig } from '../../daemons/gateway/config.ts';
import { consumerConfig } from './helpers.ts';

const consumer = () =>
  consumerConfig({
    overlayPath: '/run/overlay.json',
    hops: ['prov'],
    clusters: [{ name: 'prov', endpoints: ['127.0.0.1:8443'] }],
  });

const fakePki = { caPath: 'ca.crt', providerCertPath: 'p.crt', providerKeyPath: 'p.key' };
function provider(): any {
  return {
    listeners: [
      {
        name: 'provider',
        address: '0.0.0.0:8443',
        filter_chains: ['provider-inference'],
        tls: {
          certificates: [{ cert_path: fakePki.providerCertPath, key_path: fakePki.providerKeyPath }],
          client_ca: { ca_path: fakePki.caPath },
          client_cert_mode: 'require',
        },
      },
    ],
    filter_chains: [
      {
        name: 'provider-inference',
        filters: [
          { filter: 'peer_identity_trust', trusted_peers: [{ cert_digest: 'a'.repeat(64), organization: 'edge' }] },
          {
            filter: 'provider_route',
            provider_id: 'east1',
            routes: [
              {
                candidate_id: 'abcd1234',
                model: 'm',
                cluster: 'backend',
                paths: ['/v1/chat/completions'],
                credential: {
                  strategy: 'bearer_token',
                  secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' },
                },
              },
            ],
          },
          {
            filter: 'credential_inject',
            credentials: [
              {
                strategy: 'bearer_token',
                name: 'cred',
                namespace: 'grid-system',
                key: 'token',
                file: '/etc/praxis/credentials/cred/token',
              },
            ],
          },
          { filter: 'load_balancer', clusters: [{ name: 'backend', endpoints: ['backend.svc:8080'] }] },
        ],
      },
    ],
    admin: { address: '127.0.0.1:9901' },
    shutdown_timeout_secs: 5,
  };
}

const error = (doc: unknown): string => {
  try {
    resolveConfig(doc, 'gw.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('config was accepted');
};

describe('gateway config', () => {
  it('accepts the consumer and provider shapes and derives the role', () => {
    expect(resolveConfig(consumer(), 'c').role).toBe('consumer');
    expect(resolveConfig(provider(), 'p').role).toBe('provider');
  });

  it('reads the seed 000 consumer config written in YAML', () => {
    const yaml = `
listeners:
  - name: main
    address: 0.0.0.0:8080
    filter_chains: [main]
filter_chains:
  - name: main
    filters:
      - filter: intelligent_route
        overlay_file: /etc/praxis/routing/routing-overlay.json
        model_header: X-Gateway-Model-Name
        provider_hop_clusters:
          - existing-mock-provider
          - my-new-provider
        reload: {enabled: true, debounce_ms: 500}
      - filter: load_balancer
        clusters:
          - name: existing-mock-provider
            endpoints: ["provider-gateway.grid-system.svc.cluster.local:8443"]
          - name: my-new-provider
            tls:
              ca:
                ca_path: /etc/praxis/tls/ca.crt
              client_cert:
                cert_path: /etc/praxis/tls/tls.crt
                key_path: /etc/praxis/tls/tls.key
              sni: east1-provider.grid.internal
              verify: true
            endpoints:
              - "provider-gateway.grid-system.svc.cluster.local:8443"
admin:
  address: 127.0.0.1:9901
shutdown_timeout_secs: 5
`;
    const resolved = resolveConfig(parseConfigText(yaml, 'consumer.yaml'), 'consumer.yaml');
    expect(resolved.role).toBe('consumer');
    expect(resolved.listeners[0]?.filters.map((f) => f.filter)).toEqual(['intelligent_route', 'load_balancer']);
  });

  it('names an unknown key and its path', () => {
    const doc: any = consumer();
    doc.filter_chains[0].filters[0].overlay_fiel = 'typo';
    expect(error(doc)).toBe('gw.yaml: unknown key "overlay_fiel" at /filter_chains/0/filters/0');
    const top: any = consumer();
    top.listners = [];
    expect(error(top)).toBe('gw.yaml: unknown key "listners" at /');
    const tls: any = provider();
    tls.listeners[0].tls.client_cert_mod = 'require';
    expect(error(tls)).toBe('gw.yaml: unknown key "client_cert_mod" at /listeners/0/tls');
  });

  it('names an unknown filter', () => {
    const doc: any = consumer();
    doc.filter_chains[0].filters.unshift({ filter: 'rate_limit' });
    expect(error(doc)).toBe('gw.yaml: unknown filter "rate_limit" at /filter_chains/0/filters/0');
  });

  it('rejects a listener that references an undefined chain, and a hop cluster the load balancer lacks', () => {
    const chain: any = consumer();
    chain.listeners[0].filter_chains = ['nope'];
    expect(error(chain)).toMatch(/filter chain "nope" is not defined/);
    const hop: any = consumer();
    hop.filter_chains[0].filters[0].provider_hop_clusters = ['ghost'];
    expect(error(hop)).toMatch(/provider_hop_clusters names "ghost"/);
  });

  it('rejects credentials that set no source or two sources', () => {
    const none: any = provider();
    none.filter_chains[0].filters[2].credentials = [{ name: 'cred', namespace: 'grid-system', key: 'token' }];
    expect(error(none)).toMatch(
      /credentials\[0\] \(cred\) must set exactly one of file, env_var, value \(found none\)/,
    );
    const two: any = provider();
    two.filter_chains[0].filters[2].credentials = [
      { name: 'cred', namespace: 'grid-system', key: 'token', file: '/x', value: 'y' },
    ];
    expect(error(two)).toMatch(/found file, value/);
  });

  describe('provider boundary rules', () => {
    it('refuses a provider listener that does not require client certificates', () => {
      const doc = provider();
      doc.listeners[0].tls.client_cert_mode = 'request';
      expect(error(doc)).toMatch(/must set tls.client_cert_mode: require \(found request\)/);
      delete doc.listeners[0].tls;
      expect(error(doc)).toMatch(/found no tls/);
    });

    it('refuses a provider chain whose first filter is not peer_identity_trust', () => {
      const doc = provider();
      const [trust, route, ...rest] = doc.filter_chains[0].filters;
      doc.filter_chains[0].filters = [route, trust, ...rest];
      expect(error(doc)).toMatch(
        /peer_identity_trust must be the first filter of a provider pipeline \(found provider_route\)/,
      );
    });

    it('refuses a trust filter placed in a chain after another chain', () => {
      const doc = provider();
      doc.filter_chains.unshift({
        name: 'pre',
        filters: [{ filter: 'json_body_field', field: 'model', header: 'x-model' }],
      });
      doc.listeners[0].filter_chains = ['pre', 'provider-inference'];
      expect(error(doc)).toMatch(/peer_identity_trust must be the first filter/);
    });

    it('refuses nested or conditional filters', () => {
      const doc = provider();
      doc.filter_chains[0].filters[1] = {
        filter: 'provider_route',
        routes: [],
        filters: [{ filter: 'provider_route' }],
      };
      expect(error(doc)).toMatch(
        /provider_route" at \/filter_chains\/0\/filters\/1 has "filters": filters cannot be nested or conditional/,
      );
      const conditional = provider();
      conditional.filter_chains[0].filters[0].conditions = [{ header: 'x-skip' }];
      expect(error(conditional)).toMatch(/has "conditions"/);
    });

    it('refuses mixing consumer and provider filters in one pipeline', () => {
      const doc = provider();
      doc.filter_chains[0].filters.splice(1, 0, { filter: 'intelligent_route', overlay_file: '/x' });
      expect(error(doc)).toMatch(/consumer and provider roles run as separate gateways/);
    });

    it('refuses a route to a cluster the load balancer does not define', () => {
      const doc = provider();
      doc.filter_chains[0].filters[1].routes[0].cluster = 'elsewhere';
      expect(error(doc)).toMatch(/names cluster "elsewhere"/);
    });
  });
});

describe('agent routes (mcp_route, a2a_route, agent_provider_route)', () => {
  const filtersOf = (doc: any): any[] => doc.filter_chains[0].filters;
  const withAgents = (): any => {
    const doc: any = consumer();
    const lb = filtersOf(doc).find((f) => f.filter === 'load_balancer');
    lb.clusters.push(
      { name: 'tool/db', endpoints: ['127.0.0.1:8443'] },
      { name: 'agent/claims', endpoints: ['127.0.0.1:8443'] },
    );
    filtersOf(doc).splice(
      1,
      0,
      { filter: 'mcp_route', overlay_file: '/run/overlay.json', provider_hop_clusters: ['tool/db'] },
      { filter: 'a2a_route', agents: [{ name: 'claims', cluster: 'agent/claims', site: 'west' }] },
    );
    return doc;
  };
  const agentProvider = (): any => {
    const doc = provider();
    filtersOf(doc).splice(2, 0, {
      filter: 'agent_provider_route',
      servers: [{ protocol: 'mcp', name: 'db', cluster: 'backend', path: '/mcp' }],
    });
    return doc;
  };

  it('accepts them in their roles', () => {
    expect(resolveConfig(withAgents(), 'c').role).toBe('consumer');
    expect(resolveConfig(agentProvider(), 'p').role).toBe('provider');
    // A provider of tool servers only, without provider_route.
    const toolsOnly = agentProvider();
    filtersOf(toolsOnly).splice(1, 1);
    expect(resolveConfig(toolsOnly, 'p').role).toBe('provider');
  });

  it('refuses an agent route in the other role', () => {
    const doc = provider();
    filtersOf(doc).splice(1, 0, { filter: 'mcp_route', overlay_file: '/run/overlay.json' });
    expect(error(doc)).toMatch(/mcp_route and a2a_route are consumer filters/);
    const consumerWithProviderRoute: any = consumer();
    filtersOf(consumerWithProviderRoute).splice(0, 0, {
      filter: 'agent_provider_route',
      servers: [{ protocol: 'a2a', name: 'x', cluster: 'prov' }],
    });
    expect(error(consumerWithProviderRoute)).toMatch(
      /intelligent_route and provider filters in one pipeline; consumer and provider roles run as separate gateways/,
    );
  });

  it('refuses clusters the load balancer does not define, naming the route', () => {
    const hop = withAgents();
    filtersOf(hop)[1].provider_hop_clusters = ['tool/nope'];
    expect(error(hop)).toMatch(/mcp_route\.provider_hop_clusters names "tool\/nope"/);
    const agent = withAgents();
    filtersOf(agent)[2].agents[0].cluster = 'agent/nope';
    expect(error(agent)).toMatch(/a2a_route\.agents\[0\] \(claims\) names cluster "agent\/nope"/);
    const server = agentProvider();
    filtersOf(server)[2].servers[0].cluster = 'nope';
    expect(error(server)).toMatch(/agent_provider_route\.servers\[0\] \(mcp\/db\) names cluster "nope"/);
  });

  it('refuses repeats, a card path on an MCP server, a shared or inference prefix, and a bad agent name', () => {
    const twice = withAgents();
    filtersOf(twice)[2].agents.push({ name: 'claims', cluster: 'agent/claims' });
    expect(error(twice)).toMatch(/a2a_route\.agents\[1\] repeats agent "claims"/);
    const servers = agentProvider();
    filtersOf(servers)[2].servers.push({ protocol: 'mcp', name: 'db', cluster: 'backend' });
    expect(error(servers)).toMatch(/servers\[1\] repeats mcp server "db"/);
    const card = agentProvider();
    filtersOf(card)[2].servers[0].card_path = '/card.json';
    expect(error(card)).toMatch(/sets card_path, which only an a2a server has/);
    const shared = withAgents();
    filtersOf(shared)[2].path_prefix = '/mcp/';
    expect(error(shared)).toMatch(/mcp_route and a2a_route share path_prefix \/mcp\//);
    const inference = withAgents();
    filtersOf(inference)[1].path_prefix = '/v1/tools/';
    expect(error(inference)).toMatch(/path_prefix \/v1\/tools\/ is under \/v1\//);
    const name = withAgents();
    filtersOf(name)[2].agents[0].name = 'Claims_Agent';
    expect(error(name)).toMatch(/agents\/0\/name/);
  });

  it('refuses an agent route before the filters that authorize, or after credential_inject', () => {
    const doc = withAgents();
    const auth = { filter: 'caller_auth', keys_file: '/etc/keys.json' };
    filtersOf(doc).splice(3, 0, auth);
    expect(error(doc)).toMatch(/caller_auth must be the first filter|caller_auth must come before mcp_route/);
    const late = agentProvider();
    const route = filtersOf(late).splice(2, 1)[0];
    filtersOf(late).splice(3, 0, route);
    expect(error(late)).toMatch(/credential_inject must come after agent_provider_route/);
  });
});
