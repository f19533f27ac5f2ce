/**
 * Names of objects the gossip-operator reads or writes by name, shared by the daemon and the compiler so the RBAC
 * the compiler emits (scoped with resourceNames) names exactly the objects the daemon touches.
 * The overlay ConfigMap's name is in overlay/configmap-name.ts (docs/contract.md §2.1).
 */

/** The ConfigMap holding the operator's persisted gossip revision high-water mark (one per site). */
export function operatorStateConfigMapName(site: string): string {
  return `grid-operator-state-${site.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

/**
 * The ConfigMap recording every site name this operator has seen a GridSite for (one per site, beside the state
 * ConfigMap): a recorded name with no GridSite now is a deleted site, which a SiteInvite reuses only with
 * spec.allowDeletedName.
 */
export function siteNameLedgerConfigMapName(site: string): string {
  return `grid-site-names-${site.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

/** The Secret holding a SiteInvite's one-time token (never its status). */
export function inviteTokenSecretName(invite: string): string {
  return `grid-invite-${invite}`.slice(0, 253);
}

/**
 * The reference-only mount requirements ConfigMap of a generated consumer config: the revision is a
 * content digest, so the name changes with the document and cannot be known when RBAC is compiled.
 */
export function mountRequirementsConfigMapName(revision: string): string {
  return `grid-mount-requirements-${revision}`;
}

/** praxisConfig.configMapName when absent: the generated consumer config ConfigMap. */
export const DEFAULT_PRAXIS_CONFIG_MAP_NAME = 'praxis-consumer-config';
