// The serving config publisher on the real local store with the operator's real metrics: a gateway with gridServing
// gets grid-serving-{network}-{gateway} (labels, revision annotation, a document the gateway accepts); an unchanged
// revision is not applied again; a changed one is; a failed apply keeps the last distributed one and says which
// ConfigMap; a gateway without gridServing gets none.
import { afterEach, describe, expect, it } from 'vitest';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { GATEWAY_MAX_SERVING_BYTES, SERVING_DATA_KEY, validateServing } from '../../../schemas/serving/serving-config.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../../daemons/shared/resource-store/types.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import { ANNOTATION_SERVING_REVISION, publishServing, servingGateways } from '../../../daemons/gossip-operator/controllers/serving-publisher.ts';
import { CONFIG_MAP, type ConfigMapObject } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { renderNetwork } from '../../../daemons/gossip-operator/routing/index.ts';
import type { GatewayReference, NetworkRoutingInput } from '../../../daemons/gossip-operator/routing/model.ts';
import { local, network, SOURCE, T0 } from '../routing/fixtures.ts';
import { capturingLogger, tempDir } from '../helpers.ts';

const GATEWAY: GatewayReference = { name: 'inference-gw', namespace: 'praxis-system', siteName: 'east' };
const NAME = 'grid-serving-production-inference-gw';

function gridNetwork(gridServing: boolean | undefined): GridNetworkResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'GridNetwork',
    metadata: { name: 'production', generation: 2 },
    spec: { consumerGateways: [{ name: GATEWAY.name, namespace: GATEWAY.namespace, siteName: 'east', ...(gridServing === undefined ? {} : { gridServing }) }] },
  } as GridNetworkResource;
}

describe('serving config publisher', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup() {
    const dirs = await tempDir('serving-publisher');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    const metrics = new OperatorMetrics();
    const { logger, lines } = capturingLogger();
    const context = (s: ResourceStore) => ({ store: s, metrics, logger, now: () => T0 }) as unknown as OperatorContext;
    const applies = async (outcome: string) =>
      ((await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'grid_serving_config_applies_total')?.values ?? []).find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
    const stored = async () => (await store.get(CONFIG_MAP, { name: NAME, namespace: GATEWAY.namespace })) as ConfigMapObject | undefined;
    return { store, context, lines, applies, stored };
  }

  const publish = (ctx: OperatorContext, input: NetworkRoutingInput) => {
    const rendered = renderNetwork(input, [GATEWAY], SOURCE, T0, new Map());
    const entry = rendered.gateways[0]!;
    if (!entry.result.ok) throw new Error(entry.result.error.message);
    return publishServing(ctx, gridNetwork(true), GATEWAY, entry.result.value, { input, excluded: rendered.excluded, signalsAddresses: new Map([['east', '127.0.0.1:7950']]) });
  };

  it('only gateways that ask for it are served', () => {
    expect(servingGateways(gridNetwork(true))).toEqual(new Set(['praxis-system/inference-gw']));
    expect(servingGateways(gridNetwork(false)).size).toBe(0);
    expect(servingGateways(gridNetwork(undefined)).size).toBe(0);
  });

  it('applies a document the gateway accepts, skips an unchanged revision, applies a changed one', async () => {
    const { store, context, applies, stored } = await setup();
    const ctx = context(store);
    const input = network({ inferenceProviders: [local('llm-a'), local('llm-gone', { phase: 'Unavailable' })] });
    const revision = await publish(ctx, input);
    const cm = await stored();
    expect(cm?.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'grid-operator', 'grid.praxis.fast/network': 'production', 'grid.praxis.fast/gateway': 'inference-gw', 'app.kubernetes.io/component': 'serving' });
    expect(cm?.metadata.annotations?.[ANNOTATION_SERVING_REVISION]).toBe(revision);
    const verdict = validateServing(cm!.data![SERVING_DATA_KEY]!, { maxBytes: GATEWAY_MAX_SERVING_BYTES, expectedScope: { network: 'production', gateway: 'inference-gw', namespace: 'praxis-system', local_site: 'east' } });
    expect(verdict).toMatchObject({ ok: true, revision });
    if (verdict.ok) expect(verdict.document.serving.entries.map((e) => [e.provider, e.admission])).toEqual([['llm-a', 'all'], ['llm-gone', 'none']]);

    const version = cm?.metadata.resourceVersion;
    expect(await publish(ctx, input)).toBe(revision);
    expect((await stored())?.metadata.resourceVersion).toBe(version);
    expect(await applies('unchanged')).toBe(1);

    const changed = await publish(ctx, network({ inferenceProviders: [local('llm-a'), local('llm-gone')] }));
    expect(changed).not.toBe(revision);
    expect((await stored())?.metadata.annotations?.[ANNOTATION_SERVING_REVISION]).toBe(changed);
    expect(await applies('applied')).toBe(2);
  });

  it('a failed apply keeps the last distributed revision and names the ConfigMap', async () => {
    const { store, context, applies, stored, lines } = await setup();
    const first = await publish(context(store), network({ inferenceProviders: [local('llm-a')] }));
    const refusing: ResourceStore = new Proxy(store as LocalStore, {
      get(target, key, receiver) {
        if (key === 'apply') return async () => { throw new Error('configmaps "grid-serving-production-inference-gw" is forbidden'); };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    expect(await publish(context(refusing), network({ inferenceProviders: [local('llm-a'), local('llm-b')] }))).toBeUndefined();
    expect((await stored())?.metadata.annotations?.[ANNOTATION_SERVING_REVISION]).toBe(first);
    expect(await applies('failed')).toBe(1);
    expect(lines.some((l) => l.includes(`serving config praxis-system/${NAME} not distributed`) && l.includes('forbidden'))).toBe(true);
  });
});
