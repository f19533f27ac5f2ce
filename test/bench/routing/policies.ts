// The routing-quality bench's grid and its policies. One grid declaration (three sites, seven sims of unequal speed
// and KV-cache size behind real provider gateways, one consumer gateway at east), and per policy the few fields that
// change how the consumer gateway picks a backend. Every policy is a selection mode of the real gateway, never a
// second copy of the routing core.
import type { GridDeclaration, ProviderDeclaration, SiteDeclaration } from '../../../constructs/grid-declaration.ts';
import type { SimEngineProps } from '../../../constructs/sim-backend.ts';
import { exampleGrid } from '../../../constructs/example-grid.ts';
import type { NetworkPolicyDeclaration } from '../../../constructs/grid-declaration.ts';

export const MODEL = 'sim-model-v1';
/** The consumer gateway's session-affinity header (only the grid+session policy reads it). */
export const SESSION_HEADER = 'x-session-id';

/**
 * A backend of the bench: its site, engine, and capacityWeight (the grid's static placement, proportional to what the
 * engine can serve; round-robin and random ignore it).
 */
export interface BenchBackend {
  readonly name: string;
  readonly site: string;
  readonly engine: Required<
    Pick<
      SimEngineProps,
      'maxNumSeqs' | 'numGpuBlocks' | 'maxModelLen' | 'stepOverheadMs' | 'prefillMsPerToken' | 'decodeMsPerSeq'
    >
  >;
  readonly capacityWeight: number;
}

/**
 * Three speed classes, slowed down from the sim's H100 defaults so that the fleet saturates at ~14 requests/s, a rate
 * this 2-core machine can drive through two gateway hops: prefill is the dominant cost (as for long chat prompts), so
 * a prefix-cache hit saves most of a request's work. Small caches (6 000 to 19 000 tokens against prompts of up to
 * ~2 000) so that they differ and evict.
 */
const FAST = {
  maxNumSeqs: 12,
  numGpuBlocks: 1200,
  maxModelLen: 8192,
  stepOverheadMs: 15,
  prefillMsPerToken: 0.25,
  decodeMsPerSeq: 0.8,
} as const;
const MEDIUM = {
  maxNumSeqs: 8,
  numGpuBlocks: 800,
  maxModelLen: 8192,
  stepOverheadMs: 20,
  prefillMsPerToken: 0.35,
  decodeMsPerSeq: 1,
} as const;
const SLOW = {
  maxNumSeqs: 6,
  numGpuBlocks: 512,
  maxModelLen: 8192,
  stepOverheadMs: 30,
  prefillMsPerToken: 0.5,
  decodeMsPerSeq: 1.5,
} as const;

export const BACKENDS: readonly BenchBackend[] = [
  { name: 'east-fast', site: 'east', engine: FAST, capacityWeight: 9 },
  { name: 'east-medium', site: 'east', engine: MEDIUM, capacityWeight: 6 },
  { name: 'east-slow', site: 'east', engine: SLOW, capacityWeight: 4 },
  { name: 'west-fast', site: 'west', engine: FAST, capacityWeight: 9 },
  { name: 'west-slow', site: 'west', engine: SLOW, capacityWeight: 4 },
  { name: 'south-medium', site: 'south', engine: MEDIUM, capacityWeight: 6 },
  { name: 'south-slow', site: 'south', engine: SLOW, capacityWeight: 4 },
];

export const SITES = ['east', 'west', 'south'] as const;
/** The site whose consumer gateway the bench sends to; the kill case kills another site. */
export const CONSUMER_SITE = 'east';

export interface Policy {
  /** Name in the table. */
  readonly name: string;
  /** What the gateway does, as the output and BENCHMARKS.md say it. */
  readonly description: string;
  readonly network: Pick<
    NetworkPolicyDeclaration,
    'scoringPolicy' | 'selectionPolicy' | 'placementPolicy' | 'admissionPolicy'
  >;
  /** The providers publish vLLM metrics the operator scrapes (scoring and admission read them). */
  readonly metrics: boolean;
  readonly localLoad: boolean;
  /** Chats send their session id in SESSION_HEADER and the gateway binds a session to its first backend. */
  readonly sessionAffinity: boolean;
}

const STABILIZED = { mode: 'stabilized', missingMetrics: 'existingOnly' } as const;

export const POLICIES: readonly Policy[] = [
  {
    name: 'random',
    description: 'uniform random over all seven backends (selectionPolicy random, no metrics scraped)',
    network: { selectionPolicy: { mode: 'random' } },
    metrics: false,
    localLoad: false,
    sessionAffinity: false,
  },
  {
    name: 'round-robin',
    description: 'round-robin over all seven backends (selectionPolicy roundRobin, no metrics scraped)',
    network: { selectionPolicy: { mode: 'roundRobin' } },
    metrics: false,
    localLoad: false,
    sessionAffinity: false,
  },
  {
    name: 'least-in-flight',
    description:
      "gateway-local power of two choices by the gateway's own in-flight count over uniform random (selectionPolicy random + localLoad two_choices, no metrics scraped)",
    network: { selectionPolicy: { mode: 'random' } },
    metrics: false,
    localLoad: true,
    sessionAffinity: false,
  },
  {
    name: 'grid',
    description:
      'the grid: queueDepth scoring and stabilized admission from the scraped vLLM metrics, weightedRandom by capacityWeight, localLoad two_choices',
    network: {
      scoringPolicy: { strategy: 'queueDepth' },
      selectionPolicy: { mode: 'weightedRandom' },
      placementPolicy: { strategy: 'static' },
      admissionPolicy: STABILIZED,
    },
    metrics: true,
    localLoad: true,
    sessionAffinity: false,
  },
  {
    name: 'grid+session',
    description:
      "the grid plus prefix affinity by session: a chat's turns go to the backend that served its first turn, which holds its conversation prefix (intelligent_route session_affinity)",
    network: {
      scoringPolicy: { strategy: 'queueDepth' },
      selectionPolicy: { mode: 'weightedRandom' },
      placementPolicy: { strategy: 'static' },
      admissionPolicy: STABILIZED,
    },
    metrics: true,
    localLoad: true,
    sessionAffinity: true,
  },
];

export function policyNamed(name: string): Policy | undefined {
  return POLICIES.find((p) => p.name === name);
}

const GOSSIP = (site: string) => `gossip.${site}.grid.example.com:7946`;
const GATEWAY = (site: string) => `gateway.${site}.grid.example.com`;
const consumerIdentity = [{ organization: 'agn-demo-consumers' }];

function provider(backend: BenchBackend, metrics: boolean): ProviderDeclaration {
  return {
    name: backend.name,
    simulated: { engine: backend.engine },
    spec: {
      providerKind: 'self_hosted',
      backendKind: 'local',
      models: [{ name: MODEL, capabilities: ['text_generation'] }],
      auth: {
        strategy: 'bearer_token',
        secretRef: { name: `${backend.name}-credential`, namespace: 'grid-system', key: 'token' },
      },
      siteSelector: { matchLabels: { 'grid.praxis.fast/provider-site': backend.site } },
      // Probed every second, as the fast profile probes SWIM members: the kill case reads how many probe periods a dead
      // backend takes to leave the overlay.
      healthCheck: { path: '/health', interval: '1s', timeout: '1s' },
      ...(metrics ? { metricsConfig: { path: '/metrics', timeout: '2s', engine: 'vllm' } as const } : {}),
      capacityWeight: backend.capacityWeight,
    },
  };
}

/**
 * The bench grid under `policy`: network `demo` with east (consumer and provider gateway), west and south (provider
 * sites); all in different regions, so the grid orders by score first (scoreFirst) and every backend is in one
 * selection group (under geographyFirst the remote sites would only be a fallback behind east's own).
 */
export function benchDeclaration(policy: Policy): GridDeclaration {
  const sites: SiteDeclaration[] = SITES.map(
    (site, i): SiteDeclaration => ({
      name: site,
      region: `us-${site}-1`,
      zone: `us-${site}-1a`,
      labels: { 'grid.praxis.fast/provider-site': site },
      ...(i === 0 ? {} : { seeds: [GOSSIP(SITES[0])] }),
      gossipAddress: GOSSIP(site),
      gossipService: { type: 'LoadBalancer' },
      gatewayEndpoint: { address: `${GATEWAY(site)}:8443`, tls: { mode: 'Mutual', serverName: GATEWAY(site) } },
      // Pins of a PKI that is not here: the local grid pins every gateway to the certificate its own PKI issued.
      trust: { canonicalFingerprints: [String(i + 5).repeat(64)] },
      providerGateway: { trustedPeers: consumerIdentity, exposure: { type: 'LoadBalancer' } },
      providers: BACKENDS.filter((b) => b.site === site).map((b) => provider(b, policy.metrics)),
      ...(site === CONSUMER_SITE
        ? {
            consumerGateway: {
              // One replica: local_load and session bindings are per replica.
              replicas: 1,
              ...(policy.localLoad ? { localLoad: 'two_choices' as const } : {}),
              ...(policy.sessionAffinity ? { sessionAffinity: { header: SESSION_HEADER } } : {}),
            },
          }
        : {}),
    }),
  );
  return {
    ...(exampleGrid.image === undefined ? {} : { image: exampleGrid.image }),
    network: {
      name: 'demo',
      policy: {
        routingPolicy: 'scoreFirst',
        ...policy.network,
        metricsRefreshInterval: '10s',
        staleCandidateTtlSeconds: 300,
        swim: { probeInterval: '5s', suspicionTimeout: '30s', gossipNodes: 3 },
      },
    },
    sites,
  };
}
