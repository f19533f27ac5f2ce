// The decision core of grid_site_route: from the SiteView (serving config and each site's samples) and what this
// replica learned, the site and cluster for one request, or the refusal. Clock and randomness are injected; the
// filter (filters/grid-site-route.ts) is the HTTP shell around it.
import { availabilitySettings, freshRho, hasRoom, isFull, isRelieved, learn, weights } from './availability.ts';
import type { AvailabilitySettings, SiteLearned } from './availability.ts';
import type { DecisionReason, SiteRouteMetrics } from './metrics.ts';
import { PrefixMemory, affinityStep, prefixSettings } from './prefix-affinity.ts';
import type { AffinityOutcome, PrefixSettings } from './prefix-affinity.ts';
import { pickByCapacity, pickWithRoom, shouldShed } from './site-choice.ts';
import type { SelectionPath, SiteOption } from './site-choice.ts';
import type { ServingEntry, SiteSample, SiteView } from './site-view.ts';
import type { GridSiteRouteFilter } from '../../../schemas/generated/gateway-config.ts';
import type { CandidateLoad } from '../routing/candidate-load.ts';

export interface SiteRouterOptions {
  view: SiteView;
  config: Pick<GridSiteRouteFilter, 'availability' | 'prefix_affinity' | 'local_load'>;
  /** Whether the load balancer has an endpoint of this cluster that is not backing off. */
  isClusterAvailable(cluster: string): boolean;
  metrics?: SiteRouteMetrics;
  /** The gateway's own in-flight requests per cluster; read only with config.local_load. */
  load?: CandidateLoad;
  nowMs?: () => number;
  random?: () => number;
}

export type Decision =
  | {
      readonly kind: 'routed';
      readonly entry: ServingEntry;
      readonly path: SelectionPath;
      readonly reason: DecisionReason;
      readonly affinity?: AffinityOutcome;
    }
  | {
      readonly kind: 'refused';
      readonly status: 400 | 404 | 429 | 503;
      readonly code: string;
      readonly message: string;
      readonly reason: DecisionReason;
      readonly retryAfterSeconds?: number;
    };

export type Refusal = Extract<Decision, { kind: 'refused' }>;

/** "about one operator scrape plus one peer poll, spread so retries do not arrive together" (the reference's 3..7 s). */
const RETRY_AFTER_SECONDS = [3, 4, 5, 6, 7] as const;
/** "A site still in the grid that admits no new request answers 503 with Retry-After: 5." */
const PINNED_RETRY_AFTER_SECONDS = 5;

interface SiteGroup {
  readonly site: string;
  readonly healthy: ServingEntry[];
  readonly demoted: ServingEntry[];
}

export class SiteRouter {
  readonly availability: AvailabilitySettings;
  readonly prefix: PrefixSettings;
  readonly memory = new PrefixMemory();
  readonly #view: SiteView;
  readonly #isClusterAvailable: (cluster: string) => boolean;
  readonly #metrics: SiteRouteMetrics | undefined;
  readonly #now: () => number;
  readonly #random: () => number;
  /** Set only with local_load: the draw then reads each site's rho with this gateway's requests since its sample. */
  readonly load: CandidateLoad | undefined;
  readonly #learned = new Map<string, SiteLearned>();
  readonly #shed = new Set<string>();
  readonly #cursor = new Map<string, number>();
  #turn = 0;
  readonly #unsubscribe: () => void;

  constructor(options: SiteRouterOptions) {
    this.availability = availabilitySettings(options.config.availability);
    this.prefix = prefixSettings(options.config.prefix_affinity);
    this.#view = options.view;
    this.#isClusterAvailable = options.isClusterAvailable;
    this.#metrics = options.metrics;
    this.#now = options.nowMs ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.load = options.config.local_load === undefined ? undefined : options.load;
    if (options.config.local_load !== undefined && this.load === undefined)
      throw new Error("grid_site_route local_load needs the gateway's candidate load");
    this.#unsubscribe = this.#view.onSample((sample) => this.observe(sample));
  }

  close(): void {
    this.#unsubscribe();
  }

  /** Folds one sample in: "the availability model learns ceilings from samples, not from requests". */
  observe(sample: SiteSample): void {
    const learned = learn(this.#learned.get(sample.site), sample, this.availability);
    this.#learned.set(sample.site, learned);
    // What the sample already holds of this gateway's requests: only those after it are added to its rho.
    this.load?.sampled(sample.site);
    if (this.#metrics !== undefined) this.#publish(sample.site);
  }

  learned(site: string): SiteLearned | undefined {
    // A site whose samples stopped (the view no longer trusts its newest) is unmeasured again, not idle.
    return this.#view.sample(site) === undefined ? undefined : this.#learned.get(site);
  }

  #publish(site: string): void {
    const seen = new Set<string>();
    for (const model of this.#view.models()) {
      const entries = this.#view.entries(model);
      const sites = [...new Set(entries.map((e) => e.site))];
      const w = weights(
        sites.map((s) => this.learned(s)),
        this.availability,
      );
      const index = sites.indexOf(site);
      if (index === -1) continue;
      for (const entry of entries) {
        if (entry.site !== site || seen.has(entry.cluster)) continue;
        seen.add(entry.cluster);
        const l = this.learned(site);
        this.#metrics?.site(site, entry.cluster, l?.ceiling, l?.rho, l?.ceiling === undefined ? undefined : w[index]);
      }
    }
  }

  /** What the site taught, with rho as of now under local_load (freshRho); exactly learned() without it. */
  #fresh(site: string): SiteLearned | undefined {
    const learned = this.learned(site);
    const load = this.load;
    if (load === undefined || learned?.rho === undefined) return learned;
    const since = load.sinceSample(site);
    return since === 0 ? learned : { ...learned, rho: freshRho(learned, since) };
  }

  #healthy(entry: ServingEntry): boolean {
    if (!entry.ready) return false;
    if (this.learned(entry.site)?.readyEndpoints === 0) return false;
    return this.#isClusterAvailable(entry.cluster);
  }

  /** Entries that may take a request, grouped by site in serving-config order. "admission: none" is never chosen. */
  #groups(entries: readonly ServingEntry[]): SiteGroup[] {
    const groups = new Map<string, SiteGroup>();
    for (const entry of entries) {
      if (entry.admission !== 'all' || entry.excluded !== undefined) continue;
      let group = groups.get(entry.site);
      if (group === undefined) {
        group = { site: entry.site, healthy: [], demoted: [] };
        groups.set(entry.site, group);
      }
      (this.#healthy(entry) ? group.healthy : group.demoted).push(entry);
    }
    return [...groups.values()];
  }

  #entryOf(site: string, entries: readonly ServingEntry[]): ServingEntry {
    if (entries.length === 1) return entries[0]!;
    const next = this.#cursor.get(site) ?? 0;
    this.#cursor.set(site, next + 1);
    return entries[next % entries.length]!;
  }

  #refuse(
    status: 400 | 404 | 429 | 503,
    code: string,
    message: string,
    reason: DecisionReason,
    retryAfterSeconds?: number,
  ): Refusal {
    this.#metrics?.decision('', '', reason);
    return {
      kind: 'refused',
      status,
      code,
      message,
      reason,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    };
  }

  #retryAfter(): number {
    return RETRY_AFTER_SECONDS[this.#turn++ % RETRY_AFTER_SECONDS.length]!;
  }

  #routed(entry: ServingEntry, path: SelectionPath, reason: DecisionReason, affinity?: AffinityOutcome): Decision {
    this.#metrics?.decision(entry.site, entry.cluster, reason);
    this.#metrics?.selection(path);
    return { kind: 'routed', entry, path, reason, ...(affinity === undefined ? {} : { affinity }) };
  }

  /** Whether the model is shed now; updates the hysteresis and the grid_route_shedding gauge. */
  #shedding(model: string, healthy: readonly SiteGroup[], nowMs: number): boolean {
    const previously = this.#shed.has(model);
    const sites = healthy.map((g) => {
      const l = this.learned(g.site);
      return { full: isFull(l, nowMs, this.availability), relieved: isRelieved(l, nowMs, this.availability) };
    });
    const shed = shouldShed(previously, sites, this.availability.shedding);
    if (shed !== previously) {
      if (shed) this.#shed.add(model);
      else this.#shed.delete(model);
      this.#metrics?.shedding(model, shed);
    }
    return shed;
  }

  /**
   * The site for a request for `model` (site-selection.md "Site choice"), with prefix affinity over `keys` (the
   * request's block keys; undefined when it has none).
   */
  decide(model: string, keys: readonly string[] | undefined): Decision {
    const entries = this.#view.entries(model);
    if (entries.length === 0)
      return this.#refuse(404, 'model_not_found', `no site serves model "${model}"`, 'unknown_model');
    const groups = this.#groups(entries);
    const healthy = groups.filter((g) => g.healthy.length > 0);
    if (healthy.length === 0) {
      // "A site that is not ready, or whose cluster ... with no healthy endpoint, is chosen only when no healthy site is left."
      const demoted = groups.find((g) => g.demoted.length > 0);
      if (demoted === undefined)
        return this.#refuse(
          503,
          'no_healthy_site',
          `no healthy site serves model "${model}" now`,
          'no_healthy_site',
          this.#retryAfter(),
        );
      return this.#routed(this.#entryOf(demoted.site, demoted.demoted), 'fallback', 'fallback');
    }
    const nowMs = this.#now();
    if (this.#shedding(model, healthy, nowMs)) {
      return this.#refuse(
        429,
        'capacity_exhausted',
        `every site serving model "${model}" is at capacity`,
        'shed',
        this.#retryAfter(),
      );
    }
    const learned = healthy.map((g) => this.#fresh(g.site));
    const w = weights(learned, this.availability);
    const options: SiteOption[] = healthy.map((g, i) => ({
      site: g.site,
      weight: w[i]!,
      rho: learned[i]?.rho,
      queue: learned[i]?.queuePerUnit,
      full: isFull(learned[i], nowMs, this.availability),
    }));
    const roomIndex = options.map((_, i) => i).filter((i) => hasRoom(learned[i]));
    let affinity: AffinityOutcome | undefined;
    if (this.prefix.enabled && roomIndex.length >= 2) {
      // "A request with one admitted site counts nothing."
      const candidates = roomIndex.map((i) => ({
        run:
          keys === undefined ? 0 : Math.max(...healthy[i]!.healthy.map((e) => this.memory.run(e.cluster, keys, nowMs))),
        queue: options[i]!.queue,
      }));
      // A readable prompt shorter than one block has no block keys: no_match ("identical short prompts spread by
      // load"), not not_applicable.
      const step = affinityStep(candidates, keys === undefined ? undefined : keys.length, this.prefix, this.#random);
      affinity = step.outcome;
      this.#metrics?.affinity(step.outcome);
      if (step.outcome === 'sticky') {
        // "Selection then takes the least-queued sticky site" (then the lower rho, then serving-config order).
        let best = roomIndex[step.sticky[0]!]!;
        for (const s of step.sticky) {
          const i = roomIndex[s]!;
          const q = options[i]!.queue ?? Number.POSITIVE_INFINITY;
          const bq = options[best]!.queue ?? Number.POSITIVE_INFINITY;
          if (q < bq || (q === bq && (options[i]!.rho ?? 0) < (options[best]!.rho ?? 0))) best = i;
        }
        return this.#routed(
          this.#entryOf(healthy[best]!.site, healthy[best]!.healthy),
          'prefix_affinity',
          'routed',
          affinity,
        );
      }
    }
    if (roomIndex.length > 0) {
      const picked = pickWithRoom(
        roomIndex.map((i) => options[i]!),
        this.#random,
      );
      const group = healthy[roomIndex[picked.index]!]!;
      return this.#routed(this.#entryOf(group.site, group.healthy), picked.path, 'routed', affinity);
    }
    const group = healthy[pickByCapacity(options, this.#random)]!;
    return this.#routed(this.#entryOf(group.site, group.healthy), 'by_capacity', 'routed', affinity);
  }

  /**
   * A request naming stored state of `site`: only that site. "A site that left the grid answers 404. A site still in
   * the grid that admits no new request answers 503 with Retry-After: 5." `model` undefined: any entry of the site.
   */
  decidePinned(site: string, model: string | undefined): Decision {
    const models = model === undefined ? this.#view.models() : [model];
    let known = false;
    const healthy: ServingEntry[] = [];
    for (const m of models) {
      for (const entry of this.#view.entries(m)) {
        if (entry.site !== site) continue;
        known = true;
        if (entry.admission === 'all' && entry.excluded === undefined && this.#healthy(entry)) healthy.push(entry);
      }
    }
    if (!known) {
      const inGrid =
        model !== undefined && this.#view.models().some((m) => this.#view.entries(m).some((e) => e.site === site));
      return inGrid
        ? this.#refuse(
            404,
            'model_not_found',
            `site "${site}" holds this state but serves no model "${model}"`,
            'pinned_site_gone',
          )
        : this.#refuse(
            404,
            'stored_state_not_found',
            `site "${site}" that stored this response or conversation has left the grid`,
            'pinned_site_gone',
          );
    }
    if (healthy.length === 0) {
      return this.#refuse(
        503,
        'stored_state_site_unavailable',
        `site "${site}" that stored this response or conversation admits no new request now`,
        'pinned_site_unavailable',
        PINNED_RETRY_AFTER_SECONDS,
      );
    }
    return this.#routed(this.#entryOf(site, healthy), 'pinned', 'pinned');
  }

  /** "A new conversation stays on the local site when it admits requests"; else any healthy site. */
  decideNewConversation(): Decision {
    const all = this.#view.models().flatMap((m) => this.#view.entries(m));
    const usable = all.filter((e) => e.admission === 'all' && e.excluded === undefined && this.#healthy(e));
    const local = usable.filter((e) => e.local);
    const pool = local.length > 0 ? local : usable;
    if (pool.length === 0)
      return this.#refuse(
        503,
        'no_healthy_site',
        'no healthy site admits a new conversation now',
        'no_healthy_site',
        this.#retryAfter(),
      );
    return this.#routed(
      this.#entryOf(
        pool[0]!.site,
        pool.filter((e) => e.site === pool[0]!.site),
      ),
      'pinned',
      'pinned',
    );
  }

  /** A refusal the shell decided (a request with no model, conflicting pins), counted like the router's own. */
  refuse(status: 400 | 404 | 429 | 503, code: string, message: string, reason: DecisionReason): Refusal {
    return this.#refuse(status, code, message, reason);
  }
}
