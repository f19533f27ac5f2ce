import type {
  ClusterConfig,
  CredentialSource,
  FilterConfig,
  GatewayConfig,
  ProviderRoute,
  TrustedPeer,
} from '../schemas/generated/gateway-config.ts';
import {
  INFERENCE_PATHS,
  MODEL_HEADER,
  TLS_CA_PATH,
  TLS_CERT_PATH,
  TLS_KEY_PATH,
  adminAddress,
  credentialPath,
} from './gateway-paths.ts';

/** A credential reference (never the bytes): the Secret and key the provider gateway reads the token from. */
export interface CredentialRef {
  readonly name: string;
  readonly namespace: string;
  readonly key: string;
}

/** One authorized (candidate, model) → backend route; candidateId is the overlay's stable_id, computed at synth. */
export interface ProviderRouteInput {
  readonly candidateId: string;
  readonly model: string;
  readonly backendCluster: string;
  readonly credential?: CredentialRef;
}

/** How the provider gateway reaches one backend (an in-cluster Service or an external HTTPS API). */
export interface BackendCluster {
  readonly name: string;
  /** host:port; the gateway sends this host as the upstream Host (Praxis AI clusters have no authority key). */
  readonly endpoint: string;
  /** Server TLS to the backend; absent means plaintext inside the cluster network (guarded by a NetworkPolicy). */
  readonly tls?: { readonly sni: string };
}

/** One MCP tool server or A2A agent this provider gateway serves at /mcp/<name> or /a2a/<name>. */
export interface AgentServerInput {
  readonly protocol: 'mcp' | 'a2a';
  readonly name: string;
  readonly backendCluster: string;
  /** The backend's path for the protocol's requests (its endpoint URL's path). */
  readonly path: string;
  readonly credential?: CredentialRef;
}

export interface ProviderGatewayConfigInput {
  readonly listenerPort: number;
  readonly adminPort: number;
  /** Written to x-ai-provider-attribution. */
  readonly providerId: string;
  readonly trustedPeers: readonly TrustedPeer[];
  readonly routes: readonly ProviderRouteInput[];
  readonly backends: readonly BackendCluster[];
  readonly shutdownTimeoutSecs: number;
  /** Tool servers and agents of this site: agent_provider_route (an extension). @default - none */
  readonly agentServers?: readonly AgentServerInput[];
}

/** The extension filter a provider gateway renders for its site's tool servers and agents. */
export const AGENT_PROVIDER_FILTER = 'agent_provider_route';

function byKey<T>(key: (item: T) => string): (a: T, b: T) => number {
  return (a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
}

/** Distinct credential references of the routes, sorted: the credential table and the pod's mounts both use this. */
export function routeCredentials(
  routes: readonly { readonly credential?: CredentialRef | undefined }[],
): CredentialRef[] {
  const unique = new Map<string, CredentialRef>();
  for (const route of routes) {
    if (route.credential === undefined) continue;
    const ref = route.credential;
    unique.set(`${ref.namespace}/${ref.name}/${ref.key}`, ref);
  }
  return [...unique.entries()].sort(byKey(([k]) => k)).map(([, ref]) => ref);
}

/**
 * The provider chain of docs/contract.md §3.2: peer_identity_trust first (it cannot be made conditional), the request
 * parser, provider_route (authorizes the candidate's stable_id for exactly its model), credential_inject (final-hop
 * token from a mounted file), load_balancer to the authorized backend. The listener requires client certificates.
 */
export function renderProviderGatewayConfig(input: ProviderGatewayConfigInput): GatewayConfig {
  const routes: ProviderRoute[] = [...input.routes]
    .sort(byKey((r) => `${r.model}\u0000${r.candidateId}`))
    .map((route) => {
      const base = {
        candidate_id: route.candidateId,
        model: route.model,
        cluster: route.backendCluster,
        paths: [...INFERENCE_PATHS],
      };
      return route.credential === undefined
        ? base
        : {
            ...base,
            credential: {
              strategy: 'bearer_token' as const,
              secretRef: {
                name: route.credential.name,
                namespace: route.credential.namespace,
                key: route.credential.key,
              },
            },
          };
    });
  const agentServers = [...(input.agentServers ?? [])].sort(byKey((a) => `${a.protocol}/${a.name}`));
  const credentials: CredentialSource[] = routeCredentials([...input.routes, ...agentServers]).map((ref) => ({
    strategy: 'bearer_token',
    name: ref.name,
    namespace: ref.namespace,
    key: ref.key,
    file: credentialPath(ref.name, ref.key),
  }));
  const clusters: ClusterConfig[] = [...input.backends].sort(byKey((b) => b.name)).map((backend) => ({
    name: backend.name,
    endpoints: [backend.endpoint],
    // No `ca`: external APIs are verified against the system trust store.
    ...(backend.tls === undefined ? {} : { tls: { sni: backend.tls.sni, verify: true } }),
  }));
  return {
    listeners: [
      {
        name: 'provider',
        address: `0.0.0.0:${input.listenerPort}`,
        filter_chains: ['provider-inference'],
        tls: {
          certificates: [{ cert_path: TLS_CERT_PATH, key_path: TLS_KEY_PATH }],
          client_ca: { ca_path: TLS_CA_PATH },
          client_cert_mode: 'require',
        },
      },
    ],
    filter_chains: [
      {
        name: 'provider-inference',
        filters: [
          { filter: 'peer_identity_trust', trusted_peers: [...input.trustedPeers] },
          // A site with tool servers or agents and no inference provider has no provider_route (it needs a route);
          // a gateway with neither keeps the empty provider_route, refused at synth for its missing routes.
          ...(routes.length === 0 && agentServers.length > 0
            ? []
            : ([
                { filter: 'json_body_field', field: 'model', header: MODEL_HEADER },
                { filter: 'openai_responses_format' },
                { filter: 'provider_route', provider_id: input.providerId, model_header: MODEL_HEADER, routes },
              ] satisfies FilterConfig[])),
          ...(agentServers.length === 0
            ? []
            : [
                {
                  filter: 'agent_provider_route',
                  servers: agentServers.map((server) => ({
                    protocol: server.protocol,
                    name: server.name,
                    cluster: server.backendCluster,
                    path: server.path,
                    ...(server.credential === undefined
                      ? {}
                      : { credential: { strategy: 'bearer_token' as const, secretRef: { ...server.credential } } }),
                  })),
                } satisfies FilterConfig,
              ]),
          { filter: 'credential_inject', credentials },
          { filter: 'load_balancer', clusters },
        ],
      },
    ],
    ...adminAddress(input.adminPort),
    shutdown_timeout_secs: input.shutdownTimeoutSecs,
  };
}
