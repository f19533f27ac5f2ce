/**
 * The NetworkPolicy that justifies a gateway's `insecure_options.allow_public_admin: true`. The admin listener binds
 * every address because the kubelet's probes dial the pod IP; this policy isolates the gateway pods for ingress so
 * that only the listener port is open to every source (consumers call the edge; remote consumers' mTLS hops reach
 * the provider gateway), while the admin port (/livez, /readyz, /metrics) and a sidecar's health port are reached only from the node, which
 * Kubernetes always allows ("traffic to and from the node where a Pod is running is always allowed"), and from
 * the metrics scrapers' CIDRs a declaration lists. A site whose operator serves the fleet dashboard admits the
 * operator pods to the admin and overlay-sync ports it reads (never the listener's traffic path, which stays as it is).
 * Egress is not restricted: policyTypes is Ingress only.
 *
 * Built on the typed L1 KubeNetworkPolicy for the same reason as operator-network-policy.ts: "any source" is a rule
 * without `from`, which cdk8s-plus cannot render.
 */
import type { Construct } from 'constructs';
import type * as kplus from 'cdk8s-plus-28';
import { cidrProblem, type ListenerSources } from './operator-network-policy.ts';
import { issueAt, type SynthIssue } from './synth-error.ts';
import { ingressPolicy, tcpPort } from './ingress-policy.ts';

export interface GatewayNetworkPolicyProps {
  readonly name: string;
  readonly namespace: string;
  /** The gateway pods (the Deployment's selector labels). */
  readonly podLabels: Record<string, string>;
  readonly labels: Record<string, string>;
  readonly listenerPort: number;
  /** The admin port and any sidecar health/metrics ports of the pod (overlay-sync's on a consumer). */
  readonly scrapePorts: readonly number[];
  /** Prometheus (or another scraper) by source CIDR; absent: only the node reaches the scrape ports. */
  readonly metricsScrapers?: ListenerSources;
  /**
   * The site operator's pods (same namespace), reading the admin endpoints for the fleet dashboard.
   * @default - none
   */
  readonly dashboardReader?: { readonly podLabels: Record<string, string>; readonly ports: readonly number[] };
}

/** Synth-time problems of the metricsScrapers prop. */
export function metricsScraperIssues(scope: Construct, scrapers: ListenerSources | undefined): SynthIssue[] {
  if (scrapers === undefined) return [];
  const cidrs: unknown = (scrapers as { cidrs?: unknown }).cidrs;
  if (!Array.isArray(cidrs) || cidrs.length === 0) {
    // An empty `from` would admit every source to the admin port: the opposite of what an empty list reads as.
    return [
      issueAt(
        scope,
        'metricsScrapers.cidrs',
        'no CIDR is listed',
        'list the scrapers\' source ranges, e.g. ["10.42.0.0/16"], or omit metricsScrapers',
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
            `metricsScrapers.cidrs[${index}]`,
            problem,
            'use an IPv4 or IPv6 network in CIDR notation with the host bits zero',
          ),
        ];
  });
}

/**
 * The ingress rules: the listener from anywhere, the scrape ports from the scrapers (the node needs no rule), the
 * dashboard's ports from the operator pods.
 */
export function gatewayIngressRules(
  props: Pick<GatewayNetworkPolicyProps, 'listenerPort' | 'scrapePorts' | 'metricsScrapers' | 'dashboardReader'>,
): kplus.k8s.NetworkPolicyIngressRule[] {
  const rules: kplus.k8s.NetworkPolicyIngressRule[] = [{ ports: [tcpPort(props.listenerPort)] }];
  if (props.metricsScrapers !== undefined) {
    rules.push({
      from: props.metricsScrapers.cidrs.map((cidr) => ({ ipBlock: { cidr } })),
      ports: props.scrapePorts.map(tcpPort),
    });
  }
  if (props.dashboardReader !== undefined) {
    rules.push({
      from: [{ podSelector: { matchLabels: { ...props.dashboardReader.podLabels } } }],
      ports: props.dashboardReader.ports.map(tcpPort),
    });
  }
  return rules;
}

export function gatewayNetworkPolicy(
  scope: Construct,
  id: string,
  props: GatewayNetworkPolicyProps,
): kplus.k8s.KubeNetworkPolicy {
  return ingressPolicy(scope, id, {
    name: props.name,
    namespace: props.namespace,
    labels: props.labels,
    podLabels: props.podLabels,
    ingress: gatewayIngressRules(props),
  });
}
