// grid_site_route's Prometheus series (reference praxis-proxy/grid docs/metrics.md, "Gateway"). Label values are
// bounded: sites and clusters come from the serving config, reasons and paths are fixed sets, models are the serving
// config's. Labelled children are cached so a request costs a map lookup and an increment.
import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { AffinityOutcome } from './prefix-affinity.ts';
import type { SelectionPath } from './site-choice.ts';

/** Why a decision ended as it did (grid_route_decisions_total{reason}). */
export type DecisionReason =
  | 'routed'
  | 'fallback'
  | 'pinned'
  | 'shed'
  | 'no_healthy_site'
  | 'unknown_model'
  | 'no_model'
  | 'pinned_site_gone'
  | 'pinned_site_unavailable'
  | 'bad_pin';

type Child = { inc(value?: number): void };
type GaugeChild = { set(value: number): void };

export class SiteRouteMetrics {
  readonly #decisions: Counter<'site' | 'cluster' | 'reason'>;
  readonly #selections: Counter<'path'>;
  readonly #affinity: Counter<'outcome'>;
  readonly #ceiling: Gauge<'site' | 'cluster'>;
  readonly #rho: Gauge<'site' | 'cluster'>;
  readonly #weight: Gauge<'site' | 'cluster'>;
  readonly #shedding: Gauge<'model'>;
  readonly #children = new Map<string, Child>();
  readonly #gauges = new Map<string, GaugeChild>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.#decisions = new Counter({
      name: 'grid_route_decisions_total',
      help: 'Requests grid_site_route decided, by site, cluster and outcome. A refusal records an empty site and cluster.',
      labelNames: ['site', 'cluster', 'reason'],
      registers,
    });
    this.#selections = new Counter({
      name: 'grid_route_selections_total',
      help: 'grid_site_route decisions by the path that produced them.',
      labelNames: ['path'],
      registers,
    });
    this.#affinity = new Counter({
      name: 'grid_route_prefix_affinity_total',
      help: 'Prefix-affinity decisions by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.#ceiling = new Gauge({
      name: 'grid_route_site_ceiling',
      help: 'Ceiling the gateway has learned for the site (NaN: no reading).',
      labelNames: ['site', 'cluster'],
      registers,
    });
    this.#rho = new Gauge({
      name: 'grid_route_site_rho',
      help: 'Saturation the gateway last read for the site, in-flight over its ceiling (NaN: no reading).',
      labelNames: ['site', 'cluster'],
      registers,
    });
    this.#weight = new Gauge({
      name: 'grid_route_site_weight',
      help: 'Capacity the draw weights the site by (NaN: no reading).',
      labelNames: ['site', 'cluster'],
      registers,
    });
    this.#shedding = new Gauge({
      name: 'grid_route_shedding',
      help: '1 while the gateway sheds this model, 0 otherwise.',
      labelNames: ['model'],
      registers,
    });
  }

  #child(key: string, make: () => Child): Child {
    let child = this.#children.get(key);
    if (child === undefined) {
      child = make();
      this.#children.set(key, child);
    }
    return child;
  }

  decision(site: string, cluster: string, reason: DecisionReason): void {
    this.#child(`d\u0000${site}\u0000${cluster}\u0000${reason}`, () =>
      this.#decisions.labels(site, cluster, reason),
    ).inc();
  }

  selection(path: SelectionPath): void {
    this.#child(`s\u0000${path}`, () => this.#selections.labels(path)).inc();
  }

  affinity(outcome: AffinityOutcome): void {
    this.#child(`a\u0000${outcome}`, () => this.#affinity.labels(outcome)).inc();
  }

  #gauge(kind: 'ceiling' | 'rho' | 'weight', site: string, cluster: string): GaugeChild {
    const key = `${kind}\u0000${site}\u0000${cluster}`;
    let child = this.#gauges.get(key);
    if (child === undefined) {
      const gauge = kind === 'ceiling' ? this.#ceiling : kind === 'rho' ? this.#rho : this.#weight;
      child = gauge.labels(site, cluster);
      this.#gauges.set(key, child);
    }
    return child;
  }

  /** A site's learned state, set when a sample arrives (not per request). NaN marks an unmeasured site. */
  site(
    site: string,
    cluster: string,
    ceiling: number | undefined,
    rho: number | undefined,
    weight: number | undefined,
  ): void {
    this.#gauge('ceiling', site, cluster).set(ceiling ?? Number.NaN);
    this.#gauge('rho', site, cluster).set(rho ?? Number.NaN);
    this.#gauge('weight', site, cluster).set(weight ?? Number.NaN);
  }

  shedding(model: string, on: boolean): void {
    this.#shedding.labels(model).set(on ? 1 : 0);
  }
}
