/**
 * Label and name conventions shared by every construct. Selectors, NetworkPolicy peers and Services match on these,
 * so they live in one place: a rename here changes every selector at once instead of silently breaking one.
 */

/** The namespace a site's AGN workloads run in when the declaration names none (seed 000 uses grid-system). */
export const DEFAULT_NAMESPACE = 'grid-system';

/** Label/annotation prefix of the API group (SPEC §1). */
export const GRID_PREFIX = 'grid.praxis.fast/';

export const LABEL_NAME = 'app.kubernetes.io/name';
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
export const LABEL_PART_OF = 'app.kubernetes.io/part-of';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_VERSION = 'app.kubernetes.io/version';
export const LABEL_NETWORK = `${GRID_PREFIX}network`;

/** The roles a pod can play; NetworkPolicies select peers by this label. */
export type GridComponent = 'gossip-operator' | 'consumer-gateway' | 'provider-gateway' | 'inference-backend';

/**
 * The labels that identify one workload. `instance` is the workload's own name, so two gateways of the same
 * component in one namespace still select only their own pods.
 */
export function workloadLabels(component: GridComponent, instance: string): Record<string, string> {
  return {
    [LABEL_NAME]: component,
    [LABEL_INSTANCE]: instance,
    [LABEL_PART_OF]: 'agn',
  };
}
