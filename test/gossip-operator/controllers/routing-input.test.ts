// The operator's mapping of CRDs into the routing core for readiness and fallback: the Ready condition, the kinds,
// the declared cost and the site's sovereigntyZone reach the core; the gossiped record carries the resolved category.
import { describe, expect, it } from 'vitest';
import type { GridNetworkResource, GridSiteResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import {
  localInference,
  providerState,
  siteViews,
} from '../../../daemons/gossip-operator/controllers/routing-input.ts';

function provider(
  spec: Partial<InferenceProviderResource['spec']>,
  status?: InferenceProviderResource['status'],
): InferenceProviderResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'InferenceProvider',
    metadata: { name: 'p' },
    spec: {
      gridNetworkRef: 'grid',
      providerKind: 'self_hosted',
      backendKind: 'local',
      endpoint: 'http://p:8080',
      models: [{ name: 'm' }],
      ...spec,
    },
    ...(status !== undefined ? { status } : {}),
  } as InferenceProviderResource;
}

const ready = (status: 'True' | 'False' | 'Unknown') => ({
  phase: 'Available' as const,
  conditions: [{ type: 'Ready', status, reason: 'X', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }],
});

describe('routing input for readiness and fallback', () => {
  it.each([
    // "A provider whose Ready is False is excluded from routing"
    ['False', true],
    ['True', undefined],
    ['Unknown', undefined],
  ] as const)('Ready %s → notReady %s', (status, notReady) => {
    expect(localInference(provider({}, ready(status)), undefined).notReady).toBe(notReady);
  });

  it('carries providerKind and the declared cost (CRD default 0 for an omitted side)', () => {
    const mapped = localInference(
      provider({ providerKind: 'External', backendKind: 'OpenAI', cost: { perMillionInputTokens: 2.5 } }),
      undefined,
    );
    expect(mapped).toMatchObject({
      providerKind: 'External',
      backendKind: 'OpenAI',
      cost: { perMillionInputTokens: 2.5, perMillionOutputTokens: 0 },
    });
    expect(localInference(provider({}), undefined).cost).toBeUndefined();
  });

  it.each([
    // The External/OpenAI spelling travels as the category a peer routes without providerKind
    ['External', 'OpenAI', 'api_provider'],
    ['bedrock', 'Bedrock', 'cloud_managed'],
    ['self_hosted', 'local', 'local'],
    // unresolvable: travels as written, and the peer refuses it too
    ['self_hosted', 'mainframe', 'mainframe'],
  ])('gossips providerKind %s / backendKind %s as backend_kind %s', (providerKind, backendKind, gossiped) => {
    expect(
      providerState(localInference(provider({ providerKind, backendKind }), undefined), 'inference').backend_kind,
    ).toBe(gossiped);
  });

  it('reads each GridSite\'s sovereigntyZone (seed 001 GridSite "sovereigntyZone: us")', () => {
    const network = { metadata: { name: 'grid' }, spec: {} } as GridNetworkResource;
    const site = {
      metadata: { name: 'east' },
      spec: { gridNetworkRef: 'grid', sovereigntyZone: 'us' },
    } as GridSiteResource;
    expect(siteViews(network, 'east', [site])[0]).toMatchObject({ name: 'east', sovereigntyZone: 'us' });
  });
});
