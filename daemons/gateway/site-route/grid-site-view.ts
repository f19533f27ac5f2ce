// The SiteView grid_site_route reads: the accepted serving config (ServingStore) indexed by model, and each site's
// newest signals sample (SiteSignalsPoller). A newly accepted serving config re-points the poller at its sites.
import type { ServingConfigDocument } from '../../../schemas/generated/serving-config.ts';
import type { ServingStore } from './serving-store.ts';
import type { SiteSignalsPoller } from './site-signals-poller.ts';
import type { ServingEntry, SiteSample, SiteView } from './site-view.ts';

interface Index {
  readonly models: readonly string[];
  readonly byModel: ReadonlyMap<string, readonly ServingEntry[]>;
}

const EMPTY: Index = { models: [], byModel: new Map() };

/** The serving config as entries per model, local entries first (then by site and provider, as rendered). */
export function indexServing(document: ServingConfigDocument): Index {
  const { local_site: localSite, entries } = document.serving;
  const byModel = new Map<string, ServingEntry[]>();
  for (const e of entries) {
    const entry: ServingEntry = {
      site: e.site,
      provider: e.provider,
      models: e.models,
      cluster: e.cluster,
      admission: e.admission,
      ready: e.ready,
      ...(e.excluded !== undefined ? { excluded: e.excluded } : {}),
      local: e.site === localSite,
    };
    for (const model of new Set(e.models)) {
      const list = byModel.get(model) ?? [];
      list.push(entry);
      byModel.set(model, list);
    }
  }
  for (const list of byModel.values()) list.sort((a, b) => Number(b.local) - Number(a.local));
  return { models: [...byModel.keys()].sort(), byModel };
}

export class GridSiteView implements SiteView {
  readonly #store: ServingStore;
  readonly #poller: SiteSignalsPoller;
  #index: Index = EMPTY;

  constructor(store: ServingStore, poller: SiteSignalsPoller) {
    this.#store = store;
    this.#poller = poller;
    const current = store.current();
    if (current !== undefined) this.#accept(current);
    store.onAccepted((document) => this.#accept(document));
  }

  #accept(document: ServingConfigDocument): void {
    this.#index = indexServing(document);
    const providers = new Map<string, Set<string>>();
    for (const e of document.serving.entries) {
      const set = providers.get(e.site) ?? new Set<string>();
      set.add(e.provider);
      providers.set(e.site, set);
    }
    this.#poller.setSites(
      document.serving.network,
      document.serving.sites.map((s) => ({
        site: s.site,
        ...(s.signals_address !== undefined ? { address: s.signals_address } : {}),
        providers: providers.get(s.site) ?? new Set(),
      })),
    );
  }

  revision(): string | undefined {
    return this.#store.revision();
  }

  models(): readonly string[] {
    return this.#index.models;
  }

  entries(model: string): readonly ServingEntry[] {
    return this.#index.byModel.get(model) ?? [];
  }

  sample(site: string): SiteSample | undefined {
    return this.#poller.sample(site);
  }

  onSample(listener: (sample: SiteSample) => void): () => void {
    return this.#poller.onSample(listener);
  }
}
