// The serving config publisher on the real local store with the operator's real metrics: a gateway with gridServing
// gets grid-serving-{network}-{gateway} (labels, revision annotation, a document the gateway accepts) and a
// servingConfigStatus entry (revision, counts, renderedAt) the CRD schema accepts; an unchanged revision is not
// applied again; a changed one is; a failed apply keeps the last distributed one and says which ConfigMap; a gateway
// without gridServing gets none; a gateway no longer served has its ConfigMap deleted, unless it is not the operator's.
import { afterEach, describe, expect, it } from 'vitest';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { ServingConfigStatus } from '../../../schemas/generated/gridnetworks.ts';
import {
  GATEWAY_MAX_SERVING_BYTES,
  SERVING_DATA_KEY,
  validateServing,
} from '../../../schemas/serving/serving-config.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../../daemons/shared/resource-store/types.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import {
  ANNOTATION_SERVING_REVISION,
  publishServing,
  removeStoppedServing,
  servingGateways,
} from '../../../daemons/gossip-operator/controllers/serving-publisher.ts';
import { CONFIG_MAP, type ConfigMapObject } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { renderNetwork } from '../../../daemons/routing/index.ts';
import type { GatewayReference, NetworkRoutingInput } from '../../../daemons/routing/model.ts';
import { local, network, SOURCE, T0 } from '../../routing/fixtures.ts';
import { capturingLogger, tempDir } from '../helpers.ts';

const GATEWAY: GatewayReference = { name: 'inference-gw', namespace: 'praxis-system', siteName: 'east' };
const NAME = 'grid-serving-production-inference-gw';

function gridNetwork(gridServing: boolean | undefined): GridNetworkResource {
  return {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'GridNetwork',
    metadata: { name: 'production', generation: 2 },
    spec: {
      consumerGateways: [
        {
          name: GATEWAY.name,
          namespace: GATEWAY.namespace,
          siteName: 'east',
          ...(gridServing === undefined ? {} : { gridServing }),
        },
      ],
    },
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
      (
        (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'grid_serving_config_applies_total')
          ?.values ?? []
      ).find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
    const stored = async () =>
      (await store.get(CONFIG_MAP, { name: NAME, namespace: GATEWAY.namespace })) as ConfigMapObject | undefined;
    return { store, context, lines, applies, stored };
  }

  const publishStatus = (ctx: OperatorContext, input: NetworkRoutingInput, previous?: ServingConfigStatus) => {
    const rendered = renderNetwork(input, [GATEWAY], SOURCE, T0, new Map());
    const entry = rendered.gateways[0]!;
    if (!entry.result.ok) throw new Error(entry.result.error.message);
    return publishServing(
      ctx,
      gridNetwork(true),
      GATEWAY,
      entry.result.value,
      { input, excluded: rendered.excluded, signalsAddresses: new Map([['east', '127.0.0.1:7950']]) },
      previous,
    );
  };
  /** The distributed revision, as the other tests compare it. */
  const publish = async (ctx: OperatorContext, input: NetworkRoutingInput) =>
    (await publishStatus(ctx, input)).distributedRevision;

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
    expect(cm?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
      'grid.praxis.fast/network': 'production',
      'grid.praxis.fast/gateway': 'inference-gw',
      'app.kubernetes.io/component': 'serving',
    });
    expect(cm?.metadata.annotations?.[ANNOTATION_SERVING_REVISION]).toBe(revision);
    const verdict = validateServing(cm!.data![SERVING_DATA_KEY]!, {
      maxBytes: GATEWAY_MAX_SERVING_BYTES,
      expectedScope: { network: 'production', gateway: 'inference-gw', namespace: 'praxis-system', local_site: 'east' },
    });
    expect(verdict).toMatchObject({ ok: true, revision });
    if (verdict.ok)
      expect(verdict.document.serving.entries.map((e) => [e.provider, e.admission])).toEqual([
        ['llm-a', 'all'],
        ['llm-gone', 'none'],
      ]);

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
        if (key === 'apply')
          return async () => {
            throw new Error('configmaps "grid-serving-production-inference-gw" is forbidden');
          };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    expect(
      await publish(context(refusing), network({ inferenceProviders: [local('llm-a'), local('llm-b')] })),
    ).toBeUndefined();
    expect((await stored())?.metadata.annotations?.[ANNOTATION_SERVING_REVISION]).toBe(first);
    expect(await applies('failed')).toBe(1);
    expect(
      lines.some((l) => l.includes(`serving config praxis-system/${NAME} not distributed`) && l.includes('forbidden')),
    ).toBe(true);
  });

  it("writes a status entry like the overlay's: revision, counts, renderedAt kept while the revision is, accepted by the CRD schema", async () => {
    const { store, stored } = await setup();
    const metrics = new OperatorMetrics();
    let now = T0;
    const ctx = { store, metrics, logger: capturingLogger().logger, now: () => now } as unknown as OperatorContext;
    const input = network({ inferenceProviders: [local('llm-a'), local('llm-gone', { phase: 'Unavailable' })] });
    const first = await publishStatus(ctx, input);
    const cm = await stored();
    expect(first).toEqual({
      gatewayName: 'inference-gw',
      namespace: 'praxis-system',
      configMapName: NAME,
      schemaVersion: '1.0',
      renderedRevision: cm?.metadata.annotations?.[ANNOTATION_SERVING_REVISION],
      distributedRevision: cm?.metadata.annotations?.[ANNOTATION_SERVING_REVISION],
      configMapResourceVersion: cm?.metadata.resourceVersion,
      providerCount: 2,
      admittingCount: 1,
      siteCount: 1,
      renderedAt: new Date(T0).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      phase: 'Distributed',
      reason: '',
      message: '',
      observedGeneration: 2,
    });
    const withStatus = { ...gridNetwork(true), status: { servingConfigStatus: [first] } };
    expect(validateCustomResource(withStatus)).toEqual([]);
    expect(JSON.stringify(first)).not.toContain('token');

    now = T0 + 60_000;
    const again = await publishStatus(ctx, input, first);
    expect(again).toEqual(first);
    const changed = await publishStatus(
      ctx,
      network({ inferenceProviders: [local('llm-a'), local('llm-gone')] }),
      first,
    );
    expect(changed).toMatchObject({
      phase: 'Distributed',
      providerCount: 2,
      admittingCount: 2,
      renderedAt: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
    expect(changed.distributedRevision).not.toBe(first.distributedRevision);
  });

  it('a failed apply is Retained with the last distributed revision (Error when none was), the new one as rendered', async () => {
    const { store, context } = await setup();
    const first = await publishStatus(context(store), network({ inferenceProviders: [local('llm-a')] }));
    const refusing: ResourceStore = new Proxy(store as LocalStore, {
      get(target, key, receiver) {
        if (key === 'apply')
          return async () => {
            throw new Error('configmaps "grid-serving-production-inference-gw" is forbidden');
          };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const input = network({ inferenceProviders: [local('llm-a'), local('llm-b')] });
    const retained = await publishStatus(context(refusing), input, first);
    expect(retained).toMatchObject({
      phase: 'Retained',
      reason: 'ApplyFailed',
      distributedRevision: first.distributedRevision,
      providerCount: 2,
    });
    expect(retained.renderedRevision).not.toBe(first.distributedRevision);
    expect(retained.message).toContain(`apply ConfigMap praxis-system/${NAME}`);
    const never = await publishStatus(context(refusing), input);
    expect(never).toMatchObject({ phase: 'Error', reason: 'ApplyFailed' });
    expect(never.distributedRevision).toBeUndefined();
    // The overlay did not render: nothing applied, the last entry's revisions and counts stay.
    const notRendered = await publishServing(
      context(store),
      gridNetwork(true),
      GATEWAY,
      undefined,
      undefined,
      first,
      'the overlay did not render (invalid_policy: x)',
    );
    expect(notRendered).toMatchObject({
      phase: 'Retained',
      reason: 'NotRendered',
      distributedRevision: first.distributedRevision,
      renderedRevision: first.renderedRevision,
      providerCount: 1,
      renderedAt: first.renderedAt,
    });
    expect(notRendered.message).toContain('invalid_policy: x');
  });

  describe('a gateway no longer served', () => {
    const userConfigMap = (name: string, labels?: Record<string, string>): ConfigMapObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: GATEWAY.namespace, ...(labels === undefined ? {} : { labels }) },
      data: { 'serving-config.json': '{"mine":true}' },
    });

    it("has its ConfigMap deleted; a user's ConfigMap at a recorded name and a similarly named one survive; each is logged and counted", async () => {
      const { store, context, lines } = await setup();
      const metrics = new OperatorMetrics();
      const ctx = { ...(context(store) as object), metrics } as unknown as OperatorContext;
      const entry = await publishStatus(ctx, network({ inferenceProviders: [local('llm-a')] }));
      expect(entry.phase).toBe('Distributed');
      // A user's ConfigMap where another (removed) gateway's serving config was recorded, and one with a similar name.
      await store.apply(CONFIG_MAP, userConfigMap('grid-serving-production-old-gw'), { fieldManager: 'kubectl' });
      await store.apply(
        CONFIG_MAP,
        userConfigMap(`${NAME}-backup`, { 'app.kubernetes.io/managed-by': 'grid-operator' }),
        { fieldManager: 'kubectl' },
      );
      const previous: ServingConfigStatus[] = [
        entry,
        {
          gatewayName: 'old-gw',
          namespace: GATEWAY.namespace,
          configMapName: 'grid-serving-production-old-gw',
          phase: 'Distributed',
        },
      ];

      // Still served: nothing happens.
      expect(
        await removeStoppedServing(ctx, gridNetwork(true), servingGateways(gridNetwork(true)), previous.slice(0, 1)),
      ).toEqual([]);
      expect(await store.get(CONFIG_MAP, { name: NAME, namespace: GATEWAY.namespace })).toBeDefined();

      const kept = await removeStoppedServing(ctx, gridNetwork(false), servingGateways(gridNetwork(false)), previous);
      expect(kept).toEqual([]);
      const names = (await store.list(CONFIG_MAP, { namespace: GATEWAY.namespace })).items
        .map((o) => o.metadata.name)
        .sort();
      expect(names).toEqual([`${NAME}-backup`, 'grid-serving-production-old-gw']);
      const deletes = async (outcome: string) =>
        (
          (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'grid_serving_config_deletes_total')
            ?.values ?? []
        ).find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
      expect([await deletes('deleted'), await deletes('foreign'), await deletes('failed')]).toEqual([1, 1, 0]);
      expect(
        lines.some(
          (l) => l.includes('serving config deleted: gateway no longer served') && l.includes(`praxis-system/${NAME}`),
        ),
      ).toBe(true);
      expect(
        lines.some(
          (l) =>
            l.includes('left in place') &&
            l.includes('grid-serving-production-old-gw') &&
            l.includes('managed-by=grid-operator'),
        ),
      ).toBe(true);
      // The next reconcile has no record left and touches nothing.
      expect(await removeStoppedServing(ctx, gridNetwork(false), new Set(), kept)).toEqual([]);
    });

    it('a failed delete keeps a Disabled entry naming the ConfigMap (warned once, not every reconcile), and the next reconcile retries it', async () => {
      const { store, context, lines } = await setup();
      const entry = await publishStatus(context(store), network({ inferenceProviders: [local('llm-a')] }));
      const refusing: ResourceStore = new Proxy(store as LocalStore, {
        get(target, key, receiver) {
          if (key === 'delete')
            return async () => {
              throw new Error(`configmaps "${NAME}" is forbidden: cannot delete`);
            };
          const value = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const warned = new Set<string>();
      const kept = await removeStoppedServing(context(refusing), gridNetwork(false), new Set(), [entry], warned);
      expect(await removeStoppedServing(context(refusing), gridNetwork(false), new Set(), kept, warned)).toEqual(kept);
      const failures = lines.filter((l) =>
        l.includes('cannot delete the serving config of a gateway no longer served'),
      );
      expect(failures.map((l) => (JSON.parse(l) as { level: string }).level)).toEqual(['warn', 'debug']);
      expect(kept).toEqual([
        {
          gatewayName: 'inference-gw',
          namespace: 'praxis-system',
          configMapName: NAME,
          phase: 'Disabled',
          reason: 'DeleteFailed',
          message: expect.stringContaining(
            `cannot delete ConfigMap praxis-system/${NAME}: configmaps "${NAME}" is forbidden`,
          ),
          observedGeneration: 2,
        },
      ]);
      expect(validateCustomResource({ ...gridNetwork(false), status: { servingConfigStatus: kept } })).toEqual([]);
      expect(await store.get(CONFIG_MAP, { name: NAME, namespace: GATEWAY.namespace })).toBeDefined();
      expect(await removeStoppedServing(context(store), gridNetwork(false), new Set(), kept, warned)).toEqual([]);
      expect(await store.get(CONFIG_MAP, { name: NAME, namespace: GATEWAY.namespace })).toBeUndefined();
      expect(warned.size).toBe(0);
    });
  });
});
