/**
 * grid_site_route on the local grid (`agn up` runs the same compiled manifests): the example grid with east's consumer
 * gateway declared with gridServing, so its compiled pipeline routes with grid_site_route over the serving config
 * east's operator renders and the signals both operators serve. Real processes, real mTLS provider hops: traffic
 * spreads over both sites and names each in x-grid-site, and a response stored at west is continued at west through
 * east's gateway by its previous_response_id.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleGrid } from '../../constructs/example-grid.ts';
import { synthGrid } from '../../constructs/grid.ts';
import type { GridDeclaration } from '../../constructs/grid-declaration.ts';
import { type LocalGrid, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { waitFor } from '../../daemons/local-grid/traffic.ts';

const runDir = mkdtempSync(join(tmpdir(), 'agn-site-route-'));
const MODEL = 'sim-model-v1';
let grid: LocalGrid;

const declaration: GridDeclaration = {
  ...exampleGrid,
  sites: exampleGrid.sites.map((site) => ({
    ...site,
    peerSignals: {},
    ...(site.consumerGateway === undefined ? {} : { consumerGateway: { ...site.consumerGateway, gridServing: { signalsPollIntervalMs: 500 } } }),
  })),
};

interface Answer {
  status: number;
  site: string | null;
  provider: string | null;
  body: Record<string, unknown>;
}

async function post(path: string, body: Record<string, unknown>): Promise<Answer> {
  const listen = grid.byRole('consumer-gateway', 'east')[0]!.listenAddress!;
  const response = await fetch(`http://${listen}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${grid.demoKey()!}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: response.status, site: response.headers.get('x-grid-site'), provider: response.headers.get('x-sim-provider'), body: parsed };
}

beforeAll(async () => {
  const distDir = join(runDir, 'dist');
  synthGrid(declaration, distDir);
  grid = await startLocalGrid({ distDir, stateDir: join(runDir, 'state'), profile: 'fast' });
}, 180_000);

afterAll(async () => {
  await grid?.stop();
  if (process.env['KEEP'] === undefined) rmSync(runDir, { recursive: true, force: true });
});

describe('grid_site_route on the local grid', () => {
  it('routes over both sites, naming each in x-grid-site, and continues a response stored at west at west', async () => {
    // Once the serving config names west's provider, both sites take new traffic.
    const seen = new Map<string, number>();
    await waitFor('requests answered by both sites', async () => {
      const answer = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hello' }] });
      if (answer.status !== 200) return undefined;
      expect(answer.site === 'east' || answer.site === 'west', `x-grid-site ${answer.site}`).toBe(true);
      seen.set(answer.site!, (seen.get(answer.site!) ?? 0) + 1);
      return seen.size === 2 ? true : undefined;
    }, 120_000);

    const stored = await waitFor('a response stored at west', async () => {
      const answer = await post('/v1/responses', { model: MODEL, input: 'remember this' });
      return answer.status === 200 && answer.site === 'west' ? answer : undefined;
    }, 30_000);
    const id = String(stored.body['id']);
    expect(id).toMatch(/^resp_west\./);
    for (let i = 0; i < 5; i++) {
      const follow = await post('/v1/responses', { model: MODEL, input: 'and then?', previous_response_id: id });
      expect(follow.status, JSON.stringify(follow.body)).toBe(200);
      expect(follow.site).toBe('west');
      expect(follow.provider).toBe('west-llm');
    }
    const gone = await post('/v1/responses', { model: MODEL, input: 'x', previous_response_id: 'resp_north.0a1b' });
    expect(gone.status).toBe(404);

    const admin = grid.byRole('consumer-gateway', 'east')[0]!.adminAddress!.replace(/^0\.0\.0\.0:/, '127.0.0.1:');
    const metrics = await (await fetch(`http://${admin}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    expect(metrics).toMatch(/grid_route_decisions_total\{site="west",cluster="[^"]+",reason="pinned"\} 5/);
    expect(metrics).toMatch(/grid_route_decisions_total\{site="",cluster="",reason="pinned_site_gone"\} 1/);
  }, 240_000);
});
