/**
 * The NetworkPolicy for the operator pods, rendered only when an opt-in listener (operator-listeners.ts) is on. A
 * NetworkPolicy that selects a pod isolates it for all ingress, so the policy lists every port the operator serves:
 * SWIM (UDP and TCP) and the admin listener stay open to every source exactly as without a policy (peers gossip from
 * other sites; the kubelet probes /livez and /readyz from the node; Prometheus scrapes /metrics), the gateway age
 * ingest admits only the site's gateway pods, and the peer signals and enrollment ports admit the configured CIDRs
 * (every source by default). Egress is not restricted: policyTypes is Ingress only.
 *
 * Built on the typed L1 KubeNetworkPolicy rather than kplus.NetworkPolicy: cdk8s-plus always renders a `from` list
 * for a rule, and "any source" is a rule without `from` (an ipBlock 0.0.0.0/0 is not the same: CNIs differ on
 * whether it matches in-cluster pod addresses, and it leaves out IPv6).
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { LABEL_NAME, LABEL_PART_OF, workloadLabels } from './labels.ts';
import { issueAt, type SynthIssue } from './synth-error.ts';
import { ingressPolicy, tcpPort } from './ingress-policy.ts';

/** Where a listener admits connections from. */
export interface ListenerSources {
  /**
   * Source address ranges in CIDR notation (IPv4 `203.0.113.0/24` or IPv6 `2001:db8::/32`), host bits zero. They
   * must be the addresses the pod sees: behind a LoadBalancer or NodePort Service with externalTrafficPolicy
   * Cluster the source is rewritten to a node address, so set it to Local (or list the node range) when narrowing.
   */
  readonly cidrs: readonly string[];
}

/** The gateway pods allowed to post age reports: a gateway construct by component and name, or explicit labels. */
export type GatewayAgeReporter =
  | {
      readonly component: 'consumer-gateway' | 'provider-gateway';
      /** The gateway's name: its pods carry workloadLabels(component, name) (labels.ts). */
      readonly name: string;
      /** @default - the operator namespace */
      readonly namespace?: string;
    }
  | {
      /** Labels on the reporting pods (a gateway not rendered by these constructs); at least one. */
      readonly podLabels: Readonly<Record<string, string>>;
      /** @default - the operator namespace */
      readonly namespace?: string;
    };

/** One listener port as the policy sees it; `sources` undefined means any source. */
interface PolicyPorts {
  readonly gossipPort: number;
  readonly adminPort: number;
  readonly signals?: { readonly port: number; readonly from: ListenerSources | undefined };
  readonly gatewayAge?: { readonly port: number; readonly reporters: readonly GatewayAgeReporter[] | undefined };
  readonly enrollment?: { readonly port: number; readonly from: ListenerSources | undefined };
}

export interface OperatorNetworkPolicyProps extends PolicyPorts {
  readonly name: string;
  readonly namespace: string;
  /** Labels of the operator pods (the Deployment's selector labels). */
  readonly operatorLabels: Record<string, string>;
  readonly labels: Record<string, string>;
}

const GATEWAY_COMPONENTS = ['consumer-gateway', 'provider-gateway'] as const;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u;
// Kubernetes label syntax: an optional DNS subdomain prefix, a name of at most 63 characters; values likewise.
const LABEL_KEY = /^(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/u;
const LABEL_VALUE = /^(?:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/u;

/** The address bits of an IPv4 or IPv6 literal (IPv6 may embed a dotted IPv4 tail), or undefined. */
function addressBits(address: string): { bits: bigint; width: number } | undefined {
  const v4 = (text: string): bigint => text.split('.').reduce((sum, octet) => (sum << 8n) | BigInt(Number(octet)), 0n);
  if (isIPv4(address)) return { bits: v4(address), width: 32 };
  if (!isIPv6(address) || address.includes('%')) return undefined;
  const [head = '', tail] = address.split('::');
  const groups = (text: string): bigint[] => {
    if (text === '') return [];
    return text
      .split(':')
      .flatMap((part) => (part.includes('.') ? [v4(part) >> 16n, v4(part) & 0xffffn] : [BigInt(`0x${part}`)]));
  };
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array<bigint>(8 - left.length - right.length).fill(0n), ...right];
  return { bits: all.reduce((sum, group) => (sum << 16n) | group, 0n), width: 128 };
}

/** Why `cidr` is not a CIDR the API server and every CNI read the same way, or undefined when it is one. */
export function cidrProblem(cidr: unknown): string | undefined {
  if (typeof cidr !== 'string') return `${JSON.stringify(cidr) ?? String(cidr)} is not a CIDR`;
  const shown = JSON.stringify(cidr.slice(0, 60));
  const match = /^([^/\s]+)\/(0|[1-9][0-9]{0,2})$/u.exec(cidr);
  const address = match === null ? undefined : addressBits(match[1] ?? '');
  if (match === null || address === undefined) return `${shown} is not a CIDR (address/prefix)`;
  const prefix = Number(match[2]);
  if (prefix > address.width) return `${shown} has a prefix longer than ${address.width} bits`;
  const host = (1n << BigInt(address.width - prefix)) - 1n;
  // Host bits set usually mean a typo (10.1.2.3/8 for 10.1.2.3/32); the API server would accept and widen it.
  if ((address.bits & host) !== 0n) return `${shown} has host bits set below its /${prefix} prefix`;
  return undefined;
}

function sourcesIssues(scope: Construct, field: string, from: ListenerSources | undefined): SynthIssue[] {
  if (from === undefined) return [];
  const cidrs: unknown = (from as { cidrs?: unknown }).cidrs;
  if (!Array.isArray(cidrs) || cidrs.length === 0) {
    // An empty `from` list in a NetworkPolicy rule means every source: the opposite of what an empty list reads as.
    return [
      issueAt(
        scope,
        `${field}.cidrs`,
        'no CIDR is listed',
        `list the source ranges, e.g. ["203.0.113.0/24"], or omit ${field} to admit every source`,
      ),
    ];
  }
  return cidrs.flatMap((cidr: unknown, index) => {
    const problem = cidrProblem(cidr);
    return problem === undefined
      ? []
      : [
          issueAt(
            scope,
            `${field}.cidrs[${index}]`,
            problem,
            'use an IPv4 or IPv6 network in CIDR notation with the host bits zero, e.g. 203.0.113.0/24 or 2001:db8::/32',
          ),
        ];
  });
}

function reporterIssues(scope: Construct, reporters: readonly GatewayAgeReporter[] | undefined): SynthIssue[] {
  if (reporters === undefined) return [];
  const field = 'gatewayAgeIngest.gateways';
  if (!Array.isArray(reporters) || reporters.length === 0) {
    return [
      issueAt(
        scope,
        field,
        'no gateway is listed, so nothing could report',
        'name the gateways that post age reports, or omit gateways for every AGN gateway of the operator namespace',
      ),
    ];
  }
  const issues: SynthIssue[] = [];
  reporters.forEach((reporter, index) => {
    const at = `${field}[${index}]`;
    if (reporter.namespace !== undefined && !DNS_LABEL.test(reporter.namespace)) {
      issues.push(
        issueAt(
          scope,
          `${at}.namespace`,
          `"${String(reporter.namespace).slice(0, 80)}" is not a namespace name`,
          'use a DNS-1123 label, or omit it for the operator namespace',
        ),
      );
    }
    if ('podLabels' in reporter) {
      const entries = Object.entries(reporter.podLabels ?? {});
      if (entries.length === 0)
        issues.push(
          issueAt(
            scope,
            `${at}.podLabels`,
            'no label is given, which would select every pod of the namespace',
            'give the labels only the reporting gateway pods carry',
          ),
        );
      for (const [key, value] of entries) {
        if (!LABEL_KEY.test(key) || typeof value !== 'string' || !LABEL_VALUE.test(value)) {
          issues.push(
            issueAt(
              scope,
              `${at}.podLabels`,
              `${JSON.stringify(key).slice(0, 80)}: ${JSON.stringify(value)?.slice(0, 80)} is not a valid label`,
              'use Kubernetes label syntax for keys and values',
            ),
          );
        }
      }
    } else {
      if (!(GATEWAY_COMPONENTS as readonly unknown[]).includes(reporter.component)) {
        issues.push(
          issueAt(
            scope,
            `${at}.component`,
            `${JSON.stringify(reporter.component)} is not a gateway component`,
            `use ${GATEWAY_COMPONENTS.join(' or ')}`,
          ),
        );
      }
      if (typeof reporter.name !== 'string' || !DNS_LABEL.test(reporter.name)) {
        issues.push(
          issueAt(
            scope,
            `${at}.name`,
            `${JSON.stringify(reporter.name)?.slice(0, 80)} is not a gateway name`,
            "use the gateway construct's name (a DNS-1123 label)",
          ),
        );
      }
    }
  });
  return issues;
}

/** The synth-time problems of the listeners' source restrictions (the `from` and `gateways` props). */
export function sourceIssues(
  scope: Construct,
  props: {
    peerSignals?: { from?: ListenerSources };
    gatewayAgeIngest?: { gateways?: readonly GatewayAgeReporter[] };
    enrollment?: { from?: ListenerSources };
  },
): SynthIssue[] {
  return [
    ...(props.peerSignals === undefined ? [] : sourcesIssues(scope, 'peerSignals.from', props.peerSignals.from)),
    ...(props.gatewayAgeIngest === undefined ? [] : reporterIssues(scope, props.gatewayAgeIngest.gateways)),
    ...(props.enrollment === undefined ? [] : sourcesIssues(scope, 'enrollment.from', props.enrollment.from)),
  ];
}

function cidrPeers(from: ListenerSources | undefined): kplus.k8s.NetworkPolicyPeer[] | undefined {
  return from === undefined ? undefined : from.cidrs.map((cidr) => ({ ipBlock: { cidr } }));
}

function reporterPeers(
  namespace: string,
  reporters: readonly GatewayAgeReporter[] | undefined,
): kplus.k8s.NetworkPolicyPeer[] {
  if (reporters === undefined) {
    // Every gateway pod these constructs render in the operator's namespace: a site's gateways live there.
    return [
      {
        podSelector: {
          matchLabels: { [LABEL_PART_OF]: 'agn' },
          matchExpressions: [{ key: LABEL_NAME, operator: 'In', values: [...GATEWAY_COMPONENTS] }],
        },
      },
    ];
  }
  return reporters.map((reporter) => {
    const labels =
      'podLabels' in reporter ? { ...reporter.podLabels } : workloadLabels(reporter.component, reporter.name);
    const other = reporter.namespace !== undefined && reporter.namespace !== namespace;
    // Without a namespaceSelector a podSelector peer means the policy's own namespace; kubernetes.io/metadata.name
    // is the label the API server sets on every namespace, so it needs no labelling by hand.
    return other
      ? {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': reporter.namespace ?? namespace } },
          podSelector: { matchLabels: labels },
        }
      : { podSelector: { matchLabels: labels } };
  });
}

/** The ingress rules, the operator's existing ports first, then one rule per listener that is on. */
export function operatorIngressRules(
  props: PolicyPorts & { readonly namespace: string },
): kplus.k8s.NetworkPolicyIngressRule[] {
  const rules: kplus.k8s.NetworkPolicyIngressRule[] = [
    // Reachable from anywhere, as without the policy: SWIM peers are at other sites, probes come from the node.
    {
      ports: [
        { port: kplus.k8s.IntOrString.fromNumber(props.gossipPort), protocol: 'UDP' },
        tcpPort(props.gossipPort),
        tcpPort(props.adminPort),
      ],
    },
  ];
  const rule = (port: number, from: kplus.k8s.NetworkPolicyPeer[] | undefined): kplus.k8s.NetworkPolicyIngressRule =>
    from === undefined ? { ports: [tcpPort(port)] } : { from, ports: [tcpPort(port)] };
  if (props.signals !== undefined) rules.push(rule(props.signals.port, cidrPeers(props.signals.from)));
  if (props.gatewayAge !== undefined)
    rules.push(rule(props.gatewayAge.port, reporterPeers(props.namespace, props.gatewayAge.reporters)));
  if (props.enrollment !== undefined) rules.push(rule(props.enrollment.port, cidrPeers(props.enrollment.from)));
  return rules;
}

/** Renders the policy (call after the issues were checked). */
export function operatorNetworkPolicy(
  scope: Construct,
  id: string,
  props: OperatorNetworkPolicyProps,
): kplus.k8s.KubeNetworkPolicy {
  return ingressPolicy(scope, id, {
    name: props.name,
    namespace: props.namespace,
    labels: props.labels,
    podLabels: props.operatorLabels,
    ingress: operatorIngressRules(props),
  });
}
