/**
 * The dashboard's I/O shell: reads the site's store, the SWIM view, the signals loop and the data plane's admin
 * endpoints, and hands them to the pure read model. A build is shared by every request for CACHE_MS, so any number
 * of open pages costs one store read per interval; every remote read is bounded and a failure shows as unknown.
 */
import { performance } from 'node:perf_hooks';
import type { GridNetworkResource, GridSiteResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { OverlayEnvelope } from '../../../schemas/generated/overlay-envelope.ts';
import type { OperatorContext } from '../context.ts';
import { OVERLAY_DATA_KEY } from '../controllers/overlay-publisher.ts';
import { CONFIG_MAP, type ConfigMapObject, GRID_NETWORK, GRID_SITE, INFERENCE_PROVIDER } from '../kinds.ts';
import { parsePrometheusText } from '../probes/prometheus-text.ts';
import {
  buildReadModel,
  type FleetView,
  type GatewayObservation,
  type OverlayRead,
  type SyncObservation,
} from './read-model.ts';
import type { DashboardTarget } from './targets.ts';
import { EMPTY_TRANSITIONS, observePhases, providerPhases, sitePhases, type TransitionState } from './transitions.ts';

const CACHE_MS = 500;
const FETCH_TIMEOUT_MS = 1_500;
const MAX_BODY_CHARS = 1_000_000;

async function fetchText(address: string, path: string): Promise<string | undefined> {
  try {
    const response = await fetch(`http://${address}${path}`, {
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      redirect: 'error',
    });
    if (!response.ok) return undefined;
    const text = await response.text();
    return text.length > MAX_BODY_CHARS ? undefined : text;
  } catch {
    return undefined;
  }
}

function parseObject(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

interface GatewayRead {
  readonly observation: GatewayObservation;
  /** grid_gateway_requests_total by cluster; undefined when /metrics did not answer. */
  readonly requests?: Map<string, number>;
}

async function readGateway(target: DashboardTarget): Promise<GatewayRead> {
  const [statusText, metricsText] = await Promise.all([
    fetchText(target.address, '/status'),
    fetchText(target.address, '/metrics'),
  ]);
  const status = parseObject(statusText);
  const samples = metricsText === undefined ? undefined : parsePrometheusText(metricsText);
  const serving = samples?.find((s) => s.name === 'grid_gateway_overlay_serving_revision_info' && s.value === 1)
    ?.labels['revision'];
  let requests: Map<string, number> | undefined;
  if (samples !== undefined) {
    requests = new Map();
    for (const s of samples) {
      const cluster = s.labels['cluster'];
      if (s.name !== 'grid_gateway_requests_total' || cluster === undefined) continue;
      requests.set(cluster, (requests.get(cluster) ?? 0) + s.value);
    }
  }
  return {
    observation: {
      replica: target.replica,
      ...(status !== undefined
        ? { ready: status['ready'] === true, acceptedRevision: str(status['accepted_revision']) }
        : {}),
      ...(samples !== undefined ? { servingRevision: serving ?? null } : {}),
    },
    ...(requests !== undefined ? { requests } : {}),
  };
}

async function readSync(target: DashboardTarget): Promise<SyncObservation> {
  const status = parseObject(await fetchText(target.address, '/status'));
  const configmap = status?.['configmap'] as { namespace?: unknown; name?: unknown } | undefined;
  if (status === undefined || typeof configmap?.namespace !== 'string' || typeof configmap.name !== 'string')
    return { replica: target.replica };
  const observed = status['observed'] as Record<string, unknown> | undefined;
  const written = status['written'] as Record<string, unknown> | undefined;
  const watch = status['watch'] as Record<string, unknown> | undefined;
  return {
    replica: target.replica,
    configMap: `${configmap.namespace}/${configmap.name}`,
    state: str(status['state']) ?? 'unknown',
    writtenRevision: str(written?.['revision']),
    lastOutcome: str(observed?.['outcome']),
    degradedReason: str(status['degraded_reason']),
    ...(typeof watch?.['reconnects'] === 'number' ? { reconnects: watch['reconnects'] } : {}),
  };
}

function overlaysOf(configMaps: readonly ConfigMapObject[]): OverlayRead[] {
  const out: OverlayRead[] = [];
  for (const cm of configMaps) {
    const text = cm.data?.[OVERLAY_DATA_KEY];
    if (text === undefined) continue;
    try {
      const envelope = JSON.parse(text) as Partial<OverlayEnvelope>;
      out.push({
        configMap: `${cm.metadata.namespace}/${cm.metadata.name}`,
        candidates: envelope.overlay?.candidates ?? [],
      });
    } catch {
      // An invalid overlay is reported by routingMapStatus; the dashboard shows what it can parse.
    }
  }
  return out;
}

/** The parts of the operator the dashboard reads. */
export type DashboardContext = Pick<
  OperatorContext,
  'store' | 'signals' | 'config' | 'now' | 'gossip' | 'siteProbeRtt'
>;

export class DashboardSource {
  readonly #ctx: DashboardContext;
  /** Read at each build: fixed (--dashboard-targets) or the pods discovered so far (memory only either way). */
  readonly #targets: () => readonly DashboardTarget[];
  #transitions: TransitionState = EMPTY_TRANSITIONS;
  #previousRequests: { atMs: number; totals: Map<string, number> } | undefined;
  #rates: Map<string, number> | undefined;
  #cached: { atMs: number; view: Promise<FleetView> } | undefined;

  constructor(ctx: DashboardContext, targets: () => readonly DashboardTarget[]) {
    this.#ctx = ctx;
    this.#targets = targets;
  }

  /** The current view; concurrent and closely spaced calls share one build. */
  view(): Promise<FleetView> {
    const nowMs = performance.now();
    if (this.#cached !== undefined && nowMs - this.#cached.atMs < CACHE_MS) return this.#cached.view;
    const view = this.#build();
    this.#cached = { atMs: nowMs, view };
    view.catch(() => (this.#cached = undefined));
    return view;
  }

  async #build(): Promise<FleetView> {
    const { store } = this.#ctx;
    const unreadable: string[] = [];
    // A failed read leaves its section empty and is named on the page; the rest of the view still renders.
    const list = async <T>(what: string, read: () => Promise<T[]>): Promise<T[]> => {
      try {
        return await read();
      } catch {
        unreadable.push(what);
        return [];
      }
    };
    const targets = this.#targets();
    const [networks, gridSites, providers, gateways, syncs] = await Promise.all([
      list('GridNetworks', async () => (await store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[]),
      list('GridSites', async () => (await store.list(GRID_SITE)).items as unknown as GridSiteResource[]),
      list(
        'InferenceProviders',
        async () => (await store.list(INFERENCE_PROVIDER)).items as unknown as InferenceProviderResource[],
      ),
      Promise.all(targets.filter((t) => t.kind === 'gateway').map(readGateway)),
      Promise.all(targets.filter((t) => t.kind === 'overlay-sync').map(readSync)),
    ]);
    // The overlay ConfigMaps by the names routingMapStatus records: the operator may get them, not list them.
    const refs = (networks[0]?.status?.routingMapStatus ?? []).filter(
      (r) => r.configMapName !== undefined && r.configMapName !== '',
    );
    const configMaps = await list('overlay ConfigMaps', async () => {
      const found = await Promise.all(
        refs.map((r) => store.get(CONFIG_MAP, { namespace: r.namespace, name: r.configMapName! })),
      );
      return found.filter((cm): cm is ConfigMapObject => cm !== undefined);
    });
    this.#updateRates(gateways);
    const samples = new Map<string, { queueDepth?: number; kvCacheUtilization?: number }>();
    for (const p of providers) {
      const sample = this.#ctx.signals.latest(p.metadata.name)?.sample;
      if (sample !== undefined) {
        samples.set(p.metadata.name, {
          ...(sample.queueDepth !== undefined ? { queueDepth: sample.queueDepth } : {}),
          ...(sample.kvCacheUtilization !== undefined ? { kvCacheUtilization: sample.kvCacheUtilization } : {}),
        });
      }
    }
    const nowIso = new Date(this.#ctx.now()).toISOString();
    const inputs = {
      site: this.#ctx.config.site,
      nowIso,
      networks,
      gridSites,
      providers,
      overlays: overlaysOf(configMaps),
      members: (this.#ctx.gossip?.membership.members() ?? []).map((m) => ({ name: m.name, state: m.state })),
      probeRttMs: this.#ctx.siteProbeRtt,
      samples,
      requestsPerSecond: this.#rates,
      gateways: gateways.map((g) => g.observation),
      syncs,
      transitions: this.#transitions.recent,
    };
    const first = buildReadModel(inputs);
    this.#transitions = observePhases(
      this.#transitions,
      [...sitePhases(first.sites), ...providerPhases(first.providers)],
      nowIso,
    );
    return { ...first, transitions: this.#transitions.recent, unreadable };
  }

  /** Requests per second by cluster between the last two reads that saw every gateway's /metrics. */
  #updateRates(gateways: readonly GatewayRead[]): void {
    if (gateways.length === 0 || gateways.some((g) => g.requests === undefined)) return;
    const totals = new Map<string, number>();
    for (const g of gateways)
      for (const [cluster, n] of g.requests ?? []) totals.set(cluster, (totals.get(cluster) ?? 0) + n);
    const atMs = performance.now();
    const previous = this.#previousRequests;
    if (previous !== undefined && atMs - previous.atMs < 1_000) return;
    this.#previousRequests = { atMs, totals };
    if (previous === undefined) return;
    const seconds = (atMs - previous.atMs) / 1000;
    const rates = new Map<string, number>();
    // A restarted gateway resets its counters: a total below the previous one counts from zero.
    for (const [cluster, n] of totals) {
      const before = previous.totals.get(cluster) ?? 0;
      rates.set(cluster, Math.round(((n >= before ? n - before : n) / seconds) * 100) / 100);
    }
    this.#rates = rates;
  }
}
