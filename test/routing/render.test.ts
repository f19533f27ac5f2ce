import { describe, expect, it } from 'vitest';
import { stableId } from '../../schemas/fnv1a.ts';
import { orderCandidate } from '../../schemas/overlay/envelope.ts';
import type { RoutingBackend } from '../../daemons/routing/backends.ts';
import { renderNetwork } from '../../daemons/routing/index.ts';
import type { GatewayReference, NetworkRoutingInput } from '../../daemons/routing/model.ts';
import { renderGatewayOverlay, rfc3339Seconds, type RenderedOverlay } from '../../daemons/routing/render.ts';
import {
  expectGatewayAccepts,
  GATEWAY,
  local,
  NET,
  network,
  OWN,
  policy,
  remote,
  remoteSite,
  rendered,
  sample,
  site,
  SOURCE,
  STABILIZED,
  T0,
  tool,
} from './fixtures.ts';

const WEST_GW: GatewayReference = { name: 'west-edge', namespace: 'edge', siteName: 'west' };

/** Renders one gateway's overlay and checks the gateway would accept it. */
function render(input: NetworkRoutingInput, gateway: GatewayReference = GATEWAY, nowMs = T0): RenderedOverlay {
  const result = renderNetwork(input, [gateway], SOURCE, nowMs, new Map());
  const entry = result.gateways[0];
  if (entry === undefined) throw new Error('no gateway result');
  const overlay = rendered(entry.result);
  expectGatewayAccepts(overlay, gateway);
  return overlay;
}

/** A two-region grid: east (own, us-east-1) and west (remote, us-west-2), one model at each plus a tool. */
function grid(over: Partial<NetworkRoutingInput> = {}): NetworkRoutingInput {
  return network({
    sites: [
      site(OWN, { phase: 'Pending', region: 'us-east-1', zone: 'a', labels: { 'grid.praxis.fast/site': OWN } }),
      remoteSite('west', { region: 'us-west-2', zone: 'a', labels: { 'grid.praxis.fast/site': 'west' } }),
    ],
    inferenceProviders: [
      local('vllm-east', {
        models: ['shared-model'],
        routingCluster: 'gateway-east',
        capacityWeight: 50,
        credential: { name: 'east-token', namespace: 'grid-system', key: 'token' },
      }),
    ],
    toolProviders: [tool('db-tools', { tools: ['database-query'] })],
    remoteRecords: [
      remote('west', 'vllm-west', {
        models: ['shared-model'],
        capacityWeight: 30,
        metrics: sample({ queueDepth: 0.2 }),
      }),
    ],
    ...over,
  });
}

describe('overlay envelope (docs/contract.md §2.2)', () => {
  const overlay = render(
    grid({
      policy: policy({ selectionMode: 'weightedRandom', placementStrategy: 'static', scoringStrategy: 'queueDepth' }),
    }),
  );

  it('puts the envelope keys, scope and provenance in contract order', () => {
    expect(Object.keys(overlay.envelope)).toEqual([
      'schema_version',
      'revision',
      'content_digest',
      'scope',
      'provenance',
      'overlay',
    ]);
    expect(overlay.envelope.schema_version).toBe('1.0.0');
    expect(overlay.envelope.revision).toEqual({
      kind: 'content_addressed',
      algorithm: 'sha256',
      value: overlay.revision,
    });
    expect(overlay.envelope.content_digest).toEqual({ algorithm: 'sha256', value: overlay.revision });
    expect(overlay.envelope.scope).toEqual({
      network: NET,
      gateway: 'inference-gw',
      namespace: 'praxis-system',
      local_site: OWN,
    });
    expect(overlay.envelope.provenance).toEqual({
      producer: 'grid-operator',
      producer_version: '0.1.0',
      source_name: NET,
      source_uid: SOURCE.uid,
      source_generation: 3,
      rendered_at: '2026-07-29T00:00:00Z',
    });
    expect(overlay.configMapName).toBe(`grid-overlay-${NET}-inference-gw`);
  });

  it('renders the payload with generated_at in RFC 3339 UTC and selection_policy only because one is set', () => {
    expect(overlay.payload).toMatchObject({
      network: NET,
      local_site: OWN,
      selection_policy: { mode: 'weightedRandom' },
      generated_at: '2026-07-29T00:00:00Z',
    });
    const plain = render(grid());
    expect(Object.hasOwn(plain.payload, 'selection_policy')).toBe(false);
  });

  it('orders candidate keys as the contract table and omits optional keys instead of writing null', () => {
    const [, east, west] = overlay.payload.candidates;
    expect(Object.keys(east ?? {})).toEqual([
      'kind',
      'name',
      'site',
      'cluster',
      'fresh',
      'credential',
      'stable_id',
      'admission_state',
      'selection_tier',
      'score',
      'score_breakdown',
      'rank',
      'selection_group',
      'traffic_weight',
    ]);
    expect(Object.keys(west ?? {})).not.toContain('credential');
    expect(Object.keys(east?.score_breakdown ?? {})).toEqual([
      'locality',
      'queue_depth',
      'kv_cache',
      'prefix_cache',
      'latency',
      'cost',
      'total',
    ]);
    expect(JSON.stringify(overlay.envelope)).not.toContain('null');
  });

  it('builds every candidate form in contract order, so the envelope publishes them without a copy', () => {
    // The four literal forms of a candidate (credential or not, weighted or not) must each already be what
    // orderCandidate would produce: it then returns the candidate itself.
    for (const mode of ['weightedRandom', 'deterministic'] as const) {
      const { payload } = render(
        grid({
          policy: policy({ selectionMode: mode, placementStrategy: mode === 'weightedRandom' ? 'static' : undefined }),
        }),
      );
      const forms = new Set(
        payload.candidates.map((c) => `${Object.hasOwn(c, 'credential')}/${Object.hasOwn(c, 'traffic_weight')}`),
      );
      expect(forms.size, mode).toBe(2);
      for (const candidate of payload.candidates) expect(orderCandidate(candidate)).toBe(candidate);
    }
  });

  it('fills every enrichment field: stable_id, admission, tier, score, breakdown, rank, group, weight', () => {
    // "Each candidate is enriched with admission state, locality tier, stable ID, score, score breakdown, and rank."
    expect(overlay.payload.candidates).toEqual([
      {
        kind: 'mcp_tool',
        name: 'database-query',
        site: OWN,
        cluster: 'tool/db-tools',
        fresh: true,
        stable_id: stableId('mcp_tool', 'database-query', OWN, 'tool/db-tools'),
        admission_state: 'new_and_existing',
        selection_tier: 'same_site',
        score: 0.5,
        score_breakdown: {
          locality: 1,
          queue_depth: 0.5,
          kv_cache: 0.5,
          prefix_cache: 0.5,
          latency: 0.5,
          cost: 0.5,
          total: 0.5,
        },
        rank: 0,
        selection_group: 0,
        traffic_weight: 1,
      },
      {
        kind: 'inference_model',
        name: 'shared-model',
        site: OWN,
        cluster: 'gateway-east',
        fresh: true,
        credential: {
          strategy: 'bearer_token',
          secretRef: { name: 'east-token', namespace: 'grid-system', key: 'token' },
        },
        stable_id: stableId('inference_model', 'shared-model', OWN, 'gateway-east'),
        admission_state: 'new_and_existing',
        selection_tier: 'same_site',
        score: 0.5,
        score_breakdown: {
          locality: 1,
          queue_depth: 0.5,
          kv_cache: 0.5,
          prefix_cache: 0.5,
          latency: 0.5,
          cost: 0.5,
          total: 0.5,
        },
        rank: 1,
        selection_group: 0,
        traffic_weight: 50,
      },
      {
        kind: 'inference_model',
        name: 'shared-model',
        site: 'west',
        cluster: 'gateway-west',
        fresh: true,
        stable_id: stableId('inference_model', 'shared-model', 'west', 'gateway-west'),
        admission_state: 'new_and_existing',
        selection_tier: 'cross_region',
        score: 0.8,
        score_breakdown: {
          locality: 0.25,
          queue_depth: 0.8,
          kv_cache: 0.5,
          prefix_cache: 0.5,
          latency: 0.5,
          cost: 0.5,
          total: 0.8,
        },
        rank: 2,
        selection_group: 1,
        traffic_weight: 30,
      },
    ]);
  });

  it('publishes traffic_weight only under weightedRandom', () => {
    // docs/contract.md §2.2: traffic_weight "only under weightedRandom: the provider's capacityWeight
    // (1..1000, default 1)".
    for (const mode of [undefined, 'deterministic', 'roundRobin', 'random'] as const) {
      const plain = render(grid({ policy: policy(mode === undefined ? {} : { selectionMode: mode }) }));
      expect(plain.payload.candidates.some((c) => Object.hasOwn(c, 'traffic_weight'))).toBe(false);
    }
  });

  it('publishes an empty candidate set as a valid empty envelope (seed 001)', () => {
    const empty = render(network());
    expect(empty.payload.candidates).toEqual([]);
  });
});

describe('revision semantics (seed 004 "Revision semantics")', () => {
  const weighted = policy({ selectionMode: 'weightedRandom', placementStrategy: 'static' });

  it('gives re-rendered identical state the identical revision, and a new timestamp does not change it', () => {
    // "Timestamps, provenance, Kubernetes metadata, and envelope annotations are not part of the semantic payload.
    // Re-rendering identical routing state therefore produces the same revision."
    const first = render(grid({ policy: weighted }));
    const again = render(grid({ policy: weighted }));
    const later = render(grid({ policy: weighted }), GATEWAY, T0 + 3_600_000);
    expect(again.revision).toBe(first.revision);
    expect(later.revision).toBe(first.revision);
    expect(later.payload.generated_at).toBe('2026-07-29T01:00:00Z');
    expect(later.envelope.provenance.rendered_at).not.toBe(first.envelope.provenance.rendered_at);
  });

  it('changes the revision when a weight, an order or a credential reference changes', () => {
    // "Candidate membership, order, admission, locality, freshness, selection_group, traffic_weight, credential
    // references, or other serialized candidate content changes the revision."
    const base = render(grid({ policy: weighted })).revision;
    const reweighted = grid({
      policy: weighted,
      remoteRecords: [
        remote('west', 'vllm-west', {
          models: ['shared-model'],
          capacityWeight: 31,
          metrics: sample({ queueDepth: 0.2 }),
        }),
      ],
    });
    const degraded = grid({
      policy: weighted,
      inferenceProviders: [
        local('vllm-east', {
          models: ['shared-model'],
          routingCluster: 'gateway-east',
          capacityWeight: 50,
          phase: 'Degraded',
        }),
      ],
    });
    const reordered = grid({ policy: { ...weighted, routingPolicy: 'scoreFirst', scoringStrategy: 'queueDepth' } });
    const revisions = [render(reweighted).revision, render(degraded).revision, render(reordered).revision];
    for (const revision of revisions) expect(revision).not.toBe(base);
    expect(new Set(revisions).size).toBe(3);
  });

  it('ignores capacityWeight when it is not serialized (no weightedRandom)', () => {
    const a = render(grid()).revision;
    const b = render(
      grid({
        remoteRecords: [
          remote('west', 'vllm-west', {
            models: ['shared-model'],
            capacityWeight: 999,
            metrics: sample({ queueDepth: 0.2 }),
          }),
        ],
      }),
    ).revision;
    expect(b).toBe(a);
  });
});

describe('per-gateway perspective', () => {
  // "Renders a content-addressed overlay for each gateway reference. Each gateway can therefore receive a
  // different ranking because its localSite and routing perspective can differ."
  it('gives each gateway its own local site, tiers, order and revision from one evaluation', () => {
    const input = grid();
    const result = renderNetwork(input, [GATEWAY, WEST_GW], SOURCE, T0, new Map());
    const [east, west] = result.gateways.map((g) => rendered(g.result));
    if (east === undefined || west === undefined) throw new Error('missing overlay');
    expectGatewayAccepts(east, GATEWAY);
    expectGatewayAccepts(west, WEST_GW);
    const view = (o: RenderedOverlay) =>
      o.payload.candidates.filter((c) => c.name === 'shared-model').map((c) => `${c.site}:${c.selection_tier}`);
    expect(view(east)).toEqual(['east:same_site', 'west:cross_region']);
    expect(view(west)).toEqual(['west:same_site', 'east:cross_region']);
    expect(west.envelope.scope).toEqual({ network: NET, gateway: 'west-edge', namespace: 'edge', local_site: 'west' });
    expect(west.configMapName).toBe(`grid-overlay-${NET}-west-edge`);
    expect(west.revision).not.toBe(east.revision);
  });

  it('applies access policy against each gateway consumer site', () => {
    // docs/contract.md §2.5: "accessPolicy.siteSelector.matchLabels must be a subset of the consumer site's labels".
    const input = grid({
      inferenceProviders: [local('east-only', { models: ['private'], accessLabels: { 'grid.praxis.fast/site': OWN } })],
      toolProviders: [],
      remoteRecords: [],
    });
    const result = renderNetwork(
      input,
      [GATEWAY, WEST_GW, { name: 'lost', namespace: 'x', siteName: 'nowhere' }],
      SOURCE,
      T0,
      new Map(),
    );
    const overlays = result.gateways.map((g) => rendered(g.result));
    expect(overlays.map((o) => o.payload.candidates.length)).toEqual([1, 0, 0]);
    expect(overlays[1]?.excluded).toEqual([
      expect.objectContaining({ reason: 'access_denied', provider: 'east-only' }),
    ]);
    expect(overlays[2]?.excluded[0]?.detail).toContain('no GridSite');
  });

  it('defaults the local site to the network name when the gateway sets no siteName', () => {
    const overlay = render(grid(), { name: 'gw', namespace: 'ns' });
    expect(overlay.payload.local_site).toBe(NET);
  });

  it('advances hysteresis once per reconcile however many gateways are rendered', () => {
    const input = grid({
      policy: policy({
        scoringStrategy: 'queueDepth',
        admission: {
          enterThreshold: 0.85,
          exitThreshold: 0.7,
          failureThreshold: 1,
          successThreshold: 1,
          minimumStateDurationSeconds: 0,
          recoveryHoldDownSeconds: 0,
          missingMetrics: 'existingOnly',
        },
      }),
    });
    const result = renderNetwork(input, [GATEWAY, WEST_GW], SOURCE, T0, new Map());
    expect([...result.admissionMemory.keys()]).toEqual([`${NET}/west/vllm-west`]);
  });
});

describe('render errors are values', () => {
  function renderError(input: NetworkRoutingInput, gateway: GatewayReference = GATEWAY, nowMs = T0, source = SOURCE) {
    const entry = renderNetwork(input, [gateway], source, nowMs, new Map()).gateways[0];
    if (entry === undefined || entry.result.ok) throw new Error('expected a render error');
    return entry.result.error;
  }

  it.each([
    // docs/contract.md §1: "placementPolicy (strategy: static) is set if and only if selectionPolicy.mode ==
    // weightedRandom".
    [
      'weightedRandom without placementPolicy',
      policy({ selectionMode: 'weightedRandom' }),
      /requires spec\.placementPolicy\.strategy "static" \(got none\)/,
    ],
    [
      'weightedRandom with another placement',
      policy({ selectionMode: 'weightedRandom', placementStrategy: 'dynamic' }),
      /got "dynamic"/,
    ],
    [
      'placementPolicy without weightedRandom',
      policy({ selectionMode: 'roundRobin', placementStrategy: 'static' }),
      /only valid with spec\.selectionPolicy\.mode weightedRandom \(mode is roundRobin\)/,
    ],
  ])('%s → placement_policy_mismatch', (_label, routing, message) => {
    const error = renderError(grid({ policy: routing }));
    expect(error.code).toBe('placement_policy_mismatch');
    expect(error.message).toMatch(message);
  });

  it.each([
    ['blank namespace', { name: 'gw', namespace: ' ' }, 'invalid_scope', /namespace must be 1-256 bytes/],
    ['blank site name', { name: 'gw', namespace: 'ns', siteName: '' }, 'invalid_scope', /siteName/],
    ['over-long gateway name', { name: 'g'.repeat(257), namespace: 'ns' }, 'invalid_scope', /\.name must be/],
  ] as const)('%s → %s', (_label, gateway, code, message) => {
    const error = renderError(grid(), gateway);
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('rejects provenance a consumer would refuse, and a broken clock', () => {
    expect(renderError(grid(), GATEWAY, T0, { ...SOURCE, generation: 0 }).code).toBe('invalid_provenance');
    expect(renderError(grid(), GATEWAY, T0, { ...SOURCE, uid: '' }).code).toBe('invalid_provenance');
    expect(renderError(grid(), GATEWAY, Number.NaN).code).toBe('invalid_clock');
  });

  it('turns a value JCS cannot hash into unencodable_payload instead of throwing', () => {
    const backend: RoutingBackend = {
      kind: 'inference_model',
      name: 'm',
      site: OWN,
      cluster: 'c',
      fresh: true,
      external: false,
      credential: undefined,
      admission: 'new_and_existing',
      score: { total: Number.NaN, queue_depth: 0.5, kv_cache: 0.5, prefix_cache: 0.5, latency: 0.5, cost: 0.5 },
      capacityWeight: 1,
      accessLabels: undefined,
      provider: 'p',
    };
    const result = renderGatewayOverlay({
      network: NET,
      gateway: GATEWAY,
      policy: policy(),
      sites: [],
      backends: [backend],
      source: SOURCE,
      nowMs: T0,
    });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe('unencodable_payload');
      expect(result.error.message).toContain('score');
    }
  });
});

describe('re-ranking across reconciles (seed 004 "How re-ranking updates")', () => {
  it('moves a pressured local provider behind a healthy remote one after failureThreshold samples, then back', () => {
    // "Stabilized admission requires repeated pressure observations before entering existing_only, and
    // repeated low-pressure observations plus a minimum state duration and recovery hold-down before returning".
    const admission = { ...STABILIZED, successThreshold: 2, recoveryHoldDownSeconds: 20 };
    const reconcile = (queueDepth: number, generation: number, observedAtMs: number) =>
      grid({
        policy: policy({ scoringStrategy: 'queueDepth', admission }),
        toolProviders: [],
        inferenceProviders: [
          local('vllm-east', {
            models: ['shared-model'],
            routingCluster: 'gateway-east',
            metrics: { configuredSignals: ['queueDepth'], sample: sample({ queueDepth, generation, observedAtMs }) },
          }),
        ],
        remoteRecords: [
          remote('west', 'vllm-west', { models: ['shared-model'], metrics: sample({ queueDepth: 0.1 }) }),
        ],
      });
    const steps = [
      { at: 0, queue: 0.2, first: 'east' },
      { at: 15, queue: 0.95, first: 'east' },
      { at: 30, queue: 0.95, first: 'west' },
      { at: 45, queue: 0.3, first: 'west' },
      { at: 60, queue: 0.3, first: 'west' },
      { at: 65, queue: 0.3, first: 'east' },
    ];
    let memory = new Map() as ReturnType<typeof renderNetwork>['admissionMemory'];
    const firsts: string[] = [];
    const revisions: string[] = [];
    steps.forEach((step, index) => {
      const now = T0 + step.at * 1000;
      const result = renderNetwork(reconcile(step.queue, index + 1, now), [GATEWAY], SOURCE, now, memory);
      memory = result.admissionMemory;
      const overlay = rendered(result.gateways[0]!.result);
      expectGatewayAccepts(overlay);
      firsts.push(overlay.payload.candidates[0]!.site);
      revisions.push(overlay.revision);
    });
    expect(firsts).toEqual(steps.map((s) => s.first));
    expect(new Set(revisions).size).toBeGreaterThan(2);
  });
});

describe('rfc3339Seconds (generated_at, rendered_at)', () => {
  it('writes UTC to the second and gives each second its own text, however the calls interleave', () => {
    const t = Date.parse('2026-11-29T17:45:12.345Z');
    expect(rfc3339Seconds(t)).toBe('2026-11-29T17:45:12Z');
    expect(rfc3339Seconds(t + 600)).toBe('2026-11-29T17:45:12Z');
    expect(rfc3339Seconds(t + 655)).toBe('2026-11-29T17:45:13Z');
    expect(rfc3339Seconds(t)).toBe('2026-11-29T17:45:12Z');
    expect(rfc3339Seconds(-1)).toBe('1969-12-31T23:59:59Z');
    expect(rfc3339Seconds(-1000)).toBe('1969-12-31T23:59:59Z');
    expect(rfc3339Seconds(-1001)).toBe('1969-12-31T23:59:58Z');
  });

  it('refuses a clock reading that is not a time or falls outside years 0000-9999, also right after a good one', () => {
    const t = Date.parse('2026-11-29T17:45:12Z');
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Date.parse('+010000-01-01T00:00:00Z'), 8.64e15 + 1]) {
      expect(rfc3339Seconds(t)).toBe('2026-11-29T17:45:12Z');
      expect(rfc3339Seconds(bad), String(bad)).toBeUndefined();
    }
  });
});
