// The fleet dashboard's access as compiled: the operator's env and token volume, the pod list/watch rule from the
// permission table, and the consumer gateway NetworkPolicy rule that lets the operator read the replicas.
import { describe, expect, it } from 'vitest';
import { Testing } from 'cdk8s';
import { GossipOperator, type GossipOperatorProps } from '../../constructs/gossip-operator.ts';
import { buildGrid } from '../../constructs/grid.ts';
import { chart, find, podSpec, synth, twoSiteGrid, type Manifest } from './helpers.ts';
import { synthFailure } from './synth-failure.ts';

const base: GossipOperatorProps = {
  namespace: 'grid-system',
  network: 'demo',
  site: 'east',
  overlayConfigMaps: ['grid-overlay-demo-consumer-gateway'],
  referencedSecrets: [],
};

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

function operator(extra: Partial<GossipOperatorProps>): {
  env: Record<string, string | undefined>;
  pod: ReturnType<typeof podSpec>;
  rules: Rule[];
} {
  const c = chart();
  new GossipOperator(c, 'operator', { ...base, ...extra });
  const objects = synth(c);
  const pod = podSpec(find(objects, 'Deployment', 'gossip-operator'));
  const env = Object.fromEntries((pod.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
  return { env, pod, rules: (find(objects, 'Role', 'gossip-operator') as unknown as { rules: Rule[] }).rules };
}

const podRules = (rules: Rule[]) => rules.filter((r) => r.resources.includes('pods'));

describe('GossipOperator dashboard', () => {
  it('renders nothing by default (the operator is off on its public bind) and GRID_DASHBOARD=off when declared off', () => {
    const plain = operator({ dashboardGateways: ['consumer-gateway'] });
    expect(Object.keys(plain.env).filter((k) => k.startsWith('GRID_DASHBOARD'))).toEqual([]);
    expect(plain.pod.volumes?.map((v) => v.name)).toEqual(['tmp']);
    expect(podRules(plain.rules)).toEqual([]);
    const off = operator({ dashboard: { access: 'off' }, dashboardGateways: ['consumer-gateway'] });
    expect(off.env['GRID_DASHBOARD']).toBe('off');
    expect(off.env['GRID_DASHBOARD_TOKEN_FILE']).toBeUndefined();
    expect(podRules(off.rules)).toEqual([]);
  });

  it('with token access mounts the token Secret as a directory and may list and watch pods of its namespace', () => {
    const { env, pod, rules } = operator({ dashboard: { access: 'token' }, dashboardGateways: ['consumer-gateway'] });
    expect(env['GRID_DASHBOARD']).toBe('token');
    expect(env['GRID_DASHBOARD_TOKEN_FILE']).toBe('/etc/grid/dashboard-token/token');
    expect(pod.volumes?.find((v) => v.name === 'dashboard-token')).toEqual({
      name: 'dashboard-token',
      projected: {
        defaultMode: 0o440,
        sources: [{ secret: { name: 'grid-dashboard-token', items: [{ key: 'token', path: 'token' }] } }],
      },
    });
    // A directory mount, never subPath: the kubelet swaps a rotated Secret in only then.
    expect(pod.containers[0]?.volumeMounts?.find((m) => m.name === 'dashboard-token')).toEqual({
      name: 'dashboard-token',
      mountPath: '/etc/grid/dashboard-token',
      readOnly: true,
    });
    expect(podRules(rules)).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] }]);
    // The token itself is never in the manifest, and the admin port (probes, metrics) is unchanged.
    expect(JSON.stringify(pod)).not.toMatch(/"token":/u);
    expect(pod.containers[0]?.env?.find((e) => e.name === 'GRID_ADMIN_ADDRESS')?.value).toBe('0.0.0.0:9090');
  });

  it('names another token Secret when given, and grants no pod access without a consumer gateway to read', () => {
    const { pod, rules } = operator({ dashboard: { access: 'token', tokenSecret: 'ops-dashboard' } });
    expect(JSON.stringify(pod.volumes)).toContain('"name":"ops-dashboard"');
    expect(podRules(rules)).toEqual([]);
  });

  it('refuses an open dashboard and a bad Secret name at synth', () => {
    expect(synthFailure(() => operator({ dashboard: { access: 'open' } as never }))).toContain(
      'dashboard.access: "open" is not a dashboard access of a cluster',
    );
    expect(synthFailure(() => operator({ dashboard: { access: 'token', tokenSecret: 'Bad_Name' } }))).toContain(
      'dashboard.tokenSecret: "Bad_Name" is not a Secret name',
    );
  });
});

function site(declaration: ReturnType<typeof twoSiteGrid>, name: string): Manifest[] {
  const built = buildGrid(Testing.app(), declaration);
  return Testing.synth(built.sites.find((s) => s.siteName === name)!) as Manifest[];
}

type Ingress = { from?: unknown[]; ports: { port: number; protocol: string }[] }[];
const ingress = (objects: Manifest[], name: string): Ingress =>
  (find(objects, 'NetworkPolicy', name) as unknown as { spec: { ingress: Ingress } }).spec.ingress;

describe('GridSiteStack dashboard', () => {
  it("admits the operator pods to the consumer replicas' admin and overlay-sync ports only when the site serves the dashboard", () => {
    const withToken = site(
      twoSiteGrid({ a: { dashboard: { access: 'token' }, secrets: { dashboardToken: 'site-a-dashboard' } } }),
      'a',
    );
    expect(ingress(withToken, 'consumer-gateway')).toEqual([
      { ports: [{ port: 8080, protocol: 'TCP' }] },
      {
        from: [
          {
            podSelector: {
              matchLabels: {
                'app.kubernetes.io/instance': 'gossip-operator',
                'app.kubernetes.io/name': 'gossip-operator',
                'app.kubernetes.io/part-of': 'agn',
              },
            },
          },
        ],
        ports: [
          { port: 9901, protocol: 'TCP' },
          { port: 9091, protocol: 'TCP' },
        ],
      },
    ]);
    // The provider gateway is not read by the dashboard: its policy is unchanged.
    expect(JSON.stringify(ingress(withToken, 'provider-gateway'))).not.toContain('gossip-operator');
    const operatorPod = podSpec(find(withToken, 'Deployment', 'gossip-operator'));
    expect(JSON.stringify(operatorPod.volumes)).toContain('"name":"site-a-dashboard"');
    expect(
      (find(withToken, 'Role', 'gossip-operator') as unknown as { rules: Rule[] }).rules.filter((r) =>
        r.resources.includes('pods'),
      ),
    ).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] }]);

    for (const declared of [undefined, { access: 'off' as const }]) {
      const objects = site(twoSiteGrid({ a: declared === undefined ? {} : { dashboard: declared } }), 'a');
      expect(ingress(objects, 'consumer-gateway')).toEqual([{ ports: [{ port: 8080, protocol: 'TCP' }] }]);
      expect(
        (find(objects, 'Role', 'gossip-operator') as unknown as { rules: Rule[] }).rules.filter((r) =>
          r.resources.includes('pods'),
        ),
      ).toEqual([]);
    }
  });
});
