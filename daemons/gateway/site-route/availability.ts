// Measured site availability (reference praxis-proxy/grid docs/site-selection.md, docs/routing.md §7b): what each
// site's samples teach the gateway. Pure: the learned state goes in and comes out, time is the sample's own clock.
// Every input is the site's published in-flight, queue and readiness; with local_load the gateway also adds the
// requests it dispatched to the site since that sample (freshRho), the one part of the site's load it knows now.
import type { SiteAvailability } from '../../../schemas/generated/gateway-config.ts';
import type { SiteSample } from './site-view.ts';

/** The `availability` block with every default filled in (docs/routing.md §7b settings table). */
export type AvailabilitySettings = Required<SiteAvailability>;

export const DEFAULT_AVAILABILITY: AvailabilitySettings = {
  smoothing: 0.3,
  ceiling_half_life_ms: 600_000,
  ceiling_floor: 8,
  explore_floor: 0.25,
  full_after_ms: 5_000,
  room_after_ms: 2_000,
  queue_full: 1,
  shedding: false,
};

export function availabilitySettings(config: SiteAvailability | undefined): AvailabilitySettings {
  return { ...DEFAULT_AVAILABILITY, ...config };
}

/** What one site's samples have taught: kept per site across samples. */
export interface SiteLearned {
  /** The most in-flight the site has held with nothing waiting, decayed and floored; undefined until measured. */
  readonly ceiling: number | undefined;
  /** When the ceiling was last folded, for its decay. */
  readonly ceilingAtMs: number;
  /** Saturation, in-flight over the ceiling, smoothed; undefined while the site publishes no in-flight. */
  readonly rho: number | undefined;
  /** Queued work per ready endpoint in the newest sample; undefined without a queue reading. */
  readonly queuePerUnit: number | undefined;
  /** Ready endpoints in the newest sample that carried them (0 reads as not ready). */
  readonly readyEndpoints: number | undefined;
  /** Since when every sample has shown the site at its ceiling with work waiting; undefined when the last did not. */
  readonly congestedSinceMs: number | undefined;
  /** The newest sample that showed the site at its ceiling with work waiting. */
  readonly lastCongestedAtMs: number | undefined;
  /** Whether fullness can be judged at all: the site publishes both in-flight and a queue. */
  readonly judged: boolean;
  readonly sampleAtMs: number;
}

/**
 * Folds one sample into what the site taught before. "learns each site's ceiling as the most it has held with nothing
 * waiting, and reads saturation (rho) as in-flight over that ceiling" (site-selection.md); a sample with a whole
 * request waiting teaches no ceiling (routing.md: "Teaching stops on any whole request waiting"). A field the sample
 * leaves out is a missing signal: it keeps what was known and is never read as zero.
 */
export function learn(
  previous: SiteLearned | undefined,
  sample: SiteSample,
  settings: AvailabilitySettings,
): SiteLearned {
  const at = sample.atMs;
  const inFlight = finite(sample.inFlight);
  const waiting = finite(sample.waiting);
  const ready = finite(sample.readyEndpoints);
  const readyEndpoints = ready ?? previous?.readyEndpoints;
  const units = Math.max(1, readyEndpoints ?? 1);
  if (inFlight === undefined) {
    return {
      ceiling: previous?.ceiling,
      ceilingAtMs: previous?.ceilingAtMs ?? at,
      rho: previous?.rho,
      queuePerUnit: waiting === undefined ? previous?.queuePerUnit : waiting / units,
      readyEndpoints,
      congestedSinceMs: previous?.congestedSinceMs,
      lastCongestedAtMs: previous?.lastCongestedAtMs,
      judged: previous?.judged ?? false,
      sampleAtMs: at,
    };
  }
  const decayed =
    previous?.ceiling === undefined
      ? 0
      : previous.ceiling * 2 ** (-Math.max(0, at - previous.ceilingAtMs) / settings.ceiling_half_life_ms);
  const taught = waiting !== undefined && waiting >= 1 ? 0 : inFlight;
  const ceiling = Math.max(decayed, taught, settings.ceiling_floor);
  // Unclamped: a site holding more than its ceiling (work queued behind it) reads above 1, so it leaves "room" as
  // its queue forms rather than creeping toward 1 forever under smoothing.
  const raw = inFlight / ceiling;
  const rho = previous?.rho === undefined ? raw : previous.rho * (1 - settings.smoothing) + raw * settings.smoothing;
  const congested =
    waiting !== undefined && inFlight >= ceiling && waiting / units >= settings.queue_full && waiting > 0;
  return {
    ceiling,
    ceilingAtMs: at,
    rho,
    queuePerUnit: waiting === undefined ? undefined : waiting / units,
    readyEndpoints,
    congestedSinceMs: congested ? (previous?.congestedSinceMs ?? at) : undefined,
    lastCongestedAtMs: congested ? at : previous?.lastCongestedAtMs,
    judged: waiting !== undefined,
    sampleAtMs: at,
  };
}

function finite(value: number | undefined): number | undefined {
  return value !== undefined && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * rho as of now rather than as of the site's newest sample: `sinceSample` is the change in this gateway's own
 * in-flight requests to the site since that sample arrived (dispatched minus finished), added to the site's in-flight
 * over the same ceiling, as the sample's own in-flight is. Never below 0; an unmeasured site stays unmeasured.
 */
export function freshRho(site: SiteLearned | undefined, sinceSample: number): number | undefined {
  if (site?.rho === undefined || site.ceiling === undefined) return site?.rho;
  return Math.max(0, site.rho + sinceSample / site.ceiling);
}

/** "A site has room while rho is below 1" (site-selection.md). An unmeasured site has no room: it is not read as idle. */
export function hasRoom(site: SiteLearned | undefined): boolean {
  return site?.rho !== undefined && site.rho < 1;
}

/** At its ceiling with work waiting for `full_after_ms`; undefined when the site publishes no queue (cannot be judged). */
export function isFull(
  site: SiteLearned | undefined,
  nowMs: number,
  settings: AvailabilitySettings,
): boolean | undefined {
  if (site === undefined || !site.judged || site.rho === undefined) return undefined;
  return site.congestedSinceMs !== undefined && nowMs - site.congestedSinceMs >= settings.full_after_ms;
}

/** No sample has shown the site at its ceiling with work waiting for `room_after_ms`; undefined when not judged. */
export function isRelieved(
  site: SiteLearned | undefined,
  nowMs: number,
  settings: AvailabilitySettings,
): boolean | undefined {
  if (site === undefined || !site.judged || site.rho === undefined) return undefined;
  if (site.congestedSinceMs !== undefined) return false;
  return site.lastCongestedAtMs === undefined || nowMs - site.lastCongestedAtMs >= settings.room_after_ms;
}

/**
 * Draw weights: each measured site's ceiling, lifted to `explore_floor` of the largest measured ceiling ("The least
 * share of the largest ceiling a measured site weighs, so an unproven site can prove more"); an unmeasured site
 * weighs the mean of the measured weights, or 1 when none is.
 */
export function weights(sites: readonly (SiteLearned | undefined)[], settings: AvailabilitySettings): number[] {
  const measured = sites.flatMap((s) => (s?.ceiling === undefined ? [] : [s.ceiling]));
  const largest = measured.reduce((a, b) => Math.max(a, b), 0);
  const floor = largest * settings.explore_floor;
  const mean = measured.length === 0 ? 1 : measured.reduce((a, b) => a + Math.max(b, floor), 0) / measured.length;
  return sites.map((s) => (s?.ceiling === undefined ? mean : Math.max(s.ceiling, floor)));
}
