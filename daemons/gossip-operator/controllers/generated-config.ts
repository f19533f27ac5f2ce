/**
 * The generated consumer config reconcile of one GridNetwork (GatewayRef.praxisConfig): for every
 * generating gateway, render and apply praxis.yaml, then publish its mount requirements and reconcile its delegated
 * Deployment; for every gateway that stopped generating (generate false, praxisConfig removed, gateway removed),
 * delete the ConfigMaps the operator created for it — only when they carry the operator's labels for that
 * gateway — and drop its status entries. Which objects it created is known from the previous status, so no list
 * permission is needed.
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { gatewayRefsOf } from '../../../schemas/generated-config.ts';
import type { MountReconciliationStatus, PraxisConfigStatus } from '../../../schemas/generated/gridnetworks.ts';
import { errorFields } from '../../shared/log.ts';
import { CONFIG_MAP, type ConfigMapObject, FIELD_MANAGER } from '../kinds.ts';
import type { GatewayOverlayResult } from '../../routing/index.ts';
import type { GatewayReference } from '../../routing/model.ts';
import { type MountContext, mountPending, reconcileMounts, removeStoppedMounts } from './mount-reconciler.ts';
import { ownedBy } from './mount-requirements.ts';
import {
  DEFAULT_CONFIG_MAP_NAME,
  generatingConfig,
  PRAXIS_CONFIG_KEY,
  praxisConfigMap,
  REASON_APPLY_FAILED,
  REASON_DISABLED,
  REASON_RENDER_FAILED,
  renderPraxisConfig,
} from './praxis-config.ts';
import { boundedMessage } from './status.ts';

export interface GeneratedConfigOutcome {
  readonly praxisConfigStatus: PraxisConfigStatus[];
  readonly mountReconciliationStatus: MountReconciliationStatus[];
  /** Some gateway waits for a Secret or a rollout: reconcile again within MOUNT_POLL_MS. */
  readonly pending: boolean;
}

const gatewayKey = (namespace: string, name: string): string => `${namespace}/${name}`;

/**
 * Renders and applies the consumer config of every generating gateway. `held` maps a gateway key to the reason its
 * overlay revision was held back (projected credentials not yet attested); the config still renders, and its
 * status says why the overlay did not move.
 */
export async function publishGeneratedConfigs(
  ctx: MountContext,
  network: GridNetworkResource,
  results: readonly GatewayOverlayResult[],
  held: ReadonlyMap<string, { reason: string; message: string }> = new Map(),
): Promise<GeneratedConfigOutcome> {
  const name = network.metadata.name;
  const generation = network.metadata.generation ?? 1;
  const refs = gatewayRefsOf(network.spec);
  const previousConfigs = network.status?.praxisConfigStatus ?? [];
  const previousMounts = network.status?.mountReconciliationStatus ?? [];
  const statuses: PraxisConfigStatus[] = [];
  const mounts: MountReconciliationStatus[] = [];
  const generating = new Set<string>();
  const targets = new Set<string>();
  for (const ref of refs) {
    const praxis = generatingConfig(ref);
    if (praxis === undefined) continue;
    const key = gatewayKey(ref.namespace, ref.name);
    generating.add(key);
    const entry = results.find((r) => r.gateway.name === ref.name && r.gateway.namespace === ref.namespace);
    const gateway: GatewayReference = entry?.gateway ?? { name: ref.name, namespace: ref.namespace };
    const configMapName = praxis.configMapName ?? DEFAULT_CONFIG_MAP_NAME;
    targets.add(gatewayKey(ref.namespace, configMapName));
    const base = { gatewayName: ref.name, namespace: ref.namespace, configMapName, observedGeneration: generation };
    const previousMount = previousMounts.find((m) => m.gatewayName === ref.name && m.namespace === ref.namespace);
    // Mounts follow the config: while it does not render or apply, the last requirements and Deployment stay.
    const keepMount = (message: string): void => {
      if (previousMount !== undefined)
        mounts.push({
          ...previousMount,
          observedGeneration: generation,
          phase: 'Error',
          reason: 'ConfigNotApplied',
          message: boundedMessage(message),
        });
    };
    const candidates = entry?.result.ok === true ? entry.result.value.payload.candidates : [];
    const rendered = renderPraxisConfig({ network: name, gateway, praxis, candidates });
    if (!rendered.ok) {
      ctx.logger.warn(
        { network: name, gateway: key, message: rendered.message },
        'consumer config not rendered; ConfigMap left unchanged',
      );
      statuses.push({ ...base, phase: 'Error', reason: REASON_RENDER_FAILED, message: rendered.message });
      keepMount(`consumer config not rendered; mounts left at their last revision`);
      continue;
    }
    try {
      const existing = (await ctx.store.get(CONFIG_MAP, { name: configMapName, namespace: ref.namespace })) as
        | ConfigMapObject
        | undefined;
      // Unchanged text is not re-applied, so a steady state writes nothing and starts no watch event.
      if (existing?.data?.[PRAXIS_CONFIG_KEY] !== rendered.text) {
        await ctx.store.apply(CONFIG_MAP, praxisConfigMap(name, gateway, configMapName, rendered.text), {
          fieldManager: FIELD_MANAGER,
          force: true,
        });
        ctx.logger.info(
          { network: name, gateway: key, configMap: `${ref.namespace}/${configMapName}` },
          'consumer config applied',
        );
      }
      const hold = held.get(key);
      statuses.push({
        ...base,
        phase: 'Rendered',
        // Rendered with a reason: the ConfigMap is current, but the overlay revision is held back and this says why.
        reason: hold?.reason ?? '',
        message: boundedMessage(
          `consumer config rendered and applied to ${ref.namespace}/${configMapName}${hold !== undefined ? `; ${hold.message}` : ''}`,
        ),
      });
    } catch (error) {
      ctx.logger.warn({ network: name, gateway: key, error: errorFields(error) }, 'consumer config apply failed');
      statuses.push({
        ...base,
        phase: 'Error',
        reason: REASON_APPLY_FAILED,
        message: boundedMessage(`apply ConfigMap ${ref.namespace}/${configMapName}: ${errorFields(error).message}`),
      });
      keepMount('consumer config not applied; mounts left at their last revision');
      continue;
    }
    mounts.push(
      await reconcileMounts(
        ctx,
        {
          network: name,
          generation,
          gateway,
          praxis,
          configMapName,
          configText: rendered.text,
          candidates,
          tls: network.spec.tls,
          credentialsHeld: held.has(key),
        },
        previousMount,
      ),
    );
  }

  statuses.push(...(await removeStoppedConfigs(ctx, name, generation, previousConfigs, targets, generating)));
  mounts.push(
    ...(await removeStoppedMounts(
      ctx,
      name,
      generation,
      previousMounts.filter((m) => !generating.has(gatewayKey(m.namespace, m.gatewayName))),
    )),
  );
  return { praxisConfigStatus: statuses, mountReconciliationStatus: mounts, pending: mounts.some(mountPending) };
}

/**
 * The generated ConfigMaps no generating gateway targets any more (its generation was turned off, its praxisConfig
 * or the gateway removed, or configMapName changed): deleted when the operator's labels for that gateway are on
 * it, left alone otherwise. A failed delete keeps a Disabled entry so the name is not forgotten (unless the gateway
 * still generates under another name: then only the log says so).
 */
async function removeStoppedConfigs(
  ctx: MountContext,
  network: string,
  generation: number,
  previous: readonly PraxisConfigStatus[],
  targets: ReadonlySet<string>,
  generating: ReadonlySet<string>,
): Promise<PraxisConfigStatus[]> {
  const kept: PraxisConfigStatus[] = [];
  for (const entry of previous) {
    const configMapName = entry.configMapName;
    if (configMapName === undefined || configMapName === '' || targets.has(gatewayKey(entry.namespace, configMapName)))
      continue;
    const ref = { name: configMapName, namespace: entry.namespace };
    const at = `${entry.namespace}/${configMapName}`;
    try {
      const existing = await ctx.store.get(CONFIG_MAP, ref);
      if (existing !== undefined && !ownedBy(existing, network, entry.gatewayName)) {
        ctx.logger.info(
          { network, configMap: at, gateway: entry.gatewayName },
          'generation stopped; ConfigMap not created by the operator for this gateway, left in place',
        );
      } else if (existing !== undefined && (await ctx.store.delete(CONFIG_MAP, ref))) {
        ctx.logger.info(
          { network, configMap: at, gateway: entry.gatewayName },
          'generated consumer config deleted: generation stopped',
        );
      }
    } catch (error) {
      ctx.logger.warn(
        { network, configMap: at, error: errorFields(error) },
        'cannot delete a generated consumer config after generation stopped',
      );
      // Status is keyed by gateway: a gateway that still generates (under a new configMapName) keeps its own entry.
      if (generating.has(gatewayKey(entry.namespace, entry.gatewayName))) continue;
      kept.push({
        gatewayName: entry.gatewayName,
        namespace: entry.namespace,
        configMapName,
        phase: 'Disabled',
        reason: REASON_DISABLED,
        message: boundedMessage(`generation stopped; cannot delete ConfigMap ${at}: ${errorFields(error).message}`),
        observedGeneration: generation,
      });
    }
  }
  return kept;
}
