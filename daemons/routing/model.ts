/**
 * The routing core's input model: plain readonly data the operator maps from CRDs, probes, SWIM and the CRDT before
 * calling the pure functions of this directory. Nothing here reads a clock, a socket or the API server.
 *
 * Enumerations come from the generated CRD types (schemas/generated/), so a schema change reaches the core as a
 * type error. The GridNetwork policy arrives resolved (defaults applied, durations in seconds) by policy.ts.
 */
import type {
  GridNetworkSpec,
  AdmissionPolicy,
  ScoringPolicy,
  SignalTransport as SignalTransportSpec,
} from '../../schemas/generated/gridnetworks.ts';
import type { GridSiteStatus } from '../../schemas/generated/gridsites.ts';
import type { InferenceProviderStatus } from '../../schemas/generated/inferenceproviders.ts';
import type { ConsumerDialect } from '../../schemas/overlay/dialect.ts';
import type { AdmissionState, CandidateKind, SelectionMode } from '../../schemas/overlay/types.ts';

export type { AdmissionState, CandidateKind, ConsumerDialect, SelectionMode };

export type RoutingPolicy = NonNullable<GridNetworkSpec['routingPolicy']>;
export type ScoringStrategy = ScoringPolicy['strategy'];
export type SelectionTier = 'same_site' | 'same_zone' | 'same_region' | 'cross_region' | 'unknown';

/** GridSite phases (docs/contract.md §1). */
export type GridSitePhase = NonNullable<GridSiteStatus['phase']>;
/** InferenceProvider phases (docs/contract.md §1); AgentToolProvider uses a subset (no Degraded). */
export type ProviderPhase = NonNullable<InferenceProviderStatus['phase']>;
/** SWIM member state of the site that wrote a remote record, as the membership snapshot reports it. */
export type MemberState = 'alive' | 'suspect' | 'dead';
/** How remote liveness reaches the gateway: SWIM gossip (default) or the gateway polling peer signals. */
export type SignalTransport = SignalTransportSpec['mode'];

/** backendKind values AGN converts into scoring candidates (others are not converted; backend-kind.ts). */
export const RECOGNIZED_BACKEND_KINDS = ['local', 'remote', 'cloud_managed', 'api_provider'] as const;

export type Labels = Readonly<Record<string, string>>;

/** A Secret key reference; the token never enters the routing core. */
export interface SecretKeyRef {
  readonly name: string;
  readonly namespace: string;
  readonly key: string;
}

/** The signal names a provider's metricsConfig configures (which of the scoring signals it exports). */
export type MetricSignal = 'queueDepth' | 'kvCacheUtilization';

/**
 * One metrics observation. Local samples come from the operator's scrape (queueDepth raw, normalised here with
 * queueCapacity); remote samples are the CRDT snapshot, already normalised by the writing site. Absent or
 * non-finite values mean "no value" and score neutrally.
 */
export interface MetricsSample {
  /** The scrape counter (local) or the CRDT record revision (remote): a sample counts once per generation. */
  readonly generation: number;
  /** Epoch ms at which the sample was taken; the stabilized recovery hold-down counts from it. */
  readonly observedAtMs: number;
  readonly healthy: boolean;
  readonly queueDepth?: number;
  readonly kvCacheUtilization?: number;
  readonly prefixCacheHitRatio?: number;
  readonly latencyP99Ms?: number;
  readonly errorRate?: number;
  /** EPP pool series relayed to gateways as is (peer-signals.schema.json); routing here does not read them. */
  readonly runningPerEndpoint?: number;
  readonly waitingPerEndpoint?: number;
  readonly flowControlHeld?: number;
  readonly readyEndpoints?: number;
}

/** spec.cost: USD per million tokens (the CRD defaults both to 0). */
export interface ProviderCost {
  readonly perMillionInputTokens: number;
  readonly perMillionOutputTokens: number;
}

export interface LocalMetrics {
  /** Signals spec.metricsConfig configures: a metric named in signalNames, or read by the engine preset. */
  readonly configuredSignals: readonly MetricSignal[];
  /** spec.metricsConfig.queueCapacity: divides a raw queue size into [0,1]. */
  readonly queueCapacity?: number;
  /** Latest usable sample (fresh scrape or one within staleMetricsSeconds); absent when none. */
  readonly sample?: MetricsSample;
}

/** A local InferenceProvider, as the operator observed it. */
export interface LocalInferenceProvider {
  readonly name: string;
  readonly network: string;
  readonly phase: ProviderPhase;
  /** spec.providerKind: `External` makes an otherwise unnamed backendKind an API provider. */
  readonly providerKind?: string;
  readonly backendKind: string;
  /**
   * The Ready condition's status is False ("A provider whose Ready is False is excluded from routing");
   * absent when True, Unknown or not written yet.
   */
  readonly notReady?: boolean;
  /** spec.cost, when declared. */
  readonly cost?: ProviderCost;
  readonly models: readonly string[];
  /** spec.routingClusterRef; the provider name when absent. */
  readonly routingCluster?: string;
  /** spec.auth.secretRef when spec.auth.strategy is bearer_token. */
  readonly credential?: SecretKeyRef;
  /** spec.siteSelector.matchLabels; absent or empty: the operator's own site. */
  readonly siteSelector?: Labels;
  /** spec.accessPolicy.siteSelector.matchLabels: the consumer sites allowed to route here (empty = all). */
  readonly accessLabels?: Labels;
  /** spec.capacityWeight (1..1000, default 1). */
  readonly capacityWeight?: number;
  /** spec.trafficPolicy.drain. */
  readonly drain?: boolean;
  /** Absent when spec.metricsConfig is absent. */
  readonly metrics?: LocalMetrics;
}

/** A local AgentToolProvider. */
export interface LocalToolProvider {
  readonly name: string;
  readonly network: string;
  readonly phase: ProviderPhase;
  /** spec.tools names: the allowlist. Empty means every discovered tool. */
  readonly tools: readonly string[];
  /** status.discoveredTools from MCP tools/list; absent until a probe has succeeded. */
  readonly discoveredTools?: readonly string[];
  readonly credential?: SecretKeyRef;
  readonly siteSelector?: Labels;
  readonly accessLabels?: Labels;
}

/** A provider record received through the CRDT (`{network}/{site}/{provider}`), joined with SWIM membership. */
export interface RemoteProviderRecord {
  readonly network: string;
  readonly site: string;
  readonly provider: string;
  readonly routingCluster: string;
  readonly backendKind: string;
  readonly phase: ProviderPhase;
  readonly models: readonly string[];
  readonly tools?: readonly string[];
  readonly metrics?: MetricsSample;
  readonly accessLabels?: Labels;
  readonly capacityWeight?: number;
  readonly memberState: MemberState;
  /** Seconds since the member turned Suspect/Dead; 0 when alive or unknown. */
  readonly memberAgeSeconds: number;
}

export interface GridSiteView {
  /** metadata.name. */
  readonly name: string;
  /** spec.gridNetworkRef. */
  readonly network: string;
  readonly phase: GridSitePhase;
  readonly region?: string;
  readonly zone?: string;
  /** spec.sovereigntyZone: a consumer site with one routes only to sites of the same zone. */
  readonly sovereigntyZone?: string;
  readonly labels: Labels;
}

/**
 * GridNetwork.spec.admissionPolicy in stabilized mode, defaults applied and durations in seconds. Mode
 * instantaneous is the legacy rule and resolves to no policy at all.
 */
export interface PressureAdmissionPolicy {
  readonly enterThreshold: number;
  readonly exitThreshold: number;
  readonly failureThreshold: number;
  readonly successThreshold: number;
  readonly minimumStateDurationSeconds: number;
  readonly recoveryHoldDownSeconds: number;
  readonly missingMetrics: NonNullable<AdmissionPolicy['missingMetrics']>;
}

/** GridNetwork.spec routing fields, resolved by resolveRoutingPolicy (policy.ts). */
export interface NetworkRoutingPolicy {
  readonly routingPolicy: RoutingPolicy;
  /** Absent scoringPolicy behaves as noMetrics. */
  readonly scoringStrategy: ScoringStrategy;
  /**
   * Absent: the legacy instantaneous admission (admissionPolicy absent or mode instantaneous; docs/contract.md §2.5).
   */
  readonly admission?: PressureAdmissionPolicy;
  /** Absent: no selection_policy in the payload (consumers pick deterministically). */
  readonly selectionMode?: SelectionMode;
  /**
   * placementPolicy.strategy as found; must be 'static' exactly when selectionMode is weightedRandom. Kept a string
   * because rendering must refuse, not trust, a value that bypassed API validation.
   */
  readonly placementStrategy?: string;
  readonly staleCandidateTtlSeconds?: number;
  readonly signalTransport: SignalTransport;
}

export interface GatewayReference {
  readonly name: string;
  readonly namespace: string;
  /** spec.consumerGateways[].siteName; the network name when absent. */
  readonly siteName?: string;
  /** spec.consumerGateways[].dialect: which overlay this consumer accepts; agn (this project's gateway) when absent. */
  readonly dialect?: ConsumerDialect;
}

/** Everything one reconcile of one GridNetwork needs. */
export interface NetworkRoutingInput {
  readonly network: string;
  /** This operator's own site id: the default site of local providers and the echo filter for remote records. */
  readonly ownSite: string;
  /**
   * GridNetwork.spec.region/zone: the own site's geography where its GridSite has none (a lone site often has no
   * GridSite at all, or a Pending one without geography).
   */
  readonly ownGeography?: { readonly region?: string; readonly zone?: string };
  readonly policy: NetworkRoutingPolicy;
  readonly sites: readonly GridSiteView[];
  readonly inferenceProviders: readonly LocalInferenceProvider[];
  readonly toolProviders: readonly LocalToolProvider[];
  readonly remoteRecords: readonly RemoteProviderRecord[];
}

/** GridNetwork identity and version for the envelope's provenance. */
export interface RenderSource {
  readonly uid: string;
  readonly generation: number;
  readonly producerVersion: string;
}
