// The operator as a real process (node daemons/gossip-operator/main.ts --store local) on a grid's manifests:
// it writes the gateway's overlay ConfigMap into the state directory, `agn overlay verify` accepts it, and a
// queue-depth change on the provider's real metrics endpoint across the admission threshold changes the
// overlay within one refresh interval. Status files show the phases; /metrics, /livez, /readyz answer.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startBackend,
  tempDir,
  waitFor,
  type Backend,
} from './helpers.ts';

const run = promisify(execFile);
const TOKEN = 'tok-e2e-s3cr3t-bytes';
const OVERLAY = 'grid-overlay-grid-edge';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('gossip-operator process on the local store', () => {
  let backend: Backend;
  let dirs: { path: string; remove: () => Promise<void> };
  let child: ChildProcess;
  let stdout = '';
  let adminPort = 0;
  const stateDir = () => join(dirs.path, 'state');

  beforeAll(async () => {
    backend = await startBackend();
    dirs = await tempDir('operator-single');
    await renderFixture(
      'single-site/grid.yaml',
      { BACKEND_URL: backend.url, API_TOKEN: TOKEN },
      join(dirs.path, 'manifests'),
    );
    child = spawn(
      process.execPath,
      [
        join(REPO_ROOT, 'daemons/gossip-operator/main.ts'),
        '--store',
        'local',
        '--manifests',
        join(dirs.path, 'manifests'),
        '--state',
        stateDir(),
        '--site',
        'site-a',
        '--gossip-bind',
        '127.0.0.1:0',
        '--admin',
        '127.0.0.1:0',
        '--swim-profile',
        'loopback',
        '--lease-duration',
        '3s',
        '--provider-poll-interval',
        '1s',
        '--site-poll-interval',
        '1s',
      ],
      { env: { ...process.env, LOG_LEVEL: 'debug' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const running = await waitFor(
      'the operator to log its admin address',
      () => /"admin":"127\.0\.0\.1:(\d+)"/.exec(stdout) ?? undefined,
    );
    adminPort = Number(running[1]);
  });

  afterAll(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    await backend?.close();
    await dirs?.remove();
  });

  it('writes an overlay ConfigMap that agn overlay verify accepts', async () => {
    const started = Date.now();
    const cm: Json = await waitFor('the overlay ConfigMap', () => configMap(stateDir(), 'grid-system', OVERLAY));
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(cm.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
      'grid.praxis.fast/network': 'grid',
      'grid.praxis.fast/gateway': 'edge',
    });
    const envelope = JSON.parse(cm.data['routing-overlay.json']);
    expect(cm.metadata.annotations['grid.praxis.fast/overlay-revision']).toBe(envelope.revision.value);
    expect(JSON.parse(cm.data['routing-config.json'])).toEqual(envelope.overlay);
    const file = join(dirs.path, 'routing-overlay.json');
    await writeFile(file, cm.data['routing-overlay.json']);
    // What `npx agn overlay verify` runs (the package bin), without npx's start-up cost.
    const verified = await run(
      process.execPath,
      [
        join(REPO_ROOT, 'daemons/cli/agn.ts'),
        'overlay',
        'verify',
        file,
        '--network',
        'grid',
        '--gateway',
        'edge',
        '--namespace',
        'grid-system',
        '--local-site',
        'site-a',
      ],
      { cwd: REPO_ROOT },
    );
    expect(verified.stdout).toBe(`accept ${envelope.revision.value}\n`);
    // Credential references only: the token bytes appear nowhere in the ConfigMap, status or logs.
    expect(JSON.stringify(cm)).not.toContain(TOKEN);
    expect(stdout).not.toContain(TOKEN);
    const fallback = envelope.overlay.candidates.find((c: Json) => c.cluster === 'api-fallback');
    expect(fallback.credential).toEqual({
      strategy: 'bearer_token',
      secretRef: { name: 'api-token', namespace: 'grid-system', key: 'token' },
    });
  });

  it('reports phases in the GridNetwork, GridSite and provider status files', async () => {
    const network: Json = await waitFor('GridNetwork status Active', async () => {
      const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
      return n?.status?.phase === 'Active' ? n : undefined;
    });
    expect(network.status.gridId).toMatch(/^grid-[0-9a-f]{12}$/);
    const map = network.status.routingMapStatus[0];
    expect(map).toMatchObject({
      gatewayName: 'edge',
      namespace: 'grid-system',
      configMapName: OVERLAY,
      phase: 'Distributed',
    });
    expect(map.distributedRevision).toBe(map.renderedRevision);
    const provider: Json = await waitFor('llm-a Available and Ready', async () => {
      const p: Json = await grid(stateDir(), 'InferenceProvider', 'llm-a');
      return p?.status?.phase === 'Available' &&
        p.status.conditions?.some((c: Json) => c.type === 'Ready' && c.status === 'True')
        ? p
        : undefined;
    });
    expect(provider.status.conditions.find((c: Json) => c.type === 'Ready').reason).toBe('MetricsScraped');
    const site: Json = await waitFor('own GridSite status', async () =>
      (await grid(stateDir(), 'GridSite', 'site-a'))?.status?.phase
        ? grid(stateDir(), 'GridSite', 'site-a')
        : undefined,
    );
    // A lone site has no peer to discover: Pending/AwaitingDiscovery is the expected, healthy state.
    expect(site.status).toMatchObject({ phase: 'Pending', reason: 'AwaitingDiscovery' });
    const tools: Json = await waitFor('db-tools Available', async () => {
      const t: Json = await grid(stateDir(), 'AgentToolProvider', 'db-tools');
      return t?.status?.phase === 'Available' ? t : undefined;
    });
    expect(tools.status.discoveredTools).toEqual(['database-query']);
    // What the operator wrote is what an API server would accept (CRD schema and CEL rules, status included).
    expect(await schemaProblems(stateDir())).toEqual([]);
  });

  it('re-ranks within one refresh interval when the queue depth crosses the admission threshold', async () => {
    const admission = async () => {
      const cm: Json = await configMap(stateDir(), 'grid-system', OVERLAY);
      const overlay = JSON.parse(cm.data['routing-overlay.json']);
      const candidates = overlay.overlay.candidates as Json[];
      return {
        revision: overlay.revision.value as string,
        llm: candidates.find((c: Json) => c.cluster === 'llm-a'),
        fallback: candidates.find((c: Json) => c.cluster === 'api-fallback'),
      };
    };
    const before = await waitFor('llm-a admitted for new sessions', async () => {
      const a = await admission();
      return a.llm?.admission_state === 'new_and_existing' ? a : undefined;
    });
    expect(before.llm.rank).toBe(0);
    // Unchanged routing state leaves the ConfigMap untouched across refreshes (generated_at = last semantic change).
    const steady: Json = await configMap(stateDir(), 'grid-system', OVERLAY);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const later: Json = await configMap(stateDir(), 'grid-system', OVERLAY);
    expect(later.metadata.resourceVersion).toBe(steady.metadata.resourceVersion);
    expect(later.data['routing-overlay.json']).toBe(steady.data['routing-overlay.json']);
    const changedAt = Date.now();
    backend.queueDepth = 0.95;
    const after = await waitFor(
      'llm-a restricted to existing sessions',
      async () => {
        const a = await admission();
        return a.llm?.admission_state === 'existing_only' ? a : undefined;
      },
      10_000,
    );
    // metricsRefreshInterval is 1 s; allow scrape, render and file write on a loaded machine.
    expect(Date.now() - changedAt).toBeLessThan(5_000);
    expect(after.revision).not.toBe(before.revision);
    // Admission comes before score: the API fallback ranked behind llm-a, and now ranks ahead of it (same overlay each).
    expect(before.llm.rank).toBeLessThan(before.fallback.rank);
    expect(after.llm.rank).toBeGreaterThan(after.fallback.rank);
    backend.queueDepth = 0.2;
    await waitFor(
      'llm-a admitted again',
      async () => ((await admission()).llm?.admission_state === 'new_and_existing' ? true : undefined),
      10_000,
    );
  });

  it('serves /livez, /readyz and the metric names of SPEC and the seeds', async () => {
    const base = `http://127.0.0.1:${adminPort}`;
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    await waitFor('readiness', async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined));
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toMatch(/grid_provider_scrape_total\{grid_provider="llm-a",result="success"\} \d+/);
    expect(text).toMatch(/grid_provider_last_scrape_success_timestamp_seconds\{grid_provider="llm-a"\} \d/);
    expect(text).toContain('grid_site_phase{site="site-a",phase="Pending"} 1');
    expect(text).toContain('grid_site_phase{site="site-a",phase="Active"} 0');
    expect(text).toMatch(/grid_overlay_applies_total\{outcome="applied"\} \d+/);
    expect(text).toMatch(/grid_overlay_renders_total\{outcome="rendered"\} \d+/);
    expect(text).toMatch(/grid_mcp_probe_total\{provider="db-tools",outcome="SitesMatched"\} \d+/);
    expect(text).not.toContain(TOKEN);
  });

  it('leaves SWIM and exits 0 on SIGTERM', async () => {
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(stdout).toContain('shutting down');
    for (const line of stdout.split('\n').filter((l) => l.startsWith('{')))
      expect(() => JSON.parse(line)).not.toThrow();
  });
});
