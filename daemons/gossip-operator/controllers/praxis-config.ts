/**
 * Optional generated consumer gateway config (GatewayRef.praxisConfig): for a gateway with
 * praxisConfig.generate true, renders a complete, runnable Praxis config (docs/contract.md §3.0) and applies it as the
 * praxis.yaml key of ConfigMap praxisConfig.configMapName in the gateway namespace. A potentially routable cluster
 * without an explicit endpoint and transport fails closed: the ConfigMap is left as it was and status says why.
 * The config holds credential references and mount paths only, never token bytes. The reconcile that applies it
 * (with cleanup and mount requirements) is in generated-config.ts.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { stringify as stringifyYaml } from 'yaml';
import schema from '../../../schemas/gateway/gateway-config.schema.json' with { type: 'json' };
import type {
  ClusterConfig,
  CredentialInjectFilter,
  CredentialSource,
  FilterConfig,
  GatewayConfig,
  UpstreamTlsConfig,
} from '../../../schemas/generated/gateway-config.ts';
import type { ClusterEndpoint, GatewayRef, PraxisConfig } from '../../../schemas/generated/gridnetworks.ts';
import type { OverlayCandidate } from '../../../schemas/generated/overlay-envelope.ts';
import { generatingConfig } from '../../../schemas/generated-config.ts';
import { DEFAULT_PRAXIS_CONFIG_MAP_NAME } from '../../../schemas/object-names.ts';
import { type ConfigMapObject, FIELD_MANAGER, LABEL_GATEWAY, LABEL_NETWORK, MANAGED_BY } from '../kinds.ts';
import type { GatewayReference } from '../../routing/model.ts';
import { boundedMessage } from './status.ts';

export const PRAXIS_CONFIG_KEY = 'praxis.yaml';
export const DEFAULT_CONFIG_MAP_NAME = DEFAULT_PRAXIS_CONFIG_MAP_NAME;
export const DEFAULT_LISTENER_PORT = 8080;
export const DEFAULT_TLS_CERT_MOUNT_PATH = '/etc/praxis/tls';
export const DEFAULT_CREDENTIAL_MOUNT_PATH = '/run/secrets/grid-credentials';
/** Where the consumer Deployment mounts the overlay ConfigMap (projected volume, never subPath). */
export const OVERLAY_FILE = '/etc/praxis/routing/routing-overlay.json';
/** Mount root of tls-mode custom CA Secrets: {root}/{name}/{key}. */
export const BACKEND_CA_MOUNT_ROOT = '/run/secrets/grid-backend-ca';
export const ADMIN_ADDRESS = '127.0.0.1:9901';
export const SHUTDOWN_TIMEOUT_SECS = 5;
export const REASON_RENDER_FAILED = 'PraxisConfigRenderFailed';
export const REASON_APPLY_FAILED = 'PraxisConfigApplyFailed';
/** Overlay revision with credential references held back until supportsProjectedCredentials attests the rollout. */
export const REASON_CREDENTIALS_NOT_ATTESTED = 'ProjectedCredentialsNotAttested';
export const REASON_DISABLED = 'PraxisConfigDisabled';

const CONSUMER_CHAIN = 'consumer';

const validateGatewayConfig = new Ajv2020({
  allErrors: false,
  discriminator: true,
  strict: false,
  useDefaults: false,
}).compile<GatewayConfig>(schema);

// The predicate lives in schemas/ so the compiler grants the operator's Role for exactly the gateways it serves.
export { generatingConfig };

/**
 * The projected-credential two-step (GatewayRef.praxisConfig): a generated config in projected mode
 * resolves references under a mount the consumer only has after its rollout, so until supportsProjectedCredentials
 * attests that rollout an overlay revision whose candidates carry credential references is retained. A gateway
 * that does not generate, or generates without enableProjectedCredentials, is never held back: the hold-back is
 * about the generated config's projected mode only.
 */
export function credentialHoldBack(
  ref: GatewayRef | undefined,
  candidates: readonly OverlayCandidate[],
): { reason: string; message: string } | undefined {
  if (ref === undefined) return undefined;
  const praxis = generatingConfig(ref);
  if (
    praxis === undefined ||
    praxis.enableProjectedCredentials !== true ||
    praxis.supportsProjectedCredentials === true
  )
    return undefined;
  const secrets = [
    ...new Set(
      candidates.flatMap((c) =>
        c.credential === undefined ? [] : [`${c.credential.secretRef.namespace}/${c.credential.secretRef.name}`],
      ),
    ),
  ].sort();
  if (secrets.length === 0) return undefined;
  return {
    reason: REASON_CREDENTIALS_NOT_ATTESTED,
    message: `overlay revision with credential references (${secrets.slice(0, 4).join(', ')}${secrets.length > 4 ? ` and ${secrets.length - 4} more` : ''}) retained until praxisConfig.supportsProjectedCredentials attests the consumer rollout with projected credentials`,
  };
}

export interface PraxisRenderInput {
  readonly network: string;
  readonly gateway: GatewayReference;
  readonly praxis: PraxisConfig;
  /** Current overlay candidates of this gateway (empty when its overlay did not render). */
  readonly candidates: readonly OverlayCandidate[];
}

export type PraxisRenderResult =
  | { readonly ok: true; readonly config: GatewayConfig; readonly text: string }
  | { readonly ok: false; readonly message: string };

class RenderFailure extends Error {}

function clusterTls(endpoint: ClusterEndpoint, tlsMount: string): UpstreamTlsConfig | undefined {
  const transport = endpoint.transport;
  const at = `clusterEndpoints "${endpoint.cluster}"`;
  // transport.mode is the security switch: a missing transport never defaults to plaintext.
  if (transport === undefined) throw new RenderFailure(`MissingTransport: ${at} has no transport.mode`);
  if (transport.mode === 'plaintext') {
    if (transport.sni !== undefined)
      throw new RenderFailure(`PlaintextWithSni: ${at} sets sni with transport.mode plaintext`);
    return undefined;
  }
  if (transport.sni === undefined)
    throw new RenderFailure(`MissingSni: ${at} uses transport.mode ${transport.mode} without sni`);
  if (transport.mode === 'mutual_tls') {
    if (transport.caSecretRef !== undefined)
      throw new RenderFailure(`${at}: caSecretRef is valid for transport.mode tls only`);
    return {
      ca: { ca_path: `${tlsMount}/ca.crt` },
      client_cert: { cert_path: `${tlsMount}/tls.crt`, key_path: `${tlsMount}/tls.key` },
      sni: transport.sni,
      verify: true,
    };
  }
  const ca = transport.caSecretRef;
  return {
    // No caSecretRef: system roots (no ca block).
    ...(ca !== undefined ? { ca: { ca_path: `${BACKEND_CA_MOUNT_ROOT}/${ca.name}/${ca.key ?? 'ca.crt'}` } } : {}),
    sni: transport.sni,
    verify: true,
  };
}

function credentialTable(candidates: readonly OverlayCandidate[], mountPath: string): CredentialSource[] {
  const table = new Map<string, CredentialSource>();
  for (const c of candidates) {
    const ref = c.credential?.secretRef;
    if (ref === undefined) continue;
    const key = `${ref.namespace}/${ref.name}/${ref.key}`;
    // A file under the credential mount: the token stays in the Secret, never in the ConfigMap.
    if (!table.has(key))
      table.set(key, {
        strategy: 'bearer_token',
        name: ref.name,
        namespace: ref.namespace,
        key: ref.key,
        file: `${mountPath}/${ref.name}/${ref.key}`,
      });
  }
  return [...table.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}

/** Pure render of one gateway's consumer config; the text is the YAML stored under praxis.yaml. */
export function renderPraxisConfig(input: PraxisRenderInput): PraxisRenderResult {
  const { praxis, gateway, network, candidates } = input;
  try {
    const tlsMount = praxis.tlsCertMountPath ?? DEFAULT_TLS_CERT_MOUNT_PATH;
    const endpoints = praxis.clusterEndpoints ?? [];
    const byCluster = new Map<string, ClusterEndpoint>();
    for (const e of endpoints) {
      if (byCluster.has(e.cluster)) throw new RenderFailure(`clusterEndpoints "${e.cluster}" is listed twice`);
      byCluster.set(e.cluster, e);
    }
    const missing = [...new Set(candidates.map((c) => c.cluster))].filter((c) => !byCluster.has(c)).sort();
    if (missing.length > 0) {
      throw new RenderFailure(
        `MissingClusterEndpoint: cluster${missing.length > 1 ? 's' : ''} ${missing
          .slice(0, 8)
          .map((c) => `"${c}"`)
          .join(
            ', ',
          )}${missing.length > 8 ? ` and ${missing.length - 8} more` : ''} of current candidates ha${missing.length > 1 ? 've' : 's'} no clusterEndpoints[] entry`,
      );
    }
    if (endpoints.length === 0)
      throw new RenderFailure('clusterEndpoints is empty: the load_balancer needs at least one cluster');
    const localSite = gateway.siteName ?? network;
    if (localSite.trim() === '') throw new RenderFailure('overlay local_site must not be blank');

    // Every configured endpoint, including currently inactive providers needed for restoration.
    const clusters: ClusterConfig[] = endpoints.map((e) => {
      const tls = clusterTls(e, tlsMount);
      return { name: e.cluster, endpoints: [e.address], ...(tls !== undefined ? { tls } : {}) };
    });
    const providerHops = endpoints.filter((e) => e.transport?.mode === 'mutual_tls').map((e) => e.cluster);

    const filters: FilterConfig[] = [
      { filter: 'json_body_field', field: 'model', header: 'x-model' },
      {
        filter: 'intelligent_route',
        overlay_file: OVERLAY_FILE,
        model_header: 'x-model',
        ...(providerHops.length > 0 ? { provider_hop_clusters: providerHops } : {}),
        expected_overlay_scope: { network, gateway: gateway.name, namespace: gateway.namespace, local_site: localSite },
        reload: { enabled: true },
      },
    ];
    const projected = praxis.enableProjectedCredentials === true;
    const referenced = candidates.some((c) => c.credential !== undefined);
    if (projected || referenced) {
      const mountPath = praxis.credentialMountPath ?? praxis.credentialMountBase ?? DEFAULT_CREDENTIAL_MOUNT_PATH;
      // Projected mode starts empty and resolves the selected reference under the mount at request time.
      const inject: CredentialInjectFilter = {
        filter: 'credential_inject',
        credentials: projected ? [] : credentialTable(candidates, mountPath),
      };
      filters.push(inject);
    }
    filters.push({ filter: 'load_balancer', clusters });

    const config: GatewayConfig = {
      listeners: [
        {
          name: 'public',
          address: `0.0.0.0:${praxis.listenerPort ?? DEFAULT_LISTENER_PORT}`,
          filter_chains: [CONSUMER_CHAIN],
        },
      ],
      filter_chains: [{ name: CONSUMER_CHAIN, filters }],
      // Loopback, so Praxis AI accepts it without insecure_options (praxis-proxy-core validate_admin_address).
      admin: { address: ADMIN_ADDRESS },
      shutdown_timeout_secs: SHUTDOWN_TIMEOUT_SECS,
    };
    if (!validateGatewayConfig(config)) {
      const first = validateGatewayConfig.errors?.[0];
      throw new RenderFailure(
        `gateway config schema: ${first === undefined ? 'invalid' : `${first.instancePath || '/'} ${first.message ?? first.keyword}`}`,
      );
    }
    return { ok: true, config, text: stringifyYaml(config, { lineWidth: 0 }) };
  } catch (error) {
    if (error instanceof RenderFailure)
      return { ok: false, message: boundedMessage(`consumer config render: ${error.message}`) };
    throw error;
  }
}

export function praxisConfigMap(
  network: string,
  gateway: GatewayReference,
  name: string,
  text: string,
): ConfigMapObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: gateway.namespace,
      labels: { [MANAGED_BY]: FIELD_MANAGER, [LABEL_NETWORK]: network, [LABEL_GATEWAY]: gateway.name },
    },
    data: { [PRAXIS_CONFIG_KEY]: text },
  };
}
