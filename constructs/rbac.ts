import type { Construct } from 'constructs';
import { k8s } from 'cdk8s-plus-28';
import { METRICS_SCRAPER_RULES, policyRules, type DaemonName, type NameBindings } from './permissions.ts';

/**
 * Role/ClusterRole objects generated from the permission table (permissions.ts). Written with the typed k8s
 * imports rather than kplus.Role because kplus emits one rule per resource name; a table rule with several
 * resourceNames must stay one rule so the emitted RBAC can be compared with the table line by line.
 */

export interface RoleGrant {
  readonly daemon: DaemonName;
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccountName: string;
  readonly serviceAccountNamespace: string;
  readonly names: NameBindings;
  readonly labels: Record<string, string>;
}

/** A namespaced Role + RoleBinding for a daemon's `namespace` entries. Returns undefined when nothing is granted. */
export function grantNamespaced(scope: Construct, id: string, grant: RoleGrant): k8s.KubeRole | undefined {
  const rules = policyRules(grant.daemon, 'namespace', grant.names);
  if (rules.length === 0) return undefined;
  const metadata = { name: grant.name, namespace: grant.namespace, labels: grant.labels };
  const role = new k8s.KubeRole(scope, `${id}Role`, { metadata, rules });
  new k8s.KubeRoleBinding(scope, `${id}RoleBinding`, {
    metadata,
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: grant.name },
    subjects: [{ kind: 'ServiceAccount', name: grant.serviceAccountName, namespace: grant.serviceAccountNamespace }],
  });
  return role;
}

/** A ClusterRole + ClusterRoleBinding for a daemon's `cluster` entries (the grid kinds are cluster-scoped). */
export function grantClusterWide(
  scope: Construct,
  id: string,
  grant: Omit<RoleGrant, 'namespace'>,
): k8s.KubeClusterRole | undefined {
  const rules = policyRules(grant.daemon, 'cluster', grant.names);
  if (rules.length === 0) return undefined;
  const metadata = { name: grant.name, labels: grant.labels };
  const role = new k8s.KubeClusterRole(scope, `${id}ClusterRole`, { metadata, rules });
  new k8s.KubeClusterRoleBinding(scope, `${id}ClusterRoleBinding`, {
    metadata,
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: grant.name },
    subjects: [{ kind: 'ServiceAccount', name: grant.serviceAccountName, namespace: grant.serviceAccountNamespace }],
  });
  return role;
}

/**
 * The metrics scraper identity: a ServiceAccount with no mounted token (no pod runs as it; the operator mints its
 * tokens with TokenRequest) and a ClusterRole allowing only get on /metrics, which an llm-d EPP's
 * SubjectAccessReview checks.
 */
export function metricsScraperAccount(
  scope: Construct,
  id: string,
  props: { name: string; namespace: string; labels: Record<string, string> },
): void {
  new k8s.KubeServiceAccount(scope, `${id}ServiceAccount`, {
    metadata: { name: props.name, namespace: props.namespace, labels: props.labels },
    automountServiceAccountToken: false,
  });
  const metadata = { name: props.name, labels: props.labels };
  new k8s.KubeClusterRole(scope, `${id}ClusterRole`, {
    metadata,
    rules: METRICS_SCRAPER_RULES.map((rule) => ({
      nonResourceUrLs: [...rule.nonResourceURLs],
      verbs: [...rule.verbs],
    })),
  });
  new k8s.KubeClusterRoleBinding(scope, `${id}ClusterRoleBinding`, {
    metadata,
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: props.name },
    subjects: [{ kind: 'ServiceAccount', name: props.name, namespace: props.namespace }],
  });
}
