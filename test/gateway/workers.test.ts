// `--workers N` with real processes and sockets: one gateway process serving its listener from two worker threads
// (SO_REUSEPORT), requests landing on both, one /metrics view that counts every request once, readiness over both,
// SIGTERM draining the requests in flight in both workers before exit 0, and the command line refusing bad counts.
import { request } from 'node:http';
import { join } from 'node:path';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  candidate,
  chatBody,
  consumerConfig,
  metricSample,
  payload,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';
import { MAX_RESTARTS, RESTART_WINDOW_MS, RestartBudget } from '../../daemons/gateway/workers.ts';

const TOKEN = 'workers-backend-token-7a41';
const BODY = JSON.stringify(chatBody('m1'));

let dir: string;
let cleanup: () => Promise<void>;
let sim: Daemon;
let slowSim: Daemon;
let configPath: string;
let slowConfigPath: string;
const daemons: Daemon[] = [];

async function writeConsumer(name: string, simPort: number, extra: Record<string, unknown> = {}): Promise<string> {
  const overlayPath = join(dir, `${name}-overlay.json`);
  await writeOverlay(
    overlayPath,
    payload([
      {
        ...candidate('m1', 'local', 'sim'),
        credential: {
          strategy: 'bearer_token',
          secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
        },
      },
    ]),
  );
  const path = join(dir, `${name}.json`);
  const config = consumerConfig({
    overlayPath,
    credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: join(dir, 'sim-token') }],
    clusters: [{ name: 'sim', endpoints: [`127.0.0.1:${simPort}`] }],
  });
  await writeFile(path, JSON.stringify({ ...config, ...extra }));
  return path;
}

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('workers'));
  await writeFile(join(dir, 'sim-token'), TOKEN, { mode: 0o600 });
  sim = spawnDaemon('daemons/sim/main.ts', ['--name', 'sim', '--models', 'm1', '--token-file', join(dir, 'sim-token')]);
  // Every answer takes 600 ms, so requests are in flight in both workers when SIGTERM arrives.
  slowSim = spawnDaemon('daemons/sim/main.ts', [
    '--name',
    'sim',
    '--models',
    'm1',
    '--token-file',
    join(dir, 'sim-token'),
    '--latency-ms',
    '600',
  ]);
  daemons.push(sim, slowSim);
  configPath = await writeConsumer('consumer', await waitForPort(sim, 'sim'));
  slowConfigPath = await writeConsumer('slow', await waitForPort(slowSim, 'sim'));
});

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  await cleanup();
});

/** One chat request on its own connection (agent: false), so the kernel picks a worker for each. */
function chat(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(BODY);
  });
}

/** How many answered requests each worker logged (debug "request" lines carry the worker index). */
function requestsByWorker(daemon: Daemon): Map<number, number> {
  const counts = new Map<number, number>();
  for (const line of daemon.lines) {
    if (line['msg'] === 'request' && typeof line['worker'] === 'number')
      counts.set(line['worker'], (counts.get(line['worker']) ?? 0) + 1);
  }
  return counts;
}

async function startTwoWorkers(config: string): Promise<{ gateway: Daemon; port: number; admin: number }> {
  const gateway = spawnDaemon('daemons/gateway/main.ts', ['--config', config, '--workers', '2'], {
    LOG_LEVEL: 'debug',
  });
  daemons.push(gateway);
  const port = await waitForPort(gateway, 'edge');
  const admin = await waitForPort(gateway, 'admin');
  await waitFor('both workers ready', async () =>
    (await call(`http://127.0.0.1:${admin}/readyz`)).status === 200 ? true : undefined,
  );
  return { gateway, port, admin };
}

describe('gateway --workers 2', () => {
  it('spreads connections over both workers and /metrics counts every request exactly once', async () => {
    const { gateway, port, admin } = await startTwoWorkers(configPath);
    const listening = gateway.lines.filter((l) => l['msg'] === 'listening');
    expect(listening).toEqual([expect.objectContaining({ listener: 'edge', port, workers: 2 })]);

    const sent = 48;
    const statuses: number[] = [];
    for (let i = 0; i < sent; i += 8)
      statuses.push(...(await Promise.all(Array.from({ length: 8 }, () => chat(port)))));
    expect(statuses).toEqual(Array(sent).fill(200));

    const byWorker = await waitFor('request lines of every answer', () => {
      const counts = requestsByWorker(gateway);
      return [...counts.values()].reduce((a, b) => a + b, 0) === sent ? counts : undefined;
    });
    expect([...byWorker.keys()].sort()).toEqual([0, 1]);
    expect(Math.min(...byWorker.values())).toBeGreaterThan(0);

    const metrics = await call(`http://127.0.0.1:${admin}/metrics`);
    expect(metrics.status).toBe(200);
    // Summed over the workers: the request counter equals the requests sent, not one worker's share.
    expect(
      metricSample(metrics.text, 'grid_gateway_requests_total{role="consumer",model="m1",cluster="sim",status="200"}'),
    ).toBe(sent);
    expect(metricSample(metrics.text, 'grid_gateway_requests_in_flight{role="consumer"}')).toBe(0);
    // Readiness and info gauges are not summed: ready is 1 (every worker ready), the overlay has one candidate.
    expect(metricSample(metrics.text, 'grid_gateway_ready')).toBe(1);
    expect(metricSample(metrics.text, 'grid_gateway_overlay_candidates')).toBe(1);
    // Process metrics appear once, for the whole process.
    expect(metrics.text.match(/^grid_gateway_process_cpu_seconds_total /gm)).toHaveLength(1);
    // The event-loop delay is the workers' loops, merged into one series each (the greatest maximum).
    for (const series of ['lag', 'lag_min', 'lag_max', 'lag_p99']) {
      expect(
        metrics.text.match(new RegExp(`^grid_gateway_nodejs_eventloop_${series}_seconds `, 'gm')),
        series,
      ).toHaveLength(1);
    }

    const status = (await call(`http://127.0.0.1:${admin}/status`)).json();
    expect(status).toMatchObject({ role: 'consumer', ready: true, listeners: [{ name: 'edge', port }] });
    expect(status.workers).toEqual([
      { index: 0, running: true, ready: true, accepted_revision: status.accepted_revision },
      { index: 1, running: true, ready: true, accepted_revision: status.accepted_revision },
    ]);
    expect(await gateway.stop()).toBe(0);
  });

  it('tells the supervisor when each worker accepts its first overlay and each new revision', async () => {
    const config = await writeConsumer('cold', await waitForPort(sim, 'sim'));
    const overlayPath = join(dir, 'cold-overlay.json');
    await rm(overlayPath);
    const gateway = spawnDaemon('daemons/gateway/main.ts', ['--config', config, '--workers', '2']);
    daemons.push(gateway);
    const admin = await waitForPort(gateway, 'admin');
    const status = async (): Promise<{
      ready: boolean;
      accepted_revision: string | null;
      workers: { ready: boolean; accepted_revision: string | null }[];
    }> => (await call(`http://127.0.0.1:${admin}/status`)).json();
    expect(await status()).toMatchObject({
      ready: false,
      accepted_revision: null,
      workers: [{ ready: false }, { ready: false }],
    });
    expect((await call(`http://127.0.0.1:${admin}/readyz`)).status).toBe(503);

    const cred = {
      strategy: 'bearer_token' as const,
      secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
    };
    for (const candidates of [
      [{ ...candidate('m1', 'local', 'sim'), credential: cred }],
      [
        { ...candidate('m1', 'local', 'sim'), credential: cred },
        { ...candidate('m2', 'local', 'sim'), credential: cred },
      ],
    ]) {
      const revision = await writeOverlay(overlayPath, payload(candidates));
      const seen = await waitFor(
        `both workers on ${revision}`,
        async () => {
          const now = await status();
          return now.workers.every((w) => w.ready && w.accepted_revision === revision) ? now : undefined;
        },
        3_000,
      );
      expect(seen).toMatchObject({ ready: true, accepted_revision: revision });
      expect((await call(`http://127.0.0.1:${admin}/readyz`)).status).toBe(200);
    }
    expect(await gateway.stop()).toBe(0);
  });

  it('on SIGTERM reports not ready at once, finishes the requests in flight in both workers, then exits 0', async () => {
    const { gateway, port, admin } = await startTwoWorkers(slowConfigPath);
    const inFlight = Array.from({ length: 16 }, () => chat(port));
    await waitFor('16 requests in flight', async () => {
      const text = (await call(`http://127.0.0.1:${admin}/metrics`)).text;
      return metricSample(text, 'grid_gateway_requests_in_flight{role="consumer"}') === 16 ? true : undefined;
    });
    const started = Date.now();
    const exited = gateway.stop('SIGTERM');
    await waitFor(
      'not ready',
      async () => ((await call(`http://127.0.0.1:${admin}/readyz`)).status === 503 ? true : undefined),
      2_000,
    );

    expect(await Promise.all(inFlight)).toEqual(Array(16).fill(200));
    expect(await exited).toBe(0);
    // Bounded by the 600 ms answers and the drain delay, not by the 2 s shutdown deadline plus its margin.
    expect(Date.now() - started).toBeLessThan(4_000);
    const byWorker = requestsByWorker(gateway);
    expect([...byWorker.keys()].sort()).toEqual([0, 1]);
    expect([...byWorker.values()].reduce((a, b) => a + b, 0)).toBe(16);
    const completed = gateway.lines.filter((l) => l['msg'] === 'request');
    expect(completed.every((l) => l['completed'] === true && l['status'] === 200)).toBe(true);
    await expect(chat(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('refuses per-key request limits, which each worker would count on its own (exit 1, one stderr line)', async () => {
    const keys = join(dir, 'caller-keys.json');
    await writeFile(keys, JSON.stringify({ keys: [] }));
    const base = JSON.parse(await readFile(configPath, 'utf8')) as {
      filter_chains: { filters: Record<string, unknown>[] }[];
    };
    const filters = base.filter_chains[0]!.filters;
    const limited = join(dir, 'limited.json');
    await writeFile(
      limited,
      JSON.stringify({
        ...base,
        filter_chains: [
          {
            ...base.filter_chains[0],
            filters: [
              { filter: 'caller_auth', keys_file: keys },
              { filter: 'budget_enforce', requests_per_minute: 60 },
              filters[0],
              { filter: 'usage_meter', prices: [], report: { url: 'http://127.0.0.1:9' } },
              ...filters.slice(1),
            ],
          },
        ],
      }),
    );
    const gateway = spawnDaemon('daemons/gateway/main.ts', ['--config', limited, '--workers', '2']);
    expect(await new Promise((resolve) => gateway.proc.once('exit', resolve))).toBe(1);
    const lines = gateway.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('budget_enforce requests_per_minute/tokens_per_minute are counted per worker');
  });
});

describe('gateway --workers startup failures', () => {
  it('a worker that cannot bind fails startup like one process does (exit 1, one stderr line)', async () => {
    const base = JSON.parse(await readFile(configPath, 'utf8')) as { listeners: Record<string, unknown>[] };
    const busy = join(dir, 'busy.json');
    // The sim holds this port without SO_REUSEPORT, so the first worker's bind fails.
    await writeFile(
      busy,
      JSON.stringify({
        ...base,
        listeners: [{ ...base.listeners[0], address: `127.0.0.1:${await waitForPort(sim, 'sim')}` }],
      }),
    );
    const gateway = spawnDaemon('daemons/gateway/main.ts', ['--config', busy, '--workers', '2']);
    expect(await new Promise((resolve) => gateway.proc.once('exit', resolve))).toBe(1);
    expect(gateway.stderr().trim().split('\n')).toEqual([
      expect.stringMatching(/^gateway: startup failed: listen EADDRINUSE: address already in use 127\.0\.0\.1:\d+$/u),
    ]);
  });
});

describe('worker restart budget', () => {
  it(`allows ${MAX_RESTARTS} restarts in any ${RESTART_WINDOW_MS / 1000} s and refuses the next, until the oldest leaves the window`, () => {
    const budget = new RestartBudget();
    const t0 = 1_000_000;
    for (let i = 0; i < MAX_RESTARTS; i++) expect(budget.allow(t0 + i * 1_000)).toBe(true);
    expect(budget.allow(t0 + 10_000)).toBe(false);
    expect(budget.allow(t0 + RESTART_WINDOW_MS - 1)).toBe(false);
    // The first restart is now a whole window old: one more is allowed, and the budget is full again.
    expect(budget.allow(t0 + RESTART_WINDOW_MS)).toBe(true);
    expect(budget.allow(t0 + RESTART_WINDOW_MS + 1)).toBe(false);
  });
});

describe('gateway --workers on the command line', () => {
  it('--help documents the flag (stdout, exit 0)', async () => {
    const help = spawnDaemon('daemons/gateway/main.ts', ['--help']);
    expect(await new Promise((resolve) => help.proc.once('exit', resolve))).toBe(0);
    expect(help.stdout()).toContain('--workers N');
    expect(help.stdout()).toMatch(/1\.\.64 \(default 1\)/);
    expect(help.stderr()).toBe('');
  });

  it.each([['0'], ['65'], ['two'], ['1.5'], ['-1'], ['']])(
    '--workers %j is a usage error: one stderr line, exit 2',
    async (count) => {
      const bad = spawnDaemon('daemons/gateway/main.ts', ['--config', configPath, `--workers=${count}`]);
      expect(await new Promise((resolve) => bad.proc.once('exit', resolve))).toBe(2);
      const lines = bad.stderr().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^gateway: --workers must be a whole number from 1 to 64, got ".*" \(usage: /);
      expect(bad.stdout()).toBe('');
    },
  );

  it('--workers without a value is a usage error too', async () => {
    const bad = spawnDaemon('daemons/gateway/main.ts', ['--config', configPath, '--workers']);
    expect(await new Promise((resolve) => bad.proc.once('exit', resolve))).toBe(2);
    expect(bad.stderr().trim().split('\n')).toHaveLength(1);
    expect(bad.stderr()).toContain('--workers');
  });
});
