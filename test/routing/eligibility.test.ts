import { describe, expect, it } from 'vitest';
import {
  effectiveCapacityWeight,
  evaluateNetwork,
  providerKey,
  publishedTools,
  type RoutingBackend,
} from '../../daemons/routing/backends.ts';
import type { GridSitePhase, NetworkRoutingInput } from '../../daemons/routing/model.ts';
import { renderGatewayOverlay } from '../../daemons/routing/render.ts';
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

function evaluate(input: NetworkRoutingInput) {
  return evaluateNetwork(input, T0, new Map());
}

const where = (b: RoutingBackend) => `${b.kind}:${b.name}@${b.site}/${b.cluster}`;

describe('local providers', () => {
  it('yields one candidate per model and site, cluster from routingClusterRef else the provider name', () => {
    // "The operator renders one overlay candidate per routable model/provider pair."
    const { backends } = evaluate(
      network({
        sites: [site(OWN, { labels: { pool: 'gpu' } }), site('east-b', { labels: { pool: 'gpu' } })],
        inferenceProviders: [
          local('vllm', { models: ['m1', 'm2'], siteSelector: { pool: 'gpu' }, routingCluster: 'gw-east' }),
          local('api'),
        ],
      }),
    );
    expect(backends.map(where)).toEqual([
      'inference_model:m1@east/gw-east',
      'inference_model:m2@east/gw-east',
      'inference_model:m1@east-b/gw-east',
      'inference_model:m2@east-b/gw-east',
      'inference_model:model-a@east/api',
    ]);
  });

  it('publishes a provider whose siteSelector matches no GridSite nowhere, and says why', () => {
    // What a user looks up as "Overlay missing new candidate — Cause: ... siteSelector does not match any GridSite."
    const result = evaluate(
      network({ inferenceProviders: [local('p', { siteSelector: { 'grid.praxis.fast/provider-site': 'nope' } })] }),
    );
    expect(result.backends).toEqual([]);
    expect(result.excluded).toEqual([expect.objectContaining({ reason: 'no_matching_site', provider: 'p' })]);
  });

  it.each([
    // "Unavailable providers are excluded. Degraded providers remain in the overlay with fresh: false."
    ['Available', true],
    ['Pending', true],
    ['Degraded', false],
  ] as const)('a %s provider is published with fresh=%s', (phase, fresh) => {
    const [backend] = evaluate(network({ inferenceProviders: [local('p', { phase })] })).backends;
    expect(backend?.fresh).toBe(fresh);
  });

  it('excludes an Unavailable provider', () => {
    const result = evaluate(network({ inferenceProviders: [local('p', { phase: 'Unavailable' })] }));
    expect(result.backends).toEqual([]);
    expect(result.excluded.map((e) => e.reason)).toEqual(['provider_unavailable']);
  });

  it('does not convert an unrecognized backendKind (seed 001 "not converted into a normal scoring candidate")', () => {
    const result = evaluate(network({ inferenceProviders: [local('p', { backendKind: 'mainframe' })] }));
    expect(result.backends).toEqual([]);
    expect(result.excluded[0]?.reason).toBe('unrecognized_backend_kind');
  });

  it('carries the credential reference of a local provider and never a value', () => {
    // "the operator projects a credential reference (never the token value) into the routing overlay candidate"
    const credential = { name: 'openai-token', namespace: 'praxis-system', key: 'token' };
    const [backend] = evaluate(network({ inferenceProviders: [local('p', { credential })] })).backends;
    expect(backend?.credential).toEqual(credential);
  });

  it('excludes a provider whose metrics report healthy=false (docs/contract.md §2.5 "metrics with healthy=false → excluded")', () => {
    const result = evaluate(
      network({
        inferenceProviders: [local('sick', { metrics: { configuredSignals: [], sample: sample({ healthy: false }) } })],
      }),
    );
    expect(result.backends).toEqual([]);
    expect(result.excluded).toEqual([expect.objectContaining({ reason: 'unhealthy', provider: 'sick' })]);
  });

  it('publishes a draining provider as existing_only and never revives an unhealthy one', () => {
    // docs/contract.md §2.5: "trafficPolicy.drain: true publishes a healthy provider as existing_only."
    const result = evaluate(
      network({
        inferenceProviders: [
          local('drained', { drain: true }),
          local('sick', { drain: true, metrics: { configuredSignals: [], sample: sample({ healthy: false }) } }),
        ],
      }),
    );
    expect(result.backends.map((b) => [b.provider, b.admission])).toEqual([['drained', 'existing_only']]);
  });

  it('normalises a raw queue with queueCapacity before scoring and admission', () => {
    const result = evaluate(
      network({
        policy: policy({ scoringStrategy: 'queueDepth' }),
        inferenceProviders: [
          local('epp', {
            metrics: { configuredSignals: ['queueDepth'], queueCapacity: 40, sample: sample({ queueDepth: 10 }) },
          }),
          local('full', {
            metrics: { configuredSignals: ['queueDepth'], queueCapacity: 40, sample: sample({ queueDepth: 400 }) },
          }),
        ],
      }),
    );
    expect(result.backends.map((b) => [b.provider, b.score.total, b.admission])).toEqual([
      ['epp', 0.75, 'new_and_existing'],
      ['full', 0, 'existing_only'],
    ]);
  });

  it('threads stabilized hysteresis memory keyed by provider identity, once per provider however many sites', () => {
    const input = network({
      policy: policy({ scoringStrategy: 'queueDepth', admission: STABILIZED }),
      sites: [site(OWN, { labels: { pool: 'gpu' } }), site('east-b', { labels: { pool: 'gpu' } })],
      inferenceProviders: [
        local('epp', {
          siteSelector: { pool: 'gpu' },
          metrics: { configuredSignals: ['queueDepth'], sample: sample({ queueDepth: 0.2 }) },
        }),
      ],
    });
    const first = evaluateNetwork(input, T0, new Map());
    expect([...first.admissionMemory.keys()]).toEqual([providerKey(NET, OWN, 'epp')]);
    expect(first.admissionMemory.get(providerKey(NET, OWN, 'epp'))?.lastGeneration).toBe(1);
    expect(first.backends).toHaveLength(2);
  });

  it('drops a capability the gateway would reject and keeps the rest of the overlay', () => {
    const result = evaluate(
      network({ inferenceProviders: [local('p', { models: ['ok', ' ', 'x'.repeat(257), 'lone\ud800'] })] }),
    );
    expect(result.backends.map((b) => b.name)).toEqual(['ok']);
    expect(result.excluded.map((e) => e.reason)).toEqual([
      'invalid_capability',
      'invalid_capability',
      'invalid_capability',
    ]);
  });

  it('counts the 256-byte bound in UTF-8 bytes, not characters', () => {
    // é is 2 bytes, € 3, 😀 4 (two UTF-16 units): each pair is one name at the bound and one just past it.
    const atBound = ['x'.repeat(256), 'é'.repeat(128), `${'€'.repeat(85)}a`, '\u{1F600}'.repeat(64)];
    const past = ['x'.repeat(257), 'é'.repeat(129), '€'.repeat(86), `${'\u{1F600}'.repeat(64)}a`];
    const result = evaluate(network({ inferenceProviders: [local('p', { models: [...atBound, ...past] })] }));
    expect(result.backends.map((b) => b.name)).toEqual(atBound);
    expect(result.excluded.map((e) => e.reason)).toEqual(past.map(() => 'invalid_capability'));
  });
});

describe('capacity weight', () => {
  // "spec.capacityWeight is an optional positive relative provider capacity from 1 through 1000 ... If
  // omitted, the effective weight is 1." A value that bypassed the CRD (or a remote record's) is clamped, so the
  // overlay's traffic_weight always stays in the contract's 1..1000.
  it.each([
    [undefined, 1],
    [50, 50],
    [0, 1],
    [-3, 1],
    [5000, 1000],
    [2.6, 3],
    [Number.NaN, 1],
    [Number.POSITIVE_INFINITY, 1],
  ])('%s → %s', (weight, effective) => {
    expect(effectiveCapacityWeight(weight)).toBe(effective);
  });
});

describe('AgentToolProvider tools', () => {
  // AgentToolProvider tools are mcp_tool candidates (cluster tool/{provider}, allowlist from spec.tools);
  // CRD: spec.tools "Declared tools; discovered through tools/list when omitted".
  it.each([
    ['declared, not yet discovered', ['a', 'b'], undefined, ['a', 'b']],
    ['declared and discovered: the intersection', ['a', 'b'], ['b', 'c'], ['b']],
    ['none declared: everything discovered', [], ['c', 'd', 'c'], ['c', 'd']],
    ['none declared, none discovered', [], undefined, []],
  ] as const)('%s', (_label, tools, discoveredTools, expected) => {
    expect(publishedTools(tool('t', { tools, ...(discoveredTools ? { discoveredTools } : {}) }))).toEqual(expected);
  });

  it('publishes tools as mcp_tool candidates with cluster tool/{provider} and their credential reference', () => {
    const credential = { name: 'tool-token', namespace: 'praxis-system', key: 'token' };
    const { backends } = evaluate(
      network({
        toolProviders: [
          tool('db-tools', { tools: ['database-query'], credential }),
          tool('down', { phase: 'Unavailable' }),
        ],
      }),
    );
    expect(backends.map(where)).toEqual(['mcp_tool:database-query@east/tool/db-tools']);
    expect(backends[0]?.credential).toEqual(credential);
  });
});

describe('remote provider eligibility', () => {
  // "A remote provider record is included in the routing overlay only when the corresponding GridSite.status.phase
  // is Active, or Unreachable under poll signal transport"; "Provider
  // records from a peer whose GridSite is in Discovered, Connecting, Pending, or Left are excluded ... Records from a
  // peer with no matching GridSite are also excluded (fail-closed)."
  const phases: [GridSitePhase, 'gossip' | 'poll', boolean][] = [
    ['Active', 'gossip', true],
    ['Active', 'poll', true],
    ['Unreachable', 'gossip', false],
    ['Unreachable', 'poll', true],
    ['Pending', 'gossip', false],
    ['Pending', 'poll', false],
    ['Discovered', 'gossip', false],
    ['Connecting', 'gossip', false],
    ['Left', 'poll', false],
  ];
  it.each(phases)('GridSite %s under %s transport → included=%s', (phase, transport, included) => {
    const result = evaluate(
      network({
        policy: policy({ signalTransport: transport }),
        sites: [site(OWN), remoteSite('west', { phase })],
        remoteRecords: [remote('west', 'p')],
      }),
    );
    expect(result.backends.length).toBe(included ? 1 : 0);
    if (!included) expect(result.excluded.map((e) => e.reason)).toEqual(['site_not_eligible']);
  });

  it('a Pending remote site is excluded while a local provider of a Pending own site is included', () => {
    // "local InferenceProviders are eligible regardless of GridSite.status.phase; only remote CRDT provider
    // records are phase-gated".
    const input = network({
      sites: [site(OWN, { phase: 'Pending' }), remoteSite('west', { phase: 'Pending' })],
      inferenceProviders: [local('local-vllm')],
      remoteRecords: [remote('west', 'remote-vllm')],
    });
    const result = evaluate(input);
    expect(result.backends.map((b) => b.provider)).toEqual(['local-vllm']);
    const overlay = rendered(
      renderGatewayOverlay({
        network: NET,
        gateway: GATEWAY,
        policy: input.policy,
        sites: input.sites,
        backends: result.backends,
        source: SOURCE,
        nowMs: T0,
      }),
    );
    expect(overlay.payload.candidates.map((c) => c.site)).toEqual([OWN]);
    expectGatewayAccepts(overlay);
  });

  it.each([
    // "Remote records are filtered by network and local site identity so a site does not route to its own
    // CRDT echo or to providers from another GridNetwork."
    ['its own echo', remote(OWN, 'p'), 'own_echo'],
    ['another network', remote('west', 'p', { network: 'staging' }), 'other_network'],
    ['a site without a GridSite', remote('north', 'p'), 'site_not_found'],
    ['a GridSite of another network', remote('south', 'p'), 'site_not_found'],
    ['an Unavailable provider', remote('west', 'p', { phase: 'Unavailable' }), 'provider_unavailable'],
  ] as const)('drops %s', (_label, record, reason) => {
    const result = evaluate(
      network({
        sites: [site(OWN), remoteSite('west'), site(`${NET}-south`, { network: 'staging' })],
        remoteRecords: [record],
      }),
    );
    expect(result.backends).toEqual([]);
    expect(result.excluded.map((e) => e.reason)).toEqual([reason]);
  });

  it('matches a GridSite only under the auto-discovered name, not under the bare site id', () => {
    const result = evaluate(network({ sites: [site('west')], remoteRecords: [remote('west', 'p')] }));
    expect(result.excluded.map((e) => e.reason)).toEqual(['site_not_found']);
  });

  it.each([
    // docs/contract.md §2.2: fresh is "false for Degraded providers and for remote providers of Suspect/Dead members".
    ['Available', 'alive', true],
    ['Degraded', 'alive', false],
    ['Available', 'suspect', false],
    ['Available', 'dead', false],
  ] as const)('a remote %s provider of an %s member has fresh=%s', (phase, memberState, fresh) => {
    const result = evaluate(
      network({
        sites: [remoteSite('west')],
        remoteRecords: [remote('west', 'p', { phase, memberState, memberAgeSeconds: 5 })],
      }),
    );
    expect(result.backends[0]?.fresh).toBe(fresh);
  });

  it('never carries a credential on a remote candidate and publishes its models and tools', () => {
    // "For remote AGN sites, provider backend credentials stay in the remote provider site".
    const result = evaluate(
      network({
        sites: [remoteSite('west')],
        remoteRecords: [remote('west', 'mcp', { models: ['m'], tools: ['search', 'search'], capacityWeight: 30 })],
      }),
    );
    expect(result.backends.map(where)).toEqual([
      'inference_model:m@west/gateway-west',
      'mcp_tool:search@west/tool/mcp',
    ]);
    expect(result.backends.every((b) => b.credential === undefined && b.capacityWeight === 30)).toBe(true);
  });

  it('treats a signal the remote never sends as NotConfigured, and a non-finite one as missing', () => {
    const input = (queueDepth?: number) =>
      network({
        policy: policy({ scoringStrategy: 'queueDepth', admission: STABILIZED }),
        sites: [remoteSite('west')],
        remoteRecords: [remote('west', 'p', { metrics: sample(queueDepth === undefined ? {} : { queueDepth }) })],
      });
    expect(evaluate(input()).backends[0]?.admission).toBe('new_and_existing');
    expect(evaluate(input(Number.NaN)).backends[0]?.admission).toBe('existing_only');
    expect(evaluate(input(0.1)).backends[0]?.admission).toBe('new_and_existing');
  });
});

describe('stale candidate TTL', () => {
  // docs/contract.md §2.5: "Stale remote candidates (fresh=false) stay until their member has been Dead/Suspect for
  // staleCandidateTtlSeconds; local and fresh ones are never evicted by the TTL." Also: "age_secs = 0 on a
  // Dead/Suspect member as unknown and retains conservatively"; "defensively treats an internally observed 0 as
  // absent"; "Under poll signal transport the operator removes no candidate for liveness."
  const cases = [
    ['dead past the TTL', { memberState: 'dead', memberAgeSeconds: 3600 }, 3600, 'gossip', false],
    ['suspect past the TTL', { memberState: 'suspect', memberAgeSeconds: 4000 }, 3600, 'gossip', false],
    ['dead within the TTL', { memberState: 'dead', memberAgeSeconds: 3599 }, 3600, 'gossip', true],
    ['dead with unknown age 0', { memberState: 'dead', memberAgeSeconds: 0 }, 1, 'gossip', true],
    ['dead with no TTL set', { memberState: 'dead', memberAgeSeconds: 99999 }, undefined, 'gossip', true],
    ['dead with a TTL of 0', { memberState: 'dead', memberAgeSeconds: 99999 }, 0, 'gossip', true],
    [
      'degraded provider of an alive member',
      { phase: 'Degraded', memberState: 'alive', memberAgeSeconds: 0 },
      1,
      'gossip',
      true,
    ],
    ['dead past the TTL under poll transport', { memberState: 'dead', memberAgeSeconds: 3600 }, 3600, 'poll', true],
  ] as const;
  it.each(cases)('%s → retained=%s', (_label, record, ttl, transport, retained) => {
    const result = evaluate(
      network({
        policy: policy({ signalTransport: transport, ...(ttl === undefined ? {} : { staleCandidateTtlSeconds: ttl }) }),
        sites: [remoteSite('west')],
        remoteRecords: [remote('west', 'p', record)],
      }),
    );
    expect(result.backends.length).toBe(retained ? 1 : 0);
    if (!retained) expect(result.excluded.map((e) => e.reason)).toEqual(['stale_ttl_expired']);
  });

  it('never evicts a Degraded local provider', () => {
    const result = evaluate(
      network({
        policy: policy({ staleCandidateTtlSeconds: 1 }),
        inferenceProviders: [local('p', { phase: 'Degraded' })],
      }),
    );
    expect(result.backends.map((b) => b.fresh)).toEqual([false]);
  });
});
