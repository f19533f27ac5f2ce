import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';

export interface BackendNetworkPolicyProps {
  readonly namespace: string;
  /** Name of the policy. */
  readonly name: string;
  /** Labels of the private backend pods this policy isolates. */
  readonly backendLabels: Record<string, string>;
  /** The backend port the allowed peers may reach. */
  readonly port: number;
  /** Labels of the provider gateway pods (they forward authorized requests). */
  readonly providerGatewayLabels: Record<string, string>;
  /** Labels of the operator pods (health, metrics and model-discovery probes). */
  readonly operatorLabels: Record<string, string>;
  /** Extra labels for every object this construct emits. @default - none (the workload labels only) */
  readonly labels?: Record<string, string>;
}

/**
 * Isolates one private backend: ingress only from its provider gateway and the operator, on the backend port.
 * Everything else, consumer gateways included, is denied, so the provider gateway stays the only way in
 * (consumers route to provider gateways, never directly to private inference endpoints).
 */
export class BackendNetworkPolicy extends Construct {
  readonly policy: kplus.NetworkPolicy;
  private readonly port: number;

  constructor(scope: Construct, id: string, props: BackendNetworkPolicyProps) {
    super(scope, id);
    this.port = props.port;
    this.policy = new kplus.NetworkPolicy(this, 'Policy', {
      metadata: { name: props.name, namespace: props.namespace, labels: props.labels ?? {} },
      selector: kplus.Pods.select(this, 'Backend', { labels: props.backendLabels }),
      ingress: { default: kplus.NetworkPolicyTrafficDefault.DENY },
    });
    this.allowFrom('ProviderGateway', props.providerGatewayLabels);
    this.allowFrom('Operator', props.operatorLabels);
  }

  /** Allows one more peer (pods of the policy's namespace with these labels) on the backend port. */
  allowFrom(id: string, labels: Record<string, string>): void {
    this.policy.addIngressRule(kplus.Pods.select(this, id, { labels }), [kplus.NetworkPolicyPort.tcp(this.port)]);
  }
}
