import type { GridDeclaration, ProviderDeclaration } from './grid-declaration.ts';
import { DEFAULT_IMAGE } from './image-reference.ts';
import { readGridTrust } from './grid-trust-file.ts';
import type { ServiceExposure } from './service-exposure.ts';
import type { SimEngineProps } from './sim-backend.ts';

/**
 * The example grid `npx cdk8s synth` compiles into dist/: network `demo` with two sites.
 * - east: a combined site (consumer and provider gateway in one cluster) with two simulated providers;
 * - west: a dedicated provider site with one simulated provider and an external API provider whose bearer
 *   token is a Secret reference that only west's provider gateway mounts.
 * east also offers an MCP tool server and signs a SiteInvite; west offers an A2A agent, so every construct runs.
 * east's team also runs a Praxis AI (main) gateway of its own, `praxis-ai`: it is declared as an external consumer
 * so the operator publishes it an overlay Praxis AI main accepts (no selection_policy) and reports in its
 * routingMapStatus entry that the weightedRandom split is not honoured there.
 * east's consumer is the production-shaped one: callers need an API key per tenant, usage is metered and priced, spend
 * converges in the GridNetwork's budgetStatus and a tenant over its cap gets 429. Its fleet dashboard (which shows that
 * spend) opens with a token only.
 * Every potentially routable provider becomes an upstream of east's consumer gateway: east's own through the
 * in-cluster provider-gateway Service, west's through west's public gateway endpoint, both over mTLS.
 * Each site is reached through LoadBalancer Services (the operator's SWIM, signals and enrollment ports, and the
 * provider gateway) whose names external-dns publishes from their annotations; every peer's GridSite carries the
 * pins of the example's PKI (example-pki/, made by `agn pki init`; its keys are public, for demos only).
 */

/** A LoadBalancer Service whose advertised name external-dns publishes. */
function publicName(hostname: string): ServiceExposure<never> {
  return { type: 'LoadBalancer', annotations: { 'external-dns.alpha.kubernetes.io/hostname': hostname } };
}

// The sims publish vLLM's metrics, so the vLLM preset reads their queue (waiting over waiting + running) and KV-cache
// use; nothing is spelt out in signalNames.
const metricsConfig = { path: '/metrics', timeout: '2s', engine: 'vllm' } as const;

function simProvider(
  name: string,
  site: string,
  models: readonly string[],
  capacityWeight: number,
  engine: SimEngineProps,
): ProviderDeclaration {
  return {
    name,
    simulated: { engine },
    spec: {
      providerKind: 'self_hosted',
      backendKind: 'local',
      models: models.map((model) => ({ name: model, capabilities: ['text_generation'] })),
      auth: {
        strategy: 'bearer_token',
        secretRef: { name: `${name}-credential`, namespace: 'grid-system', key: 'token' },
      },
      siteSelector: { matchLabels: { 'grid.praxis.fast/provider-site': site } },
      healthCheck: { path: '/health', interval: '10s', timeout: '2s' },
      metricsConfig,
      capacityWeight,
      // A price, so the demo's tenants accrue spend (usage_meter prices tokens from spec.cost).
      cost: { perMillionInputTokens: 0.5, perMillionOutputTokens: 1.5 },
    },
  };
}

const consumerIdentity = [{ organization: 'agn-demo-consumers' }];

export const exampleGrid: GridDeclaration = {
  // The image `npm run image` builds from this checkout; point it at your registry (and pin a digest) to deploy.
  image: DEFAULT_IMAGE,
  // The public half of the example's PKI: the grid CA and each site's provider gateway pin.
  trust: readGridTrust(new URL('./example-pki/grid-trust.json', import.meta.url)),
  network: {
    name: 'demo',
    policy: {
      routingPolicy: 'geographyFirst',
      scoringPolicy: { strategy: 'queueDepth' },
      selectionPolicy: { mode: 'weightedRandom' },
      placementPolicy: { strategy: 'static' },
      admissionPolicy: { mode: 'stabilized', missingMetrics: 'existingOnly' },
      metricsRefreshInterval: '10s',
      staleCandidateTtlSeconds: 300,
      // The demo's two tenants; east's consumer refuses a tenant (429 insufficient_quota) once its converged spend
      // reaches the cap.
      budgetPolicy: {
        tenants: [
          { tenantId: 'team-a', capUsd: 5 },
          { tenantId: 'team-b', capUsd: 5 },
        ],
      },
      swim: { probeInterval: '5s', suspicionTimeout: '30s', gossipNodes: 3 },
    },
  },
  sites: [
    {
      name: 'east',
      region: 'us-east-1',
      zone: 'us-east-1a',
      labels: { 'grid.praxis.fast/provider-site': 'east' },
      // seeds: west's gossipAddress, by default.
      gossipAddress: 'gossip.east.grid.example.com:7946',
      gossipService: publicName('gossip.east.grid.example.com'),
      gatewayEndpoint: {
        address: 'gateway.east.grid.example.com:8443',
        tls: { mode: 'Mutual', serverName: 'gateway.east.grid.example.com' },
      },
      // Callers need an API key (hashes in the Secret `agn key mint` writes); spend is reported to east's operator
      // through its gateway ingest listener, and budgets are enforced.
      consumerGateway: { replicas: 2, callerKeys: { secretName: 'consumer-caller-keys', budgetEnforce: {} } },
      gatewayAgeIngest: {},
      // The fleet dashboard behind a token (Secret grid-dashboard-token, key token, which `agn pki` generates).
      dashboard: { access: 'token' },
      externalConsumers: [{ name: 'praxis-ai', dialect: 'praxis-main' }],
      providerGateway: { trustedPeers: consumerIdentity, exposure: publicName('gateway.east.grid.example.com') },
      providers: [
        // Unequal backends: a batches 16 sequences, b only 8 at twice the step cost and a smaller KV cache.
        simProvider('east-llm-a', 'east', ['sim-model-v1'], 3, { maxNumSeqs: 16 }),
        simProvider('east-llm-b', 'east', ['sim-model-v1', 'sim-model-v2'], 1, {
          maxNumSeqs: 8,
          stepOverheadMs: 12.8,
          numGpuBlocks: 4096,
          maxModelLen: 32768,
        }),
      ],
      toolProviders: [
        {
          name: 'east-db-tools',
          spec: {
            protocol: 'mcp',
            endpoint: 'http://db-tools.tools.svc.cluster.local:8080',
            tools: [{ name: 'database-query', description: 'Query the database' }],
            auth: {
              strategy: 'bearer_token',
              secretRef: { name: 'db-tools-credential', namespace: 'grid-system', key: 'token' },
            },
            accessPolicy: { siteSelector: { matchLabels: { 'grid.praxis.fast/provider-site': 'east' } } },
          },
        },
      ],
      // east signs the invitation for a third site that has not joined yet.
      invites: [{ name: 'north', spec: { siteName: 'north', jurisdictions: ['us'], lifetime: '24h' } }],
    },
    {
      name: 'west',
      region: 'us-west-2',
      zone: 'us-west-2b',
      labels: { 'grid.praxis.fast/provider-site': 'west' },
      gossipAddress: 'gossip.west.grid.example.com:7946',
      gossipService: publicName('gossip.west.grid.example.com'),
      gatewayEndpoint: {
        address: 'gateway.west.grid.example.com:8443',
        tls: { mode: 'Mutual', serverName: 'gateway.west.grid.example.com' },
      },
      providerGateway: { trustedPeers: consumerIdentity, exposure: publicName('gateway.west.grid.example.com') },
      providers: [
        simProvider('west-llm', 'west', ['sim-model-v1'], 2, { maxNumSeqs: 16 }),
        {
          name: 'openai-west',
          spec: {
            providerKind: 'open_ai',
            backendKind: 'api_provider',
            endpoint: 'https://api.openai.com',
            models: [{ name: 'gpt-4o-mini', capabilities: ['text_generation'] }],
            auth: {
              strategy: 'bearer_token',
              secretRef: { name: 'openai-credential', namespace: 'grid-system', key: 'token' },
            },
            accessPolicy: { siteSelector: { matchLabels: {} } },
            cost: { perMillionInputTokens: 0.15, perMillionOutputTokens: 0.6 },
          },
        },
      ],
      agentProviders: [
        {
          name: 'west-claims-agent',
          spec: {
            protocol: 'a2a',
            endpoint: 'http://claims-agent.agents.svc.cluster.local:8080',
            agentCard: { skills: ['claims-processing', 'document-review'], modalities: ['text'] },
            auth: { strategy: 'mtls_only' },
          },
        },
      ],
    },
  ],
};

export default exampleGrid;
