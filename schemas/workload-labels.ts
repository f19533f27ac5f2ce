/**
 * How a daemon finds the workloads the compiler renders: the labels on every AGN pod and the container and port
 * names of a consumer gateway pod. The constructs put these on the pods (constructs/labels.ts re-exports them) and
 * the operator's fleet dashboard lists the consumer gateway pods by them, so a rename here changes both at once.
 */

export const LABEL_NAME = 'app.kubernetes.io/name';
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
export const LABEL_PART_OF = 'app.kubernetes.io/part-of';

/** The roles a pod can play; NetworkPolicies select peers by this label. */
export type GridComponent = 'gossip-operator' | 'consumer-gateway' | 'provider-gateway' | 'inference-backend';

/**
 * The labels that identify one workload. `instance` is the workload's own name, so two gateways of the same
 * component in one namespace still select only their own pods.
 */
export function workloadLabels(component: GridComponent, instance: string): Record<string, string> {
  return {
    [LABEL_NAME]: component,
    [LABEL_INSTANCE]: instance,
    [LABEL_PART_OF]: 'agn',
  };
}

/** The equality selector of every consumer gateway pod of a namespace (any instance). */
export const CONSUMER_GATEWAY_POD_SELECTOR = `${LABEL_NAME}=consumer-gateway,${LABEL_PART_OF}=agn`;

/** Container and port names of a consumer gateway pod whose admin endpoints the dashboard reads. */
export const CONSUMER_POD = {
  gatewayContainer: 'gateway',
  /** The gateway's admin listener: /status, /metrics, /livez, /readyz. */
  gatewayAdminPort: 'admin',
  overlaySyncContainer: 'overlay-sync',
  /** overlay-sync's health listener: /status, /metrics, /livez, /readyz. */
  overlaySyncHealthPort: 'sync-health',
} as const;
