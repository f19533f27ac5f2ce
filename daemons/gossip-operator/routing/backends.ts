/**
 * Candidate assembly for one GridNetwork, the part that does not depend on the gateway: eligibility of local and
 * remote providers, freshness, stale-TTL eviction, metrics normalisation, scoring and admission (SPEC §2.5, seed 004
 * "Routing eligibility", "Stale candidate retention and expiry"). Per-gateway steps (access policy, locality,
 * ordering) run in render.ts, so hysteresis advances exactly once per reconcile however many gateways there are.
 */
import { decideAdmission, activeSignal, type AdmissionMemory, type AdmissionMemoryMap } from './admission.ts';
import {
  RECOGNIZED_BACKEND_KINDS,
  type AdmissionState,
  type CandidateKind,
  type Labels,
  type LocalInferenceProvider,
  type LocalToolProvider,
  type NetworkRoutingInput,
  type RemoteProviderRecord,
  type SecretKeyRef,
} from './model.ts';
import type { Exclusion, ExclusionReason } from './result.ts';
import { normalizeSample, NO_SIGNALS, scoreSignals, type BaseScore, type NormalizedSignals } from './scoring.ts';
import { discoveredSiteK8sName, isEmptySelector, SiteIndex } from './sites.ts';

/** One routable (kind, name, site, cluster) before the gateway's perspective is applied. */
export interface RoutingBackend {
  readonly kind: CandidateKind;
  readonly name: string;
  readonly site: string;
  readonly cluster: string;
  readonly fresh: boolean;
  /** Local providers only: remote provider credentials stay at the remote site. */
  readonly credential: SecretKeyRef | undefined;
  /** none never reaches here: those providers are excluded. */
  readonly admission: Exclude<AdmissionState, 'none'>;
  readonly score: BaseScore;
  /** Effective capacityWeight (1..1000). */
  readonly capacityWeight: number;
  readonly accessLabels: Labels | undefined;
  /** Provider identity, for exclusion reports. */
  readonly provider: string;
}

export interface NetworkEvaluation {
  readonly backends: readonly RoutingBackend[];
  /** Hysteresis memory to pass to the next reconcile (only providers evaluated now). */
  readonly admissionMemory: AdmissionMemoryMap;
  readonly excluded: readonly Exclusion[];
}

/** Admission memory and CRDT records share one identity: `{network}/{site}/{provider}`. */
export function providerKey(network: string, site: string, provider: string): string {
  return `${network}/${site}/${provider}`;
}

export const MAX_NAME_BYTES = 256;
export const MIN_CAPACITY_WEIGHT = 1;
export const MAX_CAPACITY_WEIGHT = 1000;

/**
 * The contract's bounded name (1-256 UTF-8 bytes, not blank; SPEC §2.4 steps 4 and 7) that JCS can hash (no lone
 * surrogate): one bad name, site or cluster would make gateways reject, or the revision fail for, the whole overlay.
 */
export function isBoundedName(value: string | undefined): value is string {
  if (value === undefined || !value.isWellFormed() || value.trim() === '') return false;
  // A UTF-16 unit is at most 3 UTF-8 bytes, so short names (nearly all) need no byte count.
  return value.length * 3 <= MAX_NAME_BYTES || Buffer.byteLength(value, 'utf8') <= MAX_NAME_BYTES;
}

/** capacityWeight defaults to 1; a malformed value that bypassed the CRD is clamped rather than published. */
export function effectiveCapacityWeight(weight: number | undefined): number {
  if (weight === undefined || !Number.isFinite(weight)) return MIN_CAPACITY_WEIGHT;
  return Math.min(MAX_CAPACITY_WEIGHT, Math.max(MIN_CAPACITY_WEIGHT, Math.round(weight)));
}

function recognizedBackendKind(kind: string): boolean {
  return (RECOGNIZED_BACKEND_KINDS as readonly string[]).includes(kind);
}

/** Tool names to publish: spec.tools is the allowlist (empty = all discovered); discovery, once known, must agree. */
export function publishedTools(provider: LocalToolProvider): string[] {
  const allow = new Set(provider.tools);
  const discovered = provider.discoveredTools;
  const names = discovered === undefined ? provider.tools : allow.size === 0 ? discovered : discovered.filter((t) => allow.has(t));
  return [...new Set(names)];
}

/** One reconcile's assembly: inputs read by every step and the outputs they append to. */
interface Assembly {
  readonly input: NetworkRoutingInput;
  readonly sites: SiteIndex;
  readonly nowMs: number;
  readonly previous: AdmissionMemoryMap;
  readonly backends: RoutingBackend[];
  readonly memory: Map<string, AdmissionMemory>;
  readonly excluded: Exclusion[];
}

interface Observation {
  readonly signals: NormalizedSignals;
  /** The provider configures the strategy's signal (NotConfigured otherwise). */
  readonly signalConfigured: boolean;
  readonly sample: { readonly generation: number; readonly observedAtMs: number } | undefined;
  readonly drain: boolean;
}

interface ProviderVerdict {
  readonly admission: Exclude<AdmissionState, 'none'>;
  readonly score: BaseScore;
}

export function evaluateNetwork(input: NetworkRoutingInput, nowMs: number, previous: AdmissionMemoryMap): NetworkEvaluation {
  const run: Assembly = {
    input,
    sites: new SiteIndex(input.network, input.sites),
    nowMs,
    previous,
    backends: [],
    memory: new Map(),
    excluded: [],
  };
  for (const provider of input.inferenceProviders) assembleLocalInference(run, provider);
  for (const provider of input.toolProviders) assembleLocalTools(run, provider);
  for (const record of input.remoteRecords) assembleRemote(run, record);
  return { backends: run.backends, admissionMemory: run.memory, excluded: run.excluded };
}

function exclude(run: Assembly, reason: ExclusionReason, provider: string, detail: string): void {
  run.excluded.push({ reason, provider, detail });
}

/**
 * Scores the provider and decides admission once, whatever number of candidates it yields; the hysteresis memory is
 * keyed by `key`. Returns undefined (and reports `provider`) when admission is none.
 */
function verdict(run: Assembly, key: string, provider: string, observation: Observation): ProviderVerdict | undefined {
  const { policy } = run.input;
  const { signals } = observation;
  const decision = decideAdmission(
    { policy: policy.admission, strategy: policy.scoringStrategy, signals, signalConfigured: observation.signalConfigured, sample: observation.sample },
    run.previous.get(key),
    run.nowMs,
  );
  if (decision.memory !== undefined) run.memory.set(key, decision.memory);
  if (decision.state === 'none') {
    exclude(run, 'unhealthy', provider, signals.healthy ? 'configured metric signal missing (missingMetrics: excluded)' : 'metrics report healthy=false');
    return undefined;
  }
  // trafficPolicy.drain keeps existing sessions but takes no new ones; it never revives an excluded provider.
  const admission = observation.drain ? 'existing_only' : decision.state;
  return { admission, score: scoreSignals(policy.scoringStrategy, signals) };
}

/** Absent or empty siteSelector: the operator's own site; otherwise every GridSite of the network it matches. */
function resolveLocalSites(run: Assembly, selector: Labels | undefined): string[] {
  if (isEmptySelector(selector)) return [run.input.ownSite];
  return run.sites.matching(selector as Labels).map((site) => site.name);
}

function pushCapabilities(
  run: Assembly,
  kind: CandidateKind,
  names: readonly string[],
  siteNames: readonly string[],
  template: Omit<RoutingBackend, 'kind' | 'name' | 'site'>,
): void {
  for (const site of siteNames) {
    for (const name of names) {
      if (!isBoundedName(name) || !isBoundedName(site) || !isBoundedName(template.cluster)) {
        exclude(run, 'invalid_capability', template.provider, `${kind} "${name}" at site "${site}" via cluster "${template.cluster}" has a blank or over-${MAX_NAME_BYTES}-byte name, site or cluster`);
        continue;
      }
      run.backends.push({ kind, name, site, ...template });
    }
  }
}

function assembleLocalInference(run: Assembly, provider: LocalInferenceProvider): void {
  const { input } = run;
  const id = provider.name;
  if (provider.network !== input.network) return;
  if (!recognizedBackendKind(provider.backendKind)) {
    exclude(run, 'unrecognized_backend_kind', id, `InferenceProvider ${id} spec.backendKind "${provider.backendKind}" is not one of ${RECOGNIZED_BACKEND_KINDS.join(', ')}`);
    return;
  }
  if (provider.phase === 'Unavailable') {
    exclude(run, 'provider_unavailable', id, `InferenceProvider ${id} is Unavailable`);
    return;
  }
  const siteNames = resolveLocalSites(run, provider.siteSelector);
  if (siteNames.length === 0) {
    exclude(run, 'no_matching_site', id, `InferenceProvider ${id} spec.siteSelector matches no GridSite of network ${input.network}`);
    return;
  }
  const metrics = provider.metrics;
  const signal = activeSignal(input.policy.scoringStrategy);
  const judged = verdict(run, providerKey(input.network, input.ownSite, id), id, {
    signals: normalizeSample(metrics?.sample, metrics?.queueCapacity),
    signalConfigured: signal !== undefined && metrics !== undefined && metrics.configuredSignals.includes(signal),
    sample: metrics?.sample,
    drain: provider.drain === true,
  });
  if (judged === undefined) return;
  pushCapabilities(run, 'inference_model', provider.models, siteNames, {
    cluster: provider.routingCluster ?? provider.name,
    fresh: provider.phase !== 'Degraded',
    credential: provider.credential,
    admission: judged.admission,
    score: judged.score,
    capacityWeight: effectiveCapacityWeight(provider.capacityWeight),
    accessLabels: provider.accessLabels,
    provider: id,
  });
}

function assembleLocalTools(run: Assembly, provider: LocalToolProvider): void {
  const { input } = run;
  const id = provider.name;
  if (provider.network !== input.network) return;
  if (provider.phase === 'Unavailable') {
    exclude(run, 'provider_unavailable', id, `AgentToolProvider ${id} is Unavailable`);
    return;
  }
  const siteNames = resolveLocalSites(run, provider.siteSelector);
  if (siteNames.length === 0) {
    exclude(run, 'no_matching_site', id, `AgentToolProvider ${id} spec.siteSelector matches no GridSite of network ${input.network}`);
    return;
  }
  // MCP servers export no pool metrics: tools score neutrally and are never NotConfigured-restricted.
  pushCapabilities(run, 'mcp_tool', publishedTools(provider), siteNames, {
    cluster: `tool/${id}`,
    fresh: provider.phase !== 'Degraded',
    credential: provider.credential,
    admission: 'new_and_existing',
    score: scoreSignals(input.policy.scoringStrategy, NO_SIGNALS),
    capacityWeight: MIN_CAPACITY_WEIGHT,
    accessLabels: provider.accessLabels,
    provider: id,
  });
}

function assembleRemote(run: Assembly, record: RemoteProviderRecord): void {
  const { input } = run;
  const { policy } = input;
  const id = providerKey(record.network, record.site, record.provider);
  if (record.network !== input.network) {
    exclude(run, 'other_network', id, `record belongs to GridNetwork ${record.network}, not ${input.network}`);
    return;
  }
  if (record.site === input.ownSite) {
    exclude(run, 'own_echo', id, `record is this site's own provider state echoed back through the CRDT`);
    return;
  }
  const site = run.sites.discovered(record.site);
  if (site === undefined) {
    exclude(run, 'site_not_found', id, `no GridSite named "${discoveredSiteK8sName(input.network, record.site)}" in network ${input.network}`);
    return;
  }
  const poll = policy.signalTransport === 'poll';
  if (!(site.phase === 'Active' || (poll && site.phase === 'Unreachable'))) {
    exclude(run, 'site_not_eligible', id, `GridSite ${site.name} is ${site.phase}; remote providers need Active${poll ? ' or Unreachable' : ''}`);
    return;
  }
  if (record.phase === 'Unavailable') {
    exclude(run, 'provider_unavailable', id, `remote provider ${id} is Unavailable`);
    return;
  }
  const memberLive = record.memberState === 'alive';
  const fresh = record.phase !== 'Degraded' && memberLive;
  const ttl = policy.staleCandidateTtlSeconds;
  // Only stale remote candidates of a Dead/Suspect member expire; age 0 on such a member means "unknown" and is
  // retained, a TTL of 0 is treated as absent, and poll signal transport removes nothing for liveness.
  if (
    !fresh && !poll && !memberLive && ttl !== undefined && ttl > 0 &&
    record.memberAgeSeconds > 0 && record.memberAgeSeconds >= ttl
  ) {
    exclude(run, 'stale_ttl_expired', id, `member ${record.site} has been ${record.memberState} for ${record.memberAgeSeconds}s (staleCandidateTtlSeconds ${ttl})`);
    return;
  }
  const models = recognizedBackendKind(record.backendKind) ? record.models : [];
  if (record.models.length > 0 && models.length === 0) {
    exclude(run, 'unrecognized_backend_kind', id, `remote provider backendKind "${record.backendKind}" is not one of ${RECOGNIZED_BACKEND_KINDS.join(', ')}`);
  }
  const tools = record.tools ?? [];
  if (models.length === 0 && tools.length === 0) return;

  const signal = activeSignal(policy.scoringStrategy);
  const judged = verdict(run, id, id, {
    signals: normalizeSample(record.metrics),
    // The writing site normalised its snapshot; a signal key it never sent is NotConfigured, a non-finite one missing.
    signalConfigured: signal !== undefined && record.metrics !== undefined && record.metrics[signal] !== undefined,
    sample: record.metrics,
    drain: false,
  });
  if (judged === undefined) return;
  const common = {
    fresh,
    credential: undefined,
    admission: judged.admission,
    score: judged.score,
    capacityWeight: effectiveCapacityWeight(record.capacityWeight),
    accessLabels: record.accessLabels,
    provider: id,
  };
  pushCapabilities(run, 'inference_model', models, [record.site], { cluster: record.routingCluster, ...common });
  pushCapabilities(run, 'mcp_tool', [...new Set(tools)], [record.site], { cluster: `tool/${record.provider}`, ...common });
}
