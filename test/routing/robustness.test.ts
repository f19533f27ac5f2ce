/**
 * Bad input never crashes the operator and never yields an overlay a gateway rejects: arbitrary providers, records,
 * sites and metrics (blank, over-long and lone-surrogate names, odd Unicode, NaN/Infinity metrics, out-of-range
 * weights) always render to an envelope validateOverlay accepts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderNetwork } from '../../daemons/routing/index.ts';
import type {
  GridSiteView,
  LocalInferenceProvider,
  MetricsSample,
  NetworkRoutingInput,
  RemoteProviderRecord,
} from '../../daemons/routing/model.ts';
import { expectGatewayAccepts, GATEWAY, NET, OWN, rendered, SOURCE, STABILIZED, T0 } from './fixtures.ts';

const siteIds = fc.constantFrom(OWN, 'west', 'north', 'Süd', '', ' ', 'x'.repeat(300));
const names = fc.oneof(
  fc.constantFrom('m', 'model-a', 'é', '\u{1F600}', '\ud800', 'a\udc00b', '', '  ', '\u3000', 'n'.repeat(257)),
  fc.string({ maxLength: 12 }),
);
const metric = fc.oneof(
  fc.double(),
  fc.constant(undefined),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -1, 2),
);

const sample: fc.Arbitrary<MetricsSample> = fc.record({
  generation: fc.integer({ min: 0, max: 5 }),
  observedAtMs: fc.constant(T0),
  healthy: fc.boolean(),
  queueDepth: metric,
  kvCacheUtilization: metric,
  prefixCacheHitRatio: metric,
}) as fc.Arbitrary<MetricsSample>;

const gridSite: fc.Arbitrary<GridSiteView> = fc.record({
  name: fc.oneof(
    siteIds,
    siteIds.map((s) => `${NET}-${s}`),
  ),
  network: fc.constantFrom(NET, 'other'),
  phase: fc.constantFrom('Pending', 'Active', 'Unreachable', 'Left'),
  region: fc.constantFrom('r1', 'r2', ''),
  zone: fc.constantFrom('z1', 'z2'),
  labels: fc.dictionary(fc.constantFrom('a', 'b'), fc.constantFrom('1', '2'), { maxKeys: 2 }),
});

const localProvider: fc.Arbitrary<LocalInferenceProvider> = fc.record({
  name: names,
  network: fc.constantFrom(NET, 'other'),
  phase: fc.constantFrom('Pending', 'Available', 'Degraded', 'Unavailable'),
  backendKind: fc.constantFrom('local', 'api_provider', 'weird'),
  models: fc.array(names, { maxLength: 4 }),
  routingCluster: fc.option(names, { nil: undefined }),
  siteSelector: fc.option(fc.dictionary(fc.constantFrom('a', 'b'), fc.constantFrom('1', '2'), { maxKeys: 1 }), {
    nil: undefined,
  }),
  accessLabels: fc.option(fc.dictionary(fc.constantFrom('a', 'b'), fc.constantFrom('1', '2'), { maxKeys: 1 }), {
    nil: undefined,
  }),
  capacityWeight: fc.option(fc.oneof(fc.integer({ min: -5, max: 5000 }), fc.constant(Number.NaN)), { nil: undefined }),
  drain: fc.boolean(),
  metrics: fc.option(
    fc.record({
      configuredSignals: fc.subarray(['queueDepth', 'kvCacheUtilization'] as const),
      queueCapacity: fc.option(fc.double(), { nil: undefined }),
      sample: fc.option(sample, { nil: undefined }),
    }),
    { nil: undefined },
  ),
}) as fc.Arbitrary<LocalInferenceProvider>;

const remoteRecord: fc.Arbitrary<RemoteProviderRecord> = fc.record({
  network: fc.constantFrom(NET, 'other'),
  site: siteIds,
  provider: names,
  routingCluster: names,
  backendKind: fc.constantFrom('remote', 'cloud_managed', '??'),
  phase: fc.constantFrom('Available', 'Degraded', 'Unavailable'),
  models: fc.array(names, { maxLength: 4 }),
  tools: fc.option(fc.array(names, { maxLength: 3 }), { nil: undefined }),
  metrics: fc.option(sample, { nil: undefined }),
  capacityWeight: fc.option(fc.double(), { nil: undefined }),
  memberState: fc.constantFrom('alive', 'suspect', 'dead'),
  memberAgeSeconds: fc.integer({ min: 0, max: 10_000 }),
}) as fc.Arbitrary<RemoteProviderRecord>;

const input: fc.Arbitrary<NetworkRoutingInput> = fc.record({
  network: fc.constant(NET),
  ownSite: fc.constant(OWN),
  policy: fc.record({
    routingPolicy: fc.constantFrom('geographyFirst', 'scoreFirst'),
    scoringStrategy: fc.constantFrom('noMetrics', 'queueDepth', 'kvCachePressure'),
    admission: fc.option(fc.constantFrom(STABILIZED, { ...STABILIZED, missingMetrics: 'excluded' as const }), {
      nil: undefined,
    }),
    selectionMode: fc.constantFrom(undefined, 'roundRobin'),
    staleCandidateTtlSeconds: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: undefined }),
    signalTransport: fc.constantFrom('gossip', 'poll'),
  }),
  sites: fc.array(gridSite, { maxLength: 6 }),
  inferenceProviders: fc.array(localProvider, { maxLength: 6 }),
  toolProviders: fc.constant([]),
  remoteRecords: fc.array(remoteRecord, { maxLength: 8 }),
}) as fc.Arbitrary<NetworkRoutingInput>;

describe('robustness', () => {
  it('renders any input to an overlay the gateway accepts, with ranks in order and no duplicates', () => {
    fc.assert(
      fc.property(input, (grid) => {
        const result = renderNetwork(grid, [GATEWAY], SOURCE, T0, new Map());
        const overlay = rendered(result.gateways[0]!.result);
        expectGatewayAccepts(overlay);
        const keys = overlay.payload.candidates.map((c) => `${c.kind}/${c.name}/${c.site}/${c.cluster}`);
        expect(new Set(keys).size).toBe(keys.length);
        expect(overlay.payload.candidates.map((c) => c.rank)).toEqual(keys.map((_, i) => i));
      }),
      { numRuns: 300, seed: 20260729 },
    );
  });
});
