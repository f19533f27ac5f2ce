// The one routing signal that is never old: the requests this gateway process has dispatched and not yet finished,
// per candidate. The overlay is seconds to minutes old by design and a site's signals one poll old; between them a
// burst would pile onto whatever looked best last. This count moves with every request, so local_load can steer by it.
// Each worker of `--workers N` counts its own (a worker's selection sees only what that worker dispatched).
//
// A request carries the cell it counts against (GatewayRequest.load): the route filter begins it, a failover moves it,
// and the server's close handler ends it (endLoad), which runs once whether the response ended, failed or the caller
// went away. No closure or object is made per request.

/** The in-flight count of one candidate (intelligent_route: its stable_id) or one cluster (grid_site_route). */
export interface LoadCell {
  readonly key: string;
  /** Upstream cluster the cell's requests go to: the label of grid_gateway_candidate_in_flight. */
  readonly cluster: string;
  /** Site of the cluster (grid_site_route folds its own in-flight into that site's sample). */
  readonly site: string;
  /** Requests dispatched to it that have not finished. */
  inFlight: number;
  /** `inFlight` when the newest signals sample of `site` arrived (grid_site_route's fresh rho). */
  atSample: number;
}

/** What a request holds: the cell it counts against, or undefined. */
export interface LoadHolder {
  load: LoadCell | undefined;
}

/** The arm of a local_load selection (grid_gateway_selections_total{path}). */
export type LoadPath = 'first_draw' | 'second_draw' | 'cursor' | 'skipped';
export const LOAD_PATHS: readonly LoadPath[] = ['first_draw', 'second_draw', 'cursor', 'skipped'];

/**
 * Cells beyond which idle ones are dropped. Candidates are at most 1024 per overlay (the envelope's bound) and
 * clusters are the config's; the bound only matters when overlays keep naming new candidates. A cell with requests in
 * flight is never dropped (a request still holds it), so nothing counted is lost.
 */
export const MAX_IDLE_CELLS = 4096;

export class CandidateLoad {
  readonly #cells = new Map<string, LoadCell>();
  /** Selections by path since the metrics last read them (plain numbers: no label hashing per request). */
  readonly selections: Record<LoadPath, number> = { first_draw: 0, second_draw: 0, cursor: 0, skipped: 0 };

  /** In flight to `key` on `cluster` now; 0 for one never dispatched to. */
  inFlight(key: string, cluster: string): number {
    const found = this.#cells.get(key);
    if (found === undefined) return 0;
    return found.cluster === cluster ? found.inFlight : (this.#cells.get(`${key}\u0000${cluster}`)?.inFlight ?? 0);
  }

  /** The cell of `key`, made on first use. A key seen before with another cluster gets a cell of its own. */
  cell(key: string, cluster: string, site: string): LoadCell {
    const found = this.#cells.get(key);
    if (found !== undefined && found.cluster === cluster) return found;
    // An overlay that reuses a stable_id for another cluster (the contract derives one from the other, but an older
    // producer may not): counted apart, so the metric names the cluster the requests went to.
    const id = found === undefined ? key : `${key}\u0000${cluster}`;
    const again = this.#cells.get(id);
    if (again !== undefined) return again;
    if (this.#cells.size >= MAX_IDLE_CELLS) this.#dropIdle();
    const made: LoadCell = { key: id, cluster, site, inFlight: 0, atSample: 0 };
    this.#cells.set(id, made);
    return made;
  }

  /** Counts the request against `cell`; a request already counted elsewhere (a failover) leaves its old cell. */
  begin(request: LoadHolder, cell: LoadCell): void {
    const previous = request.load;
    if (previous === cell) return;
    if (previous !== undefined) previous.inFlight--;
    cell.inFlight++;
    request.load = cell;
  }

  /** Remembers each of the site's counts at the moment its newest sample arrived (grid_site_route). */
  sampled(site: string): void {
    for (const cell of this.#cells.values()) if (cell.site === site) cell.atSample = cell.inFlight;
  }

  /** The change in in-flight to the site's cells since its newest sample arrived (dispatched minus finished). */
  sinceSample(site: string): number {
    let since = 0;
    for (const cell of this.#cells.values()) if (cell.site === site) since += cell.inFlight - cell.atSample;
    return since;
  }

  /** In flight now per cluster, every cell's cluster included (0 when idle), for the gauge. */
  byCluster(): Map<string, number> {
    const out = new Map<string, number>();
    for (const cell of this.#cells.values()) out.set(cell.cluster, (out.get(cell.cluster) ?? 0) + cell.inFlight);
    return out;
  }

  get size(): number {
    return this.#cells.size;
  }

  #dropIdle(): void {
    for (const [id, cell] of this.#cells) if (cell.inFlight === 0) this.#cells.delete(id);
  }
}

/** Ends the request's count, once: the server calls it when the response closes (ended, failed or abandoned). */
export function endLoad(request: LoadHolder): void {
  const cell = request.load;
  if (cell === undefined) return;
  request.load = undefined;
  cell.inFlight--;
}
