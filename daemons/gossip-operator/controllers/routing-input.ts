/**
 * Maps what the operator observes (CRDs, the signals loop, the CRDT view and SWIM membership) into the routing
 * core's plain input model. Field-by-field copies; every default is the CRD's or docs/contract.md §2.5's.
 */
import { gatewayRefsOf } from '../../../schemas/generated-config.ts';
import type {
  AgentToolProviderResource,
  GridNetworkResource,
  GridSiteResource,
  InferenceProviderResource,
} from '../../../schemas/crds/types.ts';
import type { ProviderState } from '../state/records.ts';
import type {
  GatewayReference,
  GridSiteView,
  LocalInferenceProvider,
  LocalMetrics,
  LocalToolProvider,
  MemberState,
  ProviderPhase,
  RemoteProviderRecord,
} from '../../routing/model.ts';
import type { RemoteProvider } from '../state/state-store.ts';
import { resolveBackendKind } from '../../routing/backend-kind.ts';
import type { MemberView } from '../swim/membership.ts';

const PROVIDER_PHASES: readonly string[] = ['Pending', 'Available', 'Degraded', 'Unavailable'];

function providerPhase(phase: string | undefined): ProviderPhase {
  return phase !== undefined && PROVIDER_PHASES.includes(phase) ? (phase as ProviderPhase) : 'Pending';
}

function labels(map: Record<string, string | undefined> | undefined): Record<string, string> | undefined {
  if (map === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(map)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** spec.consumerGateways, or the deprecated spec.gatewayRefs (0.3.x); siteName falls back to localSiteName. dialect is kept as given (absent = agn). */
export function gatewayReferences(network: GridNetworkResource): GatewayReference[] {
  const refs = gatewayRefsOf(network.spec);
  return refs.map((ref) => {
    const siteName = ref.siteName ?? ref.localSiteName;
    return {
      name: ref.name,
      namespace: ref.namespace,
      ...(siteName !== undefined ? { siteName } : {}),
      ...(ref.dialect !== undefined ? { dialect: ref.dialect } : {}),
    };
  });
}

export function siteViews(
  network: GridNetworkResource,
  ownSite: string,
  sites: readonly GridSiteResource[],
): GridSiteView[] {
  const name = network.metadata.name;
  const views: GridSiteView[] = sites
    .filter((s) => s.spec.gridNetworkRef === name)
    .map((s) => ({
      name: s.metadata.name,
      network: name,
      phase: s.status?.phase ?? 'Pending',
      ...(s.spec.region !== undefined ? { region: s.spec.region } : {}),
      ...(s.spec.zone !== undefined ? { zone: s.spec.zone } : {}),
      ...(s.spec.sovereigntyZone !== undefined ? { sovereigntyZone: s.spec.sovereigntyZone } : {}),
      labels: s.metadata.labels ?? {},
    }));
  // The own site's geography is the GridNetwork's region/zone when no GridSite describes it.
  if (!views.some((v) => v.name === ownSite)) {
    views.push({
      name: ownSite,
      network: name,
      phase: 'Active',
      ...(network.spec.region !== undefined ? { region: network.spec.region } : {}),
      ...(network.spec.zone !== undefined ? { zone: network.spec.zone } : {}),
      labels: {},
    });
  }
  return views;
}

export function bearerCredential(
  auth: InferenceProviderResource['spec']['auth'],
): { name: string; namespace: string; key: string } | undefined {
  if (auth?.strategy !== 'bearer_token' || auth.secretRef === undefined) return undefined;
  if (auth.credentialsManagedExternally === true || auth.manual === true) return undefined;
  return { name: auth.secretRef.name, namespace: auth.secretRef.namespace, key: auth.secretRef.key ?? 'token' };
}

export function localInference(
  provider: InferenceProviderResource,
  metrics: LocalMetrics | undefined,
): LocalInferenceProvider {
  const spec = provider.spec;
  const credential = bearerCredential(spec.auth);
  const siteSelector = labels(spec.siteSelector?.matchLabels);
  const accessLabels = labels(spec.accessPolicy?.siteSelector?.matchLabels);
  const ready = provider.status?.conditions?.find((c) => c.type === 'Ready');
  return {
    name: provider.metadata.name,
    network: spec.gridNetworkRef,
    phase: providerPhase(provider.status?.phase),
    providerKind: spec.providerKind,
    backendKind: spec.backendKind,
    ...(ready?.status === 'False' ? { notReady: true } : {}),
    ...(spec.cost !== undefined
      ? {
          cost: {
            perMillionInputTokens: spec.cost.perMillionInputTokens ?? 0,
            perMillionOutputTokens: spec.cost.perMillionOutputTokens ?? 0,
          },
        }
      : {}),
    models: (spec.models ?? []).map((m) => m.name),
    ...(spec.routingClusterRef !== undefined ? { routingCluster: spec.routingClusterRef } : {}),
    ...(credential !== undefined ? { credential } : {}),
    ...(siteSelector !== undefined ? { siteSelector } : {}),
    ...(accessLabels !== undefined ? { accessLabels } : {}),
    ...(spec.capacityWeight !== undefined ? { capacityWeight: spec.capacityWeight } : {}),
    ...(spec.trafficPolicy?.drain === true ? { drain: true } : {}),
    ...(metrics !== undefined ? { metrics } : {}),
  };
}

export function localTools(provider: AgentToolProviderResource): LocalToolProvider {
  const spec = provider.spec;
  const credential = bearerCredential(spec.auth as InferenceProviderResource['spec']['auth']);
  const siteSelector = labels(spec.siteSelector?.matchLabels);
  const accessLabels = labels(spec.accessPolicy?.siteSelector?.matchLabels);
  return {
    name: provider.metadata.name,
    network: spec.gridNetworkRef,
    phase: providerPhase(provider.status?.phase),
    tools: (spec.tools ?? []).map((t) => t.name),
    ...(provider.status?.discoveredTools !== undefined ? { discoveredTools: provider.status.discoveredTools } : {}),
    ...(credential !== undefined ? { credential } : {}),
    ...(siteSelector !== undefined ? { siteSelector } : {}),
    ...(accessLabels !== undefined ? { accessLabels } : {}),
  };
}

function memberState(view: MemberView | undefined): { state: MemberState; age: number } {
  if (view === undefined) return { state: 'dead', age: 0 };
  if (view.state === 'alive') return { state: 'alive', age: 0 };
  return { state: view.state === 'suspect' ? 'suspect' : 'dead', age: Math.floor(view.ageSeconds) };
}

export function remoteRecord(
  network: string,
  remote: RemoteProvider,
  member: MemberView | undefined,
): RemoteProviderRecord {
  const p = remote.provider;
  const { state, age } = memberState(member);
  const m = p.metrics;
  return {
    network,
    site: remote.site,
    provider: p.name,
    routingCluster: p.routing_cluster,
    backendKind: p.backend_kind,
    phase: providerPhase(p.phase),
    models: p.models,
    tools: p.tools,
    metrics: {
      generation: remote.revision,
      // Revisions are hybrid clocks in ms at the origin: the best available observation time.
      observedAtMs: remote.revision,
      healthy: m.healthy,
      ...(m.queue_depth !== undefined ? { queueDepth: m.queue_depth } : {}),
      ...(m.kv_cache_utilization !== undefined ? { kvCacheUtilization: m.kv_cache_utilization } : {}),
      ...(m.prefix_cache_hit_ratio !== undefined ? { prefixCacheHitRatio: m.prefix_cache_hit_ratio } : {}),
      ...(m.latency_p99_ms !== undefined ? { latencyP99Ms: m.latency_p99_ms } : {}),
      ...(m.error_rate !== undefined ? { errorRate: m.error_rate } : {}),
    },
    accessLabels: labels(p.access_policy_labels) ?? {},
    capacityWeight: p.capacity_weight,
    memberState: state,
    memberAgeSeconds: age,
  };
}

/** This site's provider record as gossiped: references and normalised metrics only, never credentials. */
export function providerState(
  provider: LocalInferenceProvider | LocalToolProvider,
  kind: 'inference' | 'tools',
): ProviderState {
  const inference = kind === 'inference' ? (provider as LocalInferenceProvider) : undefined;
  const tools = kind === 'tools' ? (provider as LocalToolProvider) : undefined;
  const sample = inference?.metrics?.sample;
  const finite = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v : undefined);
  const metrics: ProviderState['metrics'] = { healthy: sample?.healthy ?? true };
  const q = finite(sample?.queueDepth);
  const kv = finite(sample?.kvCacheUtilization);
  const p99 = finite(sample?.latencyP99Ms);
  const prefix = finite(sample?.prefixCacheHitRatio);
  const err = finite(sample?.errorRate);
  if (q !== undefined) metrics.queue_depth = q;
  if (kv !== undefined) metrics.kv_cache_utilization = kv;
  if (p99 !== undefined) metrics.latency_p99_ms = p99;
  if (prefix !== undefined) metrics.prefix_cache_hit_ratio = prefix;
  if (err !== undefined) metrics.error_rate = err;
  return {
    name: provider.name,
    routing_cluster: inference?.routingCluster ?? (inference !== undefined ? provider.name : `tool/${provider.name}`),
    models: inference?.models.slice(0, 1024) ?? [],
    tools: tools !== undefined ? [...new Set(tools.discoveredTools ?? tools.tools)].slice(0, 1024) : [],
    // The resolved category, so a peer routes the `External`/`OpenAI` spelling without knowing providerKind.
    backend_kind: inference === undefined ? 'remote' : backendCategoryOf(inference),
    phase: provider.phase,
    metrics,
    access_policy_labels: { ...(provider.accessLabels ?? {}) },
    capacity_weight: Math.min(1000, Math.max(1, Math.round(inference?.capacityWeight ?? 1))),
  };
}

/** The routing category gossiped for a local provider; an unresolvable spelling travels as written (peers refuse it too). */
function backendCategoryOf(provider: LocalInferenceProvider): string {
  const resolved = resolveBackendKind(provider.providerKind, provider.backendKind);
  return resolved.ok ? resolved.category : provider.backendKind;
}
