// The serving config as the operator derives it from one reconcile's routing (real renderNetwork): routable
// providers with their cluster and admission, known-but-excluded ones with admission none and the reason
// ("A provider whose Ready is False is excluded from routing ... and its serving config entry carries admission:
// none"), and nothing for providers this gateway cannot know. The rendered document passes the consumers' validator.
import { describe, expect, it } from 'vitest';
import {
  validateServing,
  GATEWAY_MAX_SERVING_BYTES,
  serializeServing,
} from '../../../schemas/serving/serving-config.ts';
import { renderNetwork } from '../../../daemons/routing/index.ts';
import { servingEntries } from '../../../daemons/gossip-operator/serving/entries.ts';
import { renderServing } from '../../../daemons/gossip-operator/serving/render.ts';
import {
  GATEWAY,
  NET,
  OWN,
  SOURCE,
  T0,
  local,
  network,
  remote,
  remoteSite,
  sample,
  site,
} from '../../routing/fixtures.ts';

describe('serving entries from the routing result', () => {
  const input = network({
    sites: [site(OWN, { phase: 'Pending' }), remoteSite('west'), remoteSite('north', { phase: 'Connecting' })],
    inferenceProviders: [
      local('llm-a', { models: ['model-a', 'model-b'] }),
      local('llm-routed', { routingCluster: 'pool-1' }),
      local('llm-gone', { phase: 'Unavailable', models: ['model-c'] }),
      local('llm-sick', { metrics: { configuredSignals: [], sample: sample({ healthy: false }) } }),
      local('llm-draining', { drain: true }),
      local('llm-private', { accessLabels: { tier: 'gold' } }),
    ],
    remoteRecords: [
      remote('west', 'llm-w'),
      remote('north', 'llm-n', { routingCluster: 'gateway-north' }),
      remote('west', 'llm-elsewhere', { network: 'another-net' }),
    ],
  });
  const result = renderNetwork(input, [GATEWAY], SOURCE, T0, new Map());
  const gateway = result.gateways[0]!;
  if (!gateway.result.ok) throw new Error(gateway.result.error.message);
  const overlay = gateway.result.value;
  const entries = servingEntries(input, overlay.payload, [...result.excluded, ...overlay.excluded]);
  const byProvider = new Map(entries.map((e) => [e.provider, e]));

  it.each([
    [
      'a routable local provider, every model',
      'llm-a',
      { site: OWN, cluster: 'llm-a', models: ['model-a', 'model-b'], admission: 'all', ready: true },
    ],
    ['a local provider behind spec.routingClusterRef', 'llm-routed', { cluster: 'pool-1', admission: 'all' }],
    [
      'an Unavailable provider: known, admission none',
      'llm-gone',
      { models: ['model-c'], admission: 'none', ready: false, excluded: 'provider_unavailable' },
    ],
    ['a provider whose metrics say unhealthy', 'llm-sick', { admission: 'none', ready: false, excluded: 'unhealthy' }],
    ['a draining provider (existing_only): no new work', 'llm-draining', { admission: 'none', ready: true }],
    [
      'a remote provider of an Active site, through its hop cluster',
      'llm-w',
      { site: 'west', cluster: 'gateway-west', admission: 'all', ready: true },
    ],
    [
      'a remote provider of a site not yet Active',
      'llm-n',
      { site: 'north', cluster: 'gateway-north', admission: 'none', ready: false, excluded: 'site_not_eligible' },
    ],
  ])('%s', (_name, provider, expected) => {
    expect(byProvider.get(provider)).toMatchObject(expected);
  });

  it("leaves out what this gateway cannot know: another network's record, a provider its site may not use", () => {
    expect(byProvider.has('llm-elsewhere')).toBe(false);
    expect(byProvider.has('llm-private')).toBe(false);
    expect(byProvider.get('llm-draining')?.excluded).toBeUndefined();
  });

  it('renders a document the gateway accepts, with every named site and its signals endpoint, sorted', () => {
    const rendered = renderServing({
      network: NET,
      gateway: GATEWAY,
      localSite: OWN,
      entries,
      signalsAddresses: new Map([
        [OWN, '127.0.0.1:7001'],
        ['west', 'west.example:7001'],
      ]),
      generatedAt: '2026-07-29T00:00:00Z',
    });
    expect(rendered.configMapName).toBe(`grid-serving-${NET}-${GATEWAY.name}`);
    expect(rendered.document.serving.sites).toEqual([
      { site: OWN, signals_address: '127.0.0.1:7001' },
      { site: 'north' },
      { site: 'west', signals_address: 'west.example:7001' },
    ]);
    expect(rendered.document.serving.entries.map((e) => `${e.site}/${e.provider}`)).toEqual(
      [...rendered.document.serving.entries.map((e) => `${e.site}/${e.provider}`)].sort(),
    );
    const verdict = validateServing(serializeServing(rendered.document), {
      maxBytes: GATEWAY_MAX_SERVING_BYTES,
      expectedScope: { network: NET, gateway: GATEWAY.name, namespace: GATEWAY.namespace, local_site: OWN },
    });
    expect(verdict).toMatchObject({ ok: true, revision: rendered.revision });
    // Rendering the same state later gives the same revision (generated_at does not count).
    expect(
      renderServing({
        network: NET,
        gateway: GATEWAY,
        localSite: OWN,
        entries,
        signalsAddresses: new Map([
          [OWN, '127.0.0.1:7001'],
          ['west', 'west.example:7001'],
        ]),
        generatedAt: '2026-07-29T00:01:00Z',
      }).revision,
    ).toBe(rendered.revision);
  });
});
