/**
 * Publishes the serving config of each gateway that asks for one (spec.consumerGateways[].gridServing) beside its
 * overlay: ConfigMap grid-serving-{network}-{gateway}, key serving-config.json, server-side applied. Like the overlay,
 * a ConfigMap already holding the revision is left untouched and a failed apply keeps the last distributed revision;
 * the document is validated with the consumers' own rules before it is applied, so a gateway never gets one it
 * would refuse.
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { gatewayRefsOf } from '../../../schemas/generated-config.ts';
import {
  GATEWAY_MAX_SERVING_BYTES,
  SERVING_DATA_KEY,
  serializeServing,
  servingConfigMapName,
  validateServing,
} from '../../../schemas/serving/serving-config.ts';
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONFIG_MAP, type ConfigMapObject, FIELD_MANAGER, LABEL_GATEWAY, LABEL_NETWORK, MANAGED_BY } from '../kinds.ts';
import type { GatewayReference, NetworkRoutingInput } from '../routing/model.ts';
import type { RenderedOverlay } from '../routing/render.ts';
import type { Exclusion } from '../routing/result.ts';
import { servingEntries } from '../serving/entries.ts';
import { renderServing, type RenderedServing } from '../serving/render.ts';

export const ANNOTATION_SERVING_REVISION = 'grid.praxis.fast/serving-revision';
const LABEL_COMPONENT = 'app.kubernetes.io/component';

export interface ServingSources {
  readonly input: NetworkRoutingInput;
  /** Exclusions made before any gateway's perspective. */
  readonly excluded: readonly Exclusion[];
  readonly signalsAddresses: ReadonlyMap<string, string>;
  readonly nowMs: number;
}

export function servingConfigMap(network: string, gateway: { name: string; namespace: string }, rendered: RenderedServing): ConfigMapObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: rendered.configMapName,
      namespace: gateway.namespace,
      labels: { [MANAGED_BY]: FIELD_MANAGER, [LABEL_NETWORK]: network, [LABEL_GATEWAY]: gateway.name, [LABEL_COMPONENT]: 'serving' },
      annotations: { [ANNOTATION_SERVING_REVISION]: rendered.revision },
    },
    data: { [SERVING_DATA_KEY]: serializeServing(rendered.document) },
  };
}

/** The gateways of the network whose serving config is rendered. */
export function servingGateways(network: GridNetworkResource): Set<string> {
  return new Set(gatewayRefsOf(network.spec).filter((r) => r.gridServing === true).map((r) => `${r.namespace}/${r.name}`));
}

/** Renders and applies one gateway's serving config from its overlay; returns the distributed revision, if any. */
export async function publishServing(
  ctx: OperatorContext,
  network: GridNetworkResource,
  gateway: GatewayReference,
  overlay: RenderedOverlay,
  sources: ServingSources,
): Promise<string | undefined> {
  const name = network.metadata.name;
  const where = `${gateway.namespace}/${servingConfigMapName(name, gateway.name)}`;
  try {
    const rendered = renderServing({
      network: name,
      gateway,
      localSite: overlay.payload.local_site,
      entries: servingEntries(sources.input, overlay.payload, [...sources.excluded, ...overlay.excluded]),
      signalsAddresses: sources.signalsAddresses,
      nowMs: sources.nowMs,
    });
    const existing = (await ctx.store.get(CONFIG_MAP, { name: rendered.configMapName, namespace: gateway.namespace })) as ConfigMapObject | undefined;
    if (existing?.metadata.annotations?.[ANNOTATION_SERVING_REVISION] === rendered.revision && typeof existing.data?.[SERVING_DATA_KEY] === 'string') {
      ctx.metrics.servingApplies.inc({ outcome: 'unchanged' });
      return rendered.revision;
    }
    const configMap = servingConfigMap(name, gateway, rendered);
    const verdict = validateServing(configMap.data![SERVING_DATA_KEY]!, {
      maxBytes: GATEWAY_MAX_SERVING_BYTES,
      expectedScope: { network: name, gateway: gateway.name, namespace: gateway.namespace, local_site: overlay.payload.local_site },
    });
    if (!verdict.ok) throw new Error(`the gateway would reject serving config revision ${rendered.revision} (${verdict.reason}: ${verdict.message})`);
    await ctx.store.apply(CONFIG_MAP, configMap, { fieldManager: FIELD_MANAGER, force: true });
    ctx.metrics.servingApplies.inc({ outcome: 'applied' });
    ctx.logger.info({ network: name, gateway: `${gateway.namespace}/${gateway.name}`, revision: rendered.revision, entries: rendered.document.serving.entries.length }, 'serving config distributed');
    return rendered.revision;
  } catch (error) {
    ctx.metrics.servingApplies.inc({ outcome: 'failed' });
    ctx.logger.warn({ network: name, configMap: where, error: errorFields(error) }, `serving config ${where} not distributed; the last distributed revision stays in place`);
    return undefined;
  }
}
