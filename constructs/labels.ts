/**
 * Label and name conventions shared by every construct. Selectors, NetworkPolicy peers and Services match on these,
 * so they live in one place: a rename here changes every selector at once instead of silently breaking one.
 */

/** The namespace a site's AGN workloads run in when the declaration names none. */
export const DEFAULT_NAMESPACE = 'grid-system';

/** Label/annotation prefix of the API group (docs/contract.md §1). */
export const GRID_PREFIX = 'grid.praxis.fast/';

// The pod labels are a contract with the daemons too (the dashboard lists consumer gateway pods by them).
export {
  LABEL_INSTANCE,
  LABEL_NAME,
  LABEL_PART_OF,
  workloadLabels,
  type GridComponent,
} from '../schemas/workload-labels.ts';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_VERSION = 'app.kubernetes.io/version';
export const LABEL_NETWORK = `${GRID_PREFIX}network`;
