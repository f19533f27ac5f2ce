/**
 * The Grid kinds as resource-store kinds (all cluster-scoped, docs/contract.md §1), plus the built-ins the operator
 * uses.
 */
import { API_VERSION, DEFINITIONS, LABEL_PREFIX, type GridKind } from '../../schemas/crds/definitions.ts';
import type { KubeObject, ResourceKind } from '../shared/resource-store/types.ts';

export { CONFIG_MAP, LEASE, SECRET } from '../shared/resource-store/index.ts';

/** A ConfigMap as the operator reads and writes it (overlay, consumer config, mount requirements, state). */
export interface ConfigMapObject extends KubeObject {
  data?: Record<string, string>;
}

function gridKind(kind: GridKind): ResourceKind {
  return { apiVersion: API_VERSION, kind, plural: DEFINITIONS[kind].plural, namespaced: false };
}

export const GRID_NETWORK = gridKind('GridNetwork');
export const GRID_SITE = gridKind('GridSite');
export const INFERENCE_PROVIDER = gridKind('InferenceProvider');
export const AGENT_TOOL_PROVIDER = gridKind('AgentToolProvider');
export const AGENT_TO_AGENT_PROVIDER = gridKind('AgentToAgentProvider');
export const SITE_INVITE = gridKind('SiteInvite');
/** The one consumer Deployment a gateway delegates with praxisConfig.mountReconciliation (get and apply only). */
export const DEPLOYMENT: ResourceKind = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  plural: 'deployments',
  namespaced: true,
};

/** The site's consumer gateway pods, listed and watched (never written) by the dashboard's replica discovery. */
export const POD: ResourceKind = { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true };

/** The fields of a Pod the dashboard reads. */
export interface PodObject extends KubeObject {
  spec?: { containers?: { name: string; ports?: { name?: string; containerPort: number }[] }[] };
  status?: { phase?: string; podIP?: string };
}

/** Server-side apply field manager of everything the operator writes (docs/contract.md §2.1). */
export const FIELD_MANAGER = 'grid-operator';

export const LABEL_NETWORK = `${LABEL_PREFIX}network`;
export const LABEL_GATEWAY = `${LABEL_PREFIX}gateway`;
export const LABEL_AUTO_DISCOVER = `${LABEL_PREFIX}auto-discover-sites`;
/** Marks GridSites the operator created from gossip; only these are ever garbage-collected. */
export const LABEL_AUTO_DISCOVERED = `${LABEL_PREFIX}auto-discovered`;
/** The SWIM/CRDT site id of an auto-discovered GridSite (its name is the sanitized form). */
export const ANNOTATION_SITE_ID = `${LABEL_PREFIX}site-id`;

/** The site id a GridSite stands for: a discovered stub's site-id annotation, else its name. */
export function siteIdOf(site: {
  readonly metadata: { readonly name: string; readonly annotations?: Readonly<Record<string, string>> };
}): string {
  return site.metadata.annotations?.[ANNOTATION_SITE_ID] ?? site.metadata.name;
}
export const MANAGED_BY = 'app.kubernetes.io/managed-by';
/** Labels an invite token Secret with its SiteInvite. */
export const LABEL_PREFIX_INVITE = `${LABEL_PREFIX}site-invite`;
