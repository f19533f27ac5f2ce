/**
 * File locations inside a gateway pod. The rendered config and the pod's mounts are built from these same
 * constants, so a path in praxis.yaml always names a file the pod really has.
 */

/** One projected volume holds the config, the TLS files and (provider only) the credentials. */
export const PRAXIS_DIR = '/etc/praxis';
export const PRAXIS_CONFIG_KEY = 'praxis.yaml';
export const PRAXIS_CONFIG_PATH = `${PRAXIS_DIR}/${PRAXIS_CONFIG_KEY}`;

/** The TLS Secret's three keys: a kubernetes.io/tls Secret's two, plus ca.crt as cert-manager writes it. */
export const TLS_KEYS = ['ca.crt', 'tls.crt', 'tls.key'] as const;
export const TLS_DIR = `${PRAXIS_DIR}/tls`;
export const TLS_CA_PATH = `${TLS_DIR}/ca.crt`;
export const TLS_CERT_PATH = `${TLS_DIR}/tls.crt`;
export const TLS_KEY_PATH = `${TLS_DIR}/tls.key`;

/** Where an upstream CA Secret (transport mode `tls` with caSecretRef) is projected on a consumer. */
export function upstreamCaPath(secretName: string, key: string): string {
  return `${PRAXIS_DIR}/upstream-ca/${secretName}/${key}`;
}

/** Where a provider credential is projected on the provider gateway, the only pod that mounts credentials. */
export function credentialPath(secretName: string, key: string): string {
  return `${PRAXIS_DIR}/credentials/${secretName}/${key}`;
}

/** The emptyDir overlay-sync writes into and the gateway watches (a directory mount: the `..data` swap works). */
export const OVERLAY_DIR = '/run/praxis-routing';
export const OVERLAY_DATA_KEY = 'routing-overlay.json';
export const OVERLAY_FILE = `${OVERLAY_DIR}/${OVERLAY_DATA_KEY}`;

/** The emptyDir overlay-sync writes the serving config into (gridServing) and the gateway reads (GRID_SERVING_CONFIG). */
export const SERVING_DIR = '/run/grid-serving';
export const SERVING_DATA_KEY = 'serving-config.json';
export const SERVING_FILE = `${SERVING_DIR}/${SERVING_DATA_KEY}`;

/** The header the request parser writes the model into and the routing filters read it from. */
export const MODEL_HEADER = 'x-gateway-model-name';

/**
 * The request paths a provider route allows, rendered explicitly on every route: Praxis AI's provider_route has no
 * default and matches exactly, so a path not listed here is a 404 at the provider gateway. Stored-response calls
 * (/v1/responses/{id}, …/cancel, …/input_items) carry a per-response id no fixed list can name, so a provider hop
 * answers them 404 (path_not_routed), as Praxis AI does; they are served where the response was created.
 */
export const INFERENCE_PATHS: readonly string[] = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/responses',
];

/**
 * The admin listener binds every address because the kubelet's probes dial the pod IP; Praxis AI accepts that only
 * with insecure_options.allow_public_admin, which the gateway's NetworkPolicy justifies (gateway-network-policy.ts).
 */
export function adminAddress(port: number): {
  readonly admin: { address: string };
  readonly insecure_options: { allow_public_admin: true };
} {
  return { admin: { address: `0.0.0.0:${port}` }, insecure_options: { allow_public_admin: true } };
}
