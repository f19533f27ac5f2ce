// A consumer gateway declared with caller keys: caller_auth first and usage_meter after intelligent_route, priced
// from each upstream provider's InferenceProvider.spec.cost, the keys Secret projected into the pod, and the
// compiled config accepted by the gateway's own loader. Without caller keys nothing changes (the Praxis AI chain).
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { buildGrid } from '../../constructs/grid.ts';
import { gatewayConfigProblems } from '../../constructs/gateway-config-schema.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import type { GatewayConfig, UsageMeterFilter } from '../../schemas/generated/gateway-config.ts';
import type { SiteDeclaration } from '../../constructs/grid-declaration.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import type { BudgetEnforceFilter } from '../../schemas/generated/gateway-config.ts';
import { find, podSpec, simProvider, twoSiteGrid, type Manifest } from './helpers.ts';

function siteA(
  callerKeys: boolean,
  extra: Partial<SiteDeclaration> = {},
  budgetEnforce?: { requestsPerMinute: number },
): Manifest[] {
  const declaration = twoSiteGrid({
    a: {
      consumerGateway: callerKeys
        ? { callerKeys: { secretName: 'tenant-keys', ...(budgetEnforce === undefined ? {} : { budgetEnforce }) } }
        : {},
      providers: [simProvider('pa', ['m1'], { cost: { perMillionInputTokens: 0.15, perMillionOutputTokens: 0.6 } })],
      ...extra,
    },
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

describe('consumer gateway with caller keys', () => {
  it('renders caller_auth first and usage_meter priced from spec.cost, and the gateway loads it', () => {
    const objects = siteA(true);
    const config = configOf(objects);
    expect(config.filter_chains[0]!.filters.map((f) => f.filter)).toEqual([
      'caller_auth',
      'json_body_field',
      'openai_responses_format',
      'intelligent_route',
      'usage_meter',
      'load_balancer',
    ]);
    expect(config.filter_chains[0]!.filters[0]).toEqual({
      filter: 'caller_auth',
      keys_file: '/etc/praxis/caller-keys/caller-keys.json',
    });
    const meter = config.filter_chains[0]!.filters.find((f): f is UsageMeterFilter => f.filter === 'usage_meter')!;
    // pb (site b) declares no cost: it is metered in tokens and priced at 0.
    expect(meter.prices).toEqual([{ cluster: 'pa', per_million_input_tokens: 0.15, per_million_output_tokens: 0.6 }]);
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
    const volumes = JSON.stringify(podSpec(find(objects, 'Deployment', 'consumer-gateway')).volumes);
    expect(volumes).toContain('"name":"tenant-keys"');
    expect(volumes).toContain('"path":"caller-keys/caller-keys.json"');
  });

  it('renders only the declared extension filters: any other extension key still fails the check', () => {
    const config = configOf(siteA(true));
    expect(gatewayConfigProblems(config, ['caller_auth', 'usage_meter'])).toEqual([]);
    expect(gatewayConfigProblems(config).map((p) => p.pointer)).toEqual([
      '/filter_chains/0/filters/0/filter',
      '/filter_chains/0/filters/4/filter',
    ]);
    const widened = structuredClone(config);
    widened.listeners[0]!.max_body_bytes = 1024;
    expect(gatewayConfigProblems(widened, ['caller_auth', 'usage_meter']).map((p) => p.pointer)).toEqual([
      '/listeners/0/max_body_bytes',
    ]);
  });

  it('with the site operator ingest declared: reports spend there and enforces budgets when asked', () => {
    const config = configOf(siteA(true, { gatewayAgeIngest: {} }, { requestsPerMinute: 600 }));
    const filters = config.filter_chains[0]!.filters;
    expect(filters.map((f) => f.filter)).toEqual([
      'caller_auth',
      'budget_enforce',
      'json_body_field',
      'openai_responses_format',
      'intelligent_route',
      'usage_meter',
      'load_balancer',
    ]);
    expect(filters.find((f): f is BudgetEnforceFilter => f.filter === 'budget_enforce')).toEqual({
      filter: 'budget_enforce',
      requests_per_minute: 600,
    });
    expect(filters.find((f): f is UsageMeterFilter => f.filter === 'usage_meter')!.report).toEqual({
      url: expect.stringMatching(/^http:\/\/[a-z0-9-]+\.[a-z0-9-]+\.svc\.cluster\.local:7951$/),
      token_file: '/etc/grid/ingest-token/token',
    });
    expect(resolveConfig(config, 'a consumer').role).toBe('consumer');
    expect(gatewayConfigProblems(config, ['caller_auth', 'budget_enforce', 'usage_meter'])).toEqual([]);
  });

  it('with the site operator ingest declared: mounts the ingest token into the gateway container only, and into the operator', () => {
    const objects = siteA(true, { gatewayAgeIngest: {} });
    const pod = podSpec(find(objects, 'Deployment', 'consumer-gateway'));
    const mounts = (name: string) =>
      (pod.containers.find((c) => c.name === name)?.volumeMounts ?? []).filter((m) => m.name === 'ingest-token');
    expect(mounts('gateway')).toEqual([{ name: 'ingest-token', mountPath: '/etc/grid/ingest-token', readOnly: true }]);
    for (const other of pod.containers.filter((c) => c.name !== 'gateway')) expect(mounts(other.name)).toEqual([]);
    expect(pod.volumes?.find((v) => v.name === 'ingest-token')).toEqual({
      name: 'ingest-token',
      projected: {
        defaultMode: 0o440,
        sources: [{ secret: { name: 'grid-ingest-token', items: [{ key: 'token', path: 'token' }] } }],
      },
    });
    const operator = podSpec(find(objects, 'Deployment', 'gossip-operator'));
    expect(JSON.stringify(operator.volumes)).toContain('"name":"grid-ingest-token"');
    // The site's secrets.ingestToken renames the Secret for both.
    const renamed = siteA(true, { gatewayAgeIngest: {}, secrets: { ingestToken: 'site-a-ingest' } });
    for (const deployment of ['consumer-gateway', 'gossip-operator']) {
      const text = JSON.stringify(podSpec(find(renamed, 'Deployment', deployment)).volumes);
      expect(text).toContain('"name":"site-a-ingest"');
      expect(text).not.toContain('grid-ingest-token');
    }
    // Without the ingest, the gateway reports nowhere and mounts no token.
    expect(JSON.stringify(podSpec(find(siteA(true), 'Deployment', 'consumer-gateway')).volumes)).not.toContain(
      'ingest-token',
    );
  });

  it('refuses budget enforcement without the site operator ingest, naming the field', () => {
    let error: unknown;
    try {
      siteA(true, {}, { requestsPerMinute: 10 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(GridSynthError);
    expect(String((error as Error).message)).toMatch(/callerKeys\.budgetEnforce.*gatewayAgeIngest/s);
  });

  it('without caller keys renders the Praxis AI chain and no extension', () => {
    const config = configOf(siteA(false));
    expect(config.filter_chains[0]!.filters.map((f) => f.filter)).toEqual([
      'json_body_field',
      'openai_responses_format',
      'intelligent_route',
      'load_balancer',
    ]);
    expect(gatewayConfigProblems(config)).toEqual([]);
  });
});
