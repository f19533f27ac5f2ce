// constructs/permissions.ts (the table of API calls each daemon makes) against the RBAC compiled into dist/, in
// both directions: every rule in dist/ is explained by a table entry and every table entry is in dist/ for each
// site that has names for it; the names are the ones the site's objects imply; no `*` anywhere. Then the same
// table is checked on the live API server with SubjectAccessReviews for the ServiceAccounts dist/ creates:
// every granted (verb, resource, name) is allowed and every other verb on those resources is refused.
import { beforeAll, describe, expect, it } from 'vitest';
import { DAEMON_PERMISSIONS, GRID_API_GROUP, METRICS_SCRAPER_RULES } from '../../constructs/permissions.ts';
import type { DaemonName, PermissionEntry } from '../../constructs/permissions.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import { servingConfigMapName } from '../../schemas/serving/serving-config.ts';
import { adminKubeConfig } from './kube.ts';
import { applyManifests, distFiles, readManifests, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';
import { referencedSecrets } from './site-secrets.ts';
import {
  DEFAULT_PRAXIS_CONFIG_MAP_NAME,
  inviteTokenSecretName,
  operatorStateConfigMapName,
  siteNameLedgerConfigMapName,
} from '../../schemas/object-names.ts';

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** One grant: scope, group, resource, verb, and the names (undefined = every object). */
interface Grant {
  readonly scope: 'cluster' | 'namespace';
  readonly group: string;
  readonly resource: string;
  readonly verb: string;
  readonly names: readonly string[] | undefined;
}

const key = (g: Grant): string =>
  `${g.scope} ${g.group || 'core'}/${g.resource} ${g.verb}${g.names ? ` [${[...g.names].sort().join(',')}]` : ''}`;

/** A nonResourceURL grant is written as resource `url:<path>` in the core group. */
function expand(scope: Grant['scope'], rules: readonly Rule[]): Grant[] {
  return rules.flatMap((r) => [
    ...(r.apiGroups ?? []).flatMap((group) =>
      (r.resources ?? []).flatMap((resource) =>
        r.verbs.map((verb) => ({ scope, group, resource, verb, names: r.resourceNames })),
      ),
    ),
    ...(r.nonResourceURLs ?? []).flatMap((url) =>
      r.verbs.map((verb) => ({ scope, group: '', resource: `url:${url}`, verb, names: undefined })),
    ),
  ]);
}

/** The metrics scraper ServiceAccount the operator Deployment is configured with (it runs no daemon of its own). */
function scraperAccounts(manifests: readonly Manifest[]): string[] {
  return manifests.flatMap((m) =>
    m.object.kind !== 'Deployment'
      ? []
      : (
          m.object['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
        ).template.spec.containers.flatMap((c) =>
          (c.env ?? []).filter((e) => e.name === 'GRID_METRICS_SCRAPER_SERVICE_ACCOUNT').map((e) => e.value ?? ''),
        ),
  );
}

const SCRAPER_GRANTS: Grant[] = expand(
  'cluster',
  METRICS_SCRAPER_RULES.map((r) => ({ nonResourceURLs: [...r.nonResourceURLs], verbs: [...r.verbs] })),
);

/** Which daemon a ServiceAccount belongs to: the container the Deployment running as it starts. */
function daemonOf(manifests: readonly Manifest[], serviceAccount: string): DaemonName | undefined {
  for (const m of manifests) {
    if (m.object.kind !== 'Deployment') continue;
    const pod = (
      m.object['spec'] as {
        template: { spec: { serviceAccountName?: string; containers: { name: string; command?: string[] }[] } };
      }
    ).template.spec;
    if (pod.serviceAccountName === serviceAccount) {
      if (serviceAccount === 'gossip-operator') return 'gossip-operator';
      if (pod.containers.some((c) => (c.command ?? []).includes('daemons/overlay-sync/main.ts'))) return 'overlay-sync';
    }
  }
  return undefined;
}

/** The grants dist/ gives each ServiceAccount, through its (Cluster)RoleBindings. */
function grantsBySubject(manifests: readonly Manifest[]): Map<string, Grant[]> {
  const roles = new Map<string, { scope: Grant['scope']; rules: Rule[] }>();
  for (const m of manifests) {
    if (m.object.kind === 'Role' || m.object.kind === 'ClusterRole') {
      const scope = m.object.kind === 'Role' ? 'namespace' : 'cluster';
      roles.set(`${m.object.kind}/${m.object.metadata.namespace ?? ''}/${m.object.metadata.name}`, {
        scope,
        rules: (m.object['rules'] as Rule[]) ?? [],
      });
    }
  }
  const grants = new Map<string, Grant[]>();
  for (const m of manifests) {
    if (m.object.kind !== 'RoleBinding' && m.object.kind !== 'ClusterRoleBinding') continue;
    const ref = m.object['roleRef'] as { kind: string; name: string };
    const role = roles.get(`${ref.kind}/${ref.kind === 'Role' ? m.object.metadata.namespace : ''}/${ref.name}`);
    if (role === undefined)
      throw new Error(
        `${m.object.kind} ${m.object.metadata.name} refers to ${ref.kind} ${ref.name}, which dist/ does not define`,
      );
    for (const s of m.object['subjects'] as { kind: string; name: string; namespace?: string }[]) {
      if (s.kind !== 'ServiceAccount')
        throw new Error(
          `${m.object.kind} ${m.object.metadata.name} binds a ${s.kind} (${s.name}); only ServiceAccounts are expected`,
        );
      const list = grants.get(s.name) ?? [];
      list.push(...expand(role.scope, role.rules));
      grants.set(s.name, list);
    }
  }
  return grants;
}

/**
 * Secrets the site's grid objects reference with a namespace (any `secretRef` / `…SecretRef` with name and
 * namespace), found by walking the objects (site-secrets.ts), not by the code under test. A name-only ref
 * (transport.caSecretRef) is read only by the delegated mount check and is added by slotNames for delegating gateways
 * alone.
 */
function referencedSecretNames(manifests: readonly Manifest[]): string[] {
  const specs = manifests
    .filter((m) => m.object.apiVersion.startsWith(`${GRID_API_GROUP}/`))
    .map((m) => m.object['spec']);
  const names = [...referencedSecrets(specs).values()].map(({ ref }) => ref.name);
  return [...new Set(names)].sort();
}

/** The names each slot of the table stands for at this site, derived from the site's own objects. */
function slotNames(
  manifests: readonly Manifest[],
  serviceAccount: string,
): Record<Exclude<PermissionEntry['names'], 'all'>, string[]> {
  const overlays: string[] = [];
  const praxisConfigMaps: string[] = [];
  const delegatedDeployments: string[] = [];
  // Secrets the delegated mount check GETs by a name without a namespace (transport.caSecretRef), in the gateway
  // namespace: granted only where the gateway delegates, since only then does the operator read them. (Remote candidates' credential names come from other sites' declarations and
  // cannot be derived from one site's manifests; test/cluster/mount-reconciliation.test.ts covers that grant.)
  const mountSecrets: string[] = [];
  type Praxis = {
    generate?: boolean;
    enabled?: boolean;
    configMapName?: string;
    clusterEndpoints?: { transport?: { mode?: string; caSecretRef?: { name: string } } }[];
    mountReconciliation?: { enabled?: boolean; deploymentName?: string };
  };
  type Gateway = { name: string; gridServing?: boolean; praxisConfig?: Praxis; consumerConfig?: Praxis };
  // The overlay ConfigMaps some overlay-sync container of this site is configured with: the gateways it deploys.
  const deployedOverlays = new Set(
    manifests.flatMap((m) =>
      m.object.kind !== 'Deployment'
        ? []
        : (
            m.object['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
          ).template.spec.containers.flatMap((c) =>
            (c.env ?? []).filter((e) => e.name === 'OVERLAY_SYNC_CONFIGMAP').map((e) => e.value ?? ''),
          ),
    ),
  );
  const served: string[] = [];
  for (const m of manifests) {
    if (m.object.kind !== 'GridNetwork') continue;
    const spec = m.object['spec'] as { consumerGateways?: Gateway[]; gatewayRefs?: Gateway[] };
    // The daemon's reading: consumerGateways, else the deprecated gatewayRefs; praxisConfig, else consumerConfig;
    // generate, else the deprecated enabled.
    for (const g of spec.consumerGateways ?? spec.gatewayRefs ?? []) {
      overlays.push(overlayConfigMapName(m.object.metadata.name, g.name));
      // The serving config is applied like the overlay while gridServing is on, and may be deleted as long as the
      // site deploys the gateway (so turning gridServing off can remove it).
      if (g.gridServing === true) overlays.push(servingConfigMapName(m.object.metadata.name, g.name));
      if (deployedOverlays.has(overlayConfigMapName(m.object.metadata.name, g.name)))
        served.push(servingConfigMapName(m.object.metadata.name, g.name));
      const praxis = g.praxisConfig ?? g.consumerConfig;
      if ((praxis?.generate ?? praxis?.enabled) !== true || praxis === undefined) continue;
      praxisConfigMaps.push(praxis.configMapName ?? DEFAULT_PRAXIS_CONFIG_MAP_NAME);
      const delegated = praxis.mountReconciliation;
      if (delegated?.enabled !== true || delegated.deploymentName === undefined || delegated.deploymentName === '')
        continue;
      delegatedDeployments.push(delegated.deploymentName);
      for (const e of praxis.clusterEndpoints ?? [])
        if (e.transport?.mode === 'tls' && e.transport.caSecretRef !== undefined)
          mountSecrets.push(e.transport.caSecretRef.name);
    }
  }
  // overlay-sync's one ConfigMap is the one its container is configured with.
  let own: string[] = [];
  for (const m of manifests) {
    if (m.object.kind !== 'Deployment') continue;
    const pod = (
      m.object['spec'] as {
        template: { spec: { serviceAccountName?: string; containers: { env?: { name: string; value?: string }[] }[] } };
      }
    ).template.spec;
    if (pod.serviceAccountName !== serviceAccount) continue;
    own = pod.containers.flatMap((c) =>
      (c.env ?? []).filter((e) => e.name === 'OVERLAY_SYNC_CONFIGMAP').map((e) => e.value ?? ''),
    );
  }
  const sites = manifests.flatMap((m) =>
    m.object.kind !== 'Deployment'
      ? []
      : (
          m.object['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
        ).template.spec.containers.flatMap((c) =>
          (c.env ?? []).filter((e) => e.name === 'GRID_SITE_NAME').map((e) => e.value ?? ''),
        ),
  );
  const invites = manifests
    .filter((m) => m.object.kind === 'SiteInvite')
    .map((m) => inviteTokenSecretName(m.object.metadata.name));
  // The dashboard lists the consumer gateway pods when the operator serves it with a token: the Deployments that run
  // an overlay-sync sidecar are the consumer gateways.
  const deployments = manifests
    .filter((m) => m.object.kind === 'Deployment')
    .map((m) => ({
      name: m.object.metadata.name,
      containers: (
        m.object['spec'] as {
          template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } };
        }
      ).template.spec.containers,
    }));
  const dashboardToken = deployments.some((d) =>
    d.containers.some((c) => (c.env ?? []).some((e) => e.name === 'GRID_DASHBOARD' && e.value === 'token')),
  );
  const consumerGateways = deployments
    .filter((d) => d.containers.some((c) => c.name === 'overlay-sync'))
    .map((d) => d.name);
  return {
    overlayConfigMaps: overlays.sort(),
    servingConfigMaps: served.sort(),
    overlayConfigMap: own,
    operatorState: sites.flatMap((site) => [operatorStateConfigMapName(site), siteNameLedgerConfigMapName(site)]),
    referencedSecrets: [...new Set([...referencedSecretNames(manifests), ...mountSecrets])].sort(),
    inviteSecrets: invites.sort(),
    leaderLease: ['gossip-operator-leader'],
    metricsScraper: scraperAccounts(manifests),
    praxisConfigMaps: praxisConfigMaps.sort(),
    delegatedDeployments: delegatedDeployments.sort(),
    dashboardGateways: dashboardToken ? consumerGateways.sort() : [],
  };
}

/** The grants the table says a daemon needs at this site (a named slot with no names yields nothing). */
function tableGrants(daemon: DaemonName, names: ReturnType<typeof slotNames>): Grant[] {
  return DAEMON_PERMISSIONS[daemon].flatMap((e) => {
    if (e.onlyWith !== undefined && names[e.onlyWith].length === 0) return [];
    const bound = e.names === 'all' ? undefined : names[e.names];
    if (bound !== undefined && bound.length === 0) return [];
    return e.resources.flatMap((resource) =>
      e.verbs.map((verb) => ({ scope: e.scope, group: e.apiGroup, resource, verb, names: bound })),
    );
  });
}

describe.each(distFiles().filter((f) => f !== 'crds.k8s.yaml'))(
  'RBAC in dist/%s against constructs/permissions.ts',
  (file) => {
    const manifests = readManifests(file);
    const bySubject = grantsBySubject(manifests);

    it('grants every ServiceAccount exactly what the table lists for its daemon (both directions, names included)', () => {
      expect(bySubject.size).toBeGreaterThan(0);
      for (const [serviceAccount, granted] of bySubject) {
        const daemon = daemonOf(manifests, serviceAccount);
        const scraper = scraperAccounts(manifests).includes(serviceAccount);
        expect(
          daemon !== undefined || scraper,
          `ServiceAccount ${serviceAccount} runs no daemon of the table and is no metrics scraper`,
        ).toBe(true);
        const expected = scraper ? SCRAPER_GRANTS : tableGrants(daemon!, slotNames(manifests, serviceAccount));
        const inDist = new Set(granted.map(key));
        const inTable = new Set(expected.map(key));
        expect(
          [...inDist].filter((k) => !inTable.has(k)),
          `${file}: granted to ${serviceAccount} but not in the table`,
        ).toEqual([]);
        expect(
          [...inTable].filter((k) => !inDist.has(k)),
          `${file}: in the table for ${daemon} but not granted to ${serviceAccount}`,
        ).toEqual([]);
      }
    });

    it('gives a token only to daemons with permissions, and grants nothing with `*`', () => {
      for (const m of manifests) {
        if (m.object.kind === 'Role' || m.object.kind === 'ClusterRole') {
          for (const rule of (m.object['rules'] as Rule[]) ?? []) {
            for (const field of ['apiGroups', 'resources', 'verbs', 'resourceNames'] as const) {
              expect(rule[field] ?? [], `${m.object.kind} ${m.object.metadata.name} ${field}`).not.toContain('*');
              // An empty resourceNames list would mean "every object" to Kubernetes.
              if (field === 'resourceNames' && rule.resourceNames !== undefined)
                expect(rule.resourceNames.length).toBeGreaterThan(0);
            }
          }
        }
        if (m.object.kind === 'Deployment') {
          const pod = (
            m.object['spec'] as {
              template: { spec: { serviceAccountName?: string; automountServiceAccountToken?: boolean } };
            }
          ).template.spec;
          const daemon = pod.serviceAccountName === undefined ? undefined : daemonOf(manifests, pod.serviceAccountName);
          const needsToken = daemon !== undefined && DAEMON_PERMISSIONS[daemon].length > 0;
          if (!needsToken)
            expect(pod.automountServiceAccountToken, `${m.object.metadata.name} mounts a token it has no use for`).toBe(
              false,
            );
        }
      }
    });
  },
);

describe('the table on the live API server (SubjectAccessReview for the ServiceAccounts of dist/east.k8s.yaml)', () => {
  let admin: RawClient;
  const east = readManifests('east.k8s.yaml');
  const ALL_VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];

  beforeAll(async () => {
    admin = new RawClient(adminKubeConfig());
    await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  });

  async function allowed(
    serviceAccount: string,
    grant: Omit<Grant, 'names'>,
    name: string | undefined,
  ): Promise<boolean> {
    const [resource, subresource] = grant.resource.split('/');
    const res = await admin.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:grid-system:${serviceAccount}`,
        groups: ['system:serviceaccounts', 'system:serviceaccounts:grid-system', 'system:authenticated'],
        resourceAttributes: {
          group: grant.group,
          resource,
          subresource,
          verb: grant.verb,
          namespace: grant.scope === 'namespace' ? 'grid-system' : undefined,
          name,
        },
      },
    });
    if (res.status !== 201) throw new Error(`SubjectAccessReview: HTTP ${res.status}`);
    return (res.body as { status: { allowed: boolean } }).status.allowed;
  }

  it('allows every grant of the table and refuses every other verb on the same resources and names', async () => {
    const problems: string[] = [];
    for (const [serviceAccount] of grantsBySubject(east)) {
      const daemon = daemonOf(east, serviceAccount);
      if (daemon === undefined) continue; // the metrics scraper: checked by its own test below
      const expected = tableGrants(daemon, slotNames(east, serviceAccount));
      const checks: Promise<void>[] = [];
      for (const g of expected) {
        for (const name of g.names ?? ['any-object']) {
          checks.push(
            allowed(serviceAccount, g, name).then(
              (ok) => void (ok || problems.push(`${serviceAccount} refused ${key(g)} ${name}`)),
            ),
          );
        }
        // A named grant covers only its names.
        if (g.names !== undefined) {
          checks.push(
            allowed(serviceAccount, g, 'not-granted').then(
              (ok) => void (ok && problems.push(`${serviceAccount} allowed ${key(g)} on an unnamed object`)),
            ),
          );
        }
      }
      const resources = new Map(expected.map((g) => [`${g.scope} ${g.group} ${g.resource}`, g]));
      for (const g of resources.values()) {
        for (const verb of ALL_VERBS.filter(
          (v) =>
            !expected.some(
              (e) => e.scope === g.scope && e.group === g.group && e.resource === g.resource && e.verb === v,
            ),
        )) {
          for (const name of g.names ?? ['any-object']) {
            checks.push(
              allowed(serviceAccount, { ...g, verb }, name).then(
                (ok) => void (ok && problems.push(`${serviceAccount} allowed ${verb} ${key(g)} ${name}`)),
              ),
            );
          }
        }
      }
      await Promise.all(checks);
    }
    expect(problems).toEqual([]);
  });

  it('lets the metrics scraper ServiceAccount get /metrics and nothing else it could misuse', async () => {
    const [scraper] = scraperAccounts(east);
    expect(scraper).toBe('gossip-operator-metrics-scraper');
    const review = async (attributes: Record<string, unknown>): Promise<boolean> => {
      const res = await admin.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:grid-system:${scraper}`,
          groups: ['system:serviceaccounts', 'system:serviceaccounts:grid-system', 'system:authenticated'],
          ...attributes,
        },
      });
      return (res.body as { status: { allowed: boolean } }).status.allowed;
    };
    expect(await review({ nonResourceAttributes: { path: '/metrics', verb: 'get' } })).toBe(true);
    expect(await review({ nonResourceAttributes: { path: '/metrics', verb: 'post' } })).toBe(false);
    expect(await review({ nonResourceAttributes: { path: '/debug/pprof/', verb: 'get' } })).toBe(false);
    expect(
      await review({ resourceAttributes: { group: '', resource: 'secrets', verb: 'get', namespace: 'grid-system' } }),
    ).toBe(false);
    expect(
      await review({
        resourceAttributes: {
          group: '',
          resource: 'serviceaccounts',
          subresource: 'token',
          verb: 'create',
          namespace: 'grid-system',
          name: scraper,
        },
      }),
    ).toBe(false);
  });
});

// Each row is one call read from the operator's source, as the API server authorizes it; the test fails listing
// every refusal, so a call added to daemons/gossip-operator without a grant in constructs/permissions.ts shows here.
describe('the API calls daemons/gossip-operator makes, authorized for its ServiceAccount from dist/east.k8s.yaml', () => {
  let admin: RawClient;
  beforeAll(async () => {
    admin = new RawClient(adminKubeConfig());
    await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  });

  interface Call {
    readonly source: string;
    readonly verb: string;
    readonly group: string;
    readonly resource: string;
    readonly subresource?: string;
    readonly namespace?: string;
    readonly name?: string;
  }
  const overlay = overlayConfigMapName('demo', 'consumer-gateway');
  const calls: Call[] = [
    {
      source: 'controllers/overlay-publisher.ts get the overlay ConfigMap',
      verb: 'get',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: overlay,
    },
    {
      source: 'controllers/overlay-publisher.ts apply (SSA) the overlay ConfigMap: update',
      verb: 'patch',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: overlay,
    },
    {
      source: 'controllers/overlay-publisher.ts apply (SSA) the overlay ConfigMap: first creation',
      verb: 'create',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: overlay,
    },
    {
      source: 'controllers/serving-publisher.ts get the serving ConfigMap of a gateway no longer served',
      verb: 'get',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: servingConfigMapName('demo', 'consumer-gateway'),
    },
    {
      source: 'controllers/serving-publisher.ts delete the serving ConfigMap of a gateway no longer served',
      verb: 'delete',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: servingConfigMapName('demo', 'consumer-gateway'),
    },
    {
      source: 'controllers/network-gossip.ts get its state ConfigMap',
      verb: 'get',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: 'grid-operator-state-east',
    },
    {
      source: 'controllers/network-gossip.ts apply its state ConfigMap',
      verb: 'patch',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: 'grid-operator-state-east',
    },
    {
      source: 'controllers/network-gossip.ts apply its state ConfigMap: first creation',
      verb: 'create',
      group: '',
      resource: 'configmaps',
      namespace: 'grid-system',
      name: 'grid-operator-state-east',
    },
    {
      source: 'operator.ts + manager/leader-election.ts get the Lease',
      verb: 'get',
      group: 'coordination.k8s.io',
      resource: 'leases',
      namespace: 'grid-system',
      name: 'gossip-operator-leader',
    },
    {
      source: 'manager/leader-election.ts renew the Lease with server-side apply',
      verb: 'patch',
      group: 'coordination.k8s.io',
      resource: 'leases',
      namespace: 'grid-system',
      name: 'gossip-operator-leader',
    },
    {
      source: 'manager/leader-election.ts take the Lease with server-side apply: first creation',
      verb: 'create',
      group: 'coordination.k8s.io',
      resource: 'leases',
      namespace: 'grid-system',
      name: 'gossip-operator-leader',
    },
    {
      source: 'controllers/site-discovery.ts apply a discovered GridSite',
      verb: 'patch',
      group: GRID_API_GROUP,
      resource: 'gridsites',
      name: 'demo-west',
    },
    {
      source: 'controllers/site-discovery.ts apply a discovered GridSite: first creation',
      verb: 'create',
      group: GRID_API_GROUP,
      resource: 'gridsites',
      name: 'demo-west',
    },
    {
      source: 'controllers/site-discovery.ts delete a departed GridSite stub',
      verb: 'delete',
      group: GRID_API_GROUP,
      resource: 'gridsites',
      name: 'demo-west',
    },
    {
      source: 'controllers/site-invite.ts get the invite token Secret',
      verb: 'get',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'controllers/site-invite.ts apply the invite token Secret',
      verb: 'patch',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'controllers/site-invite.ts apply the invite token Secret: first creation',
      verb: 'create',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'controllers/site-invite.ts delete the invite token Secret',
      verb: 'delete',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'probes/scraper-token.ts TokenRequest for the metrics scraper',
      verb: 'create',
      group: '',
      resource: 'serviceaccounts',
      subresource: 'token',
      namespace: 'grid-system',
      name: 'gossip-operator-metrics-scraper',
    },
    {
      source: 'enrollment/redeem.ts list SiteInvites to find a token id',
      verb: 'list',
      group: GRID_API_GROUP,
      resource: 'siteinvites',
    },
    {
      source: 'enrollment/redeem.ts get the invite token Secret',
      verb: 'get',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'enrollment/redeem.ts delete the invite token Secret (the one-time claim)',
      verb: 'delete',
      group: '',
      resource: 'secrets',
      namespace: 'grid-system',
      name: 'grid-invite-north',
    },
    {
      source: 'dashboard/replica-discovery.ts list the consumer gateway pods',
      verb: 'list',
      group: '',
      resource: 'pods',
      namespace: 'grid-system',
    },
    {
      source: 'dashboard/replica-discovery.ts watch the consumer gateway pods',
      verb: 'watch',
      group: '',
      resource: 'pods',
      namespace: 'grid-system',
    },
  ];

  it('allows every one of them', async () => {
    const refused: string[] = [];
    await Promise.all(
      calls.map(async (c) => {
        const res = await admin.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: 'system:serviceaccount:grid-system:gossip-operator',
            groups: ['system:serviceaccounts', 'system:serviceaccounts:grid-system', 'system:authenticated'],
            resourceAttributes: {
              group: c.group,
              resource: c.resource,
              subresource: c.subresource,
              verb: c.verb,
              namespace: c.namespace,
              name: c.name,
            },
          },
        });
        if (!(res.body as { status: { allowed: boolean } }).status.allowed) {
          refused.push(
            `${c.verb} ${c.group || 'core'}/${c.resource} ${c.namespace ?? '(cluster)'}/${c.name ?? '*'}  <- daemons/gossip-operator/${c.source}`,
          );
        }
      }),
    );
    expect(refused.sort()).toEqual([]);
  });
});
