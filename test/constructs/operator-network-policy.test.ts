import { describe, expect, it } from 'vitest';
import { Testing } from 'cdk8s';
import { GossipOperator, type GossipOperatorProps } from '../../constructs/gossip-operator.ts';
import { GridSiteStack } from '../../constructs/grid-site-stack.ts';
import { cidrProblem } from '../../constructs/operator-network-policy.ts';
import { synthFailure } from './synth-failure.ts';
import { chart, find, podSpec, simProvider, site, synth, type Manifest } from './helpers.ts';
import { validateKubernetesObject } from './k8s-schema.ts';

const base: GossipOperatorProps = {
  namespace: 'grid-system',
  network: 'demo',
  site: 'east',
  overlayConfigMaps: [],
  referencedSecrets: [],
};
const enrollment = { siteCertificateSecret: 'grid-site-cert', gridCaSecret: 'grid-ca-signing' } as const;

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
interface Peer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface Rule {
  from?: Peer[];
  ports: { port: number; protocol: string }[];
}
interface Policy {
  metadata: { name: string; namespace: string };
  spec: { podSelector: LabelSelector; policyTypes: string[]; ingress: Rule[] };
}

function render(extra: Partial<GossipOperatorProps>): Manifest[] {
  const c = chart();
  new GossipOperator(c, 'operator', { ...base, ...extra });
  return synth(c);
}

function policies(objects: Manifest[]): Policy[] {
  return objects.filter((o) => o.kind === 'NetworkPolicy') as unknown as Policy[];
}

function operatorPolicy(objects: Manifest[]): Policy {
  return find(objects, 'NetworkPolicy', 'gossip-operator') as unknown as Policy;
}

/** Kubernetes label selector semantics (the operators this code renders, plus NotIn/Exists for honesty). */
function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  const byExpressions = (selector.matchExpressions ?? []).every((e) => {
    const value = labels[e.key];
    if (e.operator === 'In') return value !== undefined && (e.values ?? []).includes(value);
    if (e.operator === 'NotIn') return value === undefined || !(e.values ?? []).includes(value);
    if (e.operator === 'Exists') return value !== undefined;
    if (e.operator === 'DoesNotExist') return value === undefined;
    throw new Error(`operator ${e.operator}`);
  });
  return byLabels && byExpressions;
}

/** Whether a rule admits a pod (labels, namespace) of the cluster, for a policy of namespace `policyNamespace`. */
function admitsPod(
  rule: Rule,
  policyNamespace: string,
  pod: { labels: Record<string, string>; namespace: string },
): boolean {
  if (rule.from === undefined) return true;
  return rule.from.some((peer) => {
    if (peer.ipBlock !== undefined) return false;
    const nsLabels = { 'kubernetes.io/metadata.name': pod.namespace };
    const nsOk =
      peer.namespaceSelector === undefined
        ? pod.namespace === policyNamespace
        : selects(peer.namespaceSelector, nsLabels);
    return nsOk && (peer.podSelector === undefined || selects(peer.podSelector, pod.labels));
  });
}

function podLabels(objects: Manifest[], deployment: string): Record<string, string> {
  const d = find(objects, 'Deployment', deployment) as unknown as {
    spec: { template: { metadata: { labels: Record<string, string> } } };
  };
  return d.spec.template.metadata.labels;
}

/** The rule that opens `port`/`protocol`; exactly one must. */
function ruleFor(policy: Policy, port: number, protocol = 'TCP'): Rule {
  const found = policy.spec.ingress.filter((rule) =>
    rule.ports.some((p) => p.port === port && p.protocol === protocol),
  );
  expect(found, `rules for ${protocol}/${port}`).toHaveLength(1);
  return found[0] as Rule;
}

const combinations: Partial<GossipOperatorProps>[] = [
  { peerSignals: {} },
  { gatewayAgeIngest: {} },
  { enrollment },
  { peerSignals: {}, gatewayAgeIngest: {} },
  { peerSignals: {}, enrollment },
  { gatewayAgeIngest: {}, enrollment },
  { peerSignals: {}, gatewayAgeIngest: {}, enrollment },
];

describe('GossipOperator NetworkPolicy', () => {
  it('renders no NetworkPolicy without an opt-in listener, so the operator stays unisolated as before', () => {
    expect(policies(render({}))).toEqual([]);
    const stack = Testing.synth(
      new GridSiteStack(Testing.app(), 'east', {
        network: { name: 'net' },
        site: site('east', { providers: [simProvider('pa', ['m1'])] }),
      }),
    ) as Manifest[];
    // The backend's and the provider gateway's own policies (gateway-network-policy.ts); none selects the operator.
    expect(policies(stack).map((p) => p.metadata.name)).toEqual(['backend-pa', 'provider-gateway']);
  });

  it.each(combinations.map((props) => [Object.keys(props).join('+'), props] as const))(
    '%s: selects the operator pods, and every port the container serves is in exactly one rule',
    (_name, props) => {
      const objects = render(props);
      const policy = operatorPolicy(objects);
      expect(policy.metadata).toMatchObject({ name: 'gossip-operator', namespace: 'grid-system' });
      expect(policy.spec.policyTypes).toEqual(['Ingress']);
      expect(selects(policy.spec.podSelector, podLabels(objects, 'gossip-operator'))).toBe(true);
      const container = podSpec(find(objects, 'Deployment', 'gossip-operator')).containers[0] as unknown as {
        ports: { containerPort: number; protocol?: string }[];
        livenessProbe: { httpGet: { port: number } };
        readinessProbe: { httpGet: { port: number } };
      };
      const served = container.ports.map((p) => `${p.protocol ?? 'TCP'}/${p.containerPort}`).sort();
      const opened = policy.spec.ingress.flatMap((rule) => rule.ports.map((p) => `${p.protocol}/${p.port}`)).sort();
      expect(opened).toEqual(served);
      // SWIM (both protocols) and admin keep their reachability: a rule without `from` admits every source, so
      // peers at other sites gossip and the kubelet's probes (from the node) and scrapers reach /livez, /readyz, /metrics.
      for (const [port, protocol] of [
        [7946, 'UDP'],
        [7946, 'TCP'],
        [9090, 'TCP'],
        [container.livenessProbe.httpGet.port, 'TCP'],
        [container.readinessProbe.httpGet.port, 'TCP'],
      ] as const) {
        expect(ruleFor(policy, port, protocol).from).toBeUndefined();
      }
      if (props.peerSignals !== undefined)
        expect(ruleFor(policy, 7950)).toEqual({ ports: [{ port: 7950, protocol: 'TCP' }] });
      if (props.enrollment !== undefined)
        expect(ruleFor(policy, 9443)).toEqual({ ports: [{ port: 9443, protocol: 'TCP' }] });
      if (props.gatewayAgeIngest !== undefined) expect(ruleFor(policy, 7951).from).toBeDefined();
      expect(validateKubernetesObject(policy as unknown as Record<string, unknown>)).toEqual([]);
    },
  );

  it('custom ports move with the listeners, and the SWIM/admin rule follows gossipPort and adminPort', () => {
    const policy = operatorPolicy(
      render({
        gossipPort: 8946,
        adminPort: 9100,
        peerSignals: { port: 8950 },
        gatewayAgeIngest: { port: 8951 },
        enrollment: { ...enrollment, port: 8443 },
      }),
    );
    expect(policy.spec.ingress.map((rule) => rule.ports.map((p) => `${p.protocol}/${p.port}`))).toEqual([
      ['UDP/8946', 'TCP/8946', 'TCP/9100'],
      ['TCP/8950'],
      ['TCP/8951'],
      ['TCP/8443'],
    ]);
  });

  it('gateway age ingest in a site stack admits exactly the pods of the gateways the stack renders', () => {
    const objects = Testing.synth(
      new GridSiteStack(Testing.app(), 'east', {
        network: { name: 'net' },
        site: site('east', {
          consumerGateway: { name: 'cgw' },
          providerGateway: { name: 'pgw', trustedPeers: [{ organization: 'test-consumers' }] },
          providers: [simProvider('pa', ['m1'])],
          gatewayAgeIngest: {},
        }),
      }),
    ) as Manifest[];
    const policy = operatorPolicy(objects);
    const rule = ruleFor(policy, 7951);
    const pod = (deployment: string) => ({ labels: podLabels(objects, deployment), namespace: 'grid-system' });
    expect(admitsPod(rule, 'grid-system', pod('cgw'))).toBe(true);
    expect(admitsPod(rule, 'grid-system', pod('pgw'))).toBe(true);
    // Not the operator itself, not the simulated backend, not a same-named gateway of another namespace.
    expect(admitsPod(rule, 'grid-system', pod('gossip-operator'))).toBe(false);
    expect(admitsPod(rule, 'grid-system', pod('sim-pa'))).toBe(false);
    expect(admitsPod(rule, 'grid-system', { ...pod('cgw'), namespace: 'elsewhere' })).toBe(false);
    // Nor another gateway of the same namespace that this site does not declare.
    expect(
      admitsPod(rule, 'grid-system', {
        labels: { ...pod('cgw').labels, 'app.kubernetes.io/instance': 'other' },
        namespace: 'grid-system',
      }),
    ).toBe(false);
    expect(selects(policy.spec.podSelector, podLabels(objects, 'gossip-operator'))).toBe(true);
    expect(selects(policy.spec.podSelector, podLabels(objects, 'cgw'))).toBe(false);
  });

  it('gateway age ingest of a standalone operator admits every AGN gateway pod of its namespace by default', () => {
    const rule = ruleFor(operatorPolicy(render({ gatewayAgeIngest: {} })), 7951);
    const stack = Testing.synth(
      new GridSiteStack(Testing.app(), 'a', {
        network: { name: 'net' },
        site: site('a', { consumerGateway: {}, providers: [simProvider('pa', ['m1'])] }),
      }),
    ) as Manifest[];
    for (const gateway of ['consumer-gateway', 'provider-gateway']) {
      expect(admitsPod(rule, 'grid-system', { labels: podLabels(stack, gateway), namespace: 'grid-system' })).toBe(
        true,
      );
      expect(admitsPod(rule, 'grid-system', { labels: podLabels(stack, gateway), namespace: 'other' })).toBe(false);
    }
    for (const other of ['gossip-operator', 'sim-pa'])
      expect(admitsPod(rule, 'grid-system', { labels: podLabels(stack, other), namespace: 'grid-system' })).toBe(false);
    expect(
      admitsPod(rule, 'grid-system', {
        labels: { 'app.kubernetes.io/name': 'consumer-gateway' },
        namespace: 'grid-system',
      }),
    ).toBe(false);
  });

  it('gateways in another namespace are selected through kubernetes.io/metadata.name, explicit podLabels as given', () => {
    const rule = ruleFor(
      operatorPolicy(
        render({
          gatewayAgeIngest: {
            gateways: [
              { component: 'consumer-gateway', name: 'edge', namespace: 'gateways' },
              { component: 'provider-gateway', name: 'pgw', namespace: 'grid-system' },
              { podLabels: { app: 'praxis' } },
            ],
          },
        }),
      ),
      7951,
    );
    expect(rule.from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'gateways' } },
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'consumer-gateway',
            'app.kubernetes.io/instance': 'edge',
            'app.kubernetes.io/part-of': 'agn',
          },
        },
      },
      {
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'provider-gateway',
            'app.kubernetes.io/instance': 'pgw',
            'app.kubernetes.io/part-of': 'agn',
          },
        },
      },
      { podSelector: { matchLabels: { app: 'praxis' } } },
    ]);
    // The stack keeps an explicit list instead of replacing it with its own gateways.
    const objects = Testing.synth(
      new GridSiteStack(Testing.app(), 'a', {
        network: { name: 'net' },
        site: site('a', {
          consumerGateway: {},
          providers: [simProvider('pa', ['m1'])],
          gatewayAgeIngest: { gateways: [{ podLabels: { app: 'praxis' } }] },
        }),
      }),
    ) as Manifest[];
    expect(ruleFor(operatorPolicy(objects), 7951).from).toEqual([{ podSelector: { matchLabels: { app: 'praxis' } } }]);
  });

  it('peerSignals.from and enrollment.from narrow their port to the listed CIDRs (IPv4 and IPv6); SWIM and admin stay open', () => {
    const policy = operatorPolicy(
      render({
        peerSignals: { from: { cidrs: ['203.0.113.0/24', '2001:db8::/32'] } },
        enrollment: { ...enrollment, from: { cidrs: ['198.51.100.7/32'] } },
      }),
    );
    expect(ruleFor(policy, 7950)).toEqual({
      from: [{ ipBlock: { cidr: '203.0.113.0/24' } }, { ipBlock: { cidr: '2001:db8::/32' } }],
      ports: [{ port: 7950, protocol: 'TCP' }],
    });
    expect(ruleFor(policy, 9443)).toEqual({
      from: [{ ipBlock: { cidr: '198.51.100.7/32' } }],
      ports: [{ port: 9443, protocol: 'TCP' }],
    });
    expect(ruleFor(policy, 7946, 'UDP').from).toBeUndefined();
    expect(ruleFor(policy, 9090).from).toBeUndefined();
    expect(validateKubernetesObject(policy as unknown as Record<string, unknown>)).toEqual([]);
  });

  it('cidrProblem accepts networks and names what is wrong with the rest', () => {
    for (const good of [
      '0.0.0.0/0',
      '10.0.0.0/8',
      '192.168.1.1/32',
      '::/0',
      '2001:db8::/32',
      'fe80::1/128',
      '::ffff:10.0.0.0/104',
      '2001:db8:0:0:0:0:0:0/64',
    ]) {
      expect(cidrProblem(good), good).toBeUndefined();
    }
    expect(cidrProblem('10.0.0.0')).toBe('"10.0.0.0" is not a CIDR (address/prefix)');
    expect(cidrProblem('10.0.0.0/33')).toBe('"10.0.0.0/33" has a prefix longer than 32 bits');
    expect(cidrProblem('2001:db8::/129')).toBe('"2001:db8::/129" has a prefix longer than 128 bits');
    expect(cidrProblem('10.1.2.3/8')).toBe('"10.1.2.3/8" has host bits set below its /8 prefix');
    expect(cidrProblem('fe80::1/64')).toBe('"fe80::1/64" has host bits set below its /64 prefix');
    for (const bad of [
      '300.0.0.0/8',
      '10.0.0/8',
      '10.0.0.0/08',
      '10.0.0.0/-1',
      ' 10.0.0.0/8',
      'fe80::1%eth0/128',
      'example.com/24',
      '',
      '/8',
    ]) {
      expect(cidrProblem(bad), bad).toMatch(/is not a CIDR/u);
    }
    expect(cidrProblem(42)).toBe('42 is not a CIDR');
  });

  it('refuses a bad or empty CIDR list, naming the prop and the entry', () => {
    expect(synthFailure(() => render({ peerSignals: { from: { cidrs: ['203.0.113.0/24', '10.0.0.1/8'] } } }))).toBe(
      'test/operator: peerSignals.from.cidrs[1]: "10.0.0.1/8" has host bits set below its /8 prefix. Fix: use an IPv4 or IPv6 network in CIDR notation with the host bits zero, e.g. 203.0.113.0/24 or 2001:db8::/32',
    );
    expect(synthFailure(() => render({ enrollment: { ...enrollment, from: { cidrs: ['anywhere'] } } }))).toContain(
      'enrollment.from.cidrs[0]: "anywhere" is not a CIDR',
    );
    expect(synthFailure(() => render({ enrollment: { ...enrollment, from: { cidrs: [] } } }))).toBe(
      'test/operator: enrollment.from.cidrs: no CIDR is listed. Fix: list the source ranges, e.g. ["203.0.113.0/24"], or omit enrollment.from to admit every source',
    );
    // A JavaScript caller can pass no list at all; same message, no crash.
    expect(synthFailure(() => render({ peerSignals: { from: {} as never } }))).toContain(
      'peerSignals.from.cidrs: no CIDR is listed',
    );
    // Through the site declaration the error names the site operator.
    expect(
      synthFailure(
        () =>
          new GridSiteStack(Testing.app(), 'east', {
            network: { name: 'net' },
            site: site('east', { providerGateway: undefined, peerSignals: { from: { cidrs: ['10.0.0.0/40'] } } }),
          }),
      ),
    ).toContain('east/gossip-operator: peerSignals.from.cidrs[0]: "10.0.0.0/40" has a prefix longer than 32 bits');
  });

  it('refuses an empty or malformed gateway list for the ingest, naming the entry', () => {
    expect(synthFailure(() => render({ gatewayAgeIngest: { gateways: [] } }))).toContain(
      'gatewayAgeIngest.gateways: no gateway is listed, so nothing could report',
    );
    const many = synthFailure(() =>
      render({
        gatewayAgeIngest: {
          gateways: [
            { component: 'consumer-gateway', name: 'Edge_1' },
            { component: 'inference-backend' as never, name: 'x', namespace: 'No Such' },
            { podLabels: {} },
            { podLabels: { 'bad key!': 'v' } },
          ],
        },
      }),
    );
    expect(many.split('\n')).toEqual([
      'test/operator: gatewayAgeIngest.gateways[0].name: "Edge_1" is not a gateway name. Fix: use the gateway construct\'s name (a DNS-1123 label)',
      'test/operator: gatewayAgeIngest.gateways[1].namespace: "No Such" is not a namespace name. Fix: use a DNS-1123 label, or omit it for the operator namespace',
      'test/operator: gatewayAgeIngest.gateways[1].component: "inference-backend" is not a gateway component. Fix: use consumer-gateway or provider-gateway',
      'test/operator: gatewayAgeIngest.gateways[2].podLabels: no label is given, which would select every pod of the namespace. Fix: give the labels only the reporting gateway pods carry',
      'test/operator: gatewayAgeIngest.gateways[3].podLabels: "bad key!": "v" is not a valid label. Fix: use Kubernetes label syntax for keys and values',
    ]);
  });
});
