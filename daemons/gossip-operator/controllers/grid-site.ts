/**
 * GridSite reconcile: the phase machine of site-phase.ts fed by SWIM membership
 * and the bounded mTLS gateway probe with the canonical fingerprint pin. The probe presents this site's
 * certificate (GridNetwork spec.tls.siteSecretRef) and trusts only the grid CA (spec.tls.caSecretRef).
 */
import type { GridNetworkResource, GridSiteResource } from '../../../schemas/crds/types.ts';
import type { GridSiteStatus } from '../../../schemas/generated/gridsites.ts';
import { performance } from 'node:perf_hooks';
import { errorFields } from '../../shared/log.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { ANNOTATION_SITE_ID, FIELD_MANAGER, GRID_NETWORK, GRID_SITE } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { probeSite, type SiteProbeConfig, type SiteProbeResult } from '../probes/site-probe.ts';
import { discoveredSiteK8sName } from '../../routing/sites.ts';
import { readSecretKey } from '../secrets.ts';
import { nextSitePhase, type GridSitePhase, type MemberView } from '../site-phase.ts';
import { siteIdOf } from './site-discovery.ts';
import { siteNameLedgerConfigMapName } from '../../../schemas/object-names.ts';
import { recordSiteNames } from '../site-name-ledger.ts';
import { boundedMessage, mergeConditions, nowRfc3339, sameJson, type Condition } from './status.ts';

const PROBE_TIMEOUT_MS = 5_000;
/** How long a name this process recorded is trusted before the ledger is read again (a lost first-write race heals). */
const LEDGER_RECHECK_MS = 10 * 60_000;

export class GridSiteController implements Controller {
  readonly name = CONTROLLER_NAMES.site;
  readonly kind = GRID_SITE;
  readonly #ctx: OperatorContext;
  readonly #known = new Set<string>();
  /** Site id → when this process last confirmed it is in the site name ledger. */
  readonly #recorded = new Map<string, number>();

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  /** The SWIM/CRDT site id: the annotation of a stub, a site whose discovered name is this one, or the name. */
  #siteId(site: GridSiteResource): string {
    const annotated = site.metadata.annotations?.[ANNOTATION_SITE_ID];
    if (annotated !== undefined) return annotated;
    const runtime = this.#ctx.gossip;
    if (runtime !== undefined) {
      for (const member of runtime.membership.members()) {
        if (discoveredSiteK8sName(site.spec.gridNetworkRef, member.name) === site.metadata.name) return member.name;
      }
      for (const origin of runtime.store.sites().keys()) {
        if (discoveredSiteK8sName(site.spec.gridNetworkRef, origin) === site.metadata.name) return origin;
      }
    }
    return siteIdOf(site);
  }

  async #probeConfig(site: GridSiteResource, address: string): Promise<SiteProbeConfig> {
    const endpoint = site.spec.gatewayEndpoint ?? site.spec.egress;
    const mode = endpoint?.tls?.mode ?? 'Mutual';
    const base: SiteProbeConfig = {
      address,
      mode,
      ...(endpoint?.tls?.serverName !== undefined ? { serverName: endpoint.tls.serverName } : {}),
      fingerprints: site.spec.trust?.canonicalFingerprints ?? [],
      ...(site.spec.trust?.certFingerprint !== undefined
        ? { legacyPemFingerprint: site.spec.trust.certFingerprint }
        : {}),
      timeoutMs: PROBE_TIMEOUT_MS,
    };
    if (mode === 'Plaintext') return base;
    const network = (await this.#ctx.store.get(GRID_NETWORK, { name: site.spec.gridNetworkRef })) as
      | GridNetworkResource
      | undefined;
    const tls = network?.spec.tls;
    // Missing material is reported by the probe as trust_missing, which names what is absent.
    const read = async (ref: { name: string; namespace: string } | undefined, key: string) => {
      if (ref === undefined) return undefined;
      try {
        return (await readSecretKey(this.#ctx.store, { name: ref.name, namespace: ref.namespace }, key)).toString(
          'utf8',
        );
      } catch {
        return undefined;
      }
    };
    const [ca, clientCert, clientKey] = await Promise.all([
      read(tls?.caSecretRef, 'ca.crt'),
      read(tls?.siteSecretRef, 'tls.crt'),
      read(tls?.siteSecretRef, 'tls.key'),
    ]);
    return {
      ...base,
      ...(ca !== undefined ? { ca } : {}),
      ...(clientCert !== undefined ? { clientCert } : {}),
      ...(clientKey !== undefined ? { clientKey } : {}),
    };
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const site = (await ctx.store.get(GRID_SITE, { name })) as GridSiteResource | undefined;
    if (site === undefined) {
      if (this.#known.delete(name)) ctx.metrics.dropSite(name);
      ctx.siteProbeRtt.delete(name);
      return {};
    }
    this.#known.add(name);
    await this.#recordName(siteIdOf(site));
    const current = site.status?.phase as GridSitePhase | undefined;
    const siteId = this.#siteId(site);
    const member = this.#member(siteId);
    const address = (site.spec.gatewayEndpoint ?? site.spec.egress)?.address ?? '';
    let probe: SiteProbeResult | undefined;
    if (address !== '' && member !== 'left') {
      try {
        const config = await this.#probeConfig(site, address);
        const startedMs = performance.now();
        probe = await probeSite(config);
        if (probe.outcome === 'unreachable') ctx.siteProbeRtt.delete(name);
        else ctx.siteProbeRtt.set(name, Math.round((performance.now() - startedMs) * 10) / 10);
      } catch (error) {
        ctx.siteProbeRtt.delete(name);
        probe = { outcome: 'unreachable', detail: `probe failed: ${errorFields(error).message}` };
      }
    }
    const decision = nextSitePhase({ current, hasGatewayAddress: address !== '', member, probe });
    const now = ctx.now();
    const generation = site.metadata.generation ?? 1;
    const conditions = mergeConditions(
      site.status?.conditions as Condition[] | undefined,
      decision.conditions.map((c) => ({ ...c, message: decision.message, observedGeneration: generation })),
      now,
    );
    const status: GridSiteStatus = {
      phase: decision.phase,
      reason: decision.reason,
      message: boundedMessage(decision.message),
      observedGeneration: generation,
      conditions,
    };
    const record = ctx.gossip?.store.sites().get(siteId);
    if (record?.public_cert_pem !== undefined) {
      // The state store already discarded PEMs with private keys; a non-certificate PEM is trust material gone wrong.
      if (/-----BEGIN CERTIFICATE-----/.test(record.public_cert_pem)) status.publicCertPem = record.public_cert_pem;
      else {
        status.reason = 'TrustMaterialInvalid';
        status.message = 'the site published a PEM that is not a certificate';
      }
    }
    if (record !== undefined) {
      status.capabilities = {
        inference: record.capabilities.inference,
        agentTools: record.capabilities.agent_tools,
        agentToAgent: record.capabilities.agent_to_agent,
      };
    }
    const changedPhase = current !== decision.phase;
    const before = site.status ?? {};
    const comparable = { ...before, ...status };
    delete (comparable as { lastProbeTime?: string }).lastProbeTime;
    delete (comparable as { lastTransitionTime?: string }).lastTransitionTime;
    const beforeComparable = { ...before };
    delete (beforeComparable as { lastProbeTime?: string }).lastProbeTime;
    delete (beforeComparable as { lastTransitionTime?: string }).lastTransitionTime;
    if (!sameJson(comparable, beforeComparable) || changedPhase) {
      if (probe !== undefined) status.lastProbeTime = nowRfc3339(now);
      if (changedPhase) {
        status.lastTransitionTime = nowRfc3339(now);
        ctx.metrics.sitePhaseTransitions.inc({ phase: decision.phase, reason: decision.reason });
        ctx.logger.info(
          { gridSite: name, from: current ?? 'none', to: decision.phase, reason: decision.reason },
          'GridSite phase changed',
        );
        if (decision.phase === 'Active' || current === 'Active')
          ctx.enqueue(CONTROLLER_NAMES.network, site.spec.gridNetworkRef);
      }
      await ctx.store.patchStatus(GRID_SITE, { name }, status as Record<string, unknown>, {
        fieldManager: FIELD_MANAGER,
      });
    }
    ctx.metrics.setSitePhase(name, decision.phase);
    return { requeueAfterMs: ctx.config.sitePollIntervalMs };
  }

  /**
   * The name is in use, so it goes into the site name ledger (site-name-ledger.ts): once its GridSite is gone, an
   * invite reuses it only with allowDeletedName. A failed write is logged and retried on the next reconcile; it never
   * holds up the site's phase.
   */
  async #recordName(siteId: string): Promise<void> {
    const ctx = this.#ctx;
    const now = ctx.now();
    if (now - (this.#recorded.get(siteId) ?? -Infinity) < LEDGER_RECHECK_MS) return;
    const ref = { name: siteNameLedgerConfigMapName(ctx.config.site), namespace: ctx.config.namespace };
    try {
      const added = await recordSiteNames(ctx.store, ref, [siteId], now);
      this.#recorded.set(siteId, now);
      if (added.length > 0)
        ctx.logger.info(
          { site: siteId, configMap: `${ref.namespace}/${ref.name}` },
          'site name recorded in the site name ledger',
        );
    } catch (error) {
      ctx.logger.warn(
        { site: siteId, configMap: `${ref.namespace}/${ref.name}`, error: errorFields(error) },
        'cannot record the site name in the site name ledger; retrying on the next reconcile',
      );
    }
  }

  #member(siteId: string): MemberView {
    const runtime = this.#ctx.gossip;
    if (runtime === undefined || siteId === runtime.membership.name) return undefined;
    return runtime.membership.member(siteId)?.state;
  }
}
