/**
 * Publishes each generating gateway's mount requirements as a reference-only grid-mount-requirements-<hash>
 * ConfigMap and, with praxisConfig.mountReconciliation.enabled, brings the one explicitly annotated Deployment in
 * the gateway namespace to them (reported in GridNetwork status.mountReconciliationStatus). The Deployment is written
 * with server-side apply under its own field manager and only ever gets the reserved projected volumes, the selected
 * container's mounts of them and the revision annotation; every status message names resources and paths, never Secret
 * data.
 */
import type { MountReconciliationStatus } from '../../../schemas/generated/gridnetworks.ts';
import { mountRequirementsConfigMapName } from '../../../schemas/object-names.ts';
import { errorFields } from '../../shared/log.ts';
import { ResourceStoreError } from '../../shared/resource-store/errors.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import type { OperatorContext } from '../context.ts';
import { CONFIG_MAP, type ConfigMapObject, DEPLOYMENT, FIELD_MANAGER, SECRET } from '../kinds.ts';
import type { GatewayReference } from '../../routing/model.ts';
import {
  deploymentApplyConfiguration,
  deploymentProblem,
  type DeploymentObject,
  MOUNT_REQUIREMENTS_KEY,
  mountRequirementsConfigMap,
  type MountRequirementsInput,
  mountsInPlace,
  ownedBy,
  renderMountRequirements,
  rolloutDone,
  withMounts,
} from './mount-requirements.ts';
import { boundedMessage } from './status.ts';

/** The field manager of delegated Deployment edits, apart from FIELD_MANAGER so its ownership is easy to read. */
export const MOUNT_FIELD_MANAGER = 'grid-operator-mounts';
/** The container whose mounts Grid manages when mountReconciliation.containerName is absent. */
export const DEFAULT_CONTAINER_NAME = 'praxis';
/** How soon a gateway waiting for a Secret or a rollout is looked at again (no Deployment watch: RBAC is get/patch). */
export const MOUNT_POLL_MS = 10_000;

export type MountContext = Pick<OperatorContext, 'store' | 'logger'>;

/** What the reconciler needs: the requirements' input plus the GridNetwork generation its status reports. */
export interface MountInput extends MountRequirementsInput {
  readonly generation: number;
}

/** Phases that need another look without any watched object changing. */
export function mountPending(status: MountReconciliationStatus): boolean {
  return (
    status.phase === 'WaitingForSecret' || status.phase === 'MountsReconciling' || status.phase === 'WaitingForRollout'
  );
}

async function deleteOwnedRequirements(
  ctx: MountContext,
  network: string,
  gateway: GatewayReference,
  revision: string,
): Promise<void> {
  const ref = { name: mountRequirementsConfigMapName(revision), namespace: gateway.namespace };
  const existing = await ctx.store.get(CONFIG_MAP, ref);
  // Only the operator's own object for this gateway: a user's ConfigMap of the same name is never deleted.
  if (!ownedBy(existing, network, gateway.name)) return;
  if (await ctx.store.delete(CONFIG_MAP, ref))
    ctx.logger.info(
      { network, gateway: `${gateway.namespace}/${gateway.name}`, configMap: `${ref.namespace}/${ref.name}` },
      'superseded mount requirements deleted',
    );
}

async function missingSecrets(store: ResourceStore, namespace: string, names: readonly string[]): Promise<string[]> {
  const missing: string[] = [];
  // Existence only. The store has no metadata-only read, so the GET returns the data: it is bound to nothing, not
  // logged, and unreachable once the comparison is done. The Role grants get on exactly these names
  // (referencedSecrets, mountSecretNames in schemas/praxis-config.ts).
  for (const name of names) {
    const exists = (await store.get(SECRET, { name, namespace })) !== undefined;
    if (!exists) missing.push(name);
  }
  return missing;
}

/** Renders, publishes and (when delegated) reconciles one gateway; never throws. */
export async function reconcileMounts(
  ctx: MountContext,
  input: MountInput,
  previous: MountReconciliationStatus | undefined,
): Promise<MountReconciliationStatus> {
  const { gateway, network } = input;
  const delegation = input.praxis.mountReconciliation?.enabled === true ? input.praxis.mountReconciliation : undefined;
  const base = {
    gatewayName: gateway.name,
    namespace: gateway.namespace,
    ...(delegation?.deploymentName !== undefined ? { deploymentName: delegation.deploymentName } : {}),
    ...(previous?.appliedRevision !== undefined ? { appliedRevision: previous.appliedRevision } : {}),
    deploymentGeneration: previous?.deploymentGeneration ?? 0,
    observedGeneration: input.generation,
  };
  const at = `gateway ${gateway.namespace}/${gateway.name}`;
  const fail = (reason: string, message: string, revision?: string): MountReconciliationStatus => {
    ctx.logger.warn(
      { network, gateway: `${gateway.namespace}/${gateway.name}`, reason, message },
      'mount reconciliation error',
    );
    const requirementsRevision = revision ?? previous?.requirementsRevision;
    return {
      ...base,
      ...(requirementsRevision !== undefined ? { requirementsRevision } : {}),
      phase: 'Error',
      reason,
      message: boundedMessage(message),
    };
  };

  const rendered = renderMountRequirements(input);
  if (!rendered.ok) return fail(rendered.reason, `${at}: ${rendered.message}`);
  const { revision, document } = rendered;
  const requirementsName = mountRequirementsConfigMapName(revision);
  try {
    const existing = (await ctx.store.get(CONFIG_MAP, { name: requirementsName, namespace: gateway.namespace })) as
      | ConfigMapObject
      | undefined;
    if (existing?.data?.[MOUNT_REQUIREMENTS_KEY] !== rendered.text) {
      await ctx.store.apply(CONFIG_MAP, mountRequirementsConfigMap(network, gateway, revision, rendered.text), {
        fieldManager: FIELD_MANAGER,
        force: true,
      });
      ctx.logger.info(
        {
          network,
          gateway: `${gateway.namespace}/${gateway.name}`,
          configMap: `${gateway.namespace}/${requirementsName}`,
        },
        'mount requirements published',
      );
    }
  } catch (error) {
    return fail(
      'RequirementsApplyFailed',
      `apply ConfigMap ${gateway.namespace}/${requirementsName}: ${errorFields(error).message}`,
      revision,
    );
  }
  if (previous?.requirementsRevision !== undefined && previous.requirementsRevision !== revision) {
    try {
      await deleteOwnedRequirements(ctx, network, gateway, previous.requirementsRevision);
    } catch (error) {
      // A leftover reference-only document is harmless; the next revision change tries again for its own.
      ctx.logger.warn(
        {
          network,
          configMap: `${gateway.namespace}/${mountRequirementsConfigMapName(previous.requirementsRevision)}`,
          error: errorFields(error),
        },
        'cannot delete superseded mount requirements',
      );
    }
  }
  const published = { ...base, requirementsRevision: revision };
  if (delegation === undefined) {
    return {
      ...published,
      phase: 'RequirementsRendered',
      reason: '',
      message: `mount requirements published to ${gateway.namespace}/${requirementsName} under ${MOUNT_REQUIREMENTS_KEY}`,
    };
  }

  const deploymentName = delegation.deploymentName;
  if (deploymentName === undefined || deploymentName === '')
    return fail('MissingDeploymentName', `${at}: mountReconciliation.enabled needs deploymentName`, revision);
  const containerName = delegation.containerName ?? DEFAULT_CONTAINER_NAME;
  const ref = { name: deploymentName, namespace: gateway.namespace };
  try {
    const deployment = (await ctx.store.get(DEPLOYMENT, ref)) as DeploymentObject | undefined;
    if (deployment === undefined)
      return fail('DeploymentNotFound', `Deployment ${gateway.namespace}/${deploymentName} not found`, revision);
    const problem = deploymentProblem(deployment, containerName, document.volumes);
    if (problem !== undefined) return fail(problem.reason, problem.message, revision);
    const observed = { ...published, deploymentGeneration: deployment.metadata.generation ?? 0 };

    const missing = await missingSecrets(
      ctx.store,
      gateway.namespace,
      [...new Set(document.secrets.map((s) => s.name))].sort(),
    );
    if (missing.length > 0) {
      // Mounting a missing Secret would hold the new pods in ContainerCreating: the Deployment is left as it is.
      return {
        ...observed,
        phase: 'WaitingForSecret',
        reason: 'SecretNotFound',
        message: boundedMessage(
          `waiting for Secret${missing.length > 1 ? 's' : ''} ${missing.map((m) => `${gateway.namespace}/${m}`).join(', ')} before mounting into Deployment ${gateway.namespace}/${deploymentName}`,
        ),
      };
    }

    if (!mountsInPlace(deployment, containerName, document.volumes, revision)) {
      // The API server merges the apply configuration by list keys; the local store has no field ownership and
      // replaces spec on apply, so there the whole Deployment with only the reserved entries changed is written.
      const desired =
        ctx.store.backend === 'kubernetes'
          ? deploymentApplyConfiguration(deploymentName, gateway.namespace, containerName, document.volumes, revision)
          : withMounts(deployment, containerName, document.volumes, revision);
      // The opt-in annotation was checked on this GET: the apply carries its resourceVersion as a precondition, so
      // a Deployment changed since (its annotation possibly removed) is not patched; the API server answers 409.
      const resourceVersion = deployment.metadata.resourceVersion;
      let applied: DeploymentObject;
      try {
        applied = (await ctx.store.apply(DEPLOYMENT, desired, {
          fieldManager: MOUNT_FIELD_MANAGER,
          force: true,
          ...(resourceVersion !== undefined ? { resourceVersion } : {}),
        })) as DeploymentObject;
      } catch (error) {
        if (!(error instanceof ResourceStoreError) || error.code !== 'conflict') throw error;
        ctx.logger.info(
          {
            network,
            gateway: `${gateway.namespace}/${gateway.name}`,
            deployment: `${gateway.namespace}/${deploymentName}`,
          },
          'Deployment changed since it was read; mounts not applied, retried on the next reconcile',
        );
        return {
          ...observed,
          phase: 'MountsReconciling',
          reason: 'DeploymentChanged',
          message: `Deployment ${gateway.namespace}/${deploymentName} changed since it was read; mounts of revision ${revision} not applied, checked again on the next reconcile`,
        };
      }
      ctx.logger.info(
        {
          network,
          gateway: `${gateway.namespace}/${gateway.name}`,
          deployment: `${gateway.namespace}/${deploymentName}`,
          revision,
        },
        'delegated mounts applied',
      );
      return {
        ...observed,
        deploymentGeneration: applied.metadata.generation ?? observed.deploymentGeneration,
        phase: 'MountsReconciling',
        reason: 'MountsApplied',
        message: `mounts of revision ${revision} applied to Deployment ${gateway.namespace}/${deploymentName} container "${containerName}"`,
      };
    }
    if (!rolloutDone(deployment)) {
      const s = deployment.status;
      return {
        ...observed,
        phase: 'WaitingForRollout',
        reason: 'RolloutInProgress',
        message: `Deployment ${gateway.namespace}/${deploymentName} rolling out revision ${revision}: observedGeneration ${s?.observedGeneration ?? 0}/${deployment.metadata.generation ?? 0}, updated ${s?.updatedReplicas ?? 0}, available ${s?.availableReplicas ?? 0} of ${deployment.spec?.replicas ?? 1}`,
      };
    }
    return {
      ...observed,
      appliedRevision: revision,
      phase: 'Ready',
      reason: '',
      message: `Deployment ${gateway.namespace}/${deploymentName} runs revision ${revision}`,
    };
  } catch (error) {
    return fail(
      'DeploymentReconcileFailed',
      `Deployment ${gateway.namespace}/${deploymentName}: ${errorFields(error).message}`,
      revision,
    );
  }
}

/**
 * Mount status entries of gateways that stopped generating: their owned requirements ConfigMap is deleted and the
 * entry dropped. A failed delete keeps the entry (as Error) so the next reconcile still knows the name. The
 * Deployment is left as it is: removing its mounts would roll the consumer out without its config.
 */
export async function removeStoppedMounts(
  ctx: MountContext,
  network: string,
  generation: number,
  stopped: readonly MountReconciliationStatus[],
): Promise<MountReconciliationStatus[]> {
  const kept: MountReconciliationStatus[] = [];
  for (const entry of stopped) {
    if (entry.requirementsRevision === undefined) continue;
    const gateway = { name: entry.gatewayName, namespace: entry.namespace };
    try {
      await deleteOwnedRequirements(ctx, network, gateway, entry.requirementsRevision);
    } catch (error) {
      const name = `${entry.namespace}/${mountRequirementsConfigMapName(entry.requirementsRevision)}`;
      ctx.logger.warn(
        { network, configMap: name, error: errorFields(error) },
        'cannot delete the mount requirements of a gateway that stopped generating',
      );
      kept.push({
        ...entry,
        observedGeneration: generation,
        phase: 'Error',
        reason: 'CleanupFailed',
        message: boundedMessage(
          `generation turned off; cannot delete ConfigMap ${name}: ${errorFields(error).message}`,
        ),
      });
    }
  }
  return kept;
}
