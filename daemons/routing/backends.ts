/**
 * Candidate assembly for one GridNetwork, the part that does not depend on the gateway: eligibility of local and
 * remote providers, freshness, stale-TTL eviction, metrics normalisation, scoring and admission (docs/contract.md
 * §2.5). Per-gateway steps (access policy, locality,
 * ordering) run in render.ts, so hysteresis advances exactly once per reconcile however many gateways there are.
 */
import { decideAdmission, activeSignal, type AdmissionMemory, type AdmissionMemoryMap } from './admission.ts';
import { isExternalCategory, resolveBackendKind } from './backend-kind.ts';
import type {
  AdmissionState,
  CandidateKind,
  Labels,
  LocalInferenceProvider,
  ProviderCost,
  LocalToolProvider,
  NetworkRoutingInput,
  RemoteProviderRecord,
  SecretKeyRef,
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
  /**
   * An API provider or cloud-managed service: ranked after the self-hosted pools of its tier and kept out of their
   * selection group, so it is the fallback (docs/contract.md §2.5).
   */
  readonly external: boolean;
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

/**
 * What one provider of this network is, before any gateway's perspective: whether it can serve (the
 * grid_provider_ready reading), the admission it is published with (`none` whenever it is left out), and why it is
 * left out. Rows are for this network's providers only: other networks' records and this site's own echoes have none.
 */
export interface ProviderReadiness {
  readonly kind: 'inference' | 'tools';
  /** The provider name (metadata.name locally, the record's provider name remotely). */
  readonly provider: string;
  /** The site that published the reading: this operator's site for local providers, the record's site otherwise. */
  readonly site: string;
  /** The sites it serves at: its siteSelector's matches locally (empty when none match), the record's site remotely. */
  readonly servingSites: readonly string[];
  /** The gateway upstream cluster of its candidates. */
  readonly cluster: string;
  readonly remote: boolean;
  /**
   * False when the provider cannot serve: Unavailable, its Ready condition False, its metrics healthy=false, or no
   * routing category for its kind. Site eligibility is not the provider's readiness and leaves this true.
   */
  readonly ready: boolean;
  readonly admission: AdmissionState;
  /** Present exactly when no candidate of the provider reaches any gateway's overlay. */
  readonly excluded?: { readonly reason: ExclusionReason; readonly detail: string };
}

export interface NetworkEvaluation {
  readonly backends: readonly RoutingBackend[];
  /** Hysteresis memory to pass to the next reconcile (only providers evaluated now). */
  readonly admissionMemory: AdmissionMemoryMap;
  readonly excluded: readonly Exclusion[];
  /** One row per provider of the network, local first, in input order. */
  readonly providers: readonly ProviderReadiness[];
}

/** Admission memory and CRDT records share one identity: `{network}/{site}/{provider}`. */
export function providerKey(network: string, site: string, provider: string): string {
  return `${network}/${site}/${provider}`;
}

export const MAX_NAME_BYTES = 256;
export const MIN_CAPACITY_WEIGHT = 1;
export const MAX_CAPACITY_WEIGHT = 1000;

/**
 * The contract's bounded name (1-256 UTF-8 bytes, not blank; docs/contract.md §2.4 steps 4 and 7) that JCS can hash (no
 * lone surrogate): one bad name, site or cluster would make gateways reject, or the revision fail for, the whole
 * overlay.
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

/** Tool names to publish: spec.tools is the allowlist (empty = all discovered); discovery, once known, must agree. */
export function publishedTools(provider: LocalToolProvider): string[] {
  const allow = new Set(provider.tools);
  const discovered = provider.discoveredTools;
  const names =
    discovered === undefined ? provider.tools : allow.size === 0 ? discovered : discovered.filter((t) => allow.has(t));
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
  readonly providers: ProviderReadiness[];
}

interface Observation {
  readonly signals: NormalizedSignals;
  /** The provider configures the strategy's signal (NotConfigured otherwise). */
  readonly signalConfigured: boolean;
  readonly sample: { readonly generation: number; readonly observedAtMs: number } | undefined;
  readonly drain: boolean;
  readonly cost?: ProviderCost;
}

interface ProviderVerdict {
  readonly admission: Exclude<AdmissionState, 'none'>;
  readonly score: BaseScore;
}

export function evaluateNetwork(
  input: NetworkRoutingInput,
  nowMs: number,
  previous: AdmissionMemoryMap,
): NetworkEvaluation {
  const run: Assembly = {
    input,
    sites: new SiteIndex(input.network, input.sites),
    nowMs,
    previous,
    backends: [],
    memory: new Map(),
    excluded: [],
    providers: [],
  };
  for (const provider of input.inferenceProviders) assembleLocalInference(run, provider);
  for (const provider of input.toolProviders) assembleLocalTools(run, provider);
  for (const record of input.remoteRecords) assembleRemote(run, record);
  return { backends: run.backends, admissionMemory: run.memory, excluded: run.excluded, providers: run.providers };
}

/** The per-provider rows of one reconcile (grid_provider_ready, and the serving config's admission per provider). */
export function providerReadiness(
  input: NetworkRoutingInput,
  nowMs: number,
  previous: AdmissionMemoryMap,
): readonly ProviderReadiness[] {
  return evaluateNetwork(input, nowMs, previous).providers;
}

function exclude(run: Assembly, reason: ExclusionReason, provider: string, detail: string): void {
  run.excluded.push({ reason, provider, detail });
}

type RowIdentity = Pick<ProviderReadiness, 'kind' | 'provider' | 'site' | 'servingSites' | 'cluster' | 'remote'>;

/** Reports a provider left out whole: the exclusion (for logs and metrics) and its row (admission none). */
function leaveOut(
  run: Assembly,
  row: RowIdentity,
  id: string,
  ready: boolean,
  reason: ExclusionReason,
  detail: string,
): void {
  exclude(run, reason, id, detail);
  run.providers.push({ ...row, ready, admission: 'none', excluded: { reason, detail } });
}

/**
 * Scores the provider and decides admission once, whatever number of candidates it yields; the hysteresis memory is
 * keyed by `key`. Returns undefined (and reports `provider`) when admission is none.
 */
function verdict(
  run: Assembly,
  key: string,
  provider: string,
  row: RowIdentity,
  observation: Observation,
): ProviderVerdict | undefined {
  const { policy } = run.input;
  const { signals } = observation;
  const decision = decideAdmission(
    {
      policy: policy.admission,
      strategy: policy.scoringStrategy,
      signals,
      signalConfigured: observation.signalConfigured,
      sample: observation.sample,
    },
    run.previous.get(key),
    run.nowMs,
  );
  if (decision.memory !== undefined) run.memory.set(key, decision.memory);
  if (decision.state === 'none') {
    leaveOut(
      run,
      row,
      provider,
      signals.healthy,
      'unhealthy',
      signals.healthy ? 'configured metric signal missing (missingMetrics: excluded)' : 'metrics report healthy=false',
    );
    return undefined;
  }
  // trafficPolicy.drain keeps existing sessions but takes no new ones; it never revives an excluded provider.
  const admission = observation.drain ? 'existing_only' : decision.state;
  return { admission, score: scoreSignals(policy.scoringStrategy, signals, observation.cost) };
}

/** Absent or empty siteSelector: the operator's own site; otherwise every GridSite of the network it matches. */
function resolveLocalSites(run: Assembly, selector: Labels | undefined): string[] {
  if (isEmptySelector(selector)) return [run.input.ownSite];
  return run.sites.matching(selector as Labels).map((site) => site.name);
}

/** Pushes one backend per (site, name); returns how many were pushed. */
function pushCapabilities(
  run: Assembly,
  kind: CandidateKind,
  names: readonly string[],
  siteNames: readonly string[],
  template: Omit<RoutingBackend, 'kind' | 'name' | 'site'>,
): number {
  let pushed = 0;
  for (const site of siteNames) {
    for (const name of names) {
      if (!isBoundedName(name) || !isBoundedName(site) || !isBoundedName(template.cluster)) {
        exclude(
          run,
          'invalid_capability',
          template.provider,
          `${kind} "${name}" at site "${site}" via cluster "${template.cluster}" has a blank or over-${MAX_NAME_BYTES}-byte name, site or cluster`,
        );
        continue;
      }
      run.backends.push({ kind, name, site, ...template });
      pushed += 1;
    }
  }
  return pushed;
}

/** The row of a provider that yielded candidates (or none it could publish). */
function admitted(run: Assembly, row: RowIdentity, admission: Exclude<AdmissionState, 'none'>, pushed: number): void {
  if (pushed > 0) {
    run.providers.push({ ...row, ready: true, admission });
    return;
  }
  const detail = 'no capability with a publishable name, site and cluster';
  run.providers.push({ ...row, ready: true, admission: 'none', excluded: { reason: 'invalid_capability', detail } });
}

function assembleLocalInference(run: Assembly, provider: LocalInferenceProvider): void {
  const { input } = run;
  const id = provider.name;
  if (provider.network !== input.network) return;
  const cluster = provider.routingCluster ?? provider.name;
  const row = {
    kind: 'inference' as const,
    provider: id,
    site: input.ownSite,
    servingSites: [] as string[],
    cluster,
    remote: false,
  };
  const category = resolveBackendKind(provider.providerKind, provider.backendKind);
  if (!category.ok) {
    leaveOut(run, row, id, false, 'unrecognized_backend_kind', `InferenceProvider ${id}: ${category.message}`);
    return;
  }
  if (provider.phase === 'Unavailable') {
    leaveOut(run, row, id, false, 'provider_unavailable', `InferenceProvider ${id} is Unavailable`);
    return;
  }
  if (provider.notReady === true) {
    leaveOut(run, row, id, false, 'not_ready', `InferenceProvider ${id} has Ready=False`);
    return;
  }
  const siteNames = resolveLocalSites(run, provider.siteSelector);
  if (siteNames.length === 0) {
    leaveOut(
      run,
      row,
      id,
      true,
      'no_matching_site',
      `InferenceProvider ${id} spec.siteSelector matches no GridSite of network ${input.network}`,
    );
    return;
  }
  const served = { ...row, servingSites: siteNames };
  const metrics = provider.metrics;
  const signal = activeSignal(input.policy.scoringStrategy);
  const judged = verdict(run, providerKey(input.network, input.ownSite, id), id, served, {
    signals: normalizeSample(metrics?.sample, metrics?.queueCapacity),
    signalConfigured: signal !== undefined && metrics?.configuredSignals.includes(signal) === true,
    sample: metrics?.sample,
    drain: provider.drain === true,
    ...(provider.cost !== undefined ? { cost: provider.cost } : {}),
  });
  if (judged === undefined) return;
  const pushed = pushCapabilities(run, 'inference_model', provider.models, siteNames, {
    cluster,
    fresh: provider.phase !== 'Degraded',
    external: isExternalCategory(category.category),
    credential: provider.credential,
    admission: judged.admission,
    score: judged.score,
    capacityWeight: effectiveCapacityWeight(provider.capacityWeight),
    accessLabels: provider.accessLabels,
    provider: id,
  });
  admitted(run, served, judged.admission, pushed);
}

function assembleLocalTools(run: Assembly, provider: LocalToolProvider): void {
  const { input } = run;
  const id = provider.name;
  if (provider.network !== input.network) return;
  const row = {
    kind: 'tools' as const,
    provider: id,
    site: input.ownSite,
    servingSites: [] as string[],
    cluster: `tool/${id}`,
    remote: false,
  };
  if (provider.phase === 'Unavailable') {
    leaveOut(run, row, id, false, 'provider_unavailable', `AgentToolProvider ${id} is Unavailable`);
    return;
  }
  const siteNames = resolveLocalSites(run, provider.siteSelector);
  if (siteNames.length === 0) {
    leaveOut(
      run,
      row,
      id,
      true,
      'no_matching_site',
      `AgentToolProvider ${id} spec.siteSelector matches no GridSite of network ${input.network}`,
    );
    return;
  }
  // MCP servers export no pool metrics: tools score neutrally and are never NotConfigured-restricted.
  const pushed = pushCapabilities(run, 'mcp_tool', publishedTools(provider), siteNames, {
    cluster: row.cluster,
    fresh: provider.phase !== 'Degraded',
    external: false,
    credential: provider.credential,
    admission: 'new_and_existing',
    score: scoreSignals(input.policy.scoringStrategy, NO_SIGNALS),
    capacityWeight: MIN_CAPACITY_WEIGHT,
    accessLabels: provider.accessLabels,
    provider: id,
  });
  admitted(run, { ...row, servingSites: siteNames }, 'new_and_existing', pushed);
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
  const hasModels = record.models.length > 0;
  const row = {
    kind: hasModels ? ('inference' as const) : ('tools' as const),
    provider: record.provider,
    site: record.site,
    servingSites: [record.site],
    cluster: record.routingCluster,
    remote: true,
  };
  const category = resolveBackendKind(undefined, record.backendKind);
  // The record's own state first: an Unavailable or failing provider is not ready wherever its site stands.
  const ready = record.phase !== 'Unavailable' && record.metrics?.healthy !== false;
  const site = run.sites.discovered(record.site);
  if (site === undefined) {
    leaveOut(
      run,
      row,
      id,
      ready,
      'site_not_found',
      `no GridSite named "${discoveredSiteK8sName(input.network, record.site)}" in network ${input.network}`,
    );
    return;
  }
  const poll = policy.signalTransport === 'poll';
  if (!(site.phase === 'Active' || (poll && site.phase === 'Unreachable'))) {
    leaveOut(
      run,
      row,
      id,
      ready,
      'site_not_eligible',
      `GridSite ${site.name} is ${site.phase}; remote providers need Active${poll ? ' or Unreachable' : ''}`,
    );
    return;
  }
  if (record.phase === 'Unavailable') {
    leaveOut(run, row, id, false, 'provider_unavailable', `remote provider ${id} is Unavailable`);
    return;
  }
  const memberLive = record.memberState === 'alive';
  const fresh = record.phase !== 'Degraded' && memberLive;
  const ttl = policy.staleCandidateTtlSeconds;
  // Only stale remote candidates of a Dead/Suspect member expire; age 0 on such a member means "unknown" and is
  // retained, a TTL of 0 is treated as absent, and poll signal transport removes nothing for liveness.
  if (
    !fresh &&
    !poll &&
    !memberLive &&
    ttl !== undefined &&
    ttl > 0 &&
    record.memberAgeSeconds > 0 &&
    record.memberAgeSeconds >= ttl
  ) {
    leaveOut(
      run,
      row,
      id,
      ready,
      'stale_ttl_expired',
      `member ${record.site} has been ${record.memberState} for ${record.memberAgeSeconds}s (staleCandidateTtlSeconds ${ttl})`,
    );
    return;
  }
  const models = category.ok ? record.models : [];
  const tools = record.tools ?? [];
  if (hasModels && models.length === 0) {
    const detail = `remote provider ${id}: ${category.ok ? '' : category.message}`;
    if (tools.length === 0) {
      leaveOut(run, row, id, false, 'unrecognized_backend_kind', detail);
      return;
    }
    exclude(run, 'unrecognized_backend_kind', id, detail);
  }
  if (models.length === 0 && tools.length === 0) return;

  const signal = activeSignal(policy.scoringStrategy);
  const judged = verdict(run, id, id, row, {
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
  const external = category.ok && isExternalCategory(category.category);
  const pushed =
    pushCapabilities(run, 'inference_model', models, [record.site], {
      cluster: record.routingCluster,
      external,
      ...common,
    }) +
    pushCapabilities(run, 'mcp_tool', [...new Set(tools)], [record.site], {
      cluster: `tool/${record.provider}`,
      external: false,
      ...common,
    });
  admitted(run, row, judged.admission, pushed);
}
