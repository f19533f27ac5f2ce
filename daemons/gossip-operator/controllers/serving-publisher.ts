/**
 * Publishes the serving config of each gateway that asks for one (spec.consumerGateways[].gridServing) beside its
 * overlay: ConfigMap grid-serving-{network}-{gateway}, key serving-config.json, server-side applied. Like the overlay,
 * a ConfigMap already holding the revision is left untouched and a failed apply keeps the last distributed revision;
 * the document is validated with the consumers' own rules before it is applied, so a gateway never gets one it
 * would refuse. Each gateway gets a servingConfigStatus entry shaped like its routingMapStatus entry; when a gateway
 * stops being served, the ConfigMap recorded there is deleted if it carries the operator's serving labels
 * (serving/cleanup.ts).
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import type { ServingConfigStatus } from '../../../schemas/generated/gridnetworks.ts';
import { gatewayRefsOf } from '../../../schemas/generated-config.ts';
import {
  GATEWAY_MAX_SERVING_BYTES,
  SERVING_DATA_KEY,
  SERVING_SCHEMA_VERSION,
  serializeServing,
  servingConfigMapName,
  validateServing,
} from '../../../schemas/serving/serving-config.ts';
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONFIG_MAP, type ConfigMapObject, FIELD_MANAGER } from '../kinds.ts';
import type { GatewayReference, NetworkRoutingInput } from '../../routing/model.ts';
import type { RenderedOverlay } from '../../routing/render.ts';
import type { Exclusion } from '../../routing/result.ts';
import { planServingCleanup, servingLabels, staleServing, type StoredConfigMap } from '../serving/cleanup.ts';
import { servingEntries } from '../serving/entries.ts';
import { renderServing, type RenderedServing } from '../serving/render.ts';
import { boundedMessage, nowRfc3339 } from './status.ts';

export const ANNOTATION_SERVING_REVISION = 'grid.praxis.fast/serving-revision';

export interface ServingSources {
  readonly input: NetworkRoutingInput;
  /** Exclusions made before any gateway's perspective. */
  readonly excluded: readonly Exclusion[];
  readonly signalsAddresses: ReadonlyMap<string, string>;
}

export function servingConfigMap(
  network: string,
  gateway: { name: string; namespace: string },
  rendered: RenderedServing,
): ConfigMapObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: rendered.configMapName,
      namespace: gateway.namespace,
      labels: servingLabels(network, gateway.name),
      annotations: { [ANNOTATION_SERVING_REVISION]: rendered.revision },
    },
    data: { [SERVING_DATA_KEY]: serializeServing(rendered.document) },
  };
}

/** The gateways of the network whose serving config is rendered. */
export function servingGateways(network: GridNetworkResource): Set<string> {
  return new Set(
    gatewayRefsOf(network.spec)
      .filter((r) => r.gridServing === true)
      .map((r) => `${r.namespace}/${r.name}`),
  );
}

/**
 * Renders and applies one gateway's serving config from its overlay (undefined: the overlay did not render this
 * reconcile, `notRendered` says why) and returns its status entry. A failure keeps the last distributed revision
 * in place and says so: phase Retained when one was distributed, Error when none ever was.
 */
export async function publishServing(
  ctx: OperatorContext,
  network: GridNetworkResource,
  gateway: GatewayReference,
  overlay: RenderedOverlay | undefined,
  sources: ServingSources | undefined,
  previous: ServingConfigStatus | undefined,
  notRendered = 'the overlay of this reconcile did not render',
): Promise<ServingConfigStatus> {
  const name = network.metadata.name;
  const configMapName = servingConfigMapName(name, gateway.name);
  const where = `${gateway.namespace}/${configMapName}`;
  const base: ServingConfigStatus = {
    gatewayName: gateway.name,
    namespace: gateway.namespace,
    configMapName,
    schemaVersion: SERVING_SCHEMA_VERSION,
    ...(previous?.distributedRevision !== undefined ? { distributedRevision: previous.distributedRevision } : {}),
    ...(previous?.configMapResourceVersion !== undefined
      ? { configMapResourceVersion: previous.configMapResourceVersion }
      : {}),
    observedGeneration: network.metadata.generation ?? 1,
  };
  const counts = (r: RenderedServing) => ({
    providerCount: r.document.serving.entries.length,
    admittingCount: r.document.serving.entries.filter((e) => e.admission === 'all').length,
    siteCount: r.document.serving.sites.length,
  });
  const retained = (
    reason: string,
    message: string,
    rendered?: RenderedServing,
    renderedAt?: string,
  ): ServingConfigStatus => ({
    ...base,
    ...(rendered !== undefined
      ? { renderedRevision: rendered.revision, ...counts(rendered) }
      : {
          ...(previous?.renderedRevision !== undefined ? { renderedRevision: previous.renderedRevision } : {}),
          ...(previous?.providerCount !== undefined
            ? {
                providerCount: previous.providerCount,
                admittingCount: previous.admittingCount ?? 0,
                siteCount: previous.siteCount ?? 0,
              }
            : {}),
        }),
    ...(renderedAt !== undefined
      ? { renderedAt }
      : previous?.renderedAt !== undefined
        ? { renderedAt: previous.renderedAt }
        : {}),
    phase: base.distributedRevision !== undefined ? 'Retained' : 'Error',
    reason,
    message: boundedMessage(message),
  });
  if (overlay === undefined || sources === undefined) {
    ctx.metrics.servingApplies.inc({ outcome: 'not_rendered' });
    return retained(
      'NotRendered',
      `serving config ${where} not rendered: ${notRendered}; the last distributed revision stays in place`,
    );
  }
  let rendered: RenderedServing;
  try {
    rendered = renderServing({
      network: name,
      gateway,
      localSite: overlay.payload.local_site,
      entries: servingEntries(sources.input, overlay.payload, [...sources.excluded, ...overlay.excluded]),
      signalsAddresses: sources.signalsAddresses,
      generatedAt: overlay.envelope.provenance.rendered_at,
    });
  } catch (error) {
    ctx.metrics.servingApplies.inc({ outcome: 'failed' });
    ctx.logger.warn(
      { network: name, configMap: where, error: errorFields(error) },
      `serving config ${where} not rendered; the last distributed revision stays in place`,
    );
    return retained('RenderFailed', `render ${where}: ${errorFields(error).message}`);
  }
  // Unchanged while the revision is, like the overlay's: it is the time of the last semantic change.
  const renderedAt =
    previous?.renderedRevision === rendered.revision && previous.renderedAt !== undefined
      ? previous.renderedAt
      : nowRfc3339(ctx.now());
  try {
    const existing = (await ctx.store.get(CONFIG_MAP, { name: configMapName, namespace: gateway.namespace })) as
      | ConfigMapObject
      | undefined;
    let resourceVersion: string | undefined;
    if (
      existing?.metadata.annotations?.[ANNOTATION_SERVING_REVISION] === rendered.revision &&
      typeof existing.data?.[SERVING_DATA_KEY] === 'string'
    ) {
      ctx.metrics.servingApplies.inc({ outcome: 'unchanged' });
      resourceVersion = existing.metadata.resourceVersion;
    } else {
      const configMap = servingConfigMap(name, gateway, rendered);
      const verdict = validateServing(configMap.data![SERVING_DATA_KEY]!, {
        maxBytes: GATEWAY_MAX_SERVING_BYTES,
        expectedScope: {
          network: name,
          gateway: gateway.name,
          namespace: gateway.namespace,
          local_site: overlay.payload.local_site,
        },
      });
      if (!verdict.ok) {
        ctx.metrics.servingApplies.inc({ outcome: 'consumer_would_reject' });
        const message = `the gateway would reject serving config revision ${rendered.revision} (${verdict.reason}: ${verdict.message})`;
        ctx.logger.warn(
          { network: name, configMap: where, revision: rendered.revision },
          `serving config ${where} not distributed: ${message}; the last distributed revision stays in place`,
        );
        return retained('ConsumerWouldReject', message, rendered, renderedAt);
      }
      const applied = await ctx.store.apply(CONFIG_MAP, configMap, { fieldManager: FIELD_MANAGER, force: true });
      ctx.metrics.servingApplies.inc({ outcome: 'applied' });
      resourceVersion = applied.metadata.resourceVersion;
      ctx.logger.info(
        {
          network: name,
          gateway: `${gateway.namespace}/${gateway.name}`,
          revision: rendered.revision,
          entries: rendered.document.serving.entries.length,
        },
        'serving config distributed',
      );
    }
    return {
      ...base,
      renderedRevision: rendered.revision,
      ...counts(rendered),
      renderedAt,
      distributedRevision: rendered.revision,
      ...(resourceVersion !== undefined ? { configMapResourceVersion: resourceVersion } : {}),
      phase: 'Distributed',
      reason: '',
      message: '',
    };
  } catch (error) {
    ctx.metrics.servingApplies.inc({ outcome: 'failed' });
    ctx.logger.warn(
      { network: name, configMap: where, error: errorFields(error) },
      `serving config ${where} not distributed; the last distributed revision stays in place`,
    );
    return retained('ApplyFailed', `apply ConfigMap ${where}: ${errorFields(error).message}`, rendered, renderedAt);
  }
}

/**
 * Deletes the serving ConfigMaps recorded in `previous` whose gateway is no longer served (gridServing off, gateway
 * removed), when they carry the operator's serving labels for that gateway; anything else at a recorded name is left
 * and logged. Returns the entries to keep: a Disabled one per ConfigMap whose delete failed (retried next reconcile;
 * its name would otherwise be forgotten). Never fails the reconcile.
 */
export async function removeStoppedServing(
  ctx: OperatorContext,
  network: GridNetworkResource,
  served: ReadonlySet<string>,
  previous: readonly ServingConfigStatus[],
  /** ConfigMaps already warned about: a failure that repeats every reconcile is logged at warn once, then debug. */
  warned: Set<string> = new Set(),
): Promise<ServingConfigStatus[]> {
  const name = network.metadata.name;
  const warnOnce = (at: string, fields: Record<string, unknown>, msg: string): void => {
    if (warned.has(at)) ctx.logger.debug(fields, msg);
    else ctx.logger.warn(fields, msg);
    warned.add(at);
  };
  const stale = staleServing(name, served, previous);
  if (stale.length === 0) return [];
  const kept: ServingConfigStatus[] = [];
  const disabled = (
    record: { gatewayName: string; namespace: string; configMapName: string },
    message: string,
  ): ServingConfigStatus => ({
    gatewayName: record.gatewayName,
    namespace: record.namespace,
    configMapName: record.configMapName,
    phase: 'Disabled',
    reason: 'DeleteFailed',
    message: boundedMessage(message),
    observedGeneration: network.metadata.generation ?? 1,
  });
  const existing: StoredConfigMap[] = [];
  for (const record of stale) {
    try {
      const object = await ctx.store.get(CONFIG_MAP, { name: record.configMapName, namespace: record.namespace });
      if (object !== undefined) existing.push(object);
    } catch (error) {
      // Unknown whether it is there: keep the record and look again next time.
      ctx.metrics.servingDeletes.inc({ outcome: 'failed' });
      const at = `${record.namespace}/${record.configMapName}`;
      warnOnce(
        at,
        { network: name, configMap: at, error: errorFields(error) },
        'cannot read the serving config of a gateway no longer served; retried next reconcile',
      );
      kept.push(
        disabled(
          record,
          `gridServing off or gateway removed; cannot read ConfigMap ${record.namespace}/${record.configMapName}: ${errorFields(error).message}`,
        ),
      );
    }
  }
  const unread = new Set(kept.map((k) => `${k.namespace}/${k.configMapName}`));
  const plan = planServingCleanup(
    name,
    stale.filter((r) => !unread.has(`${r.namespace}/${r.configMapName}`)),
    existing,
  );
  for (const { record, why } of plan.foreign) {
    ctx.metrics.servingDeletes.inc({ outcome: 'foreign' });
    ctx.logger.info(
      { network: name, configMap: `${record.namespace}/${record.configMapName}`, gateway: record.gatewayName },
      `gateway no longer served; ConfigMap not the operator's serving config (${why}), left in place`,
    );
  }
  for (const record of plan.deletions) {
    const at = `${record.namespace}/${record.configMapName}`;
    try {
      // false: gone between the read and the delete, which is what was wanted.
      if (!(await ctx.store.delete(CONFIG_MAP, { name: record.configMapName, namespace: record.namespace }))) continue;
      ctx.metrics.servingDeletes.inc({ outcome: 'deleted' });
      warned.delete(at);
      ctx.logger.info(
        { network: name, configMap: at, gateway: record.gatewayName },
        'serving config deleted: gateway no longer served',
      );
    } catch (error) {
      ctx.metrics.servingDeletes.inc({ outcome: 'failed' });
      warnOnce(
        at,
        { network: name, configMap: at, error: errorFields(error) },
        'cannot delete the serving config of a gateway no longer served; retried next reconcile',
      );
      kept.push(
        disabled(
          record,
          `gridServing off or gateway removed; cannot delete ConfigMap ${at}: ${errorFields(error).message}`,
        ),
      );
    }
  }
  // Status is keyed by gateway: one still served keeps only its own entry.
  return kept.filter((k) => !served.has(`${k.namespace}/${k.gatewayName}`));
}
