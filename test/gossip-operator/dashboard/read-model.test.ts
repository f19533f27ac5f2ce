import { describe, expect, it } from 'vitest';
import type { GridNetworkResource, GridSiteResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { OverlayCandidate } from '../../../schemas/generated/overlay-envelope.ts';
import { buildReadModel, type ReadModelInputs } from '../../../daemons/gossip-operator/dashboard/read-model.ts';
import { parseDashboardTargets } from '../../../daemons/gossip-operator/dashboard/targets.ts';
import {
  EMPTY_TRANSITIONS,
  MAX_TRANSITIONS,
  observePhases,
} from '../../../daemons/gossip-operator/dashboard/transitions.ts';
import { ConfigError, parseConfig } from '../../../daemons/gossip-operator/config.ts';
import { thrownMessage } from '../../thrown.ts';

const REV_A = 'a'.repeat(64);
const REV_B = 'b'.repeat(64);
const PEM_BODY = 'MIIBszCCAVmgAwIBAgIUPUBLICCERTIFICATEBYTES0000000000';

function gridSite(
  name: string,
  phase: string,
  extra: Partial<GridSiteResource['status']> = {},
  annotations?: Record<string, string>,
): GridSiteResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'GridSite',
    metadata: { name, ...(annotations !== undefined ? { annotations } : {}) },
    spec: { gridNetworkRef: 'demo' },
    status: {
      phase: phase as 'Active',
      reason: 'TlsVerified',
      message: 'secret-looking message',
      lastProbeTime: '2026-01-01T00:00:00Z',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      publicCertPem: `-----BEGIN CERTIFICATE-----\n${PEM_BODY}\n-----END CERTIFICATE-----`,
      ...extra,
    },
  } as GridSiteResource;
}

function provider(name: string, ready: 'True' | 'False'): InferenceProviderResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'InferenceProvider',
    metadata: { name },
    spec: {
      gridNetworkRef: 'demo',
      providerKind: 'self_hosted',
      backendKind: 'local',
      endpoint: 'http://10.0.0.1',
      auth: { secretRef: { name: 'llm-token', namespace: 'grid-system', key: 'token' } },
    },
    status: {
      phase: 'Available',
      conditions: [
        { type: 'Ready', status: ready, reason: 'Scraped', lastTransitionTime: '2026-01-01T00:00:00Z', message: '' },
      ],
    },
  } as unknown as InferenceProviderResource;
}

function candidate(
  site: string,
  cluster: string,
  rank: number,
  admission: OverlayCandidate['admission_state'] = 'new_and_existing',
  fresh = true,
): OverlayCandidate {
  return {
    kind: 'inference_model',
    name: 'm',
    site,
    cluster,
    fresh,
    admission_state: admission,
    rank,
    score: 1 - rank / 10,
    selection_group: 0,
    score_breakdown: { locality: 1, queue_depth: 1, kv_cache: 1, prefix_cache: 0.5, latency: 0.5, cost: 0.5, total: 1 },
    credential: {
      strategy: 'bearer_token',
      secretRef: { name: 'cred-secret-name', namespace: 'grid-system', key: 'token' },
    },
  };
}

const network = {
  apiVersion: 'grid.praxis.fast/v1alpha1',
  kind: 'GridNetwork',
  metadata: { name: 'demo' },
  spec: {},
  status: {
    phase: 'Active',
    gridId: 'grid-1',
    connectedSites: 2,
    routingMapStatus: [
      {
        gatewayName: 'consumer',
        namespace: 'grid-system',
        configMapName: 'grid-overlay-demo-consumer',
        distributedRevision: REV_A,
        phase: 'Distributed',
        candidateCount: 3,
      },
    ],
    budgetStatus: [{ tenantId: 'team-a', capUsd: 100, spendUsd: 85, spendRatio: 0.85 }],
  },
} as unknown as GridNetworkResource;

function inputs(overrides: Partial<ReadModelInputs> = {}): ReadModelInputs {
  return {
    site: 'east',
    nowIso: '2026-01-01T00:00:10.000Z',
    networks: [network],
    gridSites: [gridSite('east', 'Active'), gridSite('demo-west', 'Active')],
    providers: [provider('east-llm-a', 'True'), provider('east-llm-b', 'False')],
    overlays: [
      {
        configMap: 'grid-system/grid-overlay-demo-consumer',
        candidates: [
          candidate('east', 'east-llm-a', 0),
          candidate('west', 'west-llm', 1),
          candidate('east', 'east-llm-a', 2, 'existing_only'),
        ],
      },
    ],
    members: [
      { name: 'east', state: 'alive' },
      { name: 'west', state: 'suspect' },
    ],
    probeRttMs: new Map([['demo-west', 3.2]]),
    samples: new Map([['east-llm-a', { queueDepth: 0.25, kvCacheUtilization: 0.5 }]]),
    requestsPerSecond: new Map([['east-llm-a', 4]]),
    gateways: [
      { replica: 'c-0', ready: true, acceptedRevision: REV_A, servingRevision: REV_A },
      { replica: 'c-1', ready: true, acceptedRevision: REV_B, servingRevision: null },
      { replica: 'c-2' },
    ],
    syncs: [
      {
        replica: 'c-0',
        configMap: 'grid-system/grid-overlay-demo-consumer',
        state: 'ready',
        writtenRevision: REV_A,
        lastOutcome: 'written',
        degradedReason: null,
        reconnects: 0,
      },
      {
        replica: 'c-1',
        configMap: 'grid-system/grid-overlay-demo-consumer',
        state: 'ready_degraded',
        writtenRevision: REV_B,
        lastOutcome: 'rejected',
        degradedReason: 'overlay_invalid',
        reconnects: 2,
      },
      { replica: 'c-2' },
    ],
    transitions: [],
    ...overrides,
  };
}

describe('dashboard read model', () => {
  it('resolves a discovered GridSite to its SWIM member and shows gossip state, probe RTT and links', () => {
    const view = buildReadModel(
      inputs({ gridSites: [gridSite('east', 'Active'), gridSite('demo-west', 'Connecting')] }),
    );
    // demo-west is the GridSite a discovered member "west" gets in network demo.
    expect(view.sites.map((s) => [s.name, s.siteId, s.local, s.phase, s.gossip, s.rttMs])).toEqual([
      ['east', 'east', true, 'Active', 'self', null],
      ['demo-west', 'west', false, 'Connecting', 'suspect', 3.2],
    ]);
    expect(view.links).toEqual([{ from: 'east', to: 'demo-west', state: 'suspect' }]);
    expect(
      buildReadModel(
        inputs({ gridSites: [gridSite('x', 'Active', {}, { 'grid.praxis.fast/site-id': 'west' })] }),
      ).sites.map((s) => [s.name, s.siteId, s.gossip]),
    ).toEqual([
      ['east', 'east', 'self'],
      ['x', 'west', 'suspect'],
    ]);
  });

  it('has one provider row per (site, cluster): best-ranked score, every admission seen, local Ready and signals', () => {
    const view = buildReadModel(inputs());
    expect(
      view.providers.map((p) => [
        p.site,
        p.cluster,
        p.ready,
        p.admission,
        p.queueDepth,
        p.kvCacheUtilization,
        p.score,
        p.requestsPerSecond,
      ]),
    ).toEqual([
      ['east', 'east-llm-a', 'True', 'new_and_existing / existing_only', 0.25, 0.5, 1, 4],
      // A local provider with no candidate still shows (Ready False explains why), with zero traffic observed.
      ['east', 'east-llm-b', 'False', 'not in overlay', null, null, null, 0],
      ['west', 'west-llm', null, 'new_and_existing', null, null, 0.9, 0],
    ]);
    expect(view.providers[0]?.scoreBreakdown?.total).toBe(1);
    // Not observed (no gateway targets yet) is not zero.
    expect(
      buildReadModel(inputs({ requestsPerSecond: undefined })).providers.every((p) => p.requestsPerSecond === null),
    ).toBe(true);
  });

  it('ties each replica to its gateway through the overlay-sync ConfigMap and says whether it accepted the published revision', () => {
    const [gateway] = buildReadModel(inputs()).gateways;
    expect(gateway?.publishedRevision).toBe(REV_A);
    expect(gateway?.replicas).toEqual([
      { replica: 'c-0', ready: true, acceptedRevision: REV_A, servingRevision: REV_A, agrees: true },
      { replica: 'c-1', ready: true, acceptedRevision: REV_B, servingRevision: null, agrees: false },
    ]);
    const delivery = buildReadModel(inputs()).delivery;
    expect(delivery.map((d) => [d.replica, d.state, d.degradedReason])).toEqual([
      ['c-0', 'ready', null],
      ['c-1', 'ready_degraded', 'overlay_invalid'],
      ['c-2', 'unreachable', null],
    ]);
  });

  it('copies budgets and the network, and nothing a Secret, a credential or a free-text message holds', () => {
    const view = buildReadModel(inputs());
    expect(view.budgets).toEqual([{ tenantId: 'team-a', capUsd: 100, spendUsd: 85, spendRatio: 0.85 }]);
    expect(view.network).toEqual({ name: 'demo', phase: 'Active', gridId: 'grid-1', connectedSites: 2 });
    const text = JSON.stringify(view);
    for (const needle of [
      PEM_BODY,
      'secret-looking message',
      'cred-secret-name',
      'llm-token',
      'secretRef',
      'credential',
    ])
      expect(text).not.toContain(needle);
  });

  it('shows the local site even before its GridSite exists, and an empty network', () => {
    const view = buildReadModel(
      inputs({ networks: [], gridSites: [], overlays: [], providers: [], gateways: [], syncs: [] }),
    );
    expect(view.sites).toEqual([
      {
        name: 'east',
        siteId: 'east',
        local: true,
        phase: 'Local',
        reason: '',
        gossip: 'self',
        lastProbeTime: null,
        lastTransitionTime: null,
        rttMs: null,
      },
    ]);
    expect(view.network).toBeNull();
    expect(view.gateways).toEqual([]);
    expect(view.links).toEqual([]);
  });
});

describe('dashboard transitions', () => {
  it('records a change with the time it was seen, seeds a first sight from the status, and keeps the newest', () => {
    let state = observePhases(
      EMPTY_TRANSITIONS,
      [
        { kind: 'site', name: 'west', phase: 'Active', reason: 'TlsVerified', since: '2026-01-01T00:00:00Z' },
        { kind: 'provider', name: 'east/a', phase: 'new_and_existing', reason: '' },
      ],
      '2026-01-01T00:01:00Z',
    );
    expect(state.recent).toEqual([
      { at: '2026-01-01T00:00:00Z', kind: 'site', name: 'west', from: null, to: 'Active', reason: 'TlsVerified' },
    ]);
    state = observePhases(
      state,
      [{ kind: 'provider', name: 'east/a', phase: 'existing_only (stale)', reason: 'Ready True' }],
      '2026-01-01T00:02:00Z',
    );
    expect(state.recent[0]).toEqual({
      at: '2026-01-01T00:02:00Z',
      kind: 'provider',
      name: 'east/a',
      from: 'new_and_existing',
      to: 'existing_only (stale)',
      reason: 'Ready True',
    });
    const unchanged = observePhases(
      state,
      [{ kind: 'provider', name: 'east/a', phase: 'existing_only (stale)', reason: '' }],
      '2026-01-01T00:03:00Z',
    );
    expect(unchanged.recent).toBe(state.recent);
    for (let i = 0; i < MAX_TRANSITIONS + 5; i++) {
      state = observePhases(
        state,
        [{ kind: 'site', name: 'west', phase: i % 2 === 0 ? 'Unreachable' : 'Active', reason: '' }],
        `2026-01-02T00:00:${String(i).padStart(2, '0')}Z`,
      );
    }
    expect(state.recent).toHaveLength(MAX_TRANSITIONS);
    expect(state.recent[0]?.at).toBe('2026-01-02T00:00:54Z');
  });
});

describe('dashboard targets', () => {
  it('parses replica/kind=host:port entries', () => {
    expect(parseDashboardTargets(' c-0/gateway=10.0.0.5:9901, c-0/overlay-sync=10.0.0.5:8081,', 'X')).toEqual([
      { replica: 'c-0', kind: 'gateway', address: '10.0.0.5:9901' },
      { replica: 'c-0', kind: 'overlay-sync', address: '10.0.0.5:8081' },
    ]);
    expect(parseDashboardTargets('', 'X')).toEqual([]);
  });

  it('refuses bad entries, naming the flag and the entry', () => {
    for (const bad of [
      'c-0/gateway',
      'c-0/router=1.2.3.4:1',
      'c-0/gateway=1.2.3.4',
      'c-0/gateway=1.2.3.4:0',
      'c-0/gateway=0.0.0.0:9901',
      '/gateway=1.2.3.4:1',
      'c 0/gateway=1.2.3.4:1',
    ]) {
      expect(thrownMessage(() => parseDashboardTargets(bad, '--dashboard-targets'), Error)).toMatch(
        /^--dashboard-targets: ".*" must be REPLICA\/gateway=HOST:PORT/,
      );
    }
    expect(thrownMessage(() => parseDashboardTargets('a/gateway=1.2.3.4:1,a/gateway=1.2.3.4:2', 'X'), Error)).toBe(
      'X: "a/gateway" is listed twice',
    );
  });

  it('reaches the operator configuration from the flag or GRID_DASHBOARD_TARGETS', () => {
    expect(parseConfig(['--site', 'x'], {}).dashboardTargets).toEqual([]);
    expect(
      parseConfig(['--site', 'x'], { GRID_DASHBOARD_TARGETS: 'c-0/gateway=127.0.0.1:9901' }).dashboardTargets,
    ).toHaveLength(1);
    expect(thrownMessage(() => parseConfig(['--site', 'x', '--dashboard-targets', 'nope'], {}), ConfigError)).toContain(
      '--dashboard-targets (env GRID_DASHBOARD_TARGETS): "nope"',
    );
  });
});
