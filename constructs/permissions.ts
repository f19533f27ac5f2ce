/**
 * The per-daemon permission table: the only place that says which Kubernetes API calls each daemon makes.
 * The operator and overlay-sync Roles are generated from it (GossipOperator, OverlaySync), and the API-server
 * suite compares it with the calls the daemons really make, so a permission cannot be granted without a use.
 *
 * Entries that name objects (`names` other than `all`) become `resourceNames`; the names come from the site
 * declaration at synth time (the overlay ConfigMaps of this site's gateways, the Secrets its resources reference).
 */

export const GRID_API_GROUP = 'grid.praxis.fast';

/** The plurals of the six grid kinds (docs/contract.md §1). */
export const GRID_PLURALS = [
  'gridnetworks',
  'gridsites',
  'inferenceproviders',
  'agenttoolproviders',
  'agenttoagentproviders',
  'siteinvites',
] as const;

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/** Which objects a rule covers: every object of the resource, or the names a site supplies for that slot. */
export type NameSlot =
  | 'all'
  | 'overlayConfigMaps'
  | 'servingConfigMaps'
  | 'overlayConfigMap'
  | 'operatorState'
  | 'referencedSecrets'
  | 'inviteSecrets'
  | 'leaderLease'
  | 'metricsScraper'
  | 'praxisConfigMaps'
  | 'delegatedDeployments'
  | 'dashboardGateways';

export interface PermissionEntry {
  /** `cluster` entries go into the ClusterRole (the grid kinds are cluster-scoped); `namespace` into Roles. */
  readonly scope: 'cluster' | 'namespace';
  /** API group; '' is the core group. */
  readonly apiGroup: string;
  readonly resources: readonly string[];
  readonly verbs: readonly Verb[];
  readonly names: NameSlot;
  /**
   * Emit this entry only at a site whose slot has names: for objects whose names cannot be known at synth time
   * (content-hashed) but which exist only when the site opts into the feature that slot stands for.
   */
  readonly onlyWith?: Exclude<NameSlot, 'all'>;
  /** The daemon code path that needs this permission. */
  readonly why: string;
}

export type DaemonName = 'gossip-operator' | 'overlay-sync' | 'gateway' | 'sim';

export const DAEMON_PERMISSIONS: Readonly<Record<DaemonName, readonly PermissionEntry[]>> = {
  'gossip-operator': [
    {
      scope: 'cluster',
      apiGroup: GRID_API_GROUP,
      resources: GRID_PLURALS,
      verbs: ['get', 'list', 'watch'],
      names: 'all',
      why: 'the controllers watch every grid kind and re-read an object before reconciling it',
    },
    {
      scope: 'cluster',
      apiGroup: GRID_API_GROUP,
      resources: GRID_PLURALS.map((plural) => `${plural}/status`),
      verbs: ['patch'],
      names: 'all',
      why: 'status is written through the status subresource with a patch, never by replacing the object',
    },
    {
      scope: 'cluster',
      apiGroup: GRID_API_GROUP,
      resources: ['gridsites'],
      verbs: ['create', 'patch', 'delete'],
      names: 'all',
      why: 'site auto-discovery applies a GridSite stub per discovered peer and deletes stubs absent past the TTL; their names come from gossip',
    },
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['configmaps'],
      verbs: ['get', 'patch', 'create'],
      names: 'overlayConfigMaps',
      why: 'overlay ConfigMaps are read to compare revisions and written with server-side apply, which the API server authorizes as create for the first write (the name is in the URL, so resourceNames scopes it)',
    },
    {
      // Separate from overlayConfigMaps, which holds the serving name only while gridServing is on: this one holds
      // it for as long as the site deploys the gateway, so a re-synth that turns gridServing off still lets the
      // operator remove what it wrote.
      scope: 'namespace',
      apiGroup: '',
      resources: ['configmaps'],
      verbs: ['get', 'delete'],
      names: 'servingConfigMaps',
      why: "when gridServing is turned off, the serving ConfigMap (grid-serving-{network}-{gateway}) recorded in status is read and deleted if it carries the operator's serving labels for that gateway; granted for the name of each gateway this site deploys",
    },
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['configmaps'],
      verbs: ['get', 'patch', 'create'],
      names: 'operatorState',
      why: "the gossip revision high-water mark and the site name ledger (names of GridSites seen, so a deleted site's name is reused only with SiteInvite allowDeletedName) survive restarts in two ConfigMaps, written with server-side apply",
    },
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['secrets'],
      verbs: ['get'],
      names: 'referencedSecrets',
      why: 'the swim key, site certificate, CA and provider credentials are read by the name a resource references; delegated mount reconciliation checks that each Secret it would mount exists (credential, site TLS and transport.caSecretRef names, in the gateway namespace)',
    },
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['secrets'],
      verbs: ['get', 'patch', 'create', 'delete'],
      names: 'inviteSecrets',
      why: 'each SiteInvite keeps its one-time token in its own Secret, written with server-side apply and deleted to revoke it',
    },
    {
      // One unnamed rule, no named twin: grid-mount-requirements-<hash> is named by its content digest, so
      // resourceNames cannot scope it, and a rule naming praxisConfig.configMapName with the same verbs would grant
      // nothing more. The praxisConfigMaps slot only gates it to sites whose gateways generate.
      scope: 'namespace',
      apiGroup: '',
      resources: ['configmaps'],
      verbs: ['get', 'patch', 'create', 'delete'],
      names: 'all',
      onlyWith: 'praxisConfigMaps',
      why: 'a gateway with praxisConfig.generate gets its consumer config ConfigMap (praxisConfig.configMapName) and its content-named grid-mount-requirements-<hash> compared, written with server-side apply and deleted when superseded or generation stops; granted only where a gateway generates, and the operator deletes only ConfigMaps carrying its labels for that gateway',
    },
    {
      scope: 'namespace',
      apiGroup: 'apps',
      resources: ['deployments'],
      verbs: ['get', 'patch'],
      names: 'delegatedDeployments',
      why: 'praxisConfig.mountReconciliation reads the one annotated consumer Deployment and server-side applies its reserved projected volumes, mounts and revision annotation (never create: a missing Deployment is an Error)',
    },
    {
      // resourceNames cannot scope a list by label, so the dashboardGateways slot only gates it: granted where the
      // site serves the dashboard with a token and deploys a consumer gateway, in the site namespace only.
      scope: 'namespace',
      apiGroup: '',
      resources: ['pods'],
      verbs: ['list', 'watch'],
      names: 'all',
      onlyWith: 'dashboardGateways',
      why: "the fleet dashboard lists and watches the consumer gateway pods of the site namespace (by their workload labels) to read each replica's gateway and overlay-sync admin endpoints at its pod IP; never get, never a write",
    },
    {
      scope: 'namespace',
      apiGroup: 'coordination.k8s.io',
      resources: ['leases'],
      verbs: ['get', 'patch', 'create'],
      names: 'leaderLease',
      why: 'leader election reads and renews its one Lease with server-side apply (create for the first write, scoped by name)',
    },
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['serviceaccounts/token'],
      verbs: ['create'],
      names: 'metricsScraper',
      why: "metricsConfig.auth sends a TokenRequest-minted token of the metrics scraper ServiceAccount, never the operator's own (docs/contract.md §7.4)",
    },
  ],
  'overlay-sync': [
    {
      scope: 'namespace',
      apiGroup: '',
      resources: ['configmaps'],
      verbs: ['get', 'list', 'watch'],
      names: 'overlayConfigMap',
      why: "watches its gateway's one overlay ConfigMap (field selector on the name) and relists after a 410",
    },
  ],
  // The gateway and the simulated backend never call the API server; their pods mount no token.
  gateway: [],
  sim: [],
};

/**
 * What the metrics scraper ServiceAccount may do: only read /metrics. It runs no
 * daemon; whoever serves a scraped endpoint receives its token, so it must be worth nothing else.
 */
export const METRICS_SCRAPER_RULES: readonly {
  readonly nonResourceURLs: readonly string[];
  readonly verbs: readonly Verb[];
}[] = [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }];

/** A Kubernetes PolicyRule (rbac.authorization.k8s.io/v1), as emitted. */
export interface PolicyRule {
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly verbs: string[];
  readonly resourceNames?: string[];
}

/** The names a site supplies for each slot; a missing slot yields no rule (nothing to grant). */
export type NameBindings = Partial<Record<Exclude<NameSlot, 'all'>, readonly string[]>>;

/**
 * Resolves a daemon's entries of one scope into PolicyRules. A named slot with no names produces no rule at all,
 * because an empty `resourceNames` would mean "every object" to Kubernetes.
 */
export function policyRules(
  daemon: DaemonName,
  scope: 'cluster' | 'namespace',
  names: NameBindings = {},
): PolicyRule[] {
  const rules: PolicyRule[] = [];
  for (const entry of DAEMON_PERMISSIONS[daemon]) {
    if (entry.scope !== scope) continue;
    if (entry.onlyWith !== undefined && (names[entry.onlyWith] ?? []).length === 0) continue;
    const base = { apiGroups: [entry.apiGroup], resources: [...entry.resources], verbs: [...entry.verbs] };
    if (entry.names === 'all') {
      rules.push(base);
      continue;
    }
    const bound = [...new Set(names[entry.names] ?? [])].sort();
    if (bound.length > 0) rules.push({ ...base, resourceNames: bound });
  }
  return rules;
}
