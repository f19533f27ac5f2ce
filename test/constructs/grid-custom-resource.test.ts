import { describe, expect, it } from 'vitest';
import { AgentToAgentProvider } from '../../constructs/agent-to-agent-provider.ts';
import { AgentToolProvider } from '../../constructs/agent-tool-provider.ts';
import { GridNetwork } from '../../constructs/grid-network.ts';
import { GridSite } from '../../constructs/grid-site.ts';
import { InferenceProvider } from '../../constructs/inference-provider.ts';
import { SiteInvite } from '../../constructs/site-invite.ts';
import { synthFailure } from './synth-failure.ts';
import type { InferenceProviderSpec } from '../../schemas/generated/inferenceproviders.ts';
import { chart, synth } from './helpers.ts';

const provider: InferenceProviderSpec = {
  gridNetworkRef: 'demo',
  providerKind: 'self_hosted',
  backendKind: 'local',
  endpoint: 'http://sim:8080',
  models: [{ name: 'm1' }],
};

describe('grid custom resources', () => {
  it('emits one object per kind, typed and unchanged (snapshot)', () => {
    const c = chart();
    new GridNetwork(c, 'network', { name: 'demo', spec: { routingPolicy: 'scoreFirst' } });
    new GridSite(c, 'site', {
      name: 'east',
      labels: { 'grid.praxis.fast/network': 'demo' },
      spec: { gridNetworkRef: 'demo', region: 'us-east-1' },
    });
    new InferenceProvider(c, 'provider', { name: 'p', spec: provider });
    new AgentToolProvider(c, 'tools', {
      name: 'db-tools',
      spec: {
        gridNetworkRef: 'demo',
        protocol: 'mcp',
        endpoint: 'http://db-tools.tools:8080',
        tools: [{ name: 'database-query' }],
      },
    });
    new AgentToAgentProvider(c, 'agent', {
      name: 'claims-agent',
      spec: { gridNetworkRef: 'demo', protocol: 'a2a', endpoint: 'http://claims-agent.agents:8080' },
    });
    new SiteInvite(c, 'invite', { name: 'east2', spec: { siteName: 'east2', lifetime: '24h' } });
    const objects = synth(c);
    expect(objects.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`)).toEqual([
      'grid.praxis.fast/v1alpha1 GridNetwork/demo',
      'grid.praxis.fast/v1alpha1 GridSite/east',
      'grid.praxis.fast/v1alpha1 InferenceProvider/p',
      'grid.praxis.fast/v1alpha1 AgentToolProvider/db-tools',
      'grid.praxis.fast/v1alpha1 AgentToAgentProvider/claims-agent',
      'grid.praxis.fast/v1alpha1 SiteInvite/east2',
    ]);
    expect(objects).toMatchSnapshot();
  });

  // Each rule of the issue, with the exact message a user sees: construct path, field, problem, fix.
  const cases: [string, () => unknown, string][] = [
    [
      'missing required field',
      () =>
        new InferenceProvider(chart(), 'p', {
          name: 'p',
          spec: { ...provider, providerKind: undefined as unknown as string },
        }),
      'test/p: spec.providerKind: required field is missing. Fix: add providerKind to the declaration',
    ],
    [
      'deprecated and current name together',
      () =>
        new InferenceProvider(chart(), 'p', {
          name: 'p',
          spec: { ...provider, auth: { strategy: 'bearer_token', manual: true, credentialsManagedExternally: true } },
        }),
      'test/p: spec.auth.manual: manual is the deprecated name of credentialsManagedExternally: set only one of them. Fix: remove manual and keep only credentialsManagedExternally (the current name)',
    ],
    [
      'duration outside the allowed forms',
      () => new GridNetwork(chart(), 'n', { name: 'demo', spec: { metricsRefreshInterval: '500ms' } }),
      'test/n: spec.metricsRefreshInterval: must match ^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$ (got "500ms"). Fix: write the duration as whole seconds like 30s, or milliseconds of at least 1000ms',
    ],
    [
      'capacityWeight out of range',
      () => new InferenceProvider(chart(), 'p', { name: 'p', spec: { ...provider, capacityWeight: 5000 } }),
      'test/p: spec.capacityWeight: must be <= 1000 (got 5000). Fix: set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)',
    ],
    [
      'duplicate model names in a provider',
      () =>
        new InferenceProvider(chart(), 'p', {
          name: 'p',
          spec: { ...provider, models: [{ name: 'm1' }, { name: 'm1' }] },
        }),
      'test/p: spec.models[1]: duplicate entry (name "m1"): already at index 0. Fix: give every entry of spec.models a distinct name',
    ],
    [
      'selectionPolicy/placementPolicy mismatch',
      () => new GridNetwork(chart(), 'n', { name: 'demo', spec: { selectionPolicy: { mode: 'weightedRandom' } } }),
      'test/n: spec.placementPolicy: placementPolicy must be set if and only if selectionPolicy.mode is weightedRandom. Fix: set placementPolicy: { strategy: static } together with selectionPolicy.mode weightedRandom, and neither otherwise',
    ],
  ];

  it.each(cases)('fails at synth for %s with one message naming path, field and fix', (_name, fn, expected) => {
    expect(synthFailure(fn)).toBe(expected);
  });

  it('reports every problem of one resource, one line each', () => {
    const message = synthFailure(
      () =>
        new InferenceProvider(chart(), 'p', {
          name: 'p',
          spec: { ...provider, capacityWeight: 0, routingClusterRef: ' ' },
        }),
    );
    expect(message.split('\n')).toHaveLength(2);
  });
});
