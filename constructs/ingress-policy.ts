import type { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';

/** One TCP port of a NetworkPolicy rule. */
export const tcpPort = (port: number): kplus.k8s.NetworkPolicyPort => ({
  port: kplus.k8s.IntOrString.fromNumber(port),
  protocol: 'TCP',
});

export interface IngressPolicyProps {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  /** The pods the policy isolates. */
  readonly podLabels: Record<string, string>;
  readonly ingress: kplus.k8s.NetworkPolicyIngressRule[];
}

/** An ingress-only NetworkPolicy: the selected pods accept exactly `ingress` (the node's probes are always allowed). */
export function ingressPolicy(scope: Construct, id: string, props: IngressPolicyProps): kplus.k8s.KubeNetworkPolicy {
  return new kplus.k8s.KubeNetworkPolicy(scope, id, {
    metadata: { name: props.name, namespace: props.namespace, labels: props.labels },
    spec: { podSelector: { matchLabels: props.podLabels }, policyTypes: ['Ingress'], ingress: props.ingress },
  });
}
