// Qualification of grid_site_route, three sites: site-a's gateway (the real gateway, in process, on real sockets, with
// its real SiteView: the serving config file it reads as GRID_SERVING_CONFIG and its signals poller) chooses among
// three sites whose operators' signals endpoints (PeerSignalsServer, mTLS) answer what
// each site's EPP holds, and forwards to each site's sim backend. (a) a site at its ceiling loses new traffic within a few polls
// and the rest share by the documented weights; (b) with shedding on and every site full, 429 with Retry-After, and
// routing again after room_after_ms; (c) multi-turn chats stay on their first site, and load_override moves them
// off it under load; (d) a previous_response_id from site-b is served by site-b.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { INSTANT_TIMING } from '../../daemons/sim/engine/config.ts';
import { startSim } from '../../daemons/sim/server.ts';
import { call, tempDir, waitFor } from '../gateway/helpers.ts';
import type { Reply } from '../gateway/helpers.ts';
import { betweenTwoShares, chiSquare, seeded, twoChoicesShares } from '../gateway/site-route/fixtures.ts';
import { startThreeSites } from './site-route-fixture.ts';
import type { SignalsSite, ThreeSites } from './site-route-fixture.ts';

const TOKEN = 'site-route-sim-token-41c9';
const POLL_MS = 200;
const FULL_AFTER_MS = 1000;
const ROOM_AFTER_MS = 1500;
const SITES = ['site-a', 'site-b', 'site-c'] as const;
const CAPACITY = { 'site-a': 40, 'site-b': 20, 'site-c': 20 } as const;

let sites: SignalsSite[];
let grid: ThreeSites;
let gateway: GatewayInstance;
let base: string;
let cleanup: () => Promise<void>;

const siteOf = (reply: Reply): string => String(reply.headers['x-grid-site']);
const chat = (messages: unknown[]): Promise<Reply> =>
  call(`${base}/v1/chat/completions`, {
    body: { model: 'm', messages },
    headers: { authorization: `Bearer ${TOKEN}` },
  });
const hello = (): Promise<Reply> => chat([{ role: 'user', content: 'hi' }]);
const load = (name: string) => sites.find((s) => s.name === name)!.load;

async function metric(line: RegExp): Promise<number> {
  const text = (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
  const found = text.split('\n').find((l) => line.test(l));
  return found === undefined ? Number.NaN : Number(found.split(' ').pop());
}

/** A counter's value, 0 before its first increment (a labelled series appears only then). */
async function counter(line: RegExp): Promise<number> {
  const value = await metric(line);
  return Number.isNaN(value) ? 0 : value;
}

/** Waits until the gateway's exported rho of every site is within 0.03 of the target. */
async function rhoSettles(targets: Record<string, number>): Promise<void> {
  await waitFor(
    `rho settles at ${JSON.stringify(targets)}`,
    async () => {
      for (const [site, rho] of Object.entries(targets)) {
        const read = await metric(new RegExp(`^grid_route_site_rho\\{site="${site}",`));
        if (!(Math.abs(read - rho) < 0.03)) return undefined;
      }
      return true;
    },
    15_000,
  );
}

async function tally(n: number): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const reply = await hello();
    expect(reply.status, reply.text).toBe(200);
    counts[siteOf(reply)] = (counts[siteOf(reply)] ?? 0) + 1;
  }
  return counts;
}

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('site-route'));
  const sims = [];
  // Engine steps that take no time: the tallies below send thousands of requests one after another.
  for (const name of SITES)
    sims.push(await startSim({ name: `sim-${name}`, models: ['m'], token: TOKEN, engine: INSTANT_TIMING }));
  grid = await startThreeSites(
    dir,
    SITES,
    sims,
    SITES.map((name) => ({ capacity: CAPACITY[name], background: 0, skewedQueue: 0, readyEndpoints: 1 })),
    POLL_MS,
  );
  sites = grid.sites;
  const config = {
    listeners: [{ name: 'consumer', address: '127.0.0.1:0', filter_chains: ['main'] }],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
    filter_chains: [
      {
        name: 'main',
        filters: [
          { filter: 'json_body_field', field: 'model', header: 'x-gateway-model-name' },
          { filter: 'openai_responses_format' },
          {
            filter: 'grid_site_route',
            model_header: 'x-gateway-model-name',
            availability: {
              shedding: true,
              smoothing: 0.5,
              full_after_ms: FULL_AFTER_MS,
              room_after_ms: ROOM_AFTER_MS,
            },
          },
          {
            filter: 'load_balancer',
            clusters: sites.map((s) => ({ name: `c-${s.name}`, endpoints: [`127.0.0.1:${s.sim.port}`] })),
          },
        ],
      },
    ],
  };
  const logger = createLogger({ name: 'gateway', level: 'warn', destination: { write: () => undefined } });
  gateway = await startGateway(resolveConfig(config, join(dir, 'consumer.json')), {
    configDir: dir,
    logger,
    processMetrics: false,
    serving: grid.serving,
    // Seeded, so a chi-square at alpha 0.05 does not fail one run in twenty by chance; the states it draws over are
    // still the live ones the polls bring.
    random: seeded(20261201),
  });
  base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
  await waitFor('the serving config accepted', () => (gateway.isReady() ? true : undefined), 15_000);
  // Teach the ceilings: each site runs at its capacity with nothing waiting for a few polls.
  for (const s of sites) s.load.background = s.load.capacity;
  await waitFor(
    'ceilings learned',
    async () => {
      for (const name of SITES)
        if (!((await metric(new RegExp(`^grid_route_site_ceiling\\{site="${name}",`))) >= CAPACITY[name]))
          return undefined;
      return true;
    },
    15_000,
  );
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await grid?.close();
  for (const s of sites ?? []) await s.sim.close();
  await cleanup?.();
});

/** Waits until every site's endpoint has answered `n` more polls. */
async function polls(n: number): Promise<void> {
  const seen = sites.map((s) => s.polls);
  await waitFor(`${n} polls`, () => (sites.every((s, i) => s.polls >= seen[i]! + n) ? true : undefined), 10_000);
}

describe('grid_site_route qualification, three sites', { timeout: 90_000 }, () => {
  it('(a) three sites with room share as two choices by ceiling; one at its ceiling loses new traffic within a few polls, the other two share by ceiling over 1 + rho', async () => {
    load('site-a').background = 20;
    load('site-b').background = 5;
    load('site-c').background = 12;
    await rhoSettles({ 'site-a': 0.5, 'site-b': 0.25, 'site-c': 0.6 });
    const three = await tally(600);
    const threeShares = twoChoicesShares([40, 20, 20], [0.5, 0.25, 0.6]);
    const threeCheck = chiSquare(
      SITES.map((s) => three[s] ?? 0),
      threeShares,
    );
    expect(
      threeCheck.passes,
      `three sites ${JSON.stringify(three)} vs ${JSON.stringify(threeShares)}: chi-square ${threeCheck.statistic.toFixed(2)}`,
    ).toBe(true);

    // site-a fills: 60 held at a capacity of 40, 20 of them waiting.
    const switchedAt = Date.now();
    const pollsBefore = sites[0]!.polls;
    load('site-a').background = 60;
    let lastA = switchedAt;
    for (let i = 0; i < 60; i++) {
      const reply = await hello();
      if (siteOf(reply) === 'site-a') lastA = Date.now();
      await new Promise((r) => setTimeout(r, 25));
    }
    const pollsToMove = Math.ceil((lastA - switchedAt) / POLL_MS);
    expect(
      pollsToMove,
      `site-a last chosen ${lastA - switchedAt} ms after it filled (${sites[0]!.polls - pollsBefore} polls in the window)`,
    ).toBeLessThanOrEqual(4);
    const two = await tally(600);
    expect(two['site-a']).toBeUndefined();
    const twoShares = betweenTwoShares([20, 20], [0.25, 0.6]);
    const twoCheck = chiSquare([two['site-b'] ?? 0, two['site-c'] ?? 0], twoShares);
    expect(
      twoCheck.passes,
      `two sites ${JSON.stringify(two)} vs ${JSON.stringify(twoShares)}: chi-square ${twoCheck.statistic.toFixed(2)}`,
    ).toBe(true);
    expect(await metric(/^grid_route_selections_total\{path="between_two"\}/)).toBeGreaterThanOrEqual(600);
  });

  it('(b) with shedding on and every site full: 429 with Retry-After; routing resumes room_after_ms after the last full sample', async () => {
    for (const s of sites) s.load.background = s.load.capacity + 20;
    const shed = await waitFor(
      'a 429',
      async () => {
        const reply = await hello();
        return reply.status === 429 ? reply : undefined;
      },
      15_000,
    );
    expect(shed.json().error.code).toBe('capacity_exhausted');
    const retryAfter = Number(shed.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(3);
    expect(retryAfter).toBeLessThanOrEqual(7);
    expect(await metric(/^grid_route_shedding\{model="m"\}/)).toBe(1);
    expect(await metric(/^grid_route_decisions_total\{site="",cluster="",reason="shed"\}/)).toBeGreaterThanOrEqual(1);

    for (const s of sites) s.load.background = Math.floor(s.load.capacity / 4);
    const calmAt = Date.now();
    const resumed = await waitFor(
      'routing again',
      async () => {
        const reply = await hello();
        return reply.status === 200 ? Date.now() : undefined;
      },
      15_000,
    );
    const elapsed = resumed - calmAt;
    // The last full sample is at most one poll before the switch (and the first calm one at most one poll after).
    expect(elapsed, `resumed ${elapsed} ms after the load fell`).toBeGreaterThanOrEqual(ROOM_AFTER_MS - 2 * POLL_MS);
    expect(elapsed, `resumed ${elapsed} ms after the load fell`).toBeLessThanOrEqual(ROOM_AFTER_MS + 5 * POLL_MS);
    expect(await metric(/^grid_route_shedding\{model="m"\}/)).toBe(0);
  });

  it('(c) multi-turn chats with long shared prefixes stay where their prompt is held under light load (>= 90 % of later turns, sticky outcomes >= 90 %); load on that site moves them (load_override)', async () => {
    for (const s of sites) s.load.background = Math.floor(s.load.capacity / 5);
    await rhoSettles({ 'site-a': 0.2, 'site-b': 0.2, 'site-c': 0.2 });
    const outcomes = async (): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const o of ['sticky', 'exploration', 'load_override', 'no_match', 'not_applicable'])
        out[o] = await counter(new RegExp(`^grid_route_prefix_affinity_total\\{outcome="${o}"\\}`));
      return out;
    };
    const delta = (after: Record<string, number>, before: Record<string, number>, o: string): number =>
      after[o]! - before[o]!;
    const start = await outcomes();
    const conversations = Array.from({ length: 20 }, (_, i) => ({
      messages: [
        { role: 'system', content: `conversation ${i}: ${'You are a careful assistant for the grid. '.repeat(150)}` },
      ] as { role: string; content: string }[],
      first: '',
      last: '',
      /** Every site that served one of its turns: each may hold its prompt. */
      sites: new Set<string>(),
    }));
    let turns = 0;
    let firstTurns: Record<string, number> = {};
    let stayed = 0;
    let onFirst = 0;
    for (let turn = 0; turn < 6; turn++) {
      if (turn === 1) firstTurns = await outcomes();
      for (const c of conversations) {
        c.messages.push({ role: 'user', content: `question ${turn}` });
        const reply = await chat(c.messages);
        expect(reply.status, reply.text).toBe(200);
        c.messages.push({ role: 'assistant', content: String(reply.json().choices[0].message.content) });
        if (turn === 0) c.first = siteOf(reply);
        else {
          turns++;
          if (siteOf(reply) === c.last) stayed++;
          if (siteOf(reply) === c.first) onFirst++;
        }
        c.last = siteOf(reply);
        c.sites.add(c.last);
      }
    }
    // A turn stays where its prompt is held. An explored turn (2 %) teaches a second site the longer run, so the turns
    // after it follow there (the documented way a second site learns a prompt): counted against the turn before.
    expect(
      stayed / turns,
      `${stayed} of ${turns} later turns on the site of the turn before (${onFirst} on the first turn's site)`,
    ).toBeGreaterThanOrEqual(0.9);
    // A first turn matches nothing; every later turn is kept on its site or explores (the documented 2 %).
    const later = await outcomes();
    expect(delta(firstTurns, start, 'no_match') + delta(firstTurns, start, 'exploration')).toBe(conversations.length);
    expect(delta(later, firstTurns, 'sticky') + delta(later, firstTurns, 'exploration')).toBe(turns);
    expect(delta(later, firstTurns, 'sticky')).toBeGreaterThanOrEqual(0.9 * turns);

    // Heavy load on the site holding most conversations: a queue at its busy endpoint, worth more than the match.
    const counts: Record<string, number> = {};
    for (const c of conversations) counts[c.last] = (counts[c.last] ?? 0) + 1;
    const busy = Object.entries(counts).sort((x, y) => y[1] - x[1])[0]![0];
    const beforeLoad = await outcomes();
    load(busy).skewedQueue = 3;
    try {
      await polls(2);
      // A conversation another site has also served (an explored turn taught it the prompt) may be held there with a
      // run as long as the busy site's: its next turn then goes there as sticky, not load_override (CI saw 18
      // load_override and exploration outcomes for 19 held turns). Only the conversations held at the busy site alone
      // must move by load_override.
      let moved = 0;
      let held = 0;
      let heldAlone = 0;
      let movedAlone = 0;
      for (const c of conversations.filter((x) => x.last === busy)) {
        const alone = c.sites.size === 1;
        c.messages.push({ role: 'user', content: 'one more' });
        const reply = await chat(c.messages);
        expect(reply.status).toBe(200);
        held++;
        if (alone) heldAlone++;
        if (siteOf(reply) !== busy) {
          moved++;
          if (alone) movedAlone++;
        }
      }
      expect(moved / held, `${moved} of ${held} turns moved off ${busy}`).toBeGreaterThanOrEqual(0.9);
      // Every turn held at the busy site alone that moved was overridden by load, or explored (2 %); only a
      // conversation also held elsewhere may stay sticky (to that other site).
      const afterLoad = await outcomes();
      const overrides = delta(afterLoad, beforeLoad, 'load_override');
      const explorations = delta(afterLoad, beforeLoad, 'exploration');
      expect(heldAlone, 'conversations held at the busy site alone').toBeGreaterThan(0);
      expect(
        overrides,
        `${overrides} load_override and ${explorations} exploration outcomes for ${movedAlone} moved turns held at ${busy} alone`,
      ).toBeGreaterThanOrEqual(movedAlone - explorations);
      expect(overrides).toBeGreaterThanOrEqual(0.8 * heldAlone);
      expect(overrides + explorations + delta(afterLoad, beforeLoad, 'sticky')).toBe(held);
      expect(delta(afterLoad, beforeLoad, 'sticky')).toBeLessThanOrEqual(held - heldAlone);
    } finally {
      // Back to no queue even when an expectation failed, so the next test starts from a calm grid.
      load(busy).skewedQueue = 0;
    }
  });

  it("(d) a previous_response_id from site-b is served by site-b through site-a's gateway; a left site is 404, a site admitting nothing 503", async () => {
    const responses = (body: Record<string, unknown>): Promise<Reply> =>
      call(`${base}/v1/responses`, { body: { model: 'm', ...body }, headers: { authorization: `Bearer ${TOKEN}` } });
    const fromB = await waitFor(
      'a response stored at site-b',
      async () => {
        const reply = await responses({ input: 'remember this' });
        return reply.status === 200 && siteOf(reply) === 'site-b' ? reply : undefined;
      },
      15_000,
    );
    const id = String(fromB.json().id);
    expect(id).toMatch(/^resp_site-b\.[0-9a-f]+$/);
    const simB = sites[1]!.sim;
    for (let i = 0; i < 10; i++) {
      const before = simB.requests.at(-1);
      const follow = await responses({ input: 'and then?', previous_response_id: id });
      expect(follow.status, follow.text).toBe(200);
      expect(siteOf(follow)).toBe('site-b');
      expect(follow.headers['x-grid-backend']).toBe('c-site-b');
      // site-b's sim answered it (its newest record is this request).
      expect(simB.requests.at(-1)).not.toBe(before);
      expect(simB.requests.at(-1)?.path).toBe('/v1/responses');
    }
    // The stored response itself, by its tagged id: site-b knows it only by its own id, so the tag was stripped.
    const stored = await call(`${base}/v1/responses/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(stored.status, stored.text).toBe(200);
    expect(stored.json().id).toBe(id);
    // Streamed: every id in the event stream carries the site too.
    const streamed = await responses({ input: 'stream it', stream: true, previous_response_id: id });
    expect(siteOf(streamed)).toBe('site-b');
    expect(streamed.text).toMatch(/"id":"resp_site-b\.[0-9a-f]+"/);
    expect(streamed.text).not.toMatch(/"id":"resp_[0-9a-f]+"/);

    const gone = await responses({ input: 'x', previous_response_id: 'resp_site-z.0123' });
    expect(gone.status).toBe(404);
    // site-b's provider turns not Ready: its serving config entry carries admission: none.
    const revision = await grid.writeServing(
      grid.entries.map((e) =>
        e.site === 'site-b' ? { ...e, admission: 'none', ready: false, excluded: 'not_ready' } : e,
      ),
    );
    await waitFor(
      'the new serving config',
      () => (gateway.siteView?.revision() === revision ? true : undefined),
      10_000,
    );
    const closed = await responses({ input: 'x', previous_response_id: id });
    expect(closed.status).toBe(503);
    expect(closed.headers['retry-after']).toBe('5');
    const restored = await grid.writeServing(grid.entries);
    await waitFor(
      'the serving config restored',
      () => (gateway.siteView?.revision() === restored ? true : undefined),
      10_000,
    );
    expect((await responses({ input: 'x', previous_response_id: id })).status).toBe(200);
  });
});
