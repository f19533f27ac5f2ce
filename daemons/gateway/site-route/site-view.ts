// The gateway's read-only view of the serving config and of each site's latest signals, as grid_site_route
// reads them. grid-site-view.ts implements it (serving ConfigMap delivered by overlay-sync + the mTLS signals poller).
export type Admission = 'all' | 'none';

/** One provider of one site, as the operator rendered it into this gateway's serving config. */
export interface ServingEntry {
  readonly site: string;
  /** The InferenceProvider's name (namespace/name where the overlay uses that). */
  readonly provider: string;
  readonly models: readonly string[];
  /** Gateway cluster that reaches this provider: the local backend cluster, or the provider-hop cluster of its site. */
  readonly cluster: string;
  /**
   * 'none' when the provider takes no new requests (not Ready, excluded with a reason, or admitted existing_only):
   * known, never chosen.
   */
  readonly admission: Admission;
  /** grid_provider_ready as the operator last saw it. */
  readonly ready: boolean;
  /** Set when the operator knows the provider but excludes it: a short reason ('not_ready', 'unhealthy', 'residency', ...). */
  readonly excluded?: string;
  /** True for a provider of the gateway's own site. */
  readonly local: boolean;
}

/** One poll of one site's signals endpoint, concluded. A field left undefined is a missing signal: neutral, never zero. */
export interface SiteSample {
  readonly site: string;
  /** Gateway clock (ms) when the poll answered. */
  readonly atMs: number;
  /** Running plus waiting per endpoint, times ready endpoints, plus what flow control holds. */
  readonly inFlight?: number;
  /** Work waiting (queued) at the site; > 0 with inFlight at the ceiling means "full". */
  readonly waiting?: number;
  /** Ready endpoints; 0 reads as not ready. */
  readonly readyEndpoints?: number;
}

export interface SiteView {
  /** Revision of the serving config in use, undefined before the first one is accepted. */
  revision(): string | undefined;
  /** Every model the serving config names. */
  models(): readonly string[];
  /** Every entry serving a model, routable and known-but-excluded, across sites. */
  entries(model: string): readonly ServingEntry[];
  /** Newest sample of a site, undefined when never polled successfully (or too old to trust). */
  sample(site: string): SiteSample | undefined;
  /** Called on every new sample (the availability model learns ceilings from samples, not from requests). */
  onSample(listener: (sample: SiteSample) => void): () => void;
}
