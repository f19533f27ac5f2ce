/**
 * Which serving ConfigMaps to delete when a gateway stops being served (gridServing turned off, or the gateway
 * removed from spec.consumerGateways). Pure: the publisher finds the stale records (staleServing), fetches the ConfigMaps they name
 * and deletes what planServingCleanup says. Which ConfigMaps the operator made is known from the previous servingConfigStatus (as for
 * the overlay and the generated consumer config), so no list permission is needed; and a ConfigMap at a recorded
 * name is deleted only when it carries the operator's serving labels for that network and gateway, so a ConfigMap
 * someone else put there (or took over) is never touched.
 */
import type { ServingConfigStatus } from '../../../schemas/generated/gridnetworks.ts';
import { servingConfigMapName } from '../../../schemas/serving/serving-config.ts';
import { FIELD_MANAGER, LABEL_GATEWAY, LABEL_NETWORK, MANAGED_BY } from '../kinds.ts';

export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const SERVING_COMPONENT = 'serving';

/** A serving ConfigMap the operator recorded in status, for one gateway. */
export interface ServingRecord {
  readonly gatewayName: string;
  readonly namespace: string;
  readonly configMapName: string;
}

/** What the store holds at a name: only what the ownership check reads. */
export interface StoredConfigMap {
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
  };
}

export interface ServingCleanupPlan {
  /** Recorded, no longer wanted, and carrying the operator's serving labels for that gateway: delete. */
  readonly deletions: readonly ServingRecord[];
  /** Recorded and no longer wanted, but what is stored there is not the operator's: leave it, say so. */
  readonly foreign: readonly { readonly record: ServingRecord; readonly why: string }[];
  /** Recorded and no longer wanted, already absent: only the status entry goes. */
  readonly gone: readonly ServingRecord[];
}

const key = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The labels the operator puts on a serving ConfigMap (serving-publisher.ts) and the only ones it deletes. */
export function servingLabels(network: string, gateway: string): Record<string, string> {
  return {
    [MANAGED_BY]: FIELD_MANAGER,
    [LABEL_NETWORK]: network,
    [LABEL_GATEWAY]: gateway,
    [LABEL_COMPONENT]: SERVING_COMPONENT,
  };
}

/** Why a stored ConfigMap is not the operator's serving config for this gateway, or undefined when it is. */
export function notOwned(object: StoredConfigMap, network: string, gateway: string): string | undefined {
  const labels = object.metadata.labels ?? {};
  const missing = Object.entries(servingLabels(network, gateway))
    .filter(([k, v]) => labels[k] !== v)
    .map(([k, v]) => `${k}=${v}`);
  return missing.length === 0 ? undefined : `it lacks the label${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`;
}

/**
 * The recorded serving ConfigMaps no gateway wants any more: `served` holds `namespace/gateway` of the gateways with
 * gridServing now. A record whose name is not the one the network would give that gateway is stale too (it cannot
 * be the current ConfigMap of anything).
 */
export function staleServing(
  network: string,
  served: ReadonlySet<string>,
  recorded: readonly ServingConfigStatus[],
): ServingRecord[] {
  const stale: ServingRecord[] = [];
  for (const entry of recorded) {
    const configMapName = entry.configMapName;
    if (configMapName === undefined || configMapName === '') continue;
    const current = servingConfigMapName(network, entry.gatewayName);
    if (served.has(key(entry.namespace, entry.gatewayName)) && configMapName === current) continue;
    stale.push({ gatewayName: entry.gatewayName, namespace: entry.namespace, configMapName });
  }
  return stale;
}

/**
 * The stale records (staleServing) against what the store holds: what to delete, what to leave and why. `existing`
 * is whatever the store returned for the stale names (absent ones simply missing); a ConfigMap not at a stale
 * record's exact namespace and name is never a deletion, however alike its name or labels.
 */
export function planServingCleanup(
  network: string,
  stale: readonly ServingRecord[],
  existing: readonly StoredConfigMap[],
): ServingCleanupPlan {
  const stored = new Map(existing.map((o) => [key(o.metadata.namespace ?? '', o.metadata.name), o]));
  const deletions: ServingRecord[] = [];
  const foreign: { record: ServingRecord; why: string }[] = [];
  const gone: ServingRecord[] = [];
  for (const record of stale) {
    const object = stored.get(key(record.namespace, record.configMapName));
    if (object === undefined) {
      gone.push(record);
      continue;
    }
    const why = notOwned(object, network, record.gatewayName);
    if (why === undefined) deletions.push(record);
    else foreign.push({ record, why });
  }
  return { deletions, foreign, gone };
}
