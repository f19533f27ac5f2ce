/** Site identity, label matching and locality tiers (docs/contract.md §2.5). */
import type { GridSiteView, Labels, NetworkRoutingInput, SelectionTier } from './model.ts';

function sanitizePart(part: string): string {
  return part
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * The Kubernetes name of the GridSite auto-discovered for `site` in `network` (docs/contract.md §2.5):
 * each part lowercased, every character outside [a-z0-9] turned into '-', trimmed of '-', joined with '-'.
 */
export function discoveredSiteK8sName(network: string, site: string): string {
  return `${sanitizePart(network)}-${sanitizePart(site)}`;
}

/** The operator's own site and its GridNetwork.spec geography. */
export interface OwnSite {
  readonly site: string;
  readonly region?: string;
  readonly zone?: string;
}

/** Sites by metadata.name, restricted to one network: built once per reconcile, read per candidate. */
export class SiteIndex {
  readonly network: string;
  private readonly byName: Map<string, GridSiteView>;
  private readonly own: OwnSite | undefined;
  private ownView: GridSiteView | undefined;
  /** discoveredSiteK8sName per site id: asked for every remote record and every candidate site of a reconcile. */
  private readonly networkPart: string;
  private readonly discoveredNames = new Map<string, string>();

  constructor(network: string, sites: readonly GridSiteView[], own?: OwnSite) {
    this.network = network;
    this.networkPart = sanitizePart(network);
    this.own = own;
    this.byName = new Map();
    for (const site of sites) {
      if (site.network === network) this.byName.set(site.name, site);
    }
  }

  /** The GridSite whose name is exactly discovered_site_k8s_name(network, site): the remote eligibility match. */
  discovered(site: string): GridSiteView | undefined {
    let name = this.discoveredNames.get(site);
    if (name === undefined) {
      name = `${this.networkPart}-${sanitizePart(site)}`; // = discoveredSiteK8sName(this.network, site)
      this.discoveredNames.set(site, name);
    }
    return this.byName.get(name);
  }

  /**
   * The GridSite describing a site id, for geography and labels: the auto-discovered name first, then a GridSite
   * declared under the site id itself (manually applied sites and the operator's own site usually are).
   */
  lookup(site: string): GridSiteView | undefined {
    const found = this.discovered(site) ?? this.byName.get(site);
    if (this.own === undefined || site !== this.own.site) return found;
    // The own site's geography falls back to GridNetwork.spec.region/zone field by field.
    this.ownView ??= {
      name: found?.name ?? site,
      network: this.network,
      phase: found?.phase ?? 'Pending',
      labels: found?.labels ?? {},
      ...withText('region', found?.region ?? this.own.region),
      ...withText('zone', found?.zone ?? this.own.zone),
      ...(found?.sovereigntyZone !== undefined ? { sovereigntyZone: found.sovereigntyZone } : {}),
    };
    return this.ownView;
  }

  /** Sites of this network whose labels contain `selector`, in name order (site resolution is deterministic). */
  matching(selector: Labels): GridSiteView[] {
    const found: GridSiteView[] = [];
    for (const site of this.byName.values()) {
      if (labelsContain(site.labels, selector)) found.push(site);
    }
    return found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}

/** The site index of one reconcile, with the own site's GridNetwork geography. */
export function siteIndexFor(input: NetworkRoutingInput): SiteIndex {
  return new SiteIndex(input.network, input.sites, { site: input.ownSite, ...input.ownGeography });
}

/** True when every key/value of `selector` is in `labels` (matchLabels semantics; an empty selector matches all). */
export function labelsContain(labels: Labels, selector: Labels): boolean {
  for (const key of Object.keys(selector)) {
    if (!Object.hasOwn(labels, key) || labels[key] !== selector[key]) return false;
  }
  return true;
}

export function isEmptySelector(selector: Labels | undefined): boolean {
  return selector === undefined || Object.keys(selector).length === 0;
}

/**
 * Access policy (docs/contract.md §2.5): the provider's accessPolicy.siteSelector.matchLabels must be a subset of the
 * consumer site's labels. An empty selector admits every consumer; an unknown consumer site is denied unless it is
 * empty.
 */
export function accessAllowed(accessLabels: Labels | undefined, consumer: GridSiteView | undefined): boolean {
  if (isEmptySelector(accessLabels)) return true;
  if (consumer === undefined) return false;
  return labelsContain(consumer.labels, accessLabels as Labels);
}

function withText<K extends 'region' | 'zone'>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Partial<Record<K, string>>);
}

function hasText(value: string | undefined): value is string {
  return value !== undefined && value.trim() !== '';
}

/**
 * Locality of a candidate site seen from the consumer site. Zone comparison requires a region match because zone
 * names are not globally unique; without geography on both sides the tier is unknown.
 */
export function localityTier(
  consumerSite: string,
  consumer: GridSiteView | undefined,
  candidateSite: string,
  candidate: GridSiteView | undefined,
): SelectionTier {
  if (candidateSite === consumerSite) return 'same_site';
  const consumerRegion = consumer?.region;
  const candidateRegion = candidate?.region;
  if (!hasText(consumerRegion) || !hasText(candidateRegion)) return 'unknown';
  if (consumerRegion !== candidateRegion) return 'cross_region';
  const consumerZone = consumer?.zone;
  const candidateZone = candidate?.zone;
  if (hasText(consumerZone) && hasText(candidateZone) && consumerZone === candidateZone) return 'same_zone';
  return 'same_region';
}
