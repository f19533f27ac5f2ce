// A consumer gateway declared with sessionAffinity: intelligent_route carries Praxis AI's session_affinity block
// (enabled, the header, the TTL when set), the gateway loads it, and nothing is declared an extension. Bad values and
// the combination with gridServing (grid_site_route has no session_affinity) are refused naming the prop.
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
import { chart, find, simProvider, twoSiteGrid, type Manifest } from './helpers.ts';

const configOf = (objects: Manifest[]): GatewayConfig =>
  YAML.parse(
    (find(objects, 'ConfigMap', 'consumer-gateway-config') as unknown as { data: Record<string, string> }).data[
      'praxis.yaml'
    ] ?? '',
  ) as GatewayConfig;
const route = (config: GatewayConfig) =>
  config.filter_chains[0]!.filters.find((f) => f.filter === 'intelligent_route') as unknown as Record<string, unknown>;

function siteA(a: Partial<SiteDeclaration>): Manifest[] {
  const declaration = twoSiteGrid({ a: { providers: [simProvider('pa', ['m1'])], ...a } });
  const built = buildGrid(Testing.app(), declaration);
  return Testing.synth(built.sites.find((s) => s.siteName === 'a')!) as Manifest[];
}

function refusal(props: Record<string, unknown>): Error {
  try {
    new ConsumerGateway(chart(), 'consumer', { namespace: 'grid-system', network: 'demo', site: 'east', ...props });
  } catch (error) {
    expect(error).toBeInstanceOf(GridSynthError);
    return error as Error;
  }
  throw new Error('accepted');
}

describe('consumer gateway with sessionAffinity', () => {
  it("renders Praxis AI's session_affinity on intelligent_route, which the gateway loads, with no extension key", () => {
    const config = configOf(siteA({ consumerGateway: { sessionAffinity: { header: 'x-session-id', ttlSecs: 600 } } }));
    expect(route(config)['session_affinity']).toEqual({ enabled: true, header: 'x-session-id', ttl_secs: 600 });
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
    expect(extensionKeyPointers(config)).toEqual([]);
    expect(gatewayConfigProblems(config)).toEqual([]);
  });

  it('renders no session_affinity without the prop', () => {
    expect(route(configOf(siteA({ consumerGateway: {} })))['session_affinity']).toBeUndefined();
  });

  it('refuses a header that is no header name, a TTL out of range, and gridServing beside it, naming the field', () => {
    expect(refusal({ sessionAffinity: { header: 'x session' } }).message).toContain('sessionAffinity.header');
    expect(refusal({ sessionAffinity: { header: '' } }).message).toContain('sessionAffinity.header');
    expect(refusal({ sessionAffinity: { header: 'x-session-id', ttlSecs: 0 } }).message).toContain(
      'sessionAffinity.ttlSecs',
    );
    expect(refusal({ sessionAffinity: { header: 'x-session-id', ttlSecs: 86_401 } }).message).toContain(
      'sessionAffinity.ttlSecs',
    );
    expect(refusal({ sessionAffinity: { header: 'x-session-id' }, gridServing: {} }).message).toContain('gridServing');
  });
});
