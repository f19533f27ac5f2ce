/**
 * The fleet dashboard's read model, pure: built from the status the controllers write
 * (GridSite, InferenceProvider, GridNetwork routingMapStatus and budgetStatus, the overlay ConfigMaps), the SWIM
 * member view, the signals loop's latest samples and what the site's gateways and overlay-sync sidecars report on
 * their admin endpoints. Every field is copied by name: nothing a Secret or a credential holds can reach the page,
 * because no object is passed through whole (a GridSite's public certificate and every message are left out too).
 */
import type { GridNetworkResource, GridSiteResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { OverlayCandidate, ScoreBreakdown } from '../../../schemas/generated/overlay-envelope.ts';
import type { MemberState } from '../swim/member-table.ts';
import { ANNOTATION_SITE_ID } from '../kinds.ts';
import { discoveredSiteK8sName } from '../../routing/sites.ts';

export interface SiteRow {
  /** The GridSite name. */
  readonly name: string;
  /** The SWIM/CRDT site id it stands for (the same as name unless the GridSite was discovered or renamed). */
  readonly siteId: string;
  /** The site this operator runs in. */
  readonly local: boolean;
  readonly phase: string;
  readonly reason: string;
  /** SWIM state of the site's member as this operator sees it; "self" for the local site. */
  readonly gossip: MemberState | 'self' | 'unknown';
  readonly lastProbeTime: string | null;
  readonly lastTransitionTime: string | null;
  /** Duration of this operator's latest probe of the site's gateway (TLS handshake or TCP connect). */
  readonly rttMs: number | null;
}

export interface ProviderRow {
  readonly site: string;
  /** The overlay's cluster name (routingClusterRef, else the InferenceProvider name). */
  readonly cluster: string;
  /** "True", "False" or "Unknown" for this site's providers; null for another site's (its operator decides). */
  readonly ready: string | null;
  readonly admission: string;
  readonly fresh: boolean | null;
  readonly queueDepth: number | null;
  readonly kvCacheUtilization: number | null;
  readonly score: number | null;
  readonly scoreBreakdown: ScoreBreakdown | null;
  readonly requestsPerSecond: number | null;
}

export interface ReplicaRow {
  readonly replica: string;
  readonly ready: boolean | null;
  readonly acceptedRevision: string | null;
  readonly servingRevision: string | null;
  /** accepted == published (null when either is unknown). */
  readonly agrees: boolean | null;
}

export interface GatewayRow {
  readonly gateway: string;
  readonly namespace: string;
  readonly configMap: string;
  readonly phase: string;
  readonly reason: string;
  /** The revision last distributed through the ConfigMap. */
  readonly publishedRevision: string | null;
  readonly candidates: number | null;
  readonly replicas: readonly ReplicaRow[];
}

export interface DeliveryRow {
  readonly replica: string;
  /** The ConfigMap the sidecar copies ("namespace/name"), null when it did not answer. */
  readonly configMap: string | null;
  readonly state: string;
  readonly writtenRevision: string | null;
  readonly lastOutcome: string | null;
  readonly degradedReason: string | null;
  readonly reconnects: number | null;
}

export interface TransitionRow {
  readonly at: string;
  readonly kind: 'site' | 'provider';
  readonly name: string;
  readonly from: string | null;
  readonly to: string;
  readonly reason: string;
}

export interface BudgetRow {
  readonly tenantId: string;
  readonly capUsd: number;
  readonly spendUsd: number;
  readonly spendRatio: number;
}

export interface LinkRow {
  readonly from: string;
  readonly to: string;
  readonly state: MemberState | 'unknown';
}

export interface FleetView {
  readonly site: string;
  readonly generatedAt: string;
  readonly network: {
    readonly name: string;
    readonly phase: string;
    readonly gridId: string | null;
    readonly connectedSites: number | null;
  } | null;
  readonly sites: readonly SiteRow[];
  readonly providers: readonly ProviderRow[];
  readonly gateways: readonly GatewayRow[];
  readonly delivery: readonly DeliveryRow[];
  readonly transitions: readonly TransitionRow[];
  readonly budgets: readonly BudgetRow[];
  readonly links: readonly LinkRow[];
  /** Store reads that failed for this view (their sections are empty), e.g. "GridSites". */
  readonly unreadable: readonly string[];
}

/** What one gateway replica's admin endpoint answered (undefined fields: it did not answer). */
export interface GatewayObservation {
  readonly replica: string;
  readonly ready?: boolean;
  readonly acceptedRevision?: string | null;
  readonly servingRevision?: string | null;
}

/** What one overlay-sync sidecar's /status answered; `configMap` undefined: it did not answer. */
export interface SyncObservation {
  readonly replica: string;
  readonly configMap?: string;
  readonly state?: string;
  readonly writtenRevision?: string | null;
  readonly lastOutcome?: string | null;
  readonly degradedReason?: string | null;
  readonly reconnects?: number;
}

export interface OverlayRead {
  /** "namespace/name" of the overlay ConfigMap. */
  readonly configMap: string;
  readonly candidates: readonly OverlayCandidate[];
}

export interface ReadModelInputs {
  readonly site: string;
  readonly nowIso: string;
  readonly networks: readonly GridNetworkResource[];
  readonly gridSites: readonly GridSiteResource[];
  readonly providers: readonly InferenceProviderResource[];
  readonly overlays: readonly OverlayRead[];
  readonly members: readonly { readonly name: string; readonly state: MemberState }[];
  readonly probeRttMs: ReadonlyMap<string, number>;
  readonly samples: ReadonlyMap<string, { readonly queueDepth?: number; readonly kvCacheUtilization?: number }>;
  /** Requests per second by overlay cluster, summed over this site's gateways; undefined: not observed yet. */
  readonly requestsPerSecond: ReadonlyMap<string, number> | undefined;
  readonly gateways: readonly GatewayObservation[];
  readonly syncs: readonly SyncObservation[];
  readonly transitions: readonly TransitionRow[];
}

const ADMISSION_ORDER = ['new_and_existing', 'existing_only', 'none'];

function readyOf(provider: InferenceProviderResource): string {
  return provider.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'Unknown';
}

export function clusterOf(provider: InferenceProviderResource): string {
  return provider.spec.routingClusterRef ?? provider.metadata.name;
}

/** The site id a GridSite stands for, resolved the way the GridSite controller does (annotation, member, name). */
function siteIdFor(site: GridSiteResource, memberNames: readonly string[]): string {
  const annotated = site.metadata.annotations?.[ANNOTATION_SITE_ID];
  if (annotated !== undefined) return annotated;
  return (
    memberNames.find((m) => discoveredSiteK8sName(site.spec.gridNetworkRef, m) === site.metadata.name) ??
    site.metadata.name
  );
}

function siteRows(inputs: ReadModelInputs): SiteRow[] {
  const members = new Map(inputs.members.map((m) => [m.name, m.state]));
  const memberNames = [...members.keys(), inputs.site];
  const rows: SiteRow[] = inputs.gridSites.map((g) => {
    const id = siteIdFor(g, memberNames);
    const local = id === inputs.site;
    return {
      name: g.metadata.name,
      siteId: id,
      local,
      phase: g.status?.phase ?? 'Pending',
      reason: g.status?.reason ?? '',
      gossip: local ? 'self' : (members.get(id) ?? 'unknown'),
      lastProbeTime: g.status?.lastProbeTime ?? null,
      lastTransitionTime: g.status?.lastTransitionTime ?? null,
      rttMs: inputs.probeRttMs.get(g.metadata.name) ?? null,
    };
  });
  if (!rows.some((r) => r.local)) {
    rows.push({
      name: inputs.site,
      siteId: inputs.site,
      local: true,
      phase: 'Local',
      reason: '',
      gossip: 'self',
      lastProbeTime: null,
      lastTransitionTime: null,
      rttMs: null,
    });
  }
  return rows.sort((a, b) => (a.local === b.local ? a.name.localeCompare(b.name) : a.local ? -1 : 1));
}

/** One row per (site, cluster) serving inference: the best-ranked candidate of every overlay, plus local providers. */
function providerRows(inputs: ReadModelInputs): ProviderRow[] {
  const best = new Map<string, OverlayCandidate>();
  const admissions = new Map<string, Set<string>>();
  for (const overlay of inputs.overlays) {
    for (const c of overlay.candidates) {
      if (c.kind !== 'inference_model') continue;
      const key = `${c.site}\u0000${c.cluster}`;
      const seen = admissions.get(key) ?? new Set<string>();
      seen.add(c.admission_state ?? 'new_and_existing');
      admissions.set(key, seen);
      const previous = best.get(key);
      if (previous === undefined || (c.rank ?? Infinity) < (previous.rank ?? Infinity)) best.set(key, c);
    }
  }
  const local = new Map(inputs.providers.map((p) => [clusterOf(p), p]));
  const keys = new Set([...best.keys(), ...[...local.keys()].map((cluster) => `${inputs.site}\u0000${cluster}`)]);
  const rows: ProviderRow[] = [];
  for (const key of keys) {
    const [site = '', cluster = ''] = key.split('\u0000');
    const candidate = best.get(key);
    const provider = site === inputs.site ? local.get(cluster) : undefined;
    const sample = provider === undefined ? undefined : inputs.samples.get(provider.metadata.name);
    const admission = [...(admissions.get(key) ?? [])].sort(
      (a, b) => ADMISSION_ORDER.indexOf(a) - ADMISSION_ORDER.indexOf(b),
    );
    rows.push({
      site,
      cluster,
      ready: provider === undefined ? null : readyOf(provider),
      admission: admission.length === 0 ? 'not in overlay' : admission.join(' / '),
      fresh: candidate?.fresh ?? null,
      queueDepth: sample?.queueDepth ?? null,
      kvCacheUtilization: sample?.kvCacheUtilization ?? null,
      score: candidate?.score ?? null,
      scoreBreakdown: candidate?.score_breakdown ?? null,
      requestsPerSecond: inputs.requestsPerSecond === undefined ? null : (inputs.requestsPerSecond.get(cluster) ?? 0),
    });
  }
  return rows.sort((a, b) =>
    a.site === b.site
      ? a.cluster.localeCompare(b.cluster)
      : a.site === inputs.site
        ? -1
        : b.site === inputs.site
          ? 1
          : a.site.localeCompare(b.site),
  );
}

function gatewayRows(inputs: ReadModelInputs, network: GridNetworkResource | undefined): GatewayRow[] {
  const syncByReplica = new Map(inputs.syncs.map((s) => [s.replica, s]));
  return (network?.status?.routingMapStatus ?? []).map((entry) => {
    const configMap = `${entry.namespace}/${entry.configMapName ?? ''}`;
    const published = entry.distributedRevision ?? null;
    const replicas = inputs.gateways
      .filter((g) => syncByReplica.get(g.replica)?.configMap === configMap)
      .map((g): ReplicaRow => {
        const accepted = g.acceptedRevision ?? null;
        return {
          replica: g.replica,
          ready: g.ready ?? null,
          acceptedRevision: accepted,
          servingRevision: g.servingRevision ?? null,
          agrees: accepted === null || published === null ? null : accepted === published,
        };
      });
    return {
      gateway: entry.gatewayName,
      namespace: entry.namespace,
      configMap,
      phase: entry.phase ?? 'Pending',
      reason: entry.reason ?? '',
      publishedRevision: published,
      candidates: entry.candidateCount ?? null,
      replicas,
    };
  });
}

function deliveryRows(inputs: ReadModelInputs): DeliveryRow[] {
  return inputs.syncs.map((s) => ({
    replica: s.replica,
    configMap: s.configMap ?? null,
    state: s.configMap === undefined ? 'unreachable' : (s.state ?? 'unknown'),
    writtenRevision: s.writtenRevision ?? null,
    lastOutcome: s.lastOutcome ?? null,
    degradedReason: s.degradedReason ?? null,
    reconnects: s.reconnects ?? null,
  }));
}

export function buildReadModel(inputs: ReadModelInputs): FleetView {
  const network = inputs.networks[0];
  const sites = siteRows(inputs);
  const localName = sites.find((s) => s.local)?.name ?? inputs.site;
  const links: LinkRow[] = sites
    .filter((s) => !s.local)
    .map((s) => ({ from: localName, to: s.name, state: s.gossip === 'self' ? 'unknown' : s.gossip }));
  return {
    site: inputs.site,
    generatedAt: inputs.nowIso,
    network:
      network === undefined
        ? null
        : {
            name: network.metadata.name,
            phase: network.status?.phase ?? 'Pending',
            gridId: network.status?.gridId ?? null,
            connectedSites: network.status?.connectedSites ?? null,
          },
    sites,
    providers: providerRows(inputs),
    gateways: gatewayRows(inputs, network),
    delivery: deliveryRows(inputs),
    transitions: inputs.transitions,
    budgets: (network?.status?.budgetStatus ?? []).map((b) => ({
      tenantId: b.tenantId,
      capUsd: b.capUsd,
      spendUsd: b.spendUsd,
      spendRatio: b.spendRatio,
    })),
    links,
    unreadable: [],
  };
}
