// The fleet dashboard in a real browser: Debian's headless Chromium driven by playwright-core against a
// local grid started from dist/ by the same runner as `npm start`. The page must show what the stores, the admin
// endpoints and the backends' metrics say, follow a provider's death without a reload, pass axe-core with no
// serious or critical violation at desktop and phone widths, reach nothing outside the operator, and carry no
// token or private key bytes. east is compiled with token access, so the browser gets in the way a user does: the
// URL `agn up` prints, whose token the operator trades for a session cookie. Screenshots go to
// test/dashboard/artifacts/ (gitignored).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GRID_NETWORK,
  GRID_SITE,
  INFERENCE_PROVIDER,
  metricSum,
  readOverlays,
} from '../../daemons/local-grid/grid-status.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { attribution, chatCompletion, waitFor } from '../../daemons/local-grid/traffic.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(REPO_ROOT, 'test', 'dashboard', 'artifacts');
const MODEL = 'sim-model-v1';
const runDir = mkdtempSync(join(tmpdir(), 'agn-dashboard-'));
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let grid: LocalGrid;
let browser: Browser;
let page: Page;
let url: string;
let dashboardToken: string;
const requests: string[] = [];

async function json(address: string, path: string): Promise<Record<string, unknown>> {
  const response = await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(3000) });
  return (await response.json()) as Record<string, unknown>;
}

/** Text of every row's cells, keyed by the row's data attribute (e.g. data-provider="east/east-llm-a"). */
async function rows(table: string, key: string): Promise<Record<string, Record<string, string>>> {
  // Evaluated in the page (the test's TypeScript has no DOM library): a code cell counts by its full revision.
  return page.evaluate(`Object.fromEntries([...document.querySelectorAll('#${table} tbody tr[data-${key}]')].map((tr) => [
    tr.dataset[${JSON.stringify(key)}],
    Object.fromEntries([...tr.querySelectorAll('[data-field]')].map((c) => [c.dataset.field, c.querySelector('code')?.title || c.textContent])),
  ]))`);
}

async function axeViolations(): Promise<{ id: string; impact: string; nodes: number }[]> {
  await page.evaluate(axeSource);
  return page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })))`,
  );
}

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  grid = await startLocalGrid({ distDir: join(REPO_ROOT, 'dist'), stateDir: join(runDir, 'state'), profile: 'fast' });
  const consumer = grid.byRole('consumer-gateway', 'east')[0]!;
  await waitFor(
    'the first routed chat completion',
    async () => {
      const result = await chatCompletion(consumer.listenAddress!, MODEL, 10_000, grid.demoKey());
      return result.status === 200 && result.provider !== undefined ? result : undefined;
    },
    60_000,
    200,
  );
  const dashboard = grid.dashboard('east')!;
  expect(dashboard.token, 'the compiled east dashboard asks for token access').toBeDefined();
  url = dashboard.url;
  dashboardToken = dashboard.token!;
  // launch() gives Chromium a fresh temporary profile of its own (it refuses a --user-data-dir argument).
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(dashboard.openUrl);
  await page.waitForSelector('body[data-generated-at]', { timeout: 15_000 });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await grid?.stop();
  rmSync(runDir, { recursive: true, force: true });
}, 60_000);

describe('fleet dashboard in headless Chromium', () => {
  it('trades the token in the printed URL for an HttpOnly session cookie and leaves it out of the address bar', async () => {
    expect(page.url()).toBe(url);
    const cookies = await page.context().cookies();
    expect(cookies.map((c) => [c.name, c.path, c.httpOnly, c.sameSite])).toEqual([
      ['agn_dashboard_session', '/dashboard', true, 'Strict'],
    ]);
    expect(cookies[0]!.value).not.toContain(dashboardToken);
    // A browser without the cookie gets the page that says how to get in, and nothing of the fleet.
    const stranger = await browser.newPage();
    const denied = await stranger.goto(url);
    expect(denied?.status()).toBe(401);
    expect(await stranger.textContent('h1')).toBe('This fleet dashboard needs its token');
    expect((await stranger.goto(new URL('model.json', url).href))?.status()).toBe(401);
    const wrong = await stranger.goto(`${url}?token=not-the-dashboard-token-at-all`);
    expect(wrong?.status()).toBe(401);
    expect(await stranger.context().cookies()).toEqual([]);
    await stranger.close();
  }, 30_000);

  it('shows the sites, providers and revisions the stores, admin endpoints and metrics report', async () => {
    const store = grid.site('east').store;
    const gridSites = (await store.list(GRID_SITE)).items;
    const network = (await store.list(GRID_NETWORK)).items[0]!;
    const overlays = (await readOverlays(grid)).filter((o) => o.site === 'east');
    const consumerOverlay = overlays.find((o) => o.configMap.endsWith('consumer-gateway'))!;
    // Sites: one row per GridSite, with the phase its status holds.
    await waitFor(
      'every GridSite on the page with its phase',
      async () => {
        const shown = await rows('sites', 'site');
        const expected = Object.fromEntries(
          gridSites.map((g) => [g.metadata.name, (g['status'] as { phase?: string } | undefined)?.phase]),
        );
        return Object.keys(shown).length === gridSites.length &&
          gridSites.every((g) => shown[g.metadata.name]?.['phase'] === expected[g.metadata.name])
          ? shown
          : undefined;
      },
      10_000,
    );
    // Providers: every (site, cluster) with an inference candidate in east's overlays, Ready as east's status says.
    const shown = await rows('providers', 'provider');
    const expectedProviders = new Set(
      overlays.flatMap((o) =>
        o.candidates.filter((c) => c.kind === 'inference_model').map((c) => `${c.site}/${c.cluster}`),
      ),
    );
    expect(new Set(Object.keys(shown))).toEqual(expectedProviders);
    for (const provider of (await store.list(INFERENCE_PROVIDER)).items) {
      const ready = ((provider['status'] as { conditions?: { type: string; status: string }[] }).conditions ?? []).find(
        (c) => c.type === 'Ready',
      )?.status;
      expect(shown[`east/${provider.metadata.name}`]?.['ready']).toBe(ready);
    }
    // Revisions: published == routingMapStatus distributedRevision == the ConfigMap's; accepted == each gateway's /status.
    const routing = (
      network['status'] as { routingMapStatus: { gatewayName: string; distributedRevision: string }[] }
    ).routingMapStatus.find((r) => r.gatewayName === 'consumer-gateway')!;
    expect(routing.distributedRevision).toBe(consumerOverlay.revision);
    // The grid may publish and accept a newer revision between reading the page and reading the gateways: the rows
    // must match one reading of the network status and each replica's /status, taken after the page's.
    const distributedNow = async (): Promise<string | undefined> =>
      (
        (await store.list(GRID_NETWORK)).items[0]?.['status'] as
          | { routingMapStatus?: { gatewayName: string; distributedRevision: string }[] }
          | undefined
      )?.routingMapStatus?.find((r) => r.gatewayName === 'consumer-gateway')?.distributedRevision;
    await waitFor(
      "both consumer replicas' rows to match their /status and the published revision",
      async () => {
        const gateways = await rows('gateways', 'replica');
        if (Object.keys(gateways).length !== 2) return undefined;
        const published = await distributedNow();
        for (const process of grid.byRole('consumer-gateway', 'east')) {
          const status = await json(process.adminAddress!, '/status');
          const row = gateways[process.pod];
          const want = {
            published,
            accepted: status['accepted_revision'],
            agrees: status['accepted_revision'] === published ? 'yes' : 'no',
          };
          const got = { published: row?.['published'], accepted: row?.['accepted'], agrees: row?.['agrees'] };
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            throw new Error(`${process.pod}: page ${JSON.stringify(got)}, endpoints ${JSON.stringify(want)}`);
          }
        }
        return true;
      },
      15_000,
    );
    // A backend metric change reaches the page: the sim's queue depth, as its /metrics reports it.
    await grid.setSimState('east-llm-b', { queue_depth: 0.5 });
    const sim = grid.byRole('sim', 'east').find((p) => p.simName === 'east-llm-b')!;
    const metric = metricSum(await (await fetch(`http://${sim.listenAddress}/metrics`)).text(), 'sim_queue_depth')!;
    const queueCell = page.locator('#providers tr[data-provider="east/east-llm-b"] td.num').first();
    await expect.poll(() => queueCell.textContent(), { timeout: 10_000 }).toBe(metric.toFixed(2));
    await grid.setSimState('east-llm-b', { queue_depth: 0 });
    // Traffic through the consumer gateways shows as requests/s on the providers that served it.
    const served = await attribution(
      grid.byRole('consumer-gateway', 'east')[0]!.listenAddress!,
      MODEL,
      24,
      grid.demoKey(),
    );
    const busiest = [...served.entries()].sort((a, b) => b[1] - a[1])[0]![0];
    const rateCell = page.locator(`#providers tr[data-provider="east/${busiest}"] td.num`).last();
    await expect.poll(async () => Number(await rateCell.textContent()), { timeout: 10_000 }).toBeGreaterThan(0);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-traffic-1280x800.png'), fullPage: false });
  }, 60_000);

  it('follows a killed provider live, without reloading the page', async () => {
    await page.evaluate('window.sameDocument = true');
    const navigations: string[] = [];
    page.on('framenavigated', (f) => navigations.push(f.url()));
    const admission = page.locator('#providers tr[data-provider="east/east-llm-a"] [data-field="admission"]');
    expect(await admission.textContent()).toBe('new_and_existing');
    const t0 = Date.now();
    await grid.stopProcess('east/sim-east-llm-a/sim');
    // The page follows whichever the operator concludes first: the failed scrape (existing_only, stale) or the failed
    // health check, after which the provider is Unavailable and leaves the overlay. Which comes first
    // depends on where the kill falls in the scrape and probe intervals.
    await expect
      .poll(() => admission.textContent(), { timeout: 10_000, interval: 100 })
      .toMatch(/^(existing_only( \(stale\))?|not in overlay)$/);
    const elapsedMs = Date.now() - t0;
    process.stdout.write(`dashboard: provider death shown ${elapsedMs} ms after the kill\n`);
    expect(elapsedMs).toBeLessThan(8_000);
    // Either way it ends out of the overlay once the health check has failed ("If the operator cannot reach
    // a backend's endpoint, the InferenceProvider stays Unavailable and the overlay excludes it"), without a reload,
    // and the newest transition says why: its Ready condition.
    await expect.poll(() => admission.textContent(), { timeout: 20_000, interval: 100 }).toBe('not in overlay');
    const transition = page.locator('#transitions tbody tr', { hasText: 'provider east/east-llm-a' }).first();
    await expect
      .poll(() => transition.textContent(), { timeout: 5_000 })
      .toMatch(/provider east\/east-llm-a(new_and_existing|existing_only( \(stale\))?)not in overlayReady False/);
    expect(navigations).toEqual([]);
    expect(await page.evaluate('window.sameDocument')).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-provider-down.png'), fullPage: true });
    await grid.startProcess('east/sim-east-llm-a/sim');
    // Back: fresh again at once, readmitted for new requests only after the recovery hold-down (docs/contract.md §2.5).
    await expect.poll(() => admission.textContent(), { timeout: 15_000 }).not.toContain('stale');
  }, 60_000);

  it('passes axe-core with no serious or critical violation and is keyboard navigable, at 1280x800 and 390 px', async () => {
    for (const viewport of [
      { width: 1280, height: 800 },
      { width: 390, height: 844 },
    ]) {
      await page.setViewportSize(viewport);
      const violations = await axeViolations();
      writeFileSync(join(ARTIFACTS, `axe-${viewport.width}.json`), `${JSON.stringify(violations, null, 2)}\n`);
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      expect(serious, `${viewport.width}px`).toEqual([]);
      // The page never scrolls sideways: wide tables scroll inside their own focusable regions.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(viewport.width);
      await page.screenshot({
        path: join(ARTIFACTS, `dashboard-${viewport.width}x${viewport.height}.png`),
        fullPage: viewport.width < 600,
      });
    }
    // Keyboard: the first Tab reaches the skip link, Enter moves to the content, and every table region is in the tab order.
    await page.evaluate('window.scrollTo(0, 0)');
    await page.locator('body').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(page.url()).toMatch(/#main$/);
    const regions = await page.evaluate<number[]>(`[...document.querySelectorAll('.scroll')].map((e) => e.tabIndex)`);
    expect(regions.length).toBe(6);
    expect(regions.every((t) => t === 0)).toBe(true);
    const focused: string[] = [];
    for (let i = 0; i < 14; i++) {
      await page.keyboard.press('Tab');
      focused.push(
        await page.evaluate<string>(
          `document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent ?? ''`,
        ),
      );
    }
    expect(focused).toContain('Providers table');
  }, 60_000);

  it('loads nothing from outside the operator and shows no token or private key bytes', async () => {
    const origin = new URL(url).origin;
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.filter((r) => !r.startsWith(origin))).toEqual([]);
    const model = await (
      await fetch(new URL('model.json', url), { headers: { authorization: `Bearer ${dashboardToken}` } })
    ).text();
    expect(model).toContain('"site":"east"');
    expect(grid.tokens().map(String)).toContain(dashboardToken);
    const html = await page.content();
    const needles = grid.tokens().flatMap((t) => [t.toString(), t.toString('base64')]);
    // Private keys: any 48-character run of a PEM body is enough to be a leak.
    const pkiDir = join(runDir, 'state', 'pki');
    for (const entry of readdirSync(pkiDir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.key')) continue;
      const body = readFileSync(join(entry.parentPath, entry.name), 'utf8')
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('-----'))
        .join('');
      if (body.length >= 96) needles.push(body.slice(24, 72));
      else if (body.length > 0) needles.push(body);
    }
    expect(needles.length).toBeGreaterThan(3);
    const leaks = needles.filter(
      (n) =>
        model.includes(n) || html.includes(n) || page.url().includes(n) || page.url().includes(encodeURIComponent(n)),
    );
    expect(leaks).toEqual([]);
  }, 30_000);
});
