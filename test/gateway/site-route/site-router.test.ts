// The grid_site_route decision over a SiteView, rule by rule (reference praxis-proxy/grid docs/site-selection.md,
// docs/architecture/prefix-affinity.md, docs/metrics.md), with a fake clock and seeded randomness.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SiteRouteMetrics } from '../../../daemons/gateway/site-route/metrics.ts';
import { SiteRouter } from '../../../daemons/gateway/site-route/site-router.ts';
import { CandidateLoad, endLoad, type LoadHolder } from '../../../daemons/gateway/routing/candidate-load.ts';
import type { Decision } from '../../../daemons/gateway/site-route/site-router.ts';
import type { SiteSample } from '../../../daemons/gateway/site-route/site-view.ts';
import { MemorySiteView, chiSquare, entry, seeded, twoChoicesShares } from './fixtures.ts';

function setup(
  entries = [entry('a'), entry('b'), entry('c')],
  options: { shedding?: boolean; down?: string[]; exploration?: number } = {},
) {
  const view = new MemorySiteView(entries);
  let now = 100_000;
  const registry = new Registry();
  const metrics = new SiteRouteMetrics(registry);
  const down = new Set(options.down ?? []);
  const router = new SiteRouter({
    view,
    config: {
      availability: { shedding: options.shedding ?? false },
      prefix_affinity: { exploration: options.exploration ?? 0 },
    },
    isClusterAvailable: (c) => !down.has(c),
    metrics,
    nowMs: () => now,
    random: seeded(11),
  });
  const publish = (site: string, inFlight?: number, waiting?: number, readyEndpoints = 1): void => {
    const sample: SiteSample = {
      site,
      atMs: now,
      readyEndpoints,
      ...(inFlight === undefined ? {} : { inFlight }),
      ...(waiting === undefined ? {} : { waiting }),
    };
    view.publish(sample);
  };
  return { view, router, registry, publish, down, advance: (ms: number) => (now += ms), now: () => now };
}

const site = (d: Decision): string => (d.kind === 'routed' ? d.entry.site : `${d.status}`);
const count = (n: number, f: () => Decision): Record<string, number> => {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const s = site(f());
    out[s] = (out[s] ?? 0) + 1;
  }
  return out;
};

describe('SiteRouter.decide', () => {
  it('an unknown model gets 404; "A model with no healthy routable site gets 503" with Retry-After', () => {
    const { router } = setup([entry('a', { admission: 'none', ready: false }), entry('b', { excluded: 'residency' })]);
    expect(router.decide('other', undefined)).toMatchObject({ kind: 'refused', status: 404, code: 'model_not_found' });
    const refused = router.decide('m', undefined);
    expect(refused).toMatchObject({ kind: 'refused', status: 503, code: 'no_healthy_site' });
    expect(refused.kind === 'refused' && refused.retryAfterSeconds).toBeGreaterThanOrEqual(3);
  });

  it('an entry with admission: none is known and never chosen (seed 001: "its serving config entry carries admission: none")', () => {
    const { router, publish } = setup([entry('a', { admission: 'none', ready: false }), entry('b')]);
    publish('a', 0, 0);
    publish('b', 30, 20);
    expect(count(200, () => router.decide('m', undefined))).toEqual({ b: 200 });
  });

  it.each([
    [
      '"A site that is not ready ... is chosen only when no healthy site is left" (zero ready endpoints)',
      (t: ReturnType<typeof setup>) => t.publish('a', 0, 0, 0),
    ],
    [
      '"... or whose cluster praxis reports with no healthy endpoint" (cluster backing off)',
      (t: ReturnType<typeof setup>) => t.down.add('c-a'),
    ],
    [
      'an entry the operator last saw not ready',
      (t: ReturnType<typeof setup>) => t.view.entriesList.splice(0, 1, entry('a', { ready: false })),
    ],
  ])('%s', (_rule, demote) => {
    const t = setup([entry('a'), entry('b')]);
    t.publish('a', 1, 0);
    t.publish('b', 30, 20);
    demote(t);
    expect(count(200, () => t.router.decide('m', undefined))).toEqual({ b: 200 });
    t.down.add('c-b');
    const fallback = t.router.decide('m', undefined);
    expect(fallback).toMatchObject({ kind: 'routed', path: 'fallback', reason: 'fallback' });
    expect(site(fallback)).toBe('a');
  });

  it('before any sample every site is unmeasured (neutral): the pick is by capacity, spread over all of them', () => {
    const { router } = setup();
    const counts = count(600, () => router.decide('m', undefined));
    expect(Object.keys(counts).sort()).toEqual(['a', 'b', 'c']);
    expect(router.decide('m', undefined)).toMatchObject({ path: 'by_capacity' });
  });

  it('a site over its ceiling (rho >= 1) takes no new traffic while the others have room', () => {
    const { router, publish } = setup();
    for (const s of ['a', 'b', 'c']) publish(s, 10, 0);
    publish('a', 40, 30);
    publish('a', 40, 30);
    expect(router.learned('a')!.rho).toBeGreaterThanOrEqual(1);
    const counts = count(600, () => router.decide('m', undefined));
    expect(counts['a']).toBeUndefined();
    expect(counts['b']! + counts['c']!).toBe(600);
  });

  it('chi-square over 900 decisions: three measured sites share as two choices by learned ceiling, lower rho taken', () => {
    const { router, publish } = setup();
    // Ceilings learned 40, 20, 10 (explore floor 0.25 x 40 = 10); saturation 0.5, 0.25, 0.6.
    publish('a', 40, 0);
    publish('b', 20, 0);
    publish('c', 10, 0);
    const { router: r2, publish: p2 } = { router, publish };
    p2('a', 20, 0);
    p2('b', 5, 0);
    p2('c', 6, 0);
    const learned = ['a', 'b', 'c'].map((s) => r2.learned(s)!);
    const shares = twoChoicesShares(
      learned.map((l) => l.ceiling!),
      learned.map((l) => l.rho!),
    );
    const counts = count(900, () => r2.decide('m', undefined));
    const result = chiSquare(
      ['a', 'b', 'c'].map((s) => counts[s] ?? 0),
      shares,
    );
    expect(result.passes, `${JSON.stringify(counts)} vs ${JSON.stringify(shares)}: ${result.statistic}`).toBe(true);
  });
});

describe('local_load: own in-flight since each sample', () => {
  /**
   * Three sites with room and equal ceilings (8, rho 0), then a burst with no sample in between: requests to `slow`
   * never finish during it, the others finish at once. Counted as grid_site_route counts (begin at the decision).
   */
  function burst(localLoad: boolean, n: number) {
    const view = new MemorySiteView([entry('a'), entry('b'), entry('c')]);
    const load = new CandidateLoad();
    const router = new SiteRouter({
      view,
      config: {
        prefix_affinity: { enabled: false },
        ...(localLoad ? { local_load: { mode: 'two_choices' as const } } : {}),
      },
      isClusterAvailable: () => true,
      load,
      nowMs: () => 100_000,
      random: seeded(5),
    });
    for (const s of ['a', 'b', 'c'])
      view.publish({ site: s, atMs: 100_000, inFlight: 0, waiting: 0, readyEndpoints: 1 });
    const counts: Record<string, number> = {};
    const held: LoadHolder[] = [];
    for (let i = 0; i < n; i++) {
      const d = router.decide('m', undefined);
      if (d.kind !== 'routed') throw new Error(d.code);
      counts[d.entry.site] = (counts[d.entry.site] ?? 0) + 1;
      const request: LoadHolder = { load: undefined };
      load.begin(request, load.cell(d.entry.cluster, d.entry.cluster, d.entry.site));
      if (d.entry.site === 'a') held.push(request);
      else endLoad(request);
    }
    return { counts, router, view, load, held };
  }

  it('off: the burst keeps landing on the site that holds it, a third of it, until the next sample', () => {
    const { counts } = burst(false, 300);
    expect(counts['a']).toBeGreaterThan(70);
  });

  it("on: the held requests raise that site's rho now, so two choices move the burst to the others", () => {
    const { counts, router } = burst(true, 300);
    // Any draw pair with a and another site takes the other (a's rho is above theirs from its first held request).
    expect(counts['a'] ?? 0).toBeLessThanOrEqual(3);
    expect((counts['b'] ?? 0) + (counts['c'] ?? 0)).toBeGreaterThanOrEqual(297);
    // The learned rho itself (and its gauge) stays the sample's: only the draw reads the fresh one.
    expect(router.learned('a')!.rho).toBe(0);
  });

  it('on: a new sample already holds the requests sent before it, so only later ones are added', () => {
    const { router, view, load, held } = burst(true, 50);
    const before = held.length;
    expect(load.sinceSample('a')).toBe(before);
    // The site now publishes the requests it holds: the gateway's own are in that figure, not added again.
    view.publish({ site: 'a', atMs: 100_000, inFlight: before, waiting: 0, readyEndpoints: 1 });
    expect(load.sinceSample('a')).toBe(0);
    for (const h of held) endLoad(h);
    expect(load.sinceSample('a')).toBe(-before);
    expect(router.learned('a')!.rho).toBeGreaterThan(0);
  });

  it('without local_load in the config the router reads no load, even when given one', () => {
    const load = new CandidateLoad();
    const router = new SiteRouter({
      view: new MemorySiteView([entry('a')]),
      config: {},
      isClusterAvailable: () => true,
      load,
    });
    expect(router.load).toBeUndefined();
  });
});

describe('shedding', () => {
  function full(t: ReturnType<typeof setup>): void {
    for (const s of ['a', 'b']) t.publish(s, 10, 0);
    for (let i = 0; i < 6; i++) {
      for (const s of ['a', 'b']) t.publish(s, 20, 10);
      t.advance(1000);
    }
  }

  it('off by default: a full model still routes (by capacity)', () => {
    const t = setup([entry('a'), entry('b')]);
    full(t);
    expect(t.router.decide('m', undefined)).toMatchObject({ kind: 'routed', path: 'by_capacity' });
  });

  it('"A shed request gets 429 with Retry-After", and the model "routes again once no sample from a site has shown that for room_after_ms"', async () => {
    const t = setup([entry('a'), entry('b')], { shedding: true });
    full(t);
    const shed = t.router.decide('m', undefined);
    expect(shed).toMatchObject({ kind: 'refused', status: 429, code: 'capacity_exhausted', reason: 'shed' });
    expect(shed.kind === 'refused' && shed.retryAfterSeconds! >= 3 && shed.retryAfterSeconds! <= 7).toBe(true);
    expect(await t.registry.getSingleMetricAsString('grid_route_shedding')).toContain(
      'grid_route_shedding{model="m"} 1',
    );
    // The last congested sample is now; a calm one follows at once, and room comes room_after_ms after the congested one.
    t.publish('a', 20, 10);
    t.publish('a', 5, 0);
    t.advance(1999);
    expect(t.router.decide('m', undefined)).toMatchObject({ kind: 'refused', status: 429 });
    t.advance(1);
    expect(t.router.decide('m', undefined)).toMatchObject({ kind: 'routed' });
    expect(await t.registry.getSingleMetricAsString('grid_route_shedding')).toContain(
      'grid_route_shedding{model="m"} 0',
    );
  });

  it('a model with a site that publishes no queue never sheds: that site takes the overflow', () => {
    const t = setup([entry('a'), entry('b'), entry('c')], { shedding: true });
    full(t);
    t.publish('c', 20);
    expect(t.router.decide('m', undefined)).toMatchObject({ kind: 'routed' });
  });
});

describe('prefix affinity in the decision', () => {
  const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
  it('"keeps a conversation on the site that already holds its prompt ... while that site\'s queue allows"', async () => {
    const t = setup();
    for (const s of ['a', 'b', 'c']) t.publish(s, 2, 0);
    const first = t.router.decide('m', keys);
    expect(first.kind).toBe('routed');
    const chosen = site(first);
    t.router.memory.sent(`c-${chosen}`, keys, t.now());
    // "A burst behind a new prompt spreads by load until the first answer."
    expect(t.router.decide('m', keys)).toMatchObject({ affinity: 'no_match' });
    t.router.memory.confirmed(`c-${chosen}`, keys, t.now());
    expect(count(100, () => t.router.decide('m', keys))).toEqual({ [chosen]: 100 });
    // The queue on the sticky site grows past what a 40-block match is worth (0.128 queued requests).
    t.publish(chosen, 3, 1);
    const moved = count(100, () => t.router.decide('m', keys));
    expect(moved[chosen]).toBeUndefined();
    const text = await t.registry.getSingleMetricAsString('grid_route_prefix_affinity_total');
    expect(text).toContain('outcome="sticky"} 100');
    expect(text).toContain('outcome="load_override"} 100');
    expect(text).toContain('outcome="no_match"} 2');
  });
  it('"A request with one admitted site counts nothing"; a request with no keys counts not_applicable, a short prompt no_match', async () => {
    const t = setup([entry('a'), entry('b')]);
    t.publish('a', 2, 0);
    t.router.decide('m', keys);
    t.publish('b', 2, 0);
    t.router.decide('m', undefined);
    // A readable prompt shorter than one block: "identical short prompts spread by load".
    t.router.decide('m', []);
    const text = await t.registry.getSingleMetricAsString('grid_route_prefix_affinity_total');
    expect(text).toContain('outcome="not_applicable"} 1');
    expect(text).toContain('outcome="no_match"} 1');
  });
});

describe('pinned and new-conversation decisions', () => {
  it('"A site that left the grid answers 404"; "A site still in the grid that admits no new request answers 503 with Retry-After: 5"', () => {
    const t = setup([entry('a', { local: true }), entry('b', { admission: 'none', ready: false })]);
    expect(t.router.decidePinned('gone', 'm')).toMatchObject({
      kind: 'refused',
      status: 404,
      reason: 'pinned_site_gone',
    });
    expect(t.router.decidePinned('b', 'm')).toMatchObject({
      kind: 'refused',
      status: 503,
      retryAfterSeconds: 5,
      reason: 'pinned_site_unavailable',
    });
  });
  it('a pinned request goes to its site even when that site has no room; without a model, to any entry of the site', () => {
    const t = setup([entry('a', { local: true }), entry('b', { models: ['m', 'n'] })]);
    t.publish('a', 1, 0);
    t.publish('b', 50, 40);
    t.publish('b', 50, 40);
    expect(t.router.decidePinned('b', 'm')).toMatchObject({ kind: 'routed', path: 'pinned', entry: { site: 'b' } });
    expect(t.router.decidePinned('b', undefined)).toMatchObject({ kind: 'routed', entry: { site: 'b' } });
  });
  it('"A new conversation stays on the local site when it admits requests"', () => {
    const t = setup([entry('a'), entry('b', { local: true })]);
    expect(site(t.router.decideNewConversation())).toBe('b');
    t.down.add('c-b');
    expect(site(t.router.decideNewConversation())).toBe('a');
  });
});

describe('metrics', () => {
  it('publishes ceiling, rho and weight per site and cluster on each sample (NaN while unmeasured), and counts decisions by reason and path', async () => {
    const t = setup([entry('a'), entry('b')]);
    t.publish('a', 12, 0);
    t.publish('b', undefined, 0);
    t.router.decide('m', undefined);
    t.router.decide('x', undefined);
    const text = await t.registry.metrics();
    expect(text).toContain('grid_route_site_ceiling{site="a",cluster="c-a"} 12');
    expect(text).toContain('grid_route_site_rho{site="a",cluster="c-a"} 1');
    expect(text).toContain('grid_route_site_weight{site="a",cluster="c-a"} 12');
    // prom-client writes NaN as "Nan" (Prometheus parses it case-insensitively).
    expect(text).toContain('grid_route_site_rho{site="b",cluster="c-b"} Nan');
    expect(text).toContain('grid_route_decisions_total{site="",cluster="",reason="unknown_model"} 1');
    expect(text).toMatch(/grid_route_selections_total\{path="[a-z_]+"\} 1/);
  });
});
