/**
 * GridNetwork reconcile: gridId once; SWIM key, membership and seeds;
 * scrape local provider metrics; publish this site's state; build the routing input from local resources and
 * the CRDT; render and apply every gateway's overlay; write status. Runs again on any watched change, on gossip
 * changes and every metricsRefreshInterval (300 s, 60 s cap with TLS metrics).
 */
import { gatewayRefsOf } from '../../../schemas/generated-config.ts';
import { randomBytes } from 'node:crypto';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type {
  AgentToolProviderResource,
  GridNetworkResource,
  GridSiteResource,
  InferenceProviderResource,
} from '../../../schemas/crds/types.ts';
import type {
  GridNetworkStatus,
  RoutingMapStatus,
  ServingConfigStatus,
} from '../../../schemas/generated/gridnetworks.ts';
import { errorFields } from '../../shared/log.ts';
import type { KubeObject } from '../../shared/resource-store/types.ts';
import type { OperatorContext } from '../context.ts';
import type { GossipRuntime } from '../gossip-runtime.ts';
import type {
  GatewayReference,
  LocalInferenceProvider,
  LocalToolProvider,
  NetworkRoutingPolicy,
} from '../../routing/model.ts';
import type { RemoteProvider } from '../state/state-store.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import {
  AGENT_TOOL_PROVIDER,
  CONFIG_MAP,
  FIELD_MANAGER,
  GRID_NETWORK,
  GRID_SITE,
  INFERENCE_PROVIDER,
  LABEL_AUTO_DISCOVER,
} from '../kinds.ts';
import { overlayConfigMapName } from '../../../schemas/overlay/configmap-name.ts';
import type { Controller, ReconcileResult, SecondaryWatch } from '../manager/manager.ts';
import { TerminalError } from '../manager/manager.ts';
import {
  budgetStatus,
  err,
  renderNetwork,
  resolveRoutingPolicy,
  type AdmissionMemoryMap,
  type Exclusion,
  type GatewayOverlayResult,
  type LocalMetrics,
  type NetworkRoutingInput,
} from '../../routing/index.ts';
import { checkDuration, type DurationRule } from '../../../schemas/durations.ts';
import { ensureGossip, GossipSetupError, publishLocalState } from './network-gossip.ts';
import { siteSpend } from '../tenant-spend/ledger.ts';
import { publishOverlay } from './overlay-publisher.ts';
import { inSpanSync } from '../tracing.ts';
import { publishServing, removeStoppedServing, servingGateways, type ServingSources } from './serving-publisher.ts';
import { publishGeneratedConfigs } from './generated-config.ts';
import { MOUNT_POLL_MS } from './mount-reconciler.ts';
import { credentialHoldBack } from './praxis-config.ts';
import {
  gatewayReferences,
  localInference,
  localTools,
  providerState,
  remoteRecord,
  siteViews,
} from './routing-input.ts';
import { reconcileDiscoveredSites } from './site-discovery.ts';
import { boundedMessage, type Condition, mergeConditions, sameJson, specOnly, withOwnConditions } from './status.ts';
import { patchStatusFresh } from './status-write.ts';

export const DEFAULT_REFRESH_MS = 300_000;
export const TLS_REFRESH_CAP_MS = 60_000;
/** CRD pattern `^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$`: seconds, or milliseconds of at least 1000. */
export const REFRESH_INTERVAL_RULE: DurationRule = { units: ['s', 'ms'], minMs: 1_000, example: '10s' };

/** metricsRefreshInterval: 300 s by default, 60 s (and never longer) when any provider scrapes over TLS. */
export function refreshIntervalMs(spec: string | undefined, tlsMetrics: boolean): number {
  const cap = tlsMetrics ? TLS_REFRESH_CAP_MS : Number.POSITIVE_INFINITY;
  if (spec === undefined) return tlsMetrics ? TLS_REFRESH_CAP_MS : DEFAULT_REFRESH_MS;
  const checked = checkDuration('spec.metricsRefreshInterval', spec, REFRESH_INTERVAL_RULE);
  if (!checked.ok) throw new TerminalError(checked.message);
  return Math.min(checked.ms, cap);
}

function byName<T extends { metadata: { name: string } }>(items: readonly T[]): T[] {
  return [...items].sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0,
  );
}

/**
 * The grid ID to keep: status.gridId once negotiated, else spec.gridId, else a new one. The CRD defaults both to "",
 * and "" means unset: an API server fills status.gridId with "" as soon as any status writer creates the status
 * object (the peer-signal and gateway-age writers share it), so keeping "" would leave the grid without an ID.
 */
export function gridIdFor(
  network: { readonly spec: { readonly gridId?: string }; readonly status?: { readonly gridId?: string } },
  generate: () => string = () => `grid-${randomBytes(6).toString('hex')}`,
): string {
  const negotiated = network.status?.gridId;
  if (negotiated !== undefined && negotiated !== '') return negotiated;
  const declared = network.spec.gridId;
  return declared !== undefined && declared !== '' ? declared : generate();
}

export class GridNetworkController implements Controller {
  readonly name = CONTROLLER_NAMES.network;
  readonly kind = GRID_NETWORK;
  readonly watches: readonly SecondaryWatch[];
  readonly #ctx: OperatorContext;
  #admission: AdmissionMemoryMap = new Map();
  readonly #orphanWarned = new Set<string>();
  readonly #servingWarned = new Set<string>();

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
    const toNetwork = (object: KubeObject): string[] => {
      const ref = (object['spec'] as { gridNetworkRef?: unknown } | undefined)?.gridNetworkRef;
      return typeof ref === 'string' ? [ref] : [];
    };
    this.watches = [
      { kind: INFERENCE_PROVIDER, map: toNetwork },
      { kind: AGENT_TOOL_PROVIDER, map: toNetwork },
      { kind: GRID_SITE, map: toNetwork },
    ];
  }

  async #patchStatus(network: GridNetworkResource, status: GridNetworkStatus): Promise<void> {
    const merged = { ...network.status, ...status };
    if (sameJson(merged, network.status)) return;
    if (status.conditions === undefined) {
      await this.#ctx.store.patchStatus(
        GRID_NETWORK,
        { name: network.metadata.name },
        status as Record<string, unknown>,
        { fieldManager: FIELD_MANAGER },
      );
      return;
    }
    // Only Ready is this controller's: PeerTimeValid and GatewayAgesRejected come from a fresh read, unchanged,
    // sent with that read's resourceVersion so a concurrent writer's condition is never reverted.
    const own = status.conditions as Condition[];
    await patchStatusFresh<GridNetworkResource>(
      this.#ctx.store,
      GRID_NETWORK,
      { name: network.metadata.name },
      FIELD_MANAGER,
      (fresh) => ({
        ...status,
        conditions: withOwnConditions(fresh.status?.conditions as Condition[] | undefined, own, ['Ready']),
      }),
    );
  }

  #conditions(network: GridNetworkResource, ready: boolean, reason: string, message: string): Condition[] {
    return mergeConditions(
      network.status?.conditions as Condition[] | undefined,
      [
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          reason,
          message,
          observedGeneration: network.metadata.generation ?? 1,
        },
      ],
      this.#ctx.now(),
    );
  }

  #render(
    network: GridNetworkResource,
    policy: NetworkRoutingPolicy,
    sites: readonly GridSiteResource[],
    localProviders: readonly LocalInferenceProvider[],
    localToolProviders: readonly LocalToolProvider[],
    remote: readonly RemoteProvider[],
    runtime: GossipRuntime,
    now: number,
  ): { gateways: readonly GatewayOverlayResult[]; input: NetworkRoutingInput; excluded: readonly Exclusion[] } {
    const ctx = this.#ctx;
    const name = network.metadata.name;
    const input: NetworkRoutingInput = {
      network: name,
      ownSite: ctx.config.site,
      policy,
      sites: siteViews(network, ctx.config.site, sites),
      inferenceProviders: localProviders,
      toolProviders: localToolProviders,
      // Under poll transport a provider's measurement comes from its site's polled rows (peer-signals/).
      remoteRecords: remote.map((r) => {
        const record = remoteRecord(name, r, runtime.membership.member(r.site));
        return policy.signalTransport === 'poll' ? ctx.peerSignals.apply(record) : record;
      }),
    };
    const rendered = inSpanSync(
      ctx.tracer,
      'grid.overlay.render',
      { 'grid.network': name, 'grid.site': ctx.config.site },
      (span) => {
        const result = renderNetwork(
          input,
          gatewayReferences(network),
          {
            uid: network.metadata.uid ?? name,
            generation: network.metadata.generation ?? 1,
            producerVersion: ctx.producerVersion,
          },
          now,
          this.#admission,
        );
        span?.setAttributes({
          'grid.render.gateways': result.gateways.length,
          'grid.render.remote_records': input.remoteRecords.length,
          'grid.render.excluded': result.excluded.length,
        });
        return result;
      },
    );
    this.#admission = rendered.admissionMemory;
    // Rebuilt whole each reconcile, so a provider that left the network drops its series.
    ctx.metrics.providerReady.reset();
    for (const row of rendered.providers) {
      ctx.metrics.providerReady.set({ grid_site: row.site, grid_provider: row.provider }, row.ready ? 1 : 0);
    }
    if (rendered.excluded.length > 0) {
      ctx.logger.debug(
        {
          network: name,
          excluded: rendered.excluded
            .slice(0, 20)
            .map((e) => ({ reason: e.reason, provider: e.provider, detail: e.detail })),
        },
        'providers left out of the overlay',
      );
    }
    return { gateways: rendered.gateways, input, excluded: rendered.excluded };
  }

  /**
   * The overlay ConfigMaps of gateways removed from spec.consumerGateways (known from the previous
   * routingMapStatus, so no list permission is needed) are deleted. A failure (e.g. RBAC scoped to the current
   * gateways' names) is logged once per ConfigMap and never fails the reconcile.
   */
  async #removeOrphanOverlays(network: GridNetworkResource, gateways: readonly GatewayReference[]): Promise<void> {
    const ctx = this.#ctx;
    const name = network.metadata.name;
    const live = new Set(gateways.map((g) => `${g.namespace}/${g.name}`));
    for (const entry of network.status?.routingMapStatus ?? []) {
      if (live.has(`${entry.namespace}/${entry.gatewayName}`)) continue;
      ctx.metrics.dropUnhonoured(name, `${entry.namespace}/${entry.gatewayName}`);
      const ref = {
        name: entry.configMapName ?? overlayConfigMapName(name, entry.gatewayName),
        namespace: entry.namespace,
      };
      const key = `${ref.namespace}/${ref.name}`;
      try {
        if (await ctx.store.delete(CONFIG_MAP, ref))
          ctx.logger.info(
            { network: name, configMap: key, gateway: entry.gatewayName },
            'overlay of a removed gateway deleted',
          );
      } catch (error) {
        if (!this.#orphanWarned.has(key)) {
          this.#orphanWarned.add(key);
          ctx.logger.warn(
            { network: name, configMap: key, error: errorFields(error) },
            'cannot delete the overlay of a removed gateway; delete it by hand',
          );
        }
      }
    }
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const network = (await ctx.store.get(GRID_NETWORK, { name })) as GridNetworkResource | undefined;
    if (network === undefined) return {};
    const generation = network.metadata.generation ?? 1;

    const issues = validateCustomResource(specOnly(network));
    if (issues.length > 0) {
      const message = boundedMessage(
        `invalid spec: ${issues
          .slice(0, 3)
          .map((i) => `${i.path || '(object)'}: ${i.message}`)
          .join('; ')}`,
      );
      await this.#patchStatus(network, {
        phase: 'Degraded',
        observedGeneration: generation,
        conditions: this.#conditions(network, false, 'InvalidSpec', message),
      });
      throw new TerminalError(`GridNetwork ${name}: ${message}`);
    }
    const networks = byName((await ctx.store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[]);
    const primary = networks[0]?.metadata.name;
    if (primary !== name) {
      await this.#patchStatus(network, {
        phase: 'Degraded',
        observedGeneration: generation,
        conditions: this.#conditions(
          network,
          false,
          'MultipleGridNetworks',
          `only one GridNetwork per cluster is supported; this operator serves ${primary ?? 'none'}`,
        ),
      });
      return {};
    }
    const gridId = gridIdFor(network);

    let runtime;
    try {
      runtime = await ensureGossip(ctx, network);
    } catch (error) {
      const reason = error instanceof GossipSetupError ? error.reason : 'GossipStartFailed';
      await this.#patchStatus(network, {
        gridId,
        phase: 'Degraded',
        observedGeneration: generation,
        conditions: this.#conditions(network, false, reason, errorFields(error).message),
      });
      throw error;
    }

    const [providerList, toolList, siteList] = await Promise.all([
      ctx.store.list(INFERENCE_PROVIDER),
      ctx.store.list(AGENT_TOOL_PROVIDER),
      ctx.store.list(GRID_SITE),
    ]);
    const providers = byName(providerList.items as unknown as InferenceProviderResource[]).filter(
      (p) => p.spec?.gridNetworkRef === name,
    );
    const tools = byName(toolList.items as unknown as AgentToolProviderResource[]).filter(
      (p) => p.spec?.gridNetworkRef === name,
    );
    const sites = siteList.items as unknown as GridSiteResource[];

    // Signals loop: one scrape per provider per reconcile, cached sample reused within staleMetricsSeconds.
    const now = ctx.now();
    const scraped = await Promise.all(
      providers.map(async (p) => {
        try {
          const { local, changed } = await ctx.signals.scrape(ctx.store, ctx.metrics, p, now);
          if (changed) ctx.enqueue(CONTROLLER_NAMES.provider, p.metadata.name);
          return local;
        } catch (error) {
          ctx.logger.warn(
            { provider: p.metadata.name, error: errorFields(error) },
            'metrics scrape failed unexpectedly',
          );
          return undefined;
        }
      }),
    );
    const localProviders = providers.map((p, i) => localInference(p, scraped[i] as LocalMetrics | undefined));
    const localToolProviders = tools.map(localTools);

    try {
      await publishLocalState(
        runtime,
        ctx,
        [
          ...localProviders.map((p) => providerState(p, 'inference')),
          ...localToolProviders.map((p) => providerState(p, 'tools')),
        ],
        { inference: localProviders.length > 0, agentTools: localToolProviders.length > 0 },
        runtime.certificateBundle,
        siteSpend(network.status),
      );
    } catch (error) {
      ctx.logger.warn(
        { network: name, error: errorFields(error) },
        'publishing local state into gossip failed; retried on the next reconcile',
      );
    }
    if (network.metadata.labels?.[LABEL_AUTO_DISCOVER] === 'true') {
      try {
        await reconcileDiscoveredSites(ctx, network, runtime, sites);
      } catch (error) {
        // Discovery bookkeeping must never hold back this site's overlays.
        ctx.logger.warn(
          { network: name, error: errorFields(error) },
          'GridSite auto-discovery failed; retried on the next reconcile',
        );
      }
    }

    const remote = runtime.store.remoteProviders();
    const gateways = gatewayReferences(network);
    const policy = resolveRoutingPolicy(name, network.spec);
    let results: readonly GatewayOverlayResult[];
    let serving: ServingSources | undefined;
    if (!policy.ok) {
      // A policy that bypassed API validation renders nothing: every gateway keeps its last distributed revision.
      results = gateways.map((gateway) => ({ gateway, result: err(policy.error) }));
    } else {
      const rendered = this.#render(
        network,
        policy.value,
        sites,
        localProviders,
        localToolProviders,
        remote,
        runtime,
        now,
      );
      results = rendered.gateways;
      serving = {
        input: rendered.input,
        excluded: rendered.excluded,
        signalsAddresses: signalsAddresses(ctx, runtime),
      };
    }

    const previous = network.status?.routingMapStatus ?? [];
    const routingMapStatus: RoutingMapStatus[] = [];
    const refs = gatewayRefsOf(network.spec);
    const held = new Map<string, { reason: string; message: string }>();
    for (const entry of results) {
      const prev = previous.find(
        (s) => s.gatewayName === entry.gateway.name && s.namespace === entry.gateway.namespace,
      );
      const ref = refs.find((r) => r.name === entry.gateway.name && r.namespace === entry.gateway.namespace);
      const hold = entry.result.ok ? credentialHoldBack(ref, entry.result.value.payload.candidates) : undefined;
      if (hold !== undefined) held.set(`${entry.gateway.namespace}/${entry.gateway.name}`, hold);
      routingMapStatus.push(await publishOverlay(ctx, network, entry, prev, hold));
    }
    const servingFor = servingGateways(network);
    const previousServing = network.status?.servingConfigStatus ?? [];
    const servingConfigStatus: ServingConfigStatus[] = [];
    for (const entry of results) {
      if (!servingFor.has(`${entry.gateway.namespace}/${entry.gateway.name}`)) continue;
      const prev = previousServing.find(
        (s) => s.gatewayName === entry.gateway.name && s.namespace === entry.gateway.namespace,
      );
      const why = entry.result.ok
        ? undefined
        : `the overlay did not render (${entry.result.error.code}: ${entry.result.error.message})`;
      servingConfigStatus.push(
        await publishServing(
          ctx,
          network,
          entry.gateway,
          entry.result.ok ? entry.result.value : undefined,
          serving,
          prev,
          why,
        ),
      );
    }
    servingConfigStatus.push(
      ...(await removeStoppedServing(ctx, network, servingFor, previousServing, this.#servingWarned)),
    );
    await this.#removeOrphanOverlays(
      network,
      results.map((r) => r.gateway),
    );
    const generated = await publishGeneratedConfigs(ctx, network, results, held);
    const { praxisConfigStatus, mountReconciliationStatus } = generated;
    const verdict = distributionVerdict(routingMapStatus, servingConfigStatus, held);
    const ownSites = sites.filter((s) => s.spec?.gridNetworkRef === name);
    const status: GridNetworkStatus = {
      gridId,
      // Initializing until a seed answered (a lone site with no seeds is a healthy single-member mesh at once).
      phase: !verdict.ready ? 'Degraded' : runtime.membership.joined ? 'Active' : 'Initializing',
      connectedSites: ownSites.filter((s) => s.status?.phase === 'Active').length,
      remoteProviderCount: remote.length,
      observedGeneration: generation,
      routingMapStatus,
      // Written while a gateway is served, or to clear entries left by one that stopped.
      ...(servingConfigStatus.length > 0 || previousServing.length > 0 ? { servingConfigStatus } : {}),
      // Written when a gateway generates, or to clear entries left by one that stopped.
      ...(praxisConfigStatus.length > 0 || (network.status?.praxisConfigStatus?.length ?? 0) > 0
        ? { praxisConfigStatus }
        : {}),
      ...(mountReconciliationStatus.length > 0 || (network.status?.mountReconciliationStatus?.length ?? 0) > 0
        ? { mountReconciliationStatus }
        : {}),
      budgetStatus: budgetStatus(network.spec.budgetPolicy?.tenants, runtime.store.tenantSpend()),
      conditions: this.#conditions(network, verdict.ready, verdict.reason, verdict.message),
    };
    await this.#patchStatus(network, status);
    ctx.metrics.swimMembers.reset();
    for (const [state, count] of Object.entries(runtime.membership.stats().members))
      ctx.metrics.swimMembers.set({ state }, count);
    // GridSite phases follow membership and trust material: let the site controller look again.
    for (const site of ownSites) ctx.enqueue(CONTROLLER_NAMES.site, site.metadata.name);

    const tlsMetrics = providers.some(
      (p) => p.spec.metricsConfig !== undefined && (p.spec.metricsConfig.tls ?? p.spec.tls) !== undefined,
    );
    const refreshMs = refreshIntervalMs(network.spec.metricsRefreshInterval, tlsMetrics);
    // No Deployment or Secret watch (RBAC is get/patch by name): a waiting gateway is polled.
    return { requeueAfterMs: generated.pending ? Math.min(refreshMs, MOUNT_POLL_MS) : refreshMs };
  }
}

/**
 * Ready, with its reason and message, from what this reconcile distributed: an overlay not distributed comes first,
 * then a served gateway's serving config not distributed. A revision held back for projected-credential attestation
 * is a requested wait, not a failure; a Disabled serving entry (a gateway no longer served whose ConfigMap could not
 * be deleted yet) says so in its own entry and leaves Ready alone.
 */
export function distributionVerdict(
  routingMapStatus: readonly RoutingMapStatus[],
  servingConfigStatus: readonly ServingConfigStatus[],
  held: ReadonlyMap<string, unknown>,
): { ready: boolean; reason: string; message: string } {
  const list = (entries: readonly { namespace: string; gatewayName: string; reason?: string }[]) =>
    entries.map((s) => `${s.namespace}/${s.gatewayName} ${s.reason ?? ''}`).join(', ');
  const failed = routingMapStatus.filter(
    (s) => s.phase !== 'Distributed' && !held.has(`${s.namespace}/${s.gatewayName}`),
  );
  if (failed.length > 0)
    return {
      ready: false,
      reason: 'OverlayNotDistributed',
      message: `${failed.length} of ${routingMapStatus.length} gateway overlays not distributed: ${list(failed)}`,
    };
  const serving = servingConfigStatus.filter((s) => s.phase !== 'Disabled');
  const servingFailed = serving.filter((s) => s.phase !== 'Distributed');
  if (servingFailed.length > 0)
    return {
      ready: false,
      reason: 'ServingConfigNotDistributed',
      message: `${servingFailed.length} of ${serving.length} gateway serving configs not distributed: ${list(servingFailed)}`,
    };
  return {
    ready: true,
    reason: 'OverlaysDistributed',
    message: `${routingMapStatus.length} gateway overlays distributed${serving.length > 0 ? `, ${serving.length} serving configs` : ''}`,
  };
}

/** Each site's signals endpoint as its site record advertises it; this site's from its own listener. */
function signalsAddresses(ctx: OperatorContext, runtime: GossipRuntime): Map<string, string> {
  const addresses = new Map<string, string>();
  for (const [site, info] of runtime.store.sites())
    if (info.signals_address !== undefined) addresses.set(site, info.signals_address);
  if (ctx.signalsAddress !== undefined) addresses.set(ctx.config.site, ctx.signalsAddress);
  return addresses;
}
