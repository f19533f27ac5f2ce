/**
 * Per-provider serving state for one gateway, derived from what the routing core already decided: the providers
 * behind the gateway's overlay candidates are routable, the providers the core excluded for a reason a gateway can
 * act on are known-but-excluded (admission none), so the gateway knows them and never chooses them.
 *
 * This is the one place that reads routing results for the serving config: when routing exports its own
 * per-provider verdict (ready, admission, excluded), only servingEntries changes.
 */
import type { OverlayPayload } from '../../../schemas/overlay/types.ts';
import type { ServingConfigEntry } from '../../../schemas/generated/serving-config.ts';
import { providerKey } from '../../routing/backends.ts';
import type { NetworkRoutingInput } from '../../routing/model.ts';
import type { Exclusion, ExclusionReason } from '../../routing/result.ts';

/**
 * Exclusions that say nothing about the provider to this gateway: another network's or our own echo, a duplicate or
 * capped capability (the provider is routable through another entry), a name the contract cannot carry, and a
 * provider this gateway's site may not use at all (a model it may not use is unknown to it, 404, never 503).
 */
const NOT_KNOWN_TO_GATEWAY: ReadonlySet<ExclusionReason> = new Set<ExclusionReason>([
  'other_network',
  'own_echo',
  'duplicate',
  'over_limit',
  'invalid_capability',
  'access_denied',
]);

interface Known {
  readonly site: string;
  readonly provider: string;
  readonly cluster: string;
  readonly models: readonly string[];
}

/** Every inference provider the input names, by the identity routing reports exclusions with. */
function catalog(input: NetworkRoutingInput): Map<string, Known> {
  const known = new Map<string, Known>();
  for (const p of input.inferenceProviders) {
    if (p.network !== input.network) continue;
    known.set(p.name, { site: input.ownSite, provider: p.name, cluster: p.routingCluster ?? p.name, models: p.models });
  }
  for (const r of input.remoteRecords) {
    if (r.network !== input.network || r.site === input.ownSite) continue;
    known.set(providerKey(r.network, r.site, r.provider), {
      site: r.site,
      provider: r.provider,
      cluster: r.routingCluster,
      models: r.models,
    });
  }
  return known;
}

/**
 * `overlay` is this gateway's rendered payload; `excluded` every exclusion of the reconcile (network-wide and this
 * gateway's). A provider with both a candidate and an exclusion is routable.
 */
export function servingEntries(
  input: NetworkRoutingInput,
  overlay: OverlayPayload,
  excluded: readonly Exclusion[],
): ServingConfigEntry[] {
  const known = catalog(input);
  const bySiteCluster = new Map<string, Known>();
  for (const k of known.values()) bySiteCluster.set(`${k.site}\u0000${k.cluster}`, k);
  const entries = new Map<
    string,
    {
      site: string;
      provider: string;
      cluster: string;
      models: Set<string>;
      admits: boolean;
      ready: boolean;
      excluded?: string;
    }
  >();
  for (const c of overlay.candidates) {
    if (c.kind !== 'inference_model') continue;
    const owner = bySiteCluster.get(`${c.site}\u0000${c.cluster}`);
    const provider = owner?.provider ?? c.cluster;
    const key = `${c.site}\u0000${provider}`;
    const entry = entries.get(key) ?? {
      site: c.site,
      provider,
      cluster: c.cluster,
      models: new Set<string>(),
      admits: false,
      ready: true,
    };
    entry.models.add(c.name);
    // existing_only takes no new work: for site choice that is admission none, like a provider that is not Ready.
    entry.admits ||= c.admission_state === 'new_and_existing';
    entry.ready &&= c.fresh;
    entries.set(key, entry);
  }
  for (const e of excluded) {
    if (NOT_KNOWN_TO_GATEWAY.has(e.reason)) continue;
    const k = known.get(e.provider);
    if (k === undefined) continue;
    const key = `${k.site}\u0000${k.provider}`;
    if (entries.has(key)) continue;
    entries.set(key, {
      site: k.site,
      provider: k.provider,
      cluster: k.cluster,
      models: new Set(k.models),
      admits: false,
      ready: false,
      excluded: e.reason,
    });
  }
  return [...entries.values()]
    .sort((a, b) =>
      a.site < b.site ? -1 : a.site > b.site ? 1 : a.provider < b.provider ? -1 : a.provider > b.provider ? 1 : 0,
    )
    .map((e) => ({
      site: e.site,
      provider: e.provider,
      models: [...e.models].sort(),
      cluster: e.cluster,
      admission: e.admits ? 'all' : 'none',
      ready: e.ready,
      ...(e.excluded !== undefined ? { excluded: e.excluded } : {}),
    }));
}
