import { describe, expect, it } from 'vitest';
import { GossipOperator } from '../../constructs/gossip-operator.ts';
import { chart, find, podSpec, synth } from './helpers.ts';

const props = {
  namespace: 'grid-system',
  network: 'demo',
  site: 'east',
  gatewayAddress: 'gateway.east.example.com:8443',
  overlayConfigMaps: ['grid-overlay-demo-consumer-gateway'],
  referencedSecrets: [
    { name: 'swim-key', namespace: 'grid-system' },
    { name: 'openai-credential', namespace: 'grid-system' },
  ],
} as const;

describe('GossipOperator', () => {
  it('synthesizes namespace, RBAC, Deployment and Service (snapshot)', () => {
    const c = chart();
    new GossipOperator(c, 'operator', props);
    expect(synth(c)).toMatchSnapshot();
  });

  it('has least-privilege RBAC: no wildcard, names where Kubernetes allows them', () => {
    const c = chart();
    new GossipOperator(c, 'operator', props);
    const objects = synth(c);
    const clusterRole = find(objects, 'ClusterRole', 'gossip-operator') as unknown as {
      rules: { verbs: string[]; resources: string[]; apiGroups: string[] }[];
    };
    const role = find(objects, 'Role', 'gossip-operator') as unknown as {
      rules: { verbs: string[]; resources: string[]; resourceNames?: string[] }[];
    };
    for (const rule of [...clusterRole.rules, ...role.rules]) {
      expect(rule.verbs).not.toContain('*');
      expect(rule.resources).not.toContain('*');
      expect((rule as { apiGroups: string[] }).apiGroups).not.toContain('*');
    }
    // The only cluster-wide delete: auto-discovered GridSite stubs absent past the TTL (site-discovery.ts).
    expect(clusterRole.rules.filter((r) => r.verbs.includes('delete')).map((r) => r.resources)).toEqual([
      ['gridsites'],
    ]);
    expect(clusterRole.rules[1]?.resources.every((r) => r.endsWith('/status'))).toBe(true);
    expect(role.rules.find((r) => r.resources.includes('secrets'))).toEqual({
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get'],
      resourceNames: ['openai-credential', 'swim-key'],
    });
    expect(role.rules.find((r) => r.resources.includes('configmaps'))?.resourceNames).toEqual([
      'grid-overlay-demo-consumer-gateway',
    ]);
    expect(role.rules.find((r) => r.resources.includes('leases'))).toEqual({
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'patch', 'create'],
      resourceNames: ['gossip-operator-leader'],
    });
    expect(role.rules.filter((r) => r.resources.includes('leases'))).toHaveLength(1);
    expect(role.rules.flatMap((r) => r.verbs)).not.toContain('update');
  });

  it('mounts its token, runs non-root with a read-only root and /tmp, and takes no swim key literal', () => {
    const c = chart();
    const op = new GossipOperator(c, 'operator', props);
    expect([op.replicas, op.gossipPort, op.adminPort, op.leaseName]).toEqual([1, 7946, 9090, 'gossip-operator-leader']);
    const objects = synth(c);
    const pod = podSpec(find(objects, 'Deployment', 'gossip-operator'));
    expect(pod.automountServiceAccountToken).toBe(true);
    expect(pod.serviceAccountName).toBe('gossip-operator');
    const container = pod.containers[0];
    expect(container?.command).toEqual(['node', 'daemons/gossip-operator/main.ts']);
    expect(container?.['securityContext']).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(container?.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(container?.['readinessProbe']).toMatchObject({ httpGet: { path: '/readyz', port: 9090 } });
    expect(Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]))).toEqual({
      GRID_SITE_NAME: 'east',
      GRID_OPERATOR_NAMESPACE: { fieldRef: { fieldPath: 'metadata.namespace' } },
      GRID_GOSSIP_BIND: '0.0.0.0:7946',
      GRID_ADMIN_ADDRESS: '0.0.0.0:9090',
      GRID_GATEWAY_ADDRESS: 'gateway.east.example.com:8443',
      GRID_METRICS_SCRAPER_SERVICE_ACCOUNT: 'gossip-operator-metrics-scraper',
    });
    expect(container?.env?.map((e) => e.name)).not.toContain('GRID_SWIM_ENCRYPT_KEY');
    const service = find(objects, 'Service', 'gossip-operator') as unknown as {
      spec: { ports: { name: string; protocol?: string; port: number }[] };
    };
    expect(service.spec.ports.map((p) => [p.name, p.port, p.protocol ?? 'TCP'])).toEqual([
      ['gossip-udp', 7946, 'UDP'],
      ['gossip-tcp', 7946, 'TCP'],
      ['metrics', 9090, 'TCP'],
    ]);
    expect(find(objects, 'Namespace', 'grid-system').metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe(
      'restricted',
    );
  });

  it('emits the metrics scraper ServiceAccount (get /metrics only) and lets the operator mint tokens for it alone (seed 001 "Bearer authentication")', () => {
    const c = chart();
    const op = new GossipOperator(c, 'operator', props);
    const objects = synth(c);
    expect(op.metricsScraperName).toBe('gossip-operator-metrics-scraper');
    const account = find(objects, 'ServiceAccount', 'gossip-operator-metrics-scraper') as unknown as {
      automountServiceAccountToken?: boolean;
      metadata: { namespace?: string };
    };
    expect(account.automountServiceAccountToken).toBe(false);
    expect(account.metadata.namespace).toBe('grid-system');
    expect(
      (find(objects, 'ClusterRole', 'gossip-operator-metrics-scraper') as unknown as { rules: unknown[] }).rules,
    ).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    const binding = find(objects, 'ClusterRoleBinding', 'gossip-operator-metrics-scraper') as unknown as {
      roleRef: { name: string };
      subjects: unknown[];
    };
    expect(binding.roleRef.name).toBe('gossip-operator-metrics-scraper');
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'gossip-operator-metrics-scraper', namespace: 'grid-system' },
    ]);
    const role = find(objects, 'Role', 'gossip-operator') as unknown as { rules: { resources: string[] }[] };
    expect(role.rules.filter((r) => r.resources.some((x) => x.startsWith('serviceaccounts')))).toEqual([
      {
        apiGroups: [''],
        resources: ['serviceaccounts/token'],
        verbs: ['create'],
        resourceNames: ['gossip-operator-metrics-scraper'],
      },
    ]);
  });

  it('emits no scraper account, token grant or variable with metricsScraper false', () => {
    const c = chart();
    new GossipOperator(c, 'operator', { ...props, metricsScraper: false });
    const text = JSON.stringify(synth(c));
    expect(text).not.toContain('metrics-scraper');
    expect(text).not.toContain('serviceaccounts/token');
    expect(text).not.toContain('GRID_METRICS_SCRAPER_SERVICE_ACCOUNT');
  });

  it('refuses a referenced Secret outside its namespace', () => {
    expect(
      () =>
        new GossipOperator(chart(), 'operator', {
          ...props,
          referencedSecrets: [{ name: 'ca', namespace: 'kube-system' }],
        }),
    ).toThrow(
      "test/operator: referencedSecrets: Secret kube-system/ca is outside the operator namespace grid-system. Fix: create the Secret in grid-system and reference it there, so the operator's Role stays one namespace wide",
    );
  });
});
