// A consumer gateway declared with localLoad: its route filter carries local_load (intelligent_route's one extension
// key the compiler renders, or a key of the grid_site_route extension filter), the gateway loads the config, and synth
// declares exactly that key. Without the prop nothing changes; an external (Praxis AI) consumer never gets it.
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ConsumerGateway } from '../../constructs/consumer-gateway.ts';
import { gatewayConfigProblems } from '../../constructs/gateway-config-schema.ts';
import { buildGrid } from '../../constructs/grid.ts';
import type { SiteDeclaration } from '../../constructs/grid-declaration.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { extensionKeyPointers } from '../../schemas/gateway/praxis-rules.ts';
import type { GatewayConfig } from '../../schemas/generated/gateway-config.ts';
import { chart, find, simProvider, synth, twoSiteGrid, type Manifest } from './helpers.ts';

const configOf = (objects: Manifest[], name = 'consumer-gateway-config'): GatewayConfig =>
  YAML.parse(
    (find(objects, 'ConfigMap', name) as unknown as { data: Record<string, string> }).data['praxis.yaml'] ?? '',
  ) as GatewayConfig;
const route = (config: GatewayConfig) =>
  config.filter_chains[0]!.filters.find(
    (f) => f.filter === 'intelligent_route' || f.filter === 'grid_site_route',
  ) as unknown as Record<string, unknown>;

function siteA(a: Partial<SiteDeclaration>): Manifest[] {
  const declaration = twoSiteGrid({
    a: { providers: [simProvider('pa', ['m1'])], peerSignals: { advertise: 'signals.a.example.com:7950' }, ...a },
  });
  const built = buildGrid(Testing.app(), declaration);
  return Testing.synth(built.sites.find((s) => s.siteName === 'a')!) as Manifest[];
}

describe('consumer gateway with localLoad', () => {
  it('renders local_load on intelligent_route, which the gateway loads, and declares only that extension key', () => {
    const config = configOf(siteA({ consumerGateway: { localLoad: 'two_choices' } }));
    expect(route(config)['local_load']).toEqual({ mode: 'two_choices' });
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
    expect(extensionKeyPointers(config)).toEqual(['/filter_chains/0/filters/2/local_load']);
    // Declared, synth accepts it; the same config without the declaration is refused as an extension key.
    expect(gatewayConfigProblems(config, ['intelligent_route/local_load'])).toEqual([]);
    expect(gatewayConfigProblems(config)).toEqual([
      { pointer: '/filter_chains/0/filters/2/local_load', message: expect.stringContaining('extension key') },
    ]);
  });

  it('renders local_load on grid_site_route for a consumer serving gridServing', () => {
    const config = configOf(siteA({ consumerGateway: { localLoad: 'two_choices', gridServing: {} } }));
    expect(route(config)).toMatchObject({ filter: 'grid_site_route', local_load: { mode: 'two_choices' } });
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
  });

  it('renders nothing without the prop: the route filter is the Praxis AI one, no extension key', () => {
    const config = configOf(siteA({ consumerGateway: {} }));
    expect(route(config)['local_load']).toBeUndefined();
    expect(extensionKeyPointers(config)).toEqual([]);
  });

  it('never reaches an external (Praxis AI) consumer: it gets an overlay, not a compiled config', () => {
    const objects = siteA({
      consumerGateway: { localLoad: 'two_choices' },
      externalConsumers: [{ name: 'praxis-ai', dialect: 'praxis-main' }],
    });
    const configs = objects.filter(
      (o) =>
        o.kind === 'ConfigMap' &&
        typeof (o as unknown as { data?: Record<string, string> }).data?.['praxis.yaml'] === 'string',
    );
    expect(configs.map((o) => o.metadata.name).sort()).toEqual(['consumer-gateway-config', 'provider-gateway-config']);
    expect(JSON.stringify(configOf(objects, 'provider-gateway-config'))).not.toContain('local_load');
  });

  it('refuses a mode it does not know, naming the prop', () => {
    let error: unknown;
    try {
      new ConsumerGateway(chart(), 'consumer', {
        namespace: 'grid-system',
        network: 'demo',
        site: 'east',
        localLoad: 'least_loaded' as never,
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(GridSynthError);
    expect((error as Error).message).toContain('localLoad');
  });

  it('a standalone ConsumerGateway renders it too, and synth passes', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      namespace: 'grid-system',
      network: 'demo',
      site: 'east',
      localLoad: 'two_choices',
      upstreams: [{ cluster: 'west-llm', address: 'gateway.west.example.com:8443', transport: { mode: 'mutual_tls' } }],
    });
    expect(route(configOf(synth(c)))['local_load']).toEqual({ mode: 'two_choices' });
  });
});
