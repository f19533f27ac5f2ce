// Generated consumer Praxis config (GatewayRef.praxisConfig): the pure renderer's transport, credential
// and fail-closed rules, every rendered text accepted by the gateway's own loader, and the operator on the local
// store applying praxis.yaml ConfigMaps only for generating gateways, with praxisConfigStatus per gateway.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfigText, resolveConfig } from '../../daemons/gateway/config.ts';
import {
  ADMIN_ADDRESS,
  OVERLAY_FILE,
  PRAXIS_CONFIG_KEY,
  renderPraxisConfig,
  type PraxisRenderInput,
} from '../../daemons/gossip-operator/controllers/praxis-config.ts';
import type {
  ClusterConfig,
  CredentialInjectFilter,
  FilterConfig,
  GatewayConfig,
  IntelligentRouteFilter,
} from '../../schemas/generated/gateway-config.ts';
import type { PraxisConfig } from '../../schemas/generated/gridnetworks.ts';
import type { OverlayCandidate } from '../../schemas/generated/overlay-envelope.ts';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startBackend,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type Backend,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const TOKEN = 'tok-praxis-s3cr3t-bytes';

const candidate = (cluster: string, credential = false): OverlayCandidate => ({
  kind: 'inference_model',
  name: 'qwen3',
  site: 'site-a',
  cluster,
  fresh: true,
  ...(credential
    ? {
        credential: {
          strategy: 'bearer_token',
          secretRef: { name: 'api-token', namespace: 'grid-system', key: 'token' },
        },
      }
    : {}),
});

const ENDPOINTS: NonNullable<PraxisConfig['clusterEndpoints']> = [
  { cluster: 'local', address: '127.0.0.1:8000', transport: { mode: 'plaintext' } },
  { cluster: 'api', address: 'api.example.internal:443', transport: { mode: 'tls', sni: 'api.example.internal' } },
  {
    cluster: 'api-ca',
    address: 'api2.example.internal:443',
    transport: { mode: 'tls', sni: 'api2.example.internal', caSecretRef: { name: 'api-ca', key: 'root.pem' } },
  },
  { cluster: 'site-b', address: '10.0.0.4:30080', transport: { mode: 'mutual_tls', sni: 'site-b.grid.internal' } },
];

function input(
  praxis: Partial<PraxisConfig>,
  candidates: OverlayCandidate[] = [candidate('local')],
): PraxisRenderInput {
  return {
    network: 'grid',
    gateway: { name: 'edge', namespace: 'grid-system', siteName: 'site-a' },
    praxis: { generate: true, clusterEndpoints: ENDPOINTS, ...praxis },
    candidates,
  };
}

/** Renders and proves the text is what the gateway daemon itself loads. */
function renderAccepted(i: PraxisRenderInput): GatewayConfig {
  const result = renderPraxisConfig(i);
  if (!result.ok) throw new Error(`render failed: ${result.message}`);
  const resolved = resolveConfig(parseConfigText(result.text, 'praxis.yaml'), 'praxis.yaml');
  expect(resolved.role).toBe('consumer');
  return resolved.config;
}

const filters = (config: GatewayConfig): FilterConfig[] => config.filter_chains[0]?.filters ?? [];
const cluster = (config: GatewayConfig, name: string): ClusterConfig | undefined =>
  filters(config)
    .flatMap((f) => (f.filter === 'load_balancer' ? f.clusters : []))
    .find((c) => c.name === name);

describe('renderPraxisConfig', () => {
  it('renders the seed 001 consumer shape, accepted by the gateway loader', () => {
    const config = renderAccepted(input({ listenerPort: 9090 }));
    expect(config.listeners).toEqual([{ name: 'public', address: '0.0.0.0:9090', filter_chains: ['consumer'] }]);
    expect(config.admin).toEqual({ address: ADMIN_ADDRESS });
    expect(config.shutdown_timeout_secs).toBe(5);
    expect(filters(config).map((f) => f.filter)).toEqual(['json_body_field', 'intelligent_route', 'load_balancer']);
    const route = filters(config)[1] as IntelligentRouteFilter;
    expect(route).toMatchObject({
      overlay_file: OVERLAY_FILE,
      expected_overlay_scope: { network: 'grid', gateway: 'edge', namespace: 'grid-system', local_site: 'site-a' },
      reload: { enabled: true },
      provider_hop_clusters: ['site-b'],
    });
    expect(renderAccepted(input({})).listeners[0]?.address).toBe('0.0.0.0:8080');
  });

  it('gives every cluster an explicit transport: mutual_tls, tls (custom CA or system roots), plaintext', () => {
    const config = renderAccepted(input({ tlsCertMountPath: '/mnt/tls' }));
    expect(cluster(config, 'site-b')).toEqual({
      name: 'site-b',
      endpoints: ['10.0.0.4:30080'],
      tls: {
        ca: { ca_path: '/mnt/tls/ca.crt' },
        client_cert: { cert_path: '/mnt/tls/tls.crt', key_path: '/mnt/tls/tls.key' },
        sni: 'site-b.grid.internal',
        verify: true,
      },
    });
    expect(cluster(config, 'api')).toEqual({
      name: 'api',
      endpoints: ['api.example.internal:443'],
      tls: { sni: 'api.example.internal', verify: true },
    });
    expect(cluster(config, 'api-ca')?.tls).toEqual({
      ca: { ca_path: '/run/secrets/grid-backend-ca/api-ca/root.pem' },
      sni: 'api2.example.internal',
      verify: true,
    });
    expect(cluster(config, 'local')).toEqual({ name: 'local', endpoints: ['127.0.0.1:8000'] });
    // Inactive configured clusters stay in the load_balancer for restoration.
    expect(filters(config).find((f) => f.filter === 'load_balancer')).toMatchObject({
      clusters: expect.arrayContaining([expect.objectContaining({ name: 'api-ca' })]),
    });
  });

  it('fails closed, naming the cluster, when a candidate cluster has no clusterEndpoints entry', () => {
    const result = renderPraxisConfig(input({}, [candidate('local'), candidate('ghost-cluster')]));
    expect(result.ok).toBe(false);
    expect(!result.ok && result.message).toMatch(/MissingClusterEndpoint: cluster "ghost-cluster"/);
  });

  it('refuses a missing transport, a TLS mode without sni, plaintext with sni and an empty endpoint list', () => {
    const bad = (clusterEndpoints: PraxisConfig['clusterEndpoints'], candidates = [candidate('x')]) => {
      const r = renderPraxisConfig(input({ clusterEndpoints }, candidates));
      return r.ok ? 'accepted' : r.message;
    };
    expect(bad([{ cluster: 'x', address: 'x.internal:443' }])).toMatch(/MissingTransport: clusterEndpoints "x"/);
    expect(bad([{ cluster: 'x', address: 'x.internal:443', transport: { mode: 'mutual_tls' } }])).toMatch(/MissingSni/);
    expect(bad([{ cluster: 'x', address: 'x.internal:443', transport: { mode: 'tls' } }])).toMatch(/MissingSni/);
    expect(
      bad([{ cluster: 'x', address: 'x.internal:80', transport: { mode: 'plaintext', sni: 'x.internal' } }]),
    ).toMatch(/PlaintextWithSni/);
    expect(bad([], [])).toMatch(/clusterEndpoints is empty/);
  });

  it('adds credential_inject only for credential-bearing candidates or projected mode, with references only', () => {
    const none = renderAccepted(input({}));
    expect(filters(none).some((f) => f.filter === 'credential_inject')).toBe(false);

    const withRefs = renderAccepted(
      input({ credentialMountPath: '/run/creds' }, [candidate('local'), candidate('api', true)]),
    );
    expect(filters(withRefs).map((f) => f.filter)).toEqual([
      'json_body_field',
      'intelligent_route',
      'credential_inject',
      'load_balancer',
    ]);
    const inject = filters(withRefs).find((f): f is CredentialInjectFilter => f.filter === 'credential_inject');
    expect(inject?.credentials).toEqual([
      {
        strategy: 'bearer_token',
        name: 'api-token',
        namespace: 'grid-system',
        key: 'token',
        file: '/run/creds/api-token/token',
      },
    ]);

    const projected = renderAccepted(input({ enableProjectedCredentials: true }, [candidate('api', true)]));
    expect(filters(projected).find((f) => f.filter === 'credential_inject')).toEqual({
      filter: 'credential_inject',
      credentials: [],
    });
    const projectedNoRefs = renderAccepted(input({ enableProjectedCredentials: true }));
    expect(filters(projectedNoRefs).find((f) => f.filter === 'credential_inject')).toEqual({
      filter: 'credential_inject',
      credentials: [],
    });
  });
});

describe('operator on the local store with praxisConfig', () => {
  let backend: Backend;
  let dirs: { path: string; remove: () => Promise<void> };
  let op: LocalOperator | undefined;
  const stateDir = () => join(dirs.path, 'state');

  beforeAll(async () => {
    backend = await startBackend();
    dirs = await tempDir('operator-praxis');
    const manifests = join(dirs.path, 'manifests');
    await renderFixture(
      'praxis-config/grid.yaml',
      { BACKEND_URL: backend.url, BACKEND_ADDRESS: backend.url.replace(/^http:\/\//, ''), API_TOKEN: TOKEN },
      manifests,
    );
    op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: stateDir() } }), {
      stateDir: stateDir(),
      manifestsDir: manifests,
    });
  });

  afterAll(async () => {
    await op?.stop();
    await backend?.close();
    await dirs?.remove();
  });

  it('applies a runnable praxis.yaml for a generating gateway and fails closed for a missing endpoint', async () => {
    const network: Json = await waitFor('praxisConfigStatus for both generating gateways', async () => {
      const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
      return n?.status?.praxisConfigStatus?.length === 2 ? n : undefined;
    });
    const byGateway = (g: string) => network.status.praxisConfigStatus.find((s: Json) => s.gatewayName === g);
    expect(byGateway('edge')).toEqual({
      gatewayName: 'edge',
      namespace: 'grid-system',
      configMapName: 'praxis-edge',
      phase: 'Rendered',
      reason: '',
      message: 'consumer config rendered and applied to grid-system/praxis-edge',
      observedGeneration: network.metadata.generation ?? 1,
    });
    expect(byGateway('broken')).toMatchObject({
      gatewayName: 'broken',
      configMapName: 'praxis-broken',
      phase: 'Error',
      reason: 'PraxisConfigRenderFailed',
    });
    expect(byGateway('broken').message).toContain('"api-fallback"');

    const cm: Json = await configMap(stateDir(), 'grid-system', 'praxis-edge');
    expect(cm.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
      'grid.praxis.fast/gateway': 'edge',
    });
    expect(cm.metadata.managedFields?.map((m: Json) => m.manager)).toContain('grid-operator');
    const text: string = cm.data[PRAXIS_CONFIG_KEY];
    const config = resolveConfig(parseConfigText(text, 'praxis.yaml'), 'praxis.yaml').config;
    expect(parseYaml(text)).toEqual(config);
    expect(config.listeners[0]?.address).toBe('0.0.0.0:9090');
    expect(filters(config).map((f) => f.filter)).toEqual([
      'json_body_field',
      'intelligent_route',
      'credential_inject',
      'load_balancer',
    ]);
    expect(filters(config).find((f) => f.filter === 'credential_inject')).toEqual({
      filter: 'credential_inject',
      credentials: [
        {
          strategy: 'bearer_token',
          name: 'api-token',
          namespace: 'grid-system',
          key: 'token',
          file: '/run/secrets/grid-credentials/api-token/token',
        },
      ],
    });
    expect(cluster(config, 'llm-a')).toEqual({ name: 'llm-a', endpoints: [backend.url.replace(/^http:\/\//, '')] });
    expect(cluster(config, 'api-fallback')?.tls).toEqual({
      ca: { ca_path: '/run/secrets/grid-backend-ca/api-provider-ca/ca.crt' },
      sni: 'api.example.internal',
      verify: true,
    });
    expect(cluster(config, 'site-b')?.tls?.client_cert).toEqual({
      cert_path: '/etc/praxis/tls/tls.crt',
      key_path: '/etc/praxis/tls/tls.key',
    });
    // References and paths only: the token bytes are nowhere in the ConfigMap, the status or the logs.
    expect(JSON.stringify(cm)).not.toContain(TOKEN);
    expect(JSON.stringify(network.status)).not.toContain(TOKEN);
    expect(op?.lines.join('')).not.toContain(TOKEN);

    // Fail closed and opt-in: no ConfigMap for the broken, disabled or unconfigured gateways.
    expect(await configMap(stateDir(), 'grid-system', 'praxis-broken')).toBeUndefined();
    expect(await configMap(stateDir(), 'grid-system', 'praxis-off')).toBeUndefined();
    expect(await configMap(stateDir(), 'grid-system', 'praxis-consumer-config')).toBeUndefined();
    expect(network.status.praxisConfigStatus.map((s: Json) => s.gatewayName).sort()).toEqual(['broken', 'edge']);
    expect(await schemaProblems(stateDir())).toEqual([]);
  });
});
