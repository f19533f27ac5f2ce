/**
 * Publishes each gateway's rendered overlay as its ConfigMap (docs/contract.md §2.1) and computes its routingMapStatus
 * entry. A ConfigMap whose stored revision equals the new one is left untouched (generated_at stays the time of the
 * last semantic change); a render or apply failure keeps the last distributed revision and says so, and so does an
 * overlay the consumer's dialect would refuse: it is validated, as serialized, with that consumer's rules first.
 * The entry's SelectionPolicyHonored condition and grid_overlay_unhonoured_features say what of the selection
 * policy the consumer will not honour.
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import type { RoutingMapStatus } from '../../../schemas/generated/gridnetworks.ts';
import { type ConsumerDialect, featureReason } from '../../../schemas/overlay/dialect.ts';
import { OVERLAY_SCHEMA_VERSION, serializeOverlay } from '../../../schemas/overlay/envelope.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../../schemas/overlay/validate.ts';
import { overlayConfigMapName } from '../../../schemas/overlay/configmap-name.ts';
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONFIG_MAP, type ConfigMapObject, FIELD_MANAGER, LABEL_GATEWAY, LABEL_NETWORK, MANAGED_BY } from '../kinds.ts';
import type { GatewayOverlayResult } from '../../routing/index.ts';
import type { RenderedOverlay } from '../../routing/render.ts';
import { boundedMessage, type Condition, mergeConditions, nowRfc3339 } from './status.ts';

export const OVERLAY_DATA_KEY = 'routing-overlay.json';
export const PAYLOAD_DATA_KEY = 'routing-config.json';
export const ANNOTATION_SCHEMA = 'grid.praxis.fast/overlay-schema-version';
export const ANNOTATION_REVISION = 'grid.praxis.fast/overlay-revision';
export const ANNOTATION_DIGEST = 'grid.praxis.fast/overlay-content-digest';
export const CONDITION_SELECTION_HONORED = 'SelectionPolicyHonored';

/** The SelectionPolicyHonored condition for what a rendered overlay's consumer will not honour. */
function honoredCondition(overlay: RenderedOverlay, generation: number): Omit<Condition, 'lastTransitionTime'> {
  if (overlay.unhonoured.length === 0) {
    return {
      type: CONDITION_SELECTION_HONORED,
      status: 'True',
      reason: 'Honored',
      message: `the ${overlay.dialect} consumer honours the selection policy it is given`,
      observedGeneration: generation,
    };
  }
  return {
    type: CONDITION_SELECTION_HONORED,
    status: 'False',
    reason: overlay.unhonoured.map((u) => featureReason(u.feature)).join(','),
    message: overlay.unhonoured.map((u) => u.message).join('; '),
    observedGeneration: generation,
  };
}

/** Would this consumer accept the document exactly as it will be stored? The same checks it runs on load. */
function consumerRefusal(
  configMap: ConfigMapObject,
  dialect: ConsumerDialect,
  gateway: { name: string; namespace: string },
  overlay: RenderedOverlay,
): string | undefined {
  const verdict = validateOverlay(configMap.data?.[OVERLAY_DATA_KEY] ?? '', {
    maxBytes: GATEWAY_MAX_OVERLAY_BYTES,
    allowLegacy: false,
    dialect,
    expectedScope: {
      network: overlay.envelope.scope.network,
      gateway: gateway.name,
      namespace: gateway.namespace,
      local_site: overlay.payload.local_site,
    },
  });
  return verdict.ok
    ? undefined
    : `the ${dialect} consumer would reject revision ${overlay.revision} (${verdict.reason}: ${verdict.message})`;
}

export function overlayConfigMap(
  network: string,
  gateway: { name: string; namespace: string },
  overlay: RenderedOverlay,
): ConfigMapObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: overlay.configMapName,
      namespace: gateway.namespace,
      labels: { [MANAGED_BY]: FIELD_MANAGER, [LABEL_NETWORK]: network, [LABEL_GATEWAY]: gateway.name },
      annotations: {
        [ANNOTATION_SCHEMA]: overlay.envelope.schema_version,
        [ANNOTATION_REVISION]: overlay.revision,
        [ANNOTATION_DIGEST]: overlay.envelope.content_digest.value,
      },
    },
    data: {
      [OVERLAY_DATA_KEY]: serializeOverlay(overlay.envelope),
      [PAYLOAD_DATA_KEY]: serializeOverlay(overlay.payload),
    },
  };
}

export async function publishOverlay(
  ctx: OperatorContext,
  network: GridNetworkResource,
  entry: GatewayOverlayResult,
  previous: RoutingMapStatus | undefined,
  /** Set when this revision must not reach the gateway yet (projected-credential hold-back): nothing is applied. */
  hold?: { readonly reason: string; readonly message: string },
): Promise<RoutingMapStatus> {
  const { gateway, result } = entry;
  const generation = network.metadata.generation ?? 1;
  const dialect = gateway.dialect ?? 'agn';
  // A failed render leaves the condition about the last rendered overlay as it was.
  let conditions = previous?.conditions as Condition[] | undefined;
  if (result.ok) {
    conditions = mergeConditions(conditions, [honoredCondition(result.value, generation)], ctx.now());
    ctx.metrics.setUnhonoured(
      network.metadata.name,
      `${gateway.namespace}/${gateway.name}`,
      result.value.unhonoured.map((u) => u.feature),
    );
  }
  const base: RoutingMapStatus = {
    gatewayName: gateway.name,
    namespace: gateway.namespace,
    configMapName: overlayConfigMapName(network.metadata.name, gateway.name),
    schemaVersion: OVERLAY_SCHEMA_VERSION,
    dialect,
    ...(conditions !== undefined ? { conditions } : {}),
    ...(previous?.distributedRevision !== undefined ? { distributedRevision: previous.distributedRevision } : {}),
    ...(previous?.configMapResourceVersion !== undefined
      ? { configMapResourceVersion: previous.configMapResourceVersion }
      : {}),
    observedGeneration: generation,
  };
  const retained = (reason: string, message: string, rendered?: RenderedOverlay): RoutingMapStatus => ({
    ...base,
    ...(rendered !== undefined
      ? {
          renderedRevision: rendered.revision,
          contentDigest: rendered.envelope.content_digest.value,
          candidateCount: rendered.payload.candidates.length,
        }
      : previous?.renderedRevision !== undefined
        ? { renderedRevision: previous.renderedRevision }
        : {}),
    ...(previous?.renderedAt !== undefined ? { renderedAt: previous.renderedAt } : {}),
    phase: base.distributedRevision !== undefined ? 'Retained' : 'Error',
    reason,
    message: boundedMessage(message),
  });
  if (!result.ok) {
    ctx.metrics.overlayRenders.inc({ outcome: result.error.code });
    return retained('RenderFailed', `${result.error.code}: ${result.error.message}`);
  }
  ctx.metrics.overlayRenders.inc({ outcome: 'rendered' });
  const overlay = result.value;
  if (hold !== undefined) return retained(hold.reason, hold.message, overlay);
  const rendered = {
    renderedRevision: overlay.revision,
    contentDigest: overlay.envelope.content_digest.value,
    candidateCount: overlay.payload.candidates.length,
    renderedAt:
      previous?.renderedRevision === overlay.revision && previous.renderedAt !== undefined
        ? previous.renderedAt
        : nowRfc3339(ctx.now()),
  };
  try {
    const ref = { name: overlay.configMapName, namespace: gateway.namespace };
    const existing = (await ctx.store.get(CONFIG_MAP, ref)) as ConfigMapObject | undefined;
    let resourceVersion: string | undefined;
    if (
      existing !== undefined &&
      existing.metadata.annotations?.[ANNOTATION_REVISION] === overlay.revision &&
      typeof existing.data?.[OVERLAY_DATA_KEY] === 'string' &&
      typeof existing.data?.[PAYLOAD_DATA_KEY] === 'string'
    ) {
      ctx.metrics.overlayApplies.inc({ outcome: 'unchanged' });
      resourceVersion = existing.metadata.resourceVersion;
    } else {
      const configMap = overlayConfigMap(network.metadata.name, gateway, overlay);
      const refusal = consumerRefusal(configMap, dialect, gateway, overlay);
      if (refusal !== undefined) {
        ctx.metrics.overlayApplies.inc({ outcome: 'consumer_would_reject' });
        ctx.logger.warn(
          {
            network: network.metadata.name,
            gateway: `${gateway.namespace}/${gateway.name}`,
            dialect,
            revision: overlay.revision,
          },
          'overlay not published: its consumer would reject it; last distributed revision kept',
        );
        return { ...retained('ConsumerWouldReject', refusal, overlay), renderedAt: rendered.renderedAt };
      }
      const applied = await ctx.store.apply(CONFIG_MAP, configMap, { fieldManager: FIELD_MANAGER, force: true });
      ctx.metrics.overlayApplies.inc({ outcome: 'applied' });
      resourceVersion = applied.metadata.resourceVersion;
      ctx.logger.info(
        {
          network: network.metadata.name,
          gateway: `${gateway.namespace}/${gateway.name}`,
          revision: overlay.revision,
          candidates: overlay.payload.candidates.length,
        },
        'overlay distributed',
      );
    }
    return {
      ...base,
      ...rendered,
      distributedRevision: overlay.revision,
      ...(resourceVersion !== undefined ? { configMapResourceVersion: resourceVersion } : {}),
      phase: 'Distributed',
      reason: '',
      message: '',
    };
  } catch (error) {
    ctx.metrics.overlayApplies.inc({ outcome: 'failed' });
    ctx.logger.warn(
      { network: network.metadata.name, gateway: `${gateway.namespace}/${gateway.name}`, error: errorFields(error) },
      'overlay apply failed; last distributed revision kept',
    );
    return {
      ...retained(
        'ApplyFailed',
        `apply ConfigMap ${gateway.namespace}/${overlay.configMapName}: ${errorFields(error).message}`,
        overlay,
      ),
      renderedAt: rendered.renderedAt,
    };
  }
}
