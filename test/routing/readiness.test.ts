/**
 * Readiness and fallback rules of the routing core, one table per rule; every row quotes the design or reference
 * sentence it implements. Reference: praxis-proxy/grid docs/metrics.md, docs/architecture/polling-metrics.md,
 * docs/routing.md. The routing rules themselves: docs/contract.md §2.5.
 */
import { describe, expect, it } from 'vitest';
import {
  evaluateNetwork,
  providerReadiness,
  renderNetwork,
  resolveBackendKind,
  scoreSignals,
  NO_SIGNALS,
  type NetworkRoutingInput,
  type ProviderReadiness,
} from '../../daemons/routing/index.ts';
import {
  expectGatewayAccepts,
  GATEWAY,
  local,
  network,
  OWN,
  policy,
  remote,
  remoteSite,
  rendered,
  sample,
  site,
  SOURCE,
  T0,
} from './fixtures.ts';

function rows(input: NetworkRoutingInput): readonly ProviderReadiness[] {
  return providerReadiness(input, T0, new Map());
}

function overlay(input: NetworkRoutingInput, gateway = GATEWAY) {
  const result = renderNetwork(input, [gateway], SOURCE, T0, new Map());
  const out = rendered(result.gateways[0]!.result);
  expectGatewayAccepts(out, gateway);
  return out;
}

const clusters = (input: NetworkRoutingInput, gateway = GATEWAY) =>
  overlay(input, gateway).payload.candidates.map((c) => c.cluster);

describe('provider readiness rows (grid_provider_ready and the serving config admission)', () => {
  const west = remoteSite('west');
  it.each([
    {
      rule: 'seed 001: "A provider whose Ready is False is excluded from routing: its site publishes grid_provider_ready 0, and its serving config entry carries admission: none"',
      input: network({ inferenceProviders: [local('p', { notReady: true })] }),
      expected: { provider: 'p', site: OWN, ready: false, admission: 'none', excluded: { reason: 'not_ready' } },
    },
    {
      rule: 'seed 000: "If the operator cannot reach a backend\'s endpoint, the InferenceProvider stays Unavailable and the overlay excludes it"',
      input: network({ inferenceProviders: [local('p', { phase: 'Unavailable' })] }),
      expected: { provider: 'p', ready: false, admission: 'none', excluded: { reason: 'provider_unavailable' } },
    },
    {
      rule: 'polling-metrics.md: a provider is not ready "when it is Unavailable" (remote: as its peer published it)',
      input: network({ sites: [site(OWN), west], remoteRecords: [remote('west', 'q', { phase: 'Unavailable' })] }),
      expected: {
        provider: 'q',
        site: 'west',
        remote: true,
        ready: false,
        admission: 'none',
        excluded: { reason: 'provider_unavailable' },
      },
    },
    {
      rule: 'seed 004: "metrics with healthy=false → excluded" (docs/contract.md §2.5), and metrics.md: grid_provider_ready "0 when not [able to serve]"',
      input: network({
        inferenceProviders: [local('p', { metrics: { configuredSignals: [], sample: sample({ healthy: false }) } })],
      }),
      expected: { provider: 'p', ready: false, admission: 'none', excluded: { reason: 'unhealthy' } },
    },
    {
      rule: 'metrics.md: "grid_provider_ready ... 1 when the provider can serve"',
      input: network({ inferenceProviders: [local('p')] }),
      expected: { provider: 'p', ready: true, admission: 'new_and_existing', servingSites: [OWN], cluster: 'p' },
    },
    {
      rule: 'seed 004 routing guide: trafficPolicy drain "Stop new sessions while preserving existing affinity sessions"',
      input: network({ inferenceProviders: [local('p', { drain: true })] }),
      expected: { provider: 'p', ready: true, admission: 'existing_only' },
    },
    {
      rule: 'seed 001: records "from a peer whose GridSite is in Discovered, Connecting, Pending, or Left are excluded" — the provider itself can serve',
      input: network({
        sites: [site(OWN), remoteSite('west', { phase: 'Connecting' })],
        remoteRecords: [remote('west', 'q')],
      }),
      expected: { provider: 'q', ready: true, admission: 'none', excluded: { reason: 'site_not_eligible' } },
    },
  ])('$rule', ({ input, expected }) => {
    const found = rows(input);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject(expected);
  });

  it('has no row for another network\'s records or this site\'s own echo (metrics.md: "as this site measured it or as a peer published it")', () => {
    const input = network({ remoteRecords: [remote('west', 'q', { network: 'other' }), remote(OWN, 'echo')] });
    expect(rows(input)).toEqual([]);
  });

  it('evaluates once: the rows renderNetwork returns are those providerReadiness returns', () => {
    const input = network({ inferenceProviders: [local('a'), local('b', { notReady: true })] });
    expect(renderNetwork(input, [GATEWAY], SOURCE, T0, new Map()).providers).toEqual(rows(input));
    expect(evaluateNetwork(input, T0, new Map()).providers).toEqual(rows(input));
  });
});

describe('backend kinds: routed, or refused with a reason (never dropped quietly)', () => {
  it.each([
    // An external HTTPS API: providerKind: External, backendKind: OpenAI
    ['External', 'OpenAI', 'api_provider'],
    // The CRD's InferenceProvider example: providerKind: open_ai, backendKind: api_provider
    ['open_ai', 'api_provider', 'api_provider'],
    // In-cluster providers: providerKind: self_hosted, backendKind: local
    ['self_hosted', 'local', 'local'],
    // "spec.backendKind ... local | remote | cloud_managed | api_provider"
    ['self_hosted', 'remote', 'remote'],
    ['bedrock', 'cloud_managed', 'cloud_managed'],
    // "External APIs (OpenAI, Anthropic, Bedrock)"; the providerKind list "open_ai | anthropic | bedrock | vertex"
    ['External', 'Anthropic', 'api_provider'],
    ['External', 'Bedrock', 'cloud_managed'],
    ['vertex', 'Vertex', 'cloud_managed'],
    ['External', 'https', 'api_provider'],
    // separators and case are one spelling: ApiProvider == api_provider
    ['anthropic', 'ApiProvider', 'api_provider'],
  ])('providerKind %s, backendKind %s → %s', (providerKind, backendKind, category) => {
    expect(resolveBackendKind(providerKind, backendKind)).toEqual({ ok: true, category });
    const input = network({ inferenceProviders: [local('p', { providerKind, backendKind })] });
    expect(clusters(input)).toEqual(['p']);
  });

  it('refuses what no spelling matches, naming both fields (seed 001: "an unrecognized value is not converted into a normal scoring candidate")', () => {
    const resolution = resolveBackendKind('self_hosted', 'mainframe');
    expect(resolution.ok).toBe(false);
    expect(!resolution.ok && resolution.message).toMatch(
      /spec\.backendKind "mainframe".*spec\.providerKind "self_hosted" is not External/,
    );
    const input = network({
      inferenceProviders: [local('p', { providerKind: 'self_hosted', backendKind: 'mainframe' })],
    });
    expect(rows(input)[0]).toMatchObject({
      ready: false,
      admission: 'none',
      excluded: { reason: 'unrecognized_backend_kind' },
    });
  });
});

describe('API providers are the fallback of self-hosted pools in the same tier', () => {
  // "Scoring normally places self-hosted candidates ahead of API-provider
  // candidates, so API providers are used as fallback or explicit lower-priority routes"; docs/routing.md: "Group 0:
  // local AGN providers / Group 1: remote AGN providers / Group 2: external providers".
  const cheapApi = local('api', {
    providerKind: 'External',
    backendKind: 'OpenAI',
    cost: { perMillionInputTokens: 0, perMillionOutputTokens: 0 },
  });
  const pool = local('pool', { cost: { perMillionInputTokens: 50, perMillionOutputTokens: 50 } });
  it.each([
    { routingPolicy: 'geographyFirst' as const, strategy: 'noMetrics' as const },
    { routingPolicy: 'scoreFirst' as const, strategy: 'noMetrics' as const },
    { routingPolicy: 'scoreFirst' as const, strategy: 'queueDepth' as const },
  ])(
    '$routingPolicy/$strategy: a self-hosted pool precedes a cheaper API provider scoring as high or higher, in an earlier selection group',
    ({ routingPolicy, strategy }) => {
      const input = network({
        policy: policy({ routingPolicy, scoringStrategy: strategy, selectionMode: 'roundRobin' }),
        inferenceProviders: [
          cheapApi,
          { ...pool, metrics: { configuredSignals: ['queueDepth'], sample: sample({ queueDepth: 0.8 }) } },
        ],
      });
      const candidates = overlay(input).payload.candidates;
      expect(candidates.map((c) => [c.cluster, c.selection_group])).toEqual([
        ['pool', 0],
        ['api', 1],
      ]);
      // The API provider does score at least as high and is cheaper: the category, not score or cost, keeps it behind.
      expect(candidates[1]!.score).toBeGreaterThanOrEqual(candidates[0]!.score as number);
      expect(candidates[1]!.score_breakdown?.cost).toBeGreaterThan(candidates[0]!.score_breakdown?.cost as number);
    },
  );

  it('the API provider takes over when no self-hosted candidate is left (seed 004: "If no self-hosted candidate is available for a model, the API-provider candidate can become the selected route")', () => {
    const input = network({ inferenceProviders: [cheapApi, { ...pool, phase: 'Unavailable' }] });
    expect(overlay(input).payload.candidates.map((c) => [c.cluster, c.selection_group])).toEqual([['api', 0]]);
  });

  it("a remote site's API provider is external too (the category travels in the CRDT record)", () => {
    const input = network({
      policy: policy({ routingPolicy: 'scoreFirst' }),
      sites: [site(OWN), remoteSite('west')],
      remoteRecords: [
        remote('west', 'openai', { backendKind: 'api_provider', routingCluster: 'west-openai' }),
        remote('west', 'llm', { routingCluster: 'west-llm' }),
      ],
    });
    expect(overlay(input).payload.candidates.map((c) => [c.cluster, c.selection_group])).toEqual([
      ['west-llm', 0],
      ['west-openai', 1],
    ]);
  });
});

describe('sovereigntyZone residency before ordering', () => {
  // Ordering "does not override data-residency or sovereignty constraints; those must be enforced separately before
  // candidates reach the ordering phase"; a GridSite declares e.g. "sovereigntyZone: us".
  const eu = (name: string, zone?: string) =>
    zone === undefined ? remoteSite(name) : remoteSite(name, { sovereigntyZone: zone });
  it.each([
    { consumerZone: 'eu', remoteZone: 'eu', routed: ['east', 'gateway-west'] },
    { consumerZone: 'eu', remoteZone: 'us', routed: ['east'] },
    { consumerZone: 'eu', remoteZone: undefined, routed: ['east'] },
    { consumerZone: undefined, remoteZone: 'us', routed: ['east', 'gateway-west'] },
  ])(
    'consumer zone $consumerZone, remote site zone $remoteZone → routes to $routed',
    ({ consumerZone, remoteZone, routed }) => {
      const input = network({
        policy: policy({ routingPolicy: 'scoreFirst' }),
        sites: [site(OWN, consumerZone === undefined ? {} : { sovereigntyZone: consumerZone }), eu('west', remoteZone)],
        inferenceProviders: [local('east')],
        remoteRecords: [remote('west', 'llm')],
      });
      const out = overlay(input);
      expect(out.payload.candidates.map((c) => c.cluster)).toEqual(routed);
      const refused = out.excluded.filter((e) => e.reason === 'sovereignty_mismatch');
      expect(refused.length).toBe(routed.length === 2 ? 0 : 1);
      if (refused[0] !== undefined)
        expect(refused[0].detail).toContain(`consumer site ${OWN} is in sovereigntyZone ${consumerZone}`);
    },
  );

  it('is enforced before the API-provider fallback can reach a site outside the zone', () => {
    const input = network({
      sites: [site(OWN, { sovereigntyZone: 'eu' }), remoteSite('west', { sovereigntyZone: 'us' })],
      inferenceProviders: [local('pool', { phase: 'Unavailable' })],
      remoteRecords: [remote('west', 'openai', { backendKind: 'api_provider' })],
    });
    expect(overlay(input).payload.candidates).toEqual([]);
  });
});

describe('score: latency, error rate and cost', () => {
  // "scored signals default to neutral values and health/error signals default to no evidence of failure"; noMetrics
  // "gives all admitted candidates the same dynamic score".
  const signals = (over: Partial<typeof NO_SIGNALS>) => ({ ...NO_SIGNALS, ...over });
  it.each([
    {
      case: 'missing latency, error rate and cost leave queueDepth at 1 - queue',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0.2 }),
      cost: undefined,
      total: 0.8,
      latency: 0.5,
      costScore: 0.5,
    },
    {
      case: 'a p99 at the 1000 ms reference is neutral',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0.2, latencyP99Ms: 1000 }),
      cost: undefined,
      total: 0.8,
      latency: 0.5,
      costScore: 0.5,
    },
    {
      case: 'a faster p99 raises the total',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0.2, latencyP99Ms: 0 }),
      cost: undefined,
      total: 0.9,
      latency: 1,
      costScore: 0.5,
    },
    {
      case: 'a slower p99 lowers it, never to a 0 latency score',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0.2, latencyP99Ms: 9000 }),
      cost: undefined,
      total: 0.72,
      latency: 0.1,
      costScore: 0.5,
    },
    {
      case: 'a 20 % error rate costs 0.1',
      strategy: 'kvCachePressure' as const,
      s: signals({ kvCacheUtilization: 0.4, errorRate: 0.2 }),
      cost: undefined,
      total: 0.5,
      latency: 0.5,
      costScore: 0.5,
    },
    {
      case: 'a declared cost at the 10 USD reference is cost 0.5',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0 }),
      cost: { perMillionInputTokens: 4, perMillionOutputTokens: 6 },
      total: 1,
      latency: 0.5,
      costScore: 0.5,
    },
    {
      case: 'a free declared cost (self-hosted, spec.cost {}) is cost 1, the total stays the strategy\'s (docs/contract.md §2.5 "queueDepth → 1 - queue_depth")',
      strategy: 'queueDepth' as const,
      s: signals({ queueDepth: 0 }),
      cost: { perMillionInputTokens: 0, perMillionOutputTokens: 0 },
      total: 1,
      latency: 0.5,
      costScore: 1,
    },
    {
      case: 'noMetrics ignores measured latency and errors (docs/contract.md §2.5 "noMetrics → 0 for all")',
      strategy: 'noMetrics' as const,
      s: signals({ latencyP99Ms: 0, errorRate: 1 }),
      cost: undefined,
      total: 0,
      latency: 1,
      costScore: 0.5,
    },
    {
      case: 'a dear declared cost shows in the breakdown only',
      strategy: 'noMetrics' as const,
      s: NO_SIGNALS,
      cost: { perMillionInputTokens: 30, perMillionOutputTokens: 0 },
      total: 0,
      latency: 0.5,
      costScore: 0.25,
    },
  ])('$case', ({ strategy, s, cost, total, latency, costScore }) => {
    const score = scoreSignals(strategy, s, cost);
    expect(score.total).toBeCloseTo(total, 6);
    expect(score.latency).toBe(latency);
    expect(score.cost).toBe(costScore);
  });

  it('a pool that reports errors ranks after an equal one that reports none, and the breakdown shows its latency', () => {
    const input = network({
      policy: policy({ routingPolicy: 'scoreFirst', scoringStrategy: 'queueDepth' }),
      inferenceProviders: [
        local('failing', {
          metrics: {
            configuredSignals: ['queueDepth'],
            sample: sample({ queueDepth: 0.1, errorRate: 0.5, latencyP99Ms: 250 }),
          },
        }),
        local('quiet', { metrics: { configuredSignals: ['queueDepth'], sample: sample({ queueDepth: 0.1 }) } }),
      ],
    });
    const candidates = overlay(input).payload.candidates;
    expect(candidates.map((c) => c.cluster)).toEqual(['quiet', 'failing']);
    expect(candidates[1]!.score_breakdown?.latency).toBe(0.8);
  });
});
