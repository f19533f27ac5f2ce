// A consumer gateway declared with gridServing (the construct mounts the serving config and sets
// GRID_SERVING_CONFIG): its GridNetwork entry asks the operator for the serving config, the operator's Role and
// overlay-sync's Role are scoped to that ConfigMap too, a second overlay-sync pair delivers it into an emptyDir the
// gateway reads, and the listener routes with grid_site_route (its blocks from gridServing.siteRoute), which the
// gateway's own loader accepts. Without gridServing nothing changes; bad settings fail synth naming the field.
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { buildGrid } from '../../constructs/grid.ts';
import { gatewayConfigProblems } from '../../constructs/gateway-config-schema.ts';
import type { SiteDeclaration } from '../../constructs/grid-declaration.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { servingOptionsFromEnv } from '../../daemons/gateway/site-route/site-view-service.ts';
import type { GatewayConfig, GridSiteRouteFilter } from '../../schemas/generated/gateway-config.ts';
import { find, podSpec, simProvider, twoSiteGrid, type Manifest } from './helpers.ts';

function siteA(a: Partial<SiteDeclaration>): Manifest[] {
  const declaration = twoSiteGrid({
    a: { providers: [simProvider('pa', ['m1'])], peerSignals: { advertise: 'signals.a.example.com:7950' }, ...a },
  });
  const built = buildGrid(Testing.app(), declaration);
  return Testing.synth(built.sites.find((s) => s.siteName === 'a')!) as Manifest[];
}
const configOf = (objects: Manifest[]): GatewayConfig =>
  YAML.parse(
    (find(objects, 'ConfigMap', 'consumer-gateway-config') as unknown as { data: Record<string, string> }).data[
      'praxis.yaml'
    ] ?? '',
  ) as GatewayConfig;
/** The verbs of each operator Role rule naming the deployed gateway's serving ConfigMap. */
const servingGrants = (objects: Manifest[]) =>
  (
    find(objects, 'Role', 'gossip-operator') as unknown as { rules: { verbs: string[]; resourceNames?: string[] }[] }
  ).rules
    .filter((r) => r.resourceNames?.includes('grid-serving-net-consumer-gateway'))
    .map((r) => r.verbs);
const rulesNaming = (objects: Manifest[], configMap: string) =>
  objects
    .filter((o) => o.kind === 'Role')
    .filter((o) => JSON.stringify(o).includes(`"${configMap}"`))
    .map((o) => o.metadata.name)
    .sort();

describe('consumer gateway with gridServing', () => {
  const serving = siteA({
    consumerGateway: {
      gridServing: {
        siteRoute: { availability: { shedding: true, full_after_ms: 3000 }, prefixAffinity: { exploration: 0 } },
        signalsPollIntervalMs: 1000,
      },
    },
  });

  it('asks the operator for the serving config and scopes both Roles to its ConfigMap', () => {
    const network = find(serving, 'GridNetwork', 'net') as unknown as {
      spec: { consumerGateways: { name: string; gridServing?: boolean }[] };
    };
    expect(network.spec.consumerGateways).toEqual([
      expect.objectContaining({ name: 'consumer-gateway', gridServing: true }),
    ]);
    expect(rulesNaming(serving, 'grid-serving-net-consumer-gateway')).toHaveLength(2);
    // The operator applies it beside the overlay, and may delete it (get + delete stay when gridServing goes).
    expect(servingGrants(serving)).toEqual([
      ['get', 'patch', 'create'],
      ['get', 'delete'],
    ]);
  });

  it('delivers it with a second overlay-sync pair into an emptyDir the gateway reads from GRID_SERVING_CONFIG', () => {
    const pod = podSpec(find(serving, 'Deployment', 'consumer-gateway'));
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['overlay-sync-init', 'serving-sync-init']);
    expect(pod.containers.map((c) => c.name)).toEqual(['gateway', 'overlay-sync', 'serving-sync']);
    const sync = pod.containers.find((c) => c.name === 'serving-sync')!;
    const env = Object.fromEntries((sync.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      OVERLAY_SYNC_CONTRACT: 'serving',
      OVERLAY_SYNC_CONFIGMAP: 'grid-serving-net-consumer-gateway',
      OVERLAY_SYNC_DATA_KEY: 'serving-config.json',
      OVERLAY_SYNC_OUTPUT: '/run/grid-serving/serving-config.json',
      OVERLAY_SYNC_EXPECTED_GATEWAY: 'consumer-gateway',
      OVERLAY_SYNC_HEALTH_ADDR: '0.0.0.0:9092',
    });
    const gateway = pod.containers.find((c) => c.name === 'gateway')!;
    const gatewayEnv = Object.fromEntries((gateway.env ?? []).map((e) => [e.name, e.value ?? '']));
    expect(gatewayEnv).toEqual({
      GRID_SERVING_CONFIG: '/run/grid-serving/serving-config.json',
      GRID_SIGNALS_TLS_DIR: '/etc/praxis/tls',
      GRID_SIGNALS_POLL_INTERVAL_MS: '1000',
    });
    // What the gateway makes of that environment: the file the sidecar writes, the TLS Secret's identity.
    expect(servingOptionsFromEnv(gatewayEnv)).toMatchObject({
      file: '/run/grid-serving/serving-config.json',
      tls: { certFile: '/etc/praxis/tls/tls.crt' },
      pollIntervalMs: 1000,
    });
    const servingMount = gateway.volumeMounts?.find((m) => m.mountPath === '/run/grid-serving');
    expect(servingMount).toMatchObject({ readOnly: true });
    expect(sync.volumeMounts?.find((m) => m.mountPath === '/run/grid-serving')?.name).toBe(servingMount?.name);
  });

  it('routes with grid_site_route in place of intelligent_route, and the gateway loads the config', () => {
    const config = configOf(serving);
    const filters = config.filter_chains[0]!.filters;
    expect(filters.map((f) => f.filter)).toEqual([
      'json_body_field',
      'openai_responses_format',
      'grid_site_route',
      'load_balancer',
    ]);
    const route = filters.find((f): f is GridSiteRouteFilter => f.filter === 'grid_site_route')!;
    expect(route).toEqual({
      filter: 'grid_site_route',
      model_header: 'x-gateway-model-name',
      provider_hop_clusters: ['pa', 'pb'],
      availability: { shedding: true, full_after_ms: 3000 },
      prefix_affinity: { exploration: 0 },
    });
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
    expect(gatewayConfigProblems(config, ['grid_site_route'])).toEqual([]);
  });

  it('changes nothing without gridServing', () => {
    const plain = siteA({ consumerGateway: {} });
    expect(configOf(plain).filter_chains[0]!.filters.map((f) => f.filter)).toContain('intelligent_route');
    expect(podSpec(find(plain, 'Deployment', 'consumer-gateway')).containers.map((c) => c.name)).toEqual([
      'gateway',
      'overlay-sync',
    ]);
    // Only the operator's get + delete on the name remain, so a serving config left from gridServing on is removed.
    expect(rulesNaming(plain, 'grid-serving-net-consumer-gateway')).toEqual(['gossip-operator']);
    expect(servingGrants(plain)).toEqual([['get', 'delete']]);
  });

  it.each<[string, Partial<SiteDeclaration>, string]>([
    [
      'no signals endpoint on the site',
      { consumerGateway: { gridServing: {} }, peerSignals: undefined },
      'consumerGateway.gridServing',
    ],
    [
      'a poll interval under 100 ms',
      { consumerGateway: { gridServing: { signalsPollIntervalMs: 5 } } },
      'gridServing.signalsPollIntervalMs',
    ],
    [
      'a fractional staleness bound',
      { consumerGateway: { gridServing: { signalsStaleAfterMs: 1500.5 } } },
      'gridServing.signalsStaleAfterMs',
    ],
    [
      'an unknown availability key',
      { consumerGateway: { gridServing: { siteRoute: { availability: { shed: true } as never } } } },
      'gridServing.siteRoute.availability: must NOT have additional properties (shed)',
    ],
    [
      'a smoothing of 0',
      { consumerGateway: { gridServing: { siteRoute: { availability: { smoothing: 0 } } } } },
      'gridServing.siteRoute.availability.smoothing',
    ],
    [
      'an exploration share over 1',
      { consumerGateway: { gridServing: { siteRoute: { prefixAffinity: { exploration: 2 } } } } },
      'gridServing.siteRoute.prefixAffinity.exploration',
    ],
  ])('refuses %s, naming the field', (_name, a, field) => {
    let error: unknown;
    try {
      siteA(a);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(GridSynthError);
    expect((error as Error).message).toContain(field);
  });
});
