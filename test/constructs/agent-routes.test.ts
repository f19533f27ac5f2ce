// Tool servers and agents compiled into the gateways: a site's provider gateway serves its own at /mcp/<name> and
// /a2a/<name> with their tokens, every consumer reaches the tool servers of every site and the agents whose
// accessPolicy admits it, each through the owning site's provider gateway; a site offering only tools still gets a
// valid provider gateway (no provider_route), and one with no provider gateway at all is a declaration problem.
import { App } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { buildGrid } from '../../constructs/grid.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { fakeTrust, simProvider, site } from './helpers.ts';
import { synthFailure } from './synth-failure.ts';
import type { GridDeclaration } from '../../constructs/grid-declaration.ts';

const tools = (name: string, token = true) => ({
  name,
  spec: {
    protocol: 'mcp' as const,
    endpoint: `http://${name}.tools.svc.cluster.local:8080/mcp`,
    tools: [{ name: 'query' }],
    ...(token
      ? {
          auth: {
            strategy: 'bearer_token' as const,
            secretRef: { name: `${name}-token`, namespace: 'grid-system', key: 'token' },
          },
        }
      : {}),
  },
});
const agent = (name: string, matchLabels: Record<string, string>) => ({
  name,
  spec: {
    protocol: 'a2a' as const,
    endpoint: `http://${name}.agents.svc.cluster.local:8080/`,
    accessPolicy: { siteSelector: { matchLabels } },
  },
});

function grid(): GridDeclaration {
  return {
    network: { name: 'net' },
    trust: fakeTrust('net', ['a', 'b', 'c']),
    sites: [
      site('a', { labels: { tier: 'edge' }, consumerGateway: {}, providers: [simProvider('pa', ['m1'])] }),
      // Offers no model: only a tool server and two agents, one for edge sites only.
      site('b', {
        toolProviders: [tools('b-tools')],
        agentProviders: [agent('b-open', {}), agent('b-core', { tier: 'core' })],
      }),
      site('c', { labels: { tier: 'core' }, consumerGateway: {}, providers: [simProvider('pc', ['m1'])] }),
    ],
  };
}

const config = (
  built: ReturnType<typeof buildGrid>,
  siteName: string,
  gateway: 'consumerGateway' | 'providerGateway',
) => {
  const stack = built.sites.find((s) => s.siteName === siteName)!;
  const workload = stack[gateway]!.workload;
  return resolveConfig(workload.currentConfig, `${siteName} ${gateway}`).config;
};
const filtersOf = (c: ReturnType<typeof config>) => c.filter_chains.flatMap((chain) => chain.filters);

describe('agent routes in the compiled gateways', () => {
  it("serves a tools-only site's servers from a provider gateway without provider_route, their tokens mounted there", () => {
    const built = buildGrid(new App(), grid());
    const provider = config(built, 'b', 'providerGateway');
    expect(filtersOf(provider).map((f) => f.filter)).toEqual([
      'peer_identity_trust',
      'agent_provider_route',
      'credential_inject',
      'load_balancer',
    ]);
    const route = filtersOf(provider).find((f) => f.filter === 'agent_provider_route') as { servers: unknown[] };
    expect(route.servers).toEqual([
      { protocol: 'a2a', name: 'b-core', cluster: 'agent-backend-b-core', path: '/' },
      { protocol: 'a2a', name: 'b-open', cluster: 'agent-backend-b-open', path: '/' },
      {
        protocol: 'mcp',
        name: 'b-tools',
        cluster: 'tool-backend-b-tools',
        path: '/mcp',
        credential: {
          strategy: 'bearer_token',
          secretRef: { name: 'b-tools-token', namespace: 'grid-system', key: 'token' },
        },
      },
    ]);
    const inject = filtersOf(provider).find((f) => f.filter === 'credential_inject') as {
      credentials: { name: string; file: string }[];
    };
    expect(inject.credentials.map((c) => c.name)).toEqual(['b-tools-token']);
  });

  it("gives each consumer every tool server and the agents whose accessPolicy admits its site, through the owner's provider gateway", () => {
    const built = buildGrid(new App(), grid());
    for (const [name, agents] of [
      ['a', ['b-open']],
      ['c', ['b-core', 'b-open']],
    ] as const) {
      const consumer = config(built, name, 'consumerGateway');
      const filters = filtersOf(consumer);
      const mcp = filters.find((f) => f.filter === 'mcp_route') as { provider_hop_clusters: string[] };
      expect(mcp.provider_hop_clusters).toEqual(['tool/b-tools']);
      const a2a = filters.find((f) => f.filter === 'a2a_route') as {
        agents: { name: string; cluster: string; site: string }[];
      };
      expect(a2a.agents).toEqual(
        agents.map((agentName) => ({ name: agentName, cluster: `agent/${agentName}`, site: 'b' })),
      );
      const clusters = (
        filters.find((f) => f.filter === 'load_balancer') as { clusters: { name: string; endpoints: string[] }[] }
      ).clusters;
      for (const cluster of ['tool/b-tools', ...agents.map((a) => `agent/${a}`)])
        expect(clusters.find((c) => c.name === cluster)?.endpoints).toEqual(['gateway.b.example.com:8443']);
      // A consumer never holds a tool server's token.
      expect(JSON.stringify(consumer)).not.toContain('b-tools-token');
    }
  });

  it('refuses a site that offers tool servers without a provider gateway to front them', () => {
    const declaration = grid();
    const b = declaration.sites[1]!;
    const { providerGateway: _gone, ...withoutGateway } = b;
    const message = synthFailure(() =>
      buildGrid(new App(), { ...declaration, sites: [declaration.sites[0]!, withoutGateway, declaration.sites[2]!] }),
    );
    expect(message).toContain('b: providerGateway: site b declares providers but no provider gateway to front them');
  });
});
