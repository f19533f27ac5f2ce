/**
 * Which gateways of a GridNetwork generate their consumer Praxis config or delegate their Deployment mounts
 * (GatewayRef.praxisConfig), and which objects that makes the operator read or write by name. One predicate for
 * the daemon (what it reconciles) and the compiler (what the operator's Role grants), so the two cannot disagree.
 */
import type { GatewayRef, GridNetworkSpec, PraxisConfig } from './generated/gridnetworks.ts';
import { DEFAULT_PRAXIS_CONFIG_MAP_NAME } from './object-names.ts';

/** The gateways of a spec: consumerGateways, or the deprecated gatewayRefs when consumerGateways is absent. */
export function gatewayRefsOf(spec: GridNetworkSpec): readonly GatewayRef[] {
  return spec.consumerGateways ?? spec.gatewayRefs ?? [];
}

/**
 * The effective praxisConfig of a gateway (praxisConfig, or the deprecated consumerConfig; generate, or the
 * deprecated enabled), undefined when it does not generate.
 */
export function generatingConfig(ref: GatewayRef): PraxisConfig | undefined {
  const praxis = ref.praxisConfig ?? ref.consumerConfig;
  return generates(praxis) ? praxis : undefined;
}

/** True when this praxisConfig asks for generation (generate, or the deprecated enabled). */
export function generates(praxis: PraxisConfig | undefined): praxis is PraxisConfig {
  return praxis !== undefined && (praxis.generate ?? praxis.enabled) === true;
}

/** The Deployment a generating gateway delegates its mounts to, undefined when delegation is off or unnamed. */
export function delegatedDeployment(praxis: PraxisConfig): string | undefined {
  const delegation = praxis.mountReconciliation;
  if (delegation?.enabled !== true || delegation.deploymentName === undefined || delegation.deploymentName === '')
    return undefined;
  return delegation.deploymentName;
}

/**
 * The Secrets a delegated gateway's requirements name without a namespace of their own (the gateway namespace):
 * tls-mode custom CAs (clusterEndpoints[].transport.caSecretRef). The operator GETs each to check it exists before
 * mounting. Credential and site TLS Secrets carry their namespace and are granted from their references.
 */
export function delegatedCaSecrets(praxis: PraxisConfig): string[] {
  const names = new Set<string>();
  for (const endpoint of praxis.clusterEndpoints ?? []) {
    const ca = endpoint.transport?.mode === 'tls' ? endpoint.transport.caSecretRef : undefined;
    if (ca !== undefined) names.add(ca.name);
  }
  return [...names].sort();
}

export interface GeneratedConfigNames {
  /** Consumer config ConfigMaps of generating gateways (praxisConfig.configMapName or its default). */
  readonly praxisConfigMaps: string[];
  /** The one annotated Deployment of each delegating gateway. */
  readonly delegatedDeployments: string[];
  /** Delegating gateways, with their namespace: the operator GETs the Secrets their mounts need. */
  readonly delegatingGateways: { readonly name: string; readonly namespace: string; readonly caSecrets: string[] }[];
}

/** The names the operator's Role needs for the gateways of a spec that generate or delegate. */
export function generatedConfigNames(spec: GridNetworkSpec): GeneratedConfigNames {
  const praxisConfigMaps: string[] = [];
  const delegatedDeployments: string[] = [];
  const delegatingGateways: { name: string; namespace: string; caSecrets: string[] }[] = [];
  for (const ref of gatewayRefsOf(spec)) {
    const praxis = generatingConfig(ref);
    if (praxis === undefined) continue;
    praxisConfigMaps.push(praxis.configMapName ?? DEFAULT_PRAXIS_CONFIG_MAP_NAME);
    const deployment = delegatedDeployment(praxis);
    if (deployment === undefined) continue;
    delegatedDeployments.push(deployment);
    delegatingGateways.push({ name: ref.name, namespace: ref.namespace, caSecrets: delegatedCaSecrets(praxis) });
  }
  return { praxisConfigMaps, delegatedDeployments, delegatingGateways };
}
