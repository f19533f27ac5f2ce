// The draw among a model's sites (reference praxis-proxy/grid docs/site-selection.md, "Site choice"): pure, over
// plain data, with the random source injected so a seeded test can check the shares against the documented weights.

/** Which arm of the choice produced a decision (grid_route_selections_total{path}). */
export type SelectionPath =
  | 'two_choices'
  | 'between_two'
  | 'only_one'
  | 'by_capacity'
  | 'fallback'
  | 'prefix_affinity'
  | 'pinned';

/** One site as the draw sees it. */
export interface SiteOption {
  readonly site: string;
  /** Draw weight: the learned ceiling after the explore floor (availability.ts `weights`). */
  readonly weight: number;
  /** Saturation; undefined while unmeasured. */
  readonly rho: number | undefined;
  /** Queued work per ready endpoint; undefined without a queue reading. */
  readonly queue: number | undefined;
  /** At its ceiling with work waiting for full_after_ms; undefined when it cannot be judged. */
  readonly full: boolean | undefined;
}

/** "Bounds of either site's share when two sites with room are drawn between" (the reference's TWO_SITE_SHARE). */
export const TWO_SITE_SHARE = { min: 0.1, max: 0.9 } as const;

/** The option `draw` (in [0, 1)) lands on when options are weighted by `weight`, skipping index `skip`. */
function weighted(options: readonly SiteOption[], draw: number, weight: (o: SiteOption) => number, skip = -1): number {
  let total = 0;
  for (let i = 0; i < options.length; i++) if (i !== skip) total += weight(options[i]!);
  let target = draw * total;
  let last = -1;
  for (let i = 0; i < options.length; i++) {
    if (i === skip) continue;
    last = i;
    target -= weight(options[i]!);
    if (target < 0) return i;
  }
  return last;
}

/**
 * Among healthy sites with room: "three or more are picked two by ceiling taking the lower rho, two are picked between
 * weighted by ceiling over 1 + rho, one is taken" (site-selection.md). Exact rho ties go to the first draw.
 */
export function pickWithRoom(
  room: readonly SiteOption[],
  random: () => number,
): { index: number; path: SelectionPath } {
  if (room.length === 1) return { index: 0, path: 'only_one' };
  if (room.length === 2) {
    const rate = (o: SiteOption): number => o.weight / (1 + (o.rho ?? 0));
    const share = Math.min(
      TWO_SITE_SHARE.max,
      Math.max(TWO_SITE_SHARE.min, rate(room[0]!) / (rate(room[0]!) + rate(room[1]!))),
    );
    return { index: random() < share ? 0 : 1, path: 'between_two' };
  }
  const first = weighted(room, random(), (o) => o.weight);
  const second = weighted(room, random(), (o) => o.weight, first);
  const lower = (room[second]!.rho ?? 0) < (room[first]!.rho ?? 0) ? second : first;
  return { index: lower, path: 'two_choices' };
}

/**
 * No site with room: "the pick is by ceiling among the sites not full, tied on the best queue depth"
 * (site-selection.md). A site without a queue reading sorts after every site with one; with every site full, the
 * full ones are the field.
 */
export function pickByCapacity(healthy: readonly SiteOption[], random: () => number): number {
  const notFull = healthy.map((_, i) => i).filter((i) => healthy[i]!.full !== true);
  const field = notFull.length > 0 ? notFull : healthy.map((_, i) => i);
  const queueOf = (i: number): number => healthy[i]!.queue ?? Number.POSITIVE_INFINITY;
  const best = Math.min(...field.map(queueOf));
  const band = field.filter((i) => queueOf(i) === best);
  const picked = weighted(
    band.map((i) => healthy[i]!),
    random(),
    (o) => o.weight,
  );
  return band[picked]!;
}

/** Whether a model sheds now, given whether it shed before and each of its healthy sites' fullness and relief. */
export function shouldShed(
  previouslyShed: boolean,
  sites: readonly { full: boolean | undefined; relieved: boolean | undefined }[],
  shedding: boolean,
): boolean {
  // "a model sheds once every healthy site serving it has been at its ceiling with work waiting for full_after_ms,
  // and routes again once no sample from a site has shown that for room_after_ms" (site-selection.md). A site that
  // cannot be judged (no queue or no in-flight published) takes the overflow, so the model never sheds.
  if (!shedding || sites.length === 0) return false;
  if (sites.some((s) => s.full === undefined || s.relieved === undefined)) return false;
  if (sites.every((s) => s.full === true)) return true;
  return previouslyShed && !sites.some((s) => s.relieved === true);
}
