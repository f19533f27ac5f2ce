// The local grid qualification (two sites on loopback): the compiled grid in dist/ started by the same runner as `npm
// start`, with real processes, UDP gossip and mTLS, then driven through the flows a user relies on. Evidence
// (results.json, SUMMARY.md) goes to a temp directory; teardown is checked by pid.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  formatSnapshot,
  metricSum,
  readOverlays,
  snapshot,
  type OverlayCandidate,
} from '../../daemons/local-grid/grid-status.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import type { SupervisorEvent } from '../../daemons/local-grid/supervisor.ts';
import { attribution, chatCompletion, waitFor } from '../../daemons/local-grid/traffic.ts';
import { holdEngineLoad } from './engine-load.ts';
import { EvidenceLog } from './evidence.ts';
import { processAlive } from '../process-alive.ts';

const REFRESH_MS = 2_000; // GridNetwork metricsRefreshInterval under the runner's fast profile
const MODEL = 'sim-model-v1';
const runDir = mkdtempSync(join(tmpdir(), 'agn-e2e-'));
const evidence = new EvidenceLog();
const errorBodies: string[] = [];
let grid: LocalGrid;
let startMs = 0;
let stopped = false;
let started = false;

async function json(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
  return (await response.json()) as Record<string, unknown>;
}

async function eastOverlay(): Promise<{
  revision: string;
  candidates: readonly OverlayCandidate[];
  configMap: string;
}> {
  const overlay = (await readOverlays(grid)).find((o) => o.site === 'east');
  if (overlay === undefined) throw new Error('east has no rendered overlay');
  return overlay;
}

const model = (candidates: readonly OverlayCandidate[], name = MODEL) =>
  candidates.filter((c) => c.kind === 'inference_model' && c.name === name);
const consumer = (i: number) => grid.byRole('consumer-gateway', 'east')[i]!;

async function acceptedEverywhere(revision: string): Promise<boolean> {
  for (const c of grid.byRole('consumer-gateway', 'east')) {
    if (grid.running(c.name) === undefined) continue;
    const status = await json(`http://${c.adminAddress}/status`).catch(() => ({}) as Record<string, unknown>);
    if (status['accepted_revision'] !== revision) return false;
  }
  return true;
}

async function send(listen: string, count: number, name = MODEL): Promise<Map<string, number>> {
  const counts = await attribution(listen, name, count, grid.demoKey());
  return counts;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(join(entry.parentPath, entry.name));
  }
  return out;
}

function tlsGet(
  port: number,
  options: { cert?: string; key?: string; ca: string; headers?: Record<string, string> },
): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        servername: 'gateway.east.grid.example.com',
        ca: options.ca,
        ...(options.cert !== undefined ? { cert: options.cert, key: options.key } : {}),
        headers: { 'content-type': 'application/json', ...(options.headers ?? {}) },
        timeout: 5000,
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

beforeAll(async () => {
  const t0 = Date.now();
  grid = await startLocalGrid({ distDir: join(REPO_ROOT, 'dist'), stateDir: join(runDir, 'state'), profile: 'fast' });
  await waitFor(
    'the first routed chat completion',
    async () => {
      const result = await chatCompletion(consumer(0).listenAddress!, MODEL, 10_000, grid.demoKey());
      return result.status === 200 && result.provider !== undefined ? result : undefined;
    },
    60_000,
    200,
  );
  startMs = Date.now() - t0;
  started = true;
}, 120_000);

afterAll(async () => {
  if (!stopped) await grid?.stop();
  const failed = !started || evidence.entries.some((e) => e.outcome === 'failed');
  evidence.write(runDir, {
    grid: 'dist/ (east, west) on loopback, profile fast',
    first_routed_completion_ms: startMs,
    run_dir: runDir,
    state_kept: failed,
  });
  // The state holds generated credentials: kept only when something failed, for diagnosis.
  if (!failed) rmSync(join(runDir, 'state'), { recursive: true, force: true });
  process.stdout.write(`local grid qualification evidence: ${join(runDir, 'SUMMARY.md')}\n`);
}, 60_000);

describe('local grid qualification: two sites from dist/ on loopback', () => {
  it('agrees on one overlay revision from operator to serving request (rendered == written == accepted == serving)', async () => {
    await evidence.step('overlay revisions agree', async (note) => {
      const agreed = await waitFor(
        'every consumer pod to agree on the rendered revision',
        async () => {
          const overlay = await eastOverlay();
          const rows: Record<string, string | null>[] = [];
          for (const [i, gateway] of grid.byRole('consumer-gateway', 'east').entries()) {
            const sync = grid.processes.find((p) => p.role === 'overlay-sync' && p.pod === gateway.pod)!;
            const written = (
              (await json(`http://${sync.adminAddress}/status`))['written'] as { revision: string | null }
            ).revision;
            const accepted = (await json(`http://${gateway.adminAddress}/status`))['accepted_revision'] as
              | string
              | null;
            const result = await chatCompletion(gateway.listenAddress!, MODEL, 10_000, grid.demoKey());
            if (result.status !== 200 || result.provider === undefined) return undefined;
            const seen =
              (await grid.simRequests(result.provider)).at(-1)?.headers['x-ai-provider-routing-revision'] ?? null;
            rows.push({ consumer: String(i), rendered: overlay.revision, written, accepted, serving: seen });
          }
          return rows.every(
            (r) => r['written'] === r['rendered'] && r['accepted'] === r['rendered'] && r['serving'] === r['rendered'],
          )
            ? { overlay, rows }
            : undefined;
        },
        30_000,
      );
      note('revision', agreed.overlay.revision);
      note('consumers', agreed.rows.length);
      expect(agreed.rows).toHaveLength(2);
      expect(agreed.overlay.revision).toMatch(/^[0-9a-f]{64}$/);
      // The file the gateway reads holds exactly the ConfigMap's bytes.
      // A newer revision may land between the two reads, so read both until they name the same revision; then the
      // bytes must be identical.
      const pod = grid.pods.find((p) => p.pod.id === 'consumer-gateway-0')!;
      const pair = await waitFor(
        'the serving file and the ConfigMap at one revision',
        async () => {
          const store = await grid
            .site('east')
            .store.get(
              { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
              { namespace: 'grid-system', name: 'grid-overlay-demo-consumer-gateway' },
            );
          const data = (store?.['data'] as Record<string, string> | undefined)?.['routing-overlay.json'];
          if (data === undefined) return undefined;
          const onDisk = readFileSync(join(pod.dir, 'volumes', 'routing-overlay', 'routing-overlay.json'), 'utf8');
          return JSON.parse(onDisk).revision.value === JSON.parse(data).revision.value ? { data, onDisk } : undefined;
        },
        15_000,
      );
      expect(pair.onDisk).toBe(pair.data);
    });
  }, 60_000);

  it('attributes requests as the selection mode says (weightedRandom by capacityWeight inside the first group)', async () => {
    await evidence.step('attribution follows weightedRandom', async (note) => {
      const overlay = await eastOverlay();
      const group0 = model(overlay.candidates).filter((c) => c.selection_group === 0);
      note(
        'group0',
        group0.map(
          (c) => `${c.site}/${c.cluster} weight ${(c as unknown as { traffic_weight?: number }).traffic_weight}`,
        ),
      );
      expect(group0.map((c) => c.cluster).sort()).toEqual(['east-llm-a', 'east-llm-b']);
      const counts = await send(consumer(0).listenAddress!, 48);
      note('counts', Object.fromEntries(counts));
      expect([...counts.keys()].sort()).toEqual(['east-llm-a', 'east-llm-b']);
      // Weights 3:1 over 48 requests: P(a <= b) is far below 1e-6.
      expect(counts.get('east-llm-a')!).toBeGreaterThan(counts.get('east-llm-b')!);
    });
  }, 60_000);

  it('re-ranks on a queue-depth change within one refresh interval', async () => {
    await evidence.step('queue depth re-ranks within one refresh interval', async (note) => {
      const before = model((await eastOverlay()).candidates).filter((c) => c.site === 'east');
      expect(before[0]?.cluster).toBe('east-llm-a'); // equal scores: byte order of the site, then name
      await grid.setSimState('east-llm-a', { queue_depth: 0.6 });
      const t0 = Date.now();
      const after = await waitFor(
        'east-llm-b to rank above east-llm-a',
        async () => {
          const rows = model((await eastOverlay()).candidates).filter((c) => c.site === 'east');
          return rows[0]?.cluster === 'east-llm-b' ? rows : undefined;
        },
        15_000,
        50,
      );
      const elapsed = Date.now() - t0;
      note('re_rank_ms', elapsed);
      note(
        'scores',
        after.map((c) => `${c.cluster}=${c.score}`),
      );
      expect(after.find((c) => c.cluster === 'east-llm-a')!.score).toBeCloseTo(0.4, 5);
      // The next scrape (one refresh interval at most) sees it; one reconcile (scrape, render, write) comes on top.
      expect(elapsed).toBeLessThan(REFRESH_MS + 2_000);
      // null hands the reading back to the engine (0 would keep forcing an empty queue over its real one).
      await grid.setSimState('east-llm-a', { queue_depth: null });
      await waitFor(
        'the ranking to return',
        async () => (model((await eastOverlay()).candidates)[0]?.cluster === 'east-llm-a' ? true : undefined),
        15_000,
      );
    });
  }, 60_000);

  it("moves new traffic to west when real requests fill east's engines, and back once they are gone (no /admin/state)", async () => {
    await evidence.step('real load at east moves traffic to west', async (note) => {
      const before = await send(consumer(0).listenAddress!, 12);
      expect([...before.keys()].every((k) => k.startsWith('east-llm-'))).toBe(true);
      // Each engine's batch full and its queue well past the stabilized enterThreshold (0.85 of waiting over waiting +
      // running, the vLLM preset's reading): max_num_seqs 16 and 8 in the example, so 16 + 110 and 8 + 60 requests.
      // max_tokens keeps the running ones busy for longer than the test (about 140 and 75 tokens/s a sequence).
      const loads = [
        { provider: 'east-llm-a', count: 126, maxSeqs: 16 },
        { provider: 'east-llm-b', count: 68, maxSeqs: 8 },
      ].map((l) => {
        const sim = grid.sim(l.provider);
        const token = readFileSync(sim.tokenFile ?? '', 'utf8').trim();
        return {
          ...l,
          sim,
          held: holdEngineLoad({ address: sim.listenAddress!, token, model: MODEL, count: l.count, maxTokens: 20_000 }),
        };
      });
      try {
        const t0 = Date.now();
        for (const l of loads) {
          // The engine's own gauges, in vLLM's units: requests, not a 0-1 fraction.
          const metrics = await waitFor(
            `${l.provider}'s engine to run a full batch with the rest waiting`,
            async () => {
              const text = await (
                await fetch(`http://${l.sim.listenAddress}/metrics`, { signal: AbortSignal.timeout(3000) })
              ).text();
              const running = metricSum(text, 'vllm:num_requests_running');
              const waiting = metricSum(text, 'vllm:num_requests_waiting');
              return running === l.maxSeqs && waiting === l.count - l.maxSeqs
                ? { running, waiting, kv: metricSum(text, 'vllm:kv_cache_usage_perc') }
                : undefined;
            },
            15_000,
            100,
          );
          note(`${l.provider}_engine`, metrics);
        }
        const moved = await waitFor(
          "east's candidates closed to new requests at every consumer",
          async () => {
            const overlay = await eastOverlay();
            const east = model(overlay.candidates).filter((c) => c.site === 'east');
            return east.length === 2 &&
              east.every((c) => c.admission_state === 'existing_only') &&
              (await acceptedEverywhere(overlay.revision))
              ? east
              : undefined;
          },
          30_000,
          100,
        );
        note('closed_ms', Date.now() - t0);
        note(
          'east_scores',
          moved.map((c) => `${c.cluster}=${c.score}`),
        );
        const during = await send(consumer(0).listenAddress!, 16);
        note('counts_under_load', Object.fromEntries(during));
        expect(Object.fromEntries(during)).toEqual({ 'west-llm': 16 });
        // The load held all along: it is the engines' own queue that moved the traffic.
        for (const l of loads) expect(l.held.ended()).toBe(0);
      } finally {
        for (const l of loads) l.held.release();
      }
      const t1 = Date.now();
      // Released, the engines drain; stabilized admission reopens east after successThreshold samples and its
      // recoveryHoldDown (30 s by default).
      await waitFor(
        'east open to new requests again at every consumer',
        async () => {
          const overlay = await eastOverlay();
          const east = model(overlay.candidates).filter((c) => c.site === 'east');
          return east.length === 2 &&
            east.every((c) => c.admission_state === 'new_and_existing') &&
            (await acceptedEverywhere(overlay.revision))
            ? true
            : undefined;
        },
        60_000,
        200,
      );
      note('reopened_ms', Date.now() - t1);
      const after = await send(consumer(0).listenAddress!, 12);
      note('counts_after', Object.fromEntries(after));
      expect([...after.keys()].every((k) => k.startsWith('east-llm-'))).toBe(true);
    });
  }, 150_000);

  it('withdraws a provider whose backend died, and routes to it again once it is back', async () => {
    await evidence.step('provider withdrawn and restored', async (note) => {
      const t0 = Date.now();
      await grid.stopProcess('east/sim-east-llm-a/sim');
      const withdrawn = await waitFor(
        'east-llm-a out of the viable group at every consumer',
        async () => {
          const overlay = await eastOverlay();
          const a = model(overlay.candidates).find((c) => c.cluster === 'east-llm-a');
          const viable = a !== undefined && a.admission_state === 'new_and_existing' && a.fresh;
          return !viable && (await acceptedEverywhere(overlay.revision)) ? { overlay, a } : undefined;
        },
        40_000,
      );
      note('withdraw_ms', Date.now() - t0);
      note(
        'withdrawn_as',
        withdrawn.a === undefined ? 'removed' : `${withdrawn.a.admission_state}, fresh=${withdrawn.a.fresh}`,
      );
      const during = await send(consumer(0).listenAddress!, 16);
      note('counts_without_a', Object.fromEntries(during));
      expect([...during.keys()]).toEqual(['east-llm-b']);
      const t1 = Date.now();
      await grid.startProcess('east/sim-east-llm-a/sim');
      await waitFor(
        'east-llm-a viable again at every consumer',
        async () => {
          const overlay = await eastOverlay();
          const a = model(overlay.candidates).find((c) => c.cluster === 'east-llm-a');
          return a?.admission_state === 'new_and_existing' &&
            a.fresh &&
            a.selection_group === 0 &&
            (await acceptedEverywhere(overlay.revision))
            ? true
            : undefined;
        },
        90_000,
      );
      note('restore_ms', Date.now() - t1);
      const after = await send(consumer(0).listenAddress!, 24);
      note('counts_after_restore', Object.fromEntries(after));
      expect(after.get('east-llm-a') ?? 0).toBeGreaterThan(0);
    });
  }, 150_000);

  it('keeps serving through the other consumer gateway when one is down', async () => {
    await evidence.step('one consumer down, the other serves', async (note) => {
      const down = consumer(0);
      await grid.stopProcess(down.name);
      const refused = await chatCompletion(down.listenAddress!, MODEL, 2000, grid.demoKey());
      expect(refused.status).toBe(0);
      const other = await send(consumer(1).listenAddress!, 10);
      note('counts_via_consumer_1', Object.fromEntries(other));
      expect([...other.keys()].every((k) => k.startsWith('east-llm-'))).toBe(true);
      await grid.startProcess(down.name);
      const back = await waitFor(
        'the restarted consumer to serve',
        async () => {
          const r = await chatCompletion(down.listenAddress!, MODEL, 10_000, grid.demoKey());
          return r.status === 200 ? r : undefined;
        },
        30_000,
      );
      note('restarted_consumer_served_by', back.provider);
    });
  }, 60_000);

  it('restarts every kind of daemon killed from outside (SIGKILL) and recovers without a person', async () => {
    await evidence.step('crashed daemons restarted with backoff, grid recovers', async (note) => {
      const victims = [
        'east/gossip-operator/gossip-operator',
        'east/consumer-gateway-1/overlay-sync',
        consumer(0).name,
        'east/provider-gateway-0/gateway',
        'east/sim-east-llm-a/sim',
      ];
      expect(victims.map((v) => grid.process(v).role)).toEqual([
        'operator',
        'overlay-sync',
        'consumer-gateway',
        'provider-gateway',
        'sim',
      ]);
      const events: SupervisorEvent[] = [];
      grid.supervisor.onEvent = (e) => events.push(e);
      const before = new Map(victims.map((v) => [v, grid.running(v)!.pid]));
      const restartsBefore = new Map(victims.map((v) => [v, grid.status(v)!.restarts]));
      const t0 = Date.now();
      // As `kill -9` from a shell would: the runner is not told.
      for (const pid of before.values()) process.kill(-pid, 'SIGKILL');
      await waitFor(
        'every killed process restarted and ready',
        async () =>
          victims.every((v) => grid.status(v)?.state === 'running' && grid.running(v)!.pid !== before.get(v))
            ? true
            : undefined,
        60_000,
        100,
      );
      note('all_restarted_ms', Date.now() - t0);
      for (const v of victims) {
        expect(grid.status(v)!.restarts, v).toBe(restartsBefore.get(v)! + 1);
        expect(grid.status(v)!.lastExit?.signal, v).toBe('SIGKILL');
        expect(
          events.find((e) => e.type === 'exited' && e.name === v),
          v,
        ).toMatchObject({ exit: { signal: 'SIGKILL' }, restart: { delayMs: 1000 } });
        expect(
          events.some((e) => e.type === 'restarted' && e.name === v),
          v,
        ).toBe(true);
        expect(readFileSync(grid.specOf(v).logFile, 'utf8'), v).toMatch(/supervisor: .* restarted and ready/);
      }
      // The live table names each restart.
      const table = formatSnapshot(await snapshot(grid));
      note('status_table_processes', table.slice(table.indexOf('Processes')));
      for (const v of victims)
        expect(table).toMatch(
          new RegExp(`${v.replace(/[/.-]/g, (c) => `\\${c}`)} +running +${restartsBefore.get(v)! + 1} +SIGKILL`),
        );
      // The restarted provider gateway serves mTLS on its old port with the certificate kept in its pod directory.
      const provider = grid.process('east/provider-gateway-0/gateway');
      const ca = readFileSync(grid.pki.caFile, 'utf8');
      const east = grid.pki.sites.find((s) => s.site === 'east')!;
      const direct = await tlsGet(Number(provider.listenAddress!.split(':')[1]), {
        ca,
        cert: readFileSync(east.consumerClient.certFile, 'utf8'),
        key: readFileSync(east.consumerClient.keyFile, 'utf8'),
      });
      expect('status' in direct && direct.status).toBe(403);
      // The restarted operator rejoins the mesh: each site's member sees both alive again.
      const gossipMembers = async (site: string) =>
        (
          (
            await json(`http://${grid.byRole('operator', site)[0]!.adminAddress}/status`).catch(
              () => ({}) as Record<string, unknown>,
            )
          )['gossip'] as { members?: Record<string, number> } | null | undefined
        )?.members;
      const rejoined = await waitFor(
        'east and west to see each other alive again',
        async () => {
          const [e, w] = [await gossipMembers('east'), await gossipMembers('west')];
          return e?.['alive'] === 2 && w?.['alive'] === 2 ? { east: e, west: w } : undefined;
        },
        30_000,
        200,
      );
      note('gossip_rejoined_ms', Date.now() - t0);
      note('gossip_members', rejoined);
      // The whole loop runs through restarted processes: the restarted sim reports a queue, the restarted operator
      // scrapes it and re-ranks, the restarted overlay-sync writes the overlay, and both consumers (one restarted)
      // accept it and route.
      await grid.setSimState('east-llm-a', { queue_depth: 0.6 });
      const reranked = await waitFor(
        'east-llm-b ranked above the restarted east-llm-a, written and accepted everywhere',
        async () => {
          const overlay = await eastOverlay();
          const rows = model(overlay.candidates).filter((c) => c.site === 'east');
          if (rows[0]?.cluster !== 'east-llm-b' || !(await acceptedEverywhere(overlay.revision))) return undefined;
          const sync = grid.process('east/consumer-gateway-1/overlay-sync');
          const written = ((await json(`http://${sync.adminAddress}/status`))['written'] as { revision: string | null })
            .revision;
          return written === overlay.revision ? overlay : undefined;
        },
        30_000,
        200,
      );
      note('reranked_after_restart_ms', Date.now() - t0);
      note(
        'west_fresh',
        reranked.candidates.filter((c) => c.site === 'west').every((c) => c.fresh),
      );
      const results = await Promise.all(
        [0, 1].map((i) => chatCompletion(consumer(i).listenAddress!, MODEL, 10_000, grid.demoKey())),
      );
      note(
        'served_by',
        results.map((r) => r.provider),
      );
      expect(results.map((r) => r.status)).toEqual([200, 200]);
      // null hands the reading back to the engine (0 would keep forcing an empty queue over its real one).
      await grid.setSimState('east-llm-a', { queue_depth: null });
      // The restarted sim serves again, through the restarted provider gateway.
      await waitFor(
        'east-llm-a to serve again',
        async () => ((await send(consumer(0).listenAddress!, 8)).has('east-llm-a') ? true : undefined),
        60_000,
        500,
      );
      note('east_llm_a_serving_again_ms', Date.now() - t0);
      grid.supervisor.onEvent = undefined;
    });
  }, 180_000);

  it('keeps the network boundaries: no credential at the consumer, no entry to the provider gateway without a trusted client certificate', async () => {
    await evidence.step('network boundaries', async (note) => {
      // Provider credentials: the consumer holds the gateway ingest token it reports with, never a provider's.
      const tokens = grid.providerCredentialTokens().map((t) => t.toString());
      expect(tokens.length).toBeGreaterThan(0);
      const holds = (pod: string) =>
        filesUnder(grid.pods.find((p) => p.site === 'east' && p.pod.id === pod)!.dir).filter((f) =>
          tokens.some((t) => readFileSync(f, 'utf8').includes(t)),
        );
      expect(holds('consumer-gateway-0')).toEqual([]);
      expect(holds('consumer-gateway-1')).toEqual([]);
      expect(holds('provider-gateway-0').length).toBeGreaterThan(0); // the check can see a credential where one belongs
      for (const c of grid.byRole('consumer-gateway'))
        expect(Object.values(c.env).some((v) => tokens.some((t) => v.includes(t)))).toBe(false);
      const provider = grid.byRole('provider-gateway', 'east')[0]!;
      const port = Number(provider.listenAddress!.split(':')[1]);
      const ca = readFileSync(grid.pki.caFile, 'utf8');
      const east = grid.pki.sites.find((s) => s.site === 'east')!;
      const noCert = await tlsGet(port, { ca });
      note('without_client_certificate', noCert);
      expect('error' in noCert || noCert.status === 403).toBe(true);
      // Issued by the grid CA, but its organization is not in trusted_peers.
      const untrusted = await tlsGet(port, {
        ca,
        cert: readFileSync(east.siteIdentity.certFile, 'utf8'),
        key: readFileSync(east.siteIdentity.keyFile, 'utf8'),
      });
      note('untrusted_certificate', 'status' in untrusted ? untrusted.status : untrusted);
      expect('status' in untrusted && untrusted.status).toBe(403);
      // The consumers' certificate, but no routing context from a consumer gateway.
      const noContext = await tlsGet(port, {
        ca,
        cert: readFileSync(east.consumerClient.certFile, 'utf8'),
        key: readFileSync(east.consumerClient.keyFile, 'utf8'),
      });
      note('trusted_certificate_without_routing_headers', 'status' in noContext ? noContext.status : noContext);
      expect('status' in noContext && noContext.status).toBe(403);
      for (const r of [untrusted, noContext]) if ('body' in r) errorBodies.push(r.body);
    });
  }, 30_000);

  it("marks a lost remote site's candidates stale, withdraws them once its gateway is unreachable, and keeps traffic local", async () => {
    await evidence.step('remote site killed: stale candidates, traffic stays local', async (note) => {
      const before = (await eastOverlay()).candidates.filter((c) => c.site === 'west');
      note(
        'west_candidates_before',
        before.map((c) => `${c.name}@${c.cluster} fresh=${c.fresh}`),
      );
      expect(before.length).toBeGreaterThan(0);
      expect(before.every((c) => c.fresh)).toBe(true);
      // First west's control plane dies (SIGKILL: no graceful SWIM leave) while its gateways still answer: the
      // member turns suspect then dead, and its candidates stay in the overlay as fresh=false (docs/contract.md §2.5).
      const t0 = Date.now();
      await grid.killProcess('west/gossip-operator/gossip-operator');
      const stale = await waitFor(
        "every west candidate fresh=false in east's overlay, accepted by the consumers",
        async () => {
          const overlay = await eastOverlay();
          const west = overlay.candidates.filter((c) => c.site === 'west');
          return west.length === before.length &&
            west.every((c) => !c.fresh) &&
            (await acceptedEverywhere(overlay.revision))
            ? west
            : undefined;
        },
        30_000,
      );
      note('stale_ms', Date.now() - t0);
      note(
        'west_candidates_stale',
        stale.map((c) => `${c.name}@${c.cluster} fresh=${c.fresh} group=${c.selection_group}`),
      );
      const whileStale = await send(consumer(0).listenAddress!, 16);
      note('counts_while_stale', Object.fromEntries(whileStale));
      expect([...whileStale.keys()].every((k) => k === 'east-llm-a' || k === 'east-llm-b')).toBe(true);
      // Then the rest of the site: the GridSite probe fails, the site is Unreachable and no longer eligible.
      const t1 = Date.now();
      await Promise.all(grid.processes.filter((p) => p.site === 'west').map((p) => grid.killProcess(p.name)));
      await waitFor(
        "west's GridSite Unreachable and its candidates withdrawn",
        async () => {
          const site = await grid
            .site('east')
            .store.get(
              { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'GridSite', plural: 'gridsites', namespaced: false },
              { name: 'demo-west' },
            );
          const overlay = await eastOverlay();
          const phase = (site?.['status'] as { phase?: string } | undefined)?.phase;
          return phase === 'Unreachable' &&
            !overlay.candidates.some((c) => c.site === 'west') &&
            (await acceptedEverywhere(overlay.revision))
            ? true
            : undefined;
        },
        30_000,
      );
      note('withdrawn_ms', Date.now() - t1);
      const counts = await send(consumer(0).listenAddress!, 16);
      note('counts_after_site_lost', Object.fromEntries(counts));
      expect([...counts.keys()].every((k) => k === 'east-llm-a' || k === 'east-llm-b')).toBe(true);
      const remoteOnly = await chatCompletion(consumer(0).listenAddress!, 'gpt-4o-mini', 10_000, grid.demoKey());
      note('remote_only_model_status', remoteOnly.status);
      expect(remoteOnly.status).not.toBe(200);
      errorBodies.push(remoteOnly.body);
    });
  }, 90_000);

  it('leaks no token into any log, state file, overlay or error body, and leaves no process behind', async () => {
    await evidence.step('no token bytes anywhere; clean teardown', async (note) => {
      const pids = grid.supervisor.processes.map((p) => p.pid);
      await grid.stop();
      stopped = true;
      const tokens = grid.tokens();
      const needles = tokens.flatMap((t) => [t.toString(), t.toString('base64')]);
      const leaks: string[] = [];
      const files = filesUnder(join(runDir, 'state'));
      for (const file of files) {
        const text = readFileSync(file, 'utf8');
        // A Secret in a store, or a file that is exactly one mounted secret key, is where a token belongs.
        if (file.includes(`${join('objects', 'core', 'Secret')}/`)) continue;
        // The demo caller keys `agn up` minted, kept for the next start (owner-only, checked below).
        if (file === join(runDir, 'state', 'caller-keys', 'demo-keys.json')) continue;
        if (tokens.some((t) => text.trim() === t.toString())) continue;
        if (needles.some((n) => text.includes(n))) leaks.push(file);
      }
      for (const body of errorBodies)
        if (needles.some((n) => body.includes(n))) leaks.push(`error body: ${body.slice(0, 80)}`);
      // Every file holding key or token bytes is owner-only (0600), and so are the directories made for them (0700).
      const swimKey = readFileSync(join(runDir, 'state', 'pki', 'swim.key'), 'utf8').trim();
      const privateNeedles = [...needles, swimKey, Buffer.from(swimKey, 'hex').toString('base64'), 'PRIVATE KEY'];
      const secretObjects = `${join('objects', 'core', 'Secret')}/`;
      const privateFiles = files.filter(
        (f) => f.includes(secretObjects) || privateNeedles.some((n) => readFileSync(f, 'utf8').includes(n)),
      );
      const wide = privateFiles
        .filter((f) => (statSync(f).mode & 0o077) !== 0)
        .map((f) => `${f} ${(statSync(f).mode & 0o777).toString(8)}`);
      const privateDirs = [
        join(runDir, 'state', 'pki'),
        join(runDir, 'state', 'caller-keys'),
        ...privateFiles.filter((f) => f.includes(secretObjects)).flatMap((f) => [dirname(f), dirname(dirname(f))]),
      ];
      const wideDirs = [...new Set(privateDirs)]
        .filter((d) => (statSync(d).mode & 0o077) !== 0)
        .map((d) => `${d} ${(statSync(d).mode & 0o777).toString(8)}`);
      note('private_files', privateFiles.length);
      expect(privateFiles.filter((f) => f.includes(secretObjects)).length).toBeGreaterThan(0);
      expect(wide).toEqual([]);
      expect(wideDirs).toEqual([]);
      note('files_scanned', files.length);
      note('logs_scanned', readdirSync(grid.logDir).length);
      note('error_bodies_scanned', errorBodies.length);
      expect(leaks).toEqual([]);
      expect(statSync(grid.logDir).isDirectory()).toBe(true);
      const orphans = pids.filter(processAlive);
      note('processes', pids.length);
      expect(orphans).toEqual([]);
    });
  }, 60_000);
});
