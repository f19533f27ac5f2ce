/**
 * GridSite auto-discovery (label grid.praxis.fast/auto-discover-sites: "true" on the GridNetwork): a stub GridSite
 * per remote SWIM member, its gateway address taken from the member's gossiped site record; and the garbage
 * collection of stubs gossip no longer vouches for (past staleCandidateTtlSeconds, 24 h when unset). Declared GridSites
 * are never touched. A pass that would delete more than half the stubs, and more than 8, deletes none: a partition
 * looks like a mass departure.
 */
import type { GridNetworkResource, GridSiteResource } from '../../../schemas/crds/types.ts';
import { API_VERSION } from '../../../schemas/crds/definitions.ts';
import type { KubeObject } from '../../shared/resource-store/types.ts';
import type { OperatorContext } from '../context.ts';
import type { GossipRuntime } from '../gossip-runtime.ts';
import {
  ANNOTATION_SITE_ID,
  FIELD_MANAGER,
  GRID_SITE,
  LABEL_AUTO_DISCOVERED,
  LABEL_NETWORK,
  siteIdOf,
} from '../kinds.ts';
import { discoveredSiteK8sName } from '../../routing/sites.ts';
import { nowRfc3339 } from './status.ts';

export const DEFAULT_STUB_TTL_SECONDS = 86_400;
export const MAX_DISCOVERED_SITES = 256;

export interface GcDecision {
  /** Stubs whose absentSince should be set (now) or cleared (null). */
  readonly absentSince: ReadonlyMap<string, string | null>;
  readonly delete: readonly string[];
  /** True when the safety brake held back the deletes. */
  readonly braked: boolean;
}

/** Pure GC decision over the auto-discovered stubs of one network. */
export function decideStubGc(
  stubs: readonly { name: string; siteId: string; absentSince?: string }[],
  vouched: (siteId: string) => boolean,
  nowMs: number,
  ttlSeconds: number,
  judging: boolean,
): GcDecision {
  const absentSince = new Map<string, string | null>();
  const expired: string[] = [];
  for (const stub of stubs) {
    if (vouched(stub.siteId)) {
      if (stub.absentSince !== undefined) absentSince.set(stub.name, null);
      continue;
    }
    if (!judging) continue;
    if (stub.absentSince === undefined) {
      absentSince.set(stub.name, nowRfc3339(nowMs));
      continue;
    }
    const since = Date.parse(stub.absentSince);
    if (!Number.isNaN(since) && nowMs - since >= ttlSeconds * 1000) expired.push(stub.name);
  }
  const braked = expired.length > stubs.length / 2 && expired.length > 8;
  return { absentSince, delete: braked ? [] : expired, braked };
}

export { siteIdOf };

export async function reconcileDiscoveredSites(
  ctx: OperatorContext,
  network: GridNetworkResource,
  runtime: GossipRuntime,
  sites: readonly GridSiteResource[],
): Promise<void> {
  const name = network.metadata.name;
  const own = sites.filter((s) => s.spec.gridNetworkRef === name);
  const byName = new Map(own.map((s) => [s.metadata.name, s]));
  const records = runtime.store.sites();
  let stubCount = own.filter((s) => s.metadata.labels?.[LABEL_AUTO_DISCOVERED] === 'true').length;
  for (const member of runtime.members()) {
    if (member.state !== 'alive') continue;
    const siteName = discoveredSiteK8sName(name, member.name);
    const address = records.get(member.name)?.gateway_address ?? '';
    const existing = byName.get(siteName);
    if (existing !== undefined) {
      const current = existing.spec.gatewayEndpoint?.address ?? '';
      // Only stubs follow the gossiped address; a declared site's endpoint is the administrator's.
      if (existing.metadata.labels?.[LABEL_AUTO_DISCOVERED] !== 'true' || current === address || address === '')
        continue;
      await ctx.store.apply(
        GRID_SITE,
        asObject({
          ...stubObject(name, member.name, siteName, address),
          spec: { ...existing.spec, gatewayEndpoint: { ...existing.spec.gatewayEndpoint, address } },
        }),
        { fieldManager: FIELD_MANAGER },
      );
      continue;
    }
    if (stubCount >= MAX_DISCOVERED_SITES) {
      ctx.logger.warn(
        { network: name, site: member.name },
        `auto-discovery cap of ${MAX_DISCOVERED_SITES} sites reached; site not recorded`,
      );
      continue;
    }
    await ctx.store.apply(GRID_SITE, asObject(stubObject(name, member.name, siteName, address)), {
      fieldManager: FIELD_MANAGER,
    });
    stubCount += 1;
    ctx.logger.info({ network: name, site: member.name, gridSite: siteName }, 'site discovered over SWIM');
  }

  const stubs = own
    .filter((s) => s.metadata.labels?.[LABEL_AUTO_DISCOVERED] === 'true')
    .map((s) => ({
      name: s.metadata.name,
      siteId: siteIdOf(s),
      ...(s.status?.absentSince !== undefined ? { absentSince: s.status.absentSince } : {}),
    }));
  const now = ctx.now();
  const judging = now - ctx.startedAtMs >= ctx.config.discoveryVerificationWindowMs;
  const vouched = (siteId: string): boolean => {
    const m = runtime.membership.member(siteId);
    return m !== undefined && m.state !== 'dead' && m.state !== 'left';
  };
  const ttl =
    network.spec.staleCandidateTtlSeconds !== undefined && network.spec.staleCandidateTtlSeconds > 0
      ? network.spec.staleCandidateTtlSeconds
      : DEFAULT_STUB_TTL_SECONDS;
  const decision = decideStubGc(stubs, vouched, now, ttl, judging);
  for (const [stub, since] of decision.absentSince) {
    await ctx.store.patchStatus(GRID_SITE, { name: stub }, { absentSince: since }, { fieldManager: FIELD_MANAGER });
  }
  if (decision.braked) {
    ctx.logger.warn(
      { network: name, stubs: stubs.length },
      'GridSite GC would delete more than half the auto-discovered sites; deleting none (partition safety brake)',
    );
  }
  for (const stub of decision.delete) {
    // Conditional on the object being unchanged: a site that rejoined meanwhile keeps its stub.
    const before = byName.get(stub);
    const current = (await ctx.store.get(GRID_SITE, { name: stub })) as GridSiteResource | undefined;
    if (current === undefined || current.metadata.resourceVersion !== before?.metadata.resourceVersion) continue;
    await ctx.store.delete(GRID_SITE, { name: stub });
    ctx.metrics.dropSite(stub);
    ctx.logger.info(
      { network: name, gridSite: stub },
      'auto-discovered GridSite garbage-collected after its absence TTL',
    );
  }
}

function asObject(site: GridSiteResource): KubeObject {
  return site as unknown as KubeObject;
}

function stubObject(network: string, siteId: string, name: string, address: string): GridSiteResource {
  return {
    apiVersion: API_VERSION,
    kind: 'GridSite',
    metadata: {
      name,
      labels: { [LABEL_NETWORK]: network, [LABEL_AUTO_DISCOVERED]: 'true' },
      annotations: { [ANNOTATION_SITE_ID]: siteId },
    },
    spec: { gridNetworkRef: network, gatewayEndpoint: { address } },
  };
}
