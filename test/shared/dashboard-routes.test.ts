import { request } from 'node:http';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type AdminServer, startAdminServer } from '../../daemons/shared/admin-server.ts';
import { EVENT_INTERVAL_MS, MAX_EVENT_STREAMS } from '../../daemons/shared/dashboard-routes.ts';

let server: AdminServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(view: () => Promise<unknown>): Promise<string> {
  server = await startAdminServer({
    address: '127.0.0.1:0',
    registry: new Registry(),
    isReady: () => true,
    dashboard: { view, access: { mode: 'open' } },
  });
  return `http://127.0.0.1:${server.port}`;
}

/** Opens an event stream and collects `data:` events until `count` arrived or `ms` passed. */
function events(url: string, count: number, ms: number): Promise<{ status: number; data: unknown[] }> {
  return new Promise((resolve, reject) => {
    const data: unknown[] = [];
    const req = request(url, (res) => {
      let buffer = '';
      const done = () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, data });
      };
      const timer = setTimeout(done, ms);
      res.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const line = event.split('\n').find((l) => l.startsWith('data: '));
          if (line !== undefined) data.push(JSON.parse(line.slice(6)));
        }
        if (data.length >= count) done();
      });
      res.on('end', done);
    });
    req.on('error', (error) => (data.length > 0 ? undefined : reject(error)));
    req.end();
  });
}

describe('dashboard routes on the admin listener', () => {
  it('serves the page and assets same-origin only, the read model as JSON, and redirects /dashboard', async () => {
    const base = await start(async () => ({ site: 'east', generatedAt: 'now' }));
    const page = await fetch(`${base}/dashboard/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).toContain('<script type="module" src="dashboard.js">');
    // Nothing outside the operator: no absolute URL other than the SVG namespace in the page or its assets.
    const js = await (await fetch(`${base}/dashboard/dashboard.js`)).text();
    const css = await (await fetch(`${base}/dashboard/dashboard.css`)).text();
    for (const text of [html, js, css])
      expect(
        text.match(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/gi)?.filter((u) => u !== 'http://www.w3.org') ?? [],
      ).toEqual([]);
    expect((await fetch(`${base}/dashboard/dashboard.css`)).headers.get('content-type')).toBe(
      'text/css; charset=utf-8',
    );
    expect(await (await fetch(`${base}/dashboard/model.json`)).json()).toEqual({ site: 'east', generatedAt: 'now' });
    const redirect = await fetch(`${base}/dashboard`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/dashboard/');
    expect((await fetch(`${base}/dashboard/secrets.json`)).status).toBe(404);
    expect((await fetch(`${base}/dashboard/model.json`, { method: 'POST' })).status).toBe(405);
  });

  it('answers 503 when the view cannot be built, and the daemon keeps serving', async () => {
    const base = await start(() => Promise.reject(new Error('store down')));
    const response = await fetch(`${base}/dashboard/model.json`);
    expect(response.status).toBe(503);
    expect(await response.text()).toBe('dashboard view unavailable\n');
    expect((await fetch(`${base}/livez`)).status).toBe(200);
  });

  it('pushes the view on the event stream when it changes, not when only generatedAt moves', async () => {
    let phase = 'Active';
    let builds = 0;
    const base = await start(async () => ({ generatedAt: String(builds++), phase }));
    setTimeout(() => (phase = 'Unreachable'), EVENT_INTERVAL_MS * 2.5);
    const { status, data } = await events(`${base}/dashboard/events`, 3, EVENT_INTERVAL_MS * 5);
    expect(status).toBe(200);
    expect(builds).toBeGreaterThanOrEqual(4);
    expect(data.map((d) => (d as { phase: string }).phase)).toEqual(['Active', 'Unreachable']);
  }, 15_000);

  it(`refuses stream ${MAX_EVENT_STREAMS + 1} with 503 so open pages cannot exhaust the daemon`, async () => {
    const base = await start(async () => ({ generatedAt: 'x' }));
    const open = Array.from({ length: MAX_EVENT_STREAMS }, () => events(`${base}/dashboard/events`, 1, 5_000));
    const all = await Promise.all(open);
    expect(all.every((r) => r.status === 200)).toBe(true);
    const held = Array.from({ length: MAX_EVENT_STREAMS }, () => events(`${base}/dashboard/events`, 99, 1_500));
    await new Promise((r) => setTimeout(r, 300));
    const refused = await fetch(`${base}/dashboard/events`);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    await Promise.all(held);
    // Closed streams free their slots.
    await new Promise((r) => setTimeout(r, 100));
    expect((await events(`${base}/dashboard/events`, 1, 2_000)).status).toBe(200);
  }, 15_000);
});
