// AgentToolProvider's list watchers on the real local store against real MCP servers of the official SDK: a server
// advertising tools.listChanged is watched, its announcement queues the provider, the watcher follows the provider
// (replaced on a changed spec, stopped when the provider goes, its probe fails or the capability goes, and on
// close). The last test runs a whole operator: an announced change reaches status.tools and toolsChangedAt long
// before the poll interval, and stopping the operator ends the watcher's session.
import { join } from 'node:path';
import { mkdir, writeFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { AGENT_TOOL_PROVIDER, GRID_NETWORK, SECRET } from '../../../daemons/gossip-operator/kinds.ts';
import { AgentToolProviderController } from '../../../daemons/gossip-operator/controllers/agent-tool-provider.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { type StatefulSdkServer, startPagedV1, startStatefulV1 } from '../probes/mcp-sdk-servers.ts';
import { startOperator } from '../../../daemons/gossip-operator/operator.ts';
import { capturingLogger, grid, tempDir, testConfig, waitFor } from '../helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const USER = { fieldManager: 'test-user' };
const TOKEN = 'tools-s3cr3t-token-bytes';
const TOOLS = [{ name: 'database-query', description: 'Runs a read-only SQL query.' }];
const SUMMARISE = { name: 'summarise', description: 'Summarises a document.' };

describe('AgentToolProvider list watchers', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  interface Setup {
    store: LocalStore;
    controller: AgentToolProviderController;
    enqueued: { controller: string; name: string; afterMs: number | undefined }[];
    lines: string[];
  }

  async function setup(): Promise<Setup> {
    const dirs = await tempDir('tools-controller');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    await store.apply(
      GRID_NETWORK,
      {
        apiVersion: GRID_NETWORK.apiVersion,
        kind: 'GridNetwork',
        metadata: { name: 'grid' },
        spec: { consumerGateways: [{ name: 'edge', namespace: 'grid-system', siteName: 'site-a' }] },
      },
      USER,
    );
    const { logger, lines } = capturingLogger();
    const enqueued: Setup['enqueued'] = [];
    const ctx = {
      store,
      logger,
      metrics: new OperatorMetrics(),
      config: testConfig({ site: 'site-a', store: { backend: 'local', stateDir: dirs.path } }),
      now: Date.now,
      enqueue: (controller: string, name: string, afterMs?: number) =>
        void enqueued.push({ controller, name, afterMs }),
    } as unknown as OperatorContext;
    const controller = new AgentToolProviderController(ctx);
    cleanups.push(() => controller.close());
    return { store, controller, enqueued, lines };
  }

  async function server(start: Promise<StatefulSdkServer> = startStatefulV1(TOOLS)): Promise<StatefulSdkServer> {
    const s = await start;
    cleanups.push(() => s.close());
    return s;
  }

  async function declare(s: Setup, spec: Record<string, unknown>, name = 'db-tools'): Promise<void> {
    await s.store.apply(
      AGENT_TOOL_PROVIDER,
      {
        apiVersion: AGENT_TOOL_PROVIDER.apiVersion,
        kind: 'AgentToolProvider',
        metadata: { name },
        spec: { gridNetworkRef: 'grid', protocol: 'mcp', ...spec },
      },
      USER,
    );
  }

  const streamOpen = (server: StatefulSdkServer) =>
    waitFor("the watcher's stream open", () => (server.openStreams() === 1 ? true : undefined));

  it('watches a server that advertises listChanged; its announcement queues the provider at once', async () => {
    const s = await setup();
    const tools = await server();
    await declare(s, { endpoint: tools.url });
    expect(await s.controller.reconcile('db-tools')).toEqual({ requeueAfterMs: 1_000 });
    expect(s.controller.watching('db-tools')).toBe(true);
    await streamOpen(tools);
    // Probing again with nothing changed keeps the watcher it has.
    await s.controller.reconcile('db-tools');
    expect(tools.seen.filter((r) => r.http === 'GET')).toHaveLength(1);
    expect(s.enqueued).toEqual([]);
    tools.changeTools([...TOOLS, SUMMARISE]);
    await waitFor('the provider queued', () => (s.enqueued.length > 0 ? true : undefined), 1_000);
    expect(s.enqueued[0]).toEqual({ controller: 'agenttoolprovider', name: 'db-tools', afterMs: undefined });
    expect(s.lines.join('')).toContain('watching the MCP server for tool list changes');
  });

  it('replaces the watcher when the spec changes and stops it when the provider goes', async () => {
    const s = await setup();
    const [a, b] = [await server(), await server()];
    await declare(s, { endpoint: a.url });
    await s.controller.reconcile('db-tools');
    await streamOpen(a);
    await declare(s, { endpoint: b.url });
    await s.controller.reconcile('db-tools');
    await streamOpen(b);
    await waitFor("the first server's sessions ended", () =>
      a.openSessions() === 0 && a.openStreams() === 0 ? true : undefined,
    );
    expect(a.seen.at(-1)?.http).toBe('DELETE');
    await s.store.delete(AGENT_TOOL_PROVIDER, { name: 'db-tools' });
    expect(await s.controller.reconcile('db-tools')).toEqual({});
    expect(s.controller.watching('db-tools')).toBe(false);
    await waitFor("the second server's sessions ended", () =>
      b.openSessions() === 0 && b.openStreams() === 0 ? true : undefined,
    );
  });

  it('replaces the watcher when the credential changes, and never logs the token', async () => {
    const s = await setup();
    let token = TOKEN;
    const tools = await server(startStatefulV1(TOOLS, { requireToken: () => token }));
    await s.store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'tools-token', namespace: 'grid-system' },
        stringData: { token: TOKEN },
      },
      USER,
    );
    await declare(s, {
      endpoint: tools.url,
      auth: { strategy: 'bearer_token', secretRef: { name: 'tools-token', namespace: 'grid-system', key: 'token' } },
    });
    expect(await s.controller.reconcile('db-tools')).toEqual({ requeueAfterMs: 1_000 });
    await streamOpen(tools);
    const firstGet = tools.seen.find((r) => r.http === 'GET')!.session;
    token = `${TOKEN}-rotated`;
    await s.store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'tools-token', namespace: 'grid-system' },
        stringData: { token },
      },
      USER,
    );
    await s.controller.reconcile('db-tools');
    await waitFor('a stream in a new session', () =>
      tools.seen.filter((r) => r.http === 'GET' && r.session !== firstGet).length === 1 && tools.openStreams() === 1
        ? true
        : undefined,
    );
    // The new watcher's handshake and stream carried the rotated token (the server refuses anything else).
    expect(tools.seen.filter((r) => r.http === 'GET' && r.rpc === 'unauthorized')).toHaveLength(0);
    expect(s.lines.join('')).not.toContain(TOKEN);
  });

  it('stops the watcher when a probe fails, and starts one again when probes pass', async () => {
    const s = await setup();
    const tools = await server();
    await declare(s, {
      endpoint: tools.url,
      auth: { strategy: 'bearer_token', secretRef: { name: 'absent', namespace: 'grid-system' } },
    });
    // A credential it cannot read: no probe, no watcher.
    await s.controller.reconcile('db-tools');
    expect(s.controller.watching('db-tools')).toBe(false);
    await declare(s, { endpoint: tools.url });
    await s.controller.reconcile('db-tools');
    await streamOpen(tools);
    await tools.close();
    await s.controller.reconcile('db-tools');
    expect((await s.store.get(AGENT_TOOL_PROVIDER, { name: 'db-tools' }))!['status']).toMatchObject({
      phase: 'Unavailable',
      reason: 'McpEndpointUnreachable',
    });
    expect(s.controller.watching('db-tools')).toBe(false);
  });

  it('does not watch a server that does not advertise listChanged', async () => {
    const s = await setup();
    const paged = await server(startPagedV1(TOOLS, 5));
    await declare(s, { endpoint: paged.url });
    expect(await s.controller.reconcile('db-tools')).toEqual({ requeueAfterMs: 1_000 });
    expect((await s.store.get(AGENT_TOOL_PROVIDER, { name: 'db-tools' }))!['status']).toMatchObject({
      phase: 'Available',
      session: true,
    });
    expect(s.controller.watching('db-tools')).toBe(false);
    await new Promise((r) => setTimeout(r, 200));
    expect(paged.seen.map((r) => r.http)).not.toContain('GET');
  });

  it('close() stops every watcher and ends their sessions; no watcher starts after it', async () => {
    const s = await setup();
    const tools = await server();
    await declare(s, { endpoint: tools.url });
    await declare(s, { endpoint: tools.url }, 'db-tools-2');
    await s.controller.reconcile('db-tools');
    await s.controller.reconcile('db-tools-2');
    await waitFor('two streams', () => (tools.openStreams() === 2 ? true : undefined));
    await s.controller.close();
    expect(tools.openSessions()).toBe(0);
    await waitFor('the streams closed', () => (tools.openStreams() === 0 ? true : undefined));
    await s.controller.reconcile('db-tools');
    expect(s.controller.watching('db-tools')).toBe(false);
  });

  it('runs in the operator: an announced change reaches status.tools and toolsChangedAt well before the poll', async () => {
    const tools = await server();
    const dirs = await tempDir('tools-operator');
    cleanups.push(() => dirs.remove());
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    await mkdir(manifests, { recursive: true });
    await writeFile(
      join(manifests, 'grid.yaml'),
      [
        'apiVersion: grid.praxis.fast/v1alpha1\nkind: GridNetwork\nmetadata:\n  name: grid\nspec:\n  consumerGateways:\n    - name: edge\n      namespace: grid-system\n      siteName: site-a\n',
        `apiVersion: grid.praxis.fast/v1alpha1\nkind: AgentToolProvider\nmetadata:\n  name: db-tools\nspec:\n  gridNetworkRef: grid\n  protocol: mcp\n  endpoint: ${tools.url}\n`,
      ].join('---\n'),
    );
    // A poll far longer than the test, and a store that does not relist (a relist reconciles every object): only
    // the announcement can bring the change in time.
    const LONG_MS = 120_000;
    const store = await openLocalStore({
      stateDir: state,
      manifestsDir: manifests,
      coalesceMs: 5,
      rescanIntervalMs: LONG_MS,
    });
    const { logger, lines } = capturingLogger();
    const operator = await startOperator({
      config: testConfig({
        site: 'site-a',
        store: { backend: 'local', stateDir: state },
        providerPollIntervalMs: LONG_MS,
      }),
      logger,
      store,
    });
    let stopped = false;
    const stop = async () => {
      stopped = true;
      await operator.stop();
      await store.close();
    };
    cleanups.push(async () => {
      if (!stopped) await stop();
    });
    const first: Json = await waitFor('db-tools Available', async () => {
      const p: Json = await grid(state, 'AgentToolProvider', 'db-tools');
      return p?.status?.phase === 'Available' ? p : undefined;
    });
    expect(first.status.tools).toEqual(TOOLS);
    expect(first.status.toolsChangedAt).toBeUndefined();
    await streamOpen(tools);

    // Whatever reconciles the first status write set off are done: the list is probed no more until told to.
    await new Promise((r) => setTimeout(r, 500));
    const listed = tools.seen.filter((r) => r.rpc === 'tools/list').length;
    await new Promise((r) => setTimeout(r, 500));
    expect(tools.seen.filter((r) => r.rpc === 'tools/list').length).toBe(listed);

    const announced = Date.now();
    tools.changeTools([...TOOLS, SUMMARISE]);
    const changed: Json = await waitFor(
      'the new tool in status',
      async () => {
        const p: Json = await grid(state, 'AgentToolProvider', 'db-tools');
        return p?.status?.tools?.length === 2 ? p : undefined;
      },
      10_000,
    );
    expect(Date.now() - announced).toBeLessThan(5_000);
    expect(changed.status.tools).toEqual([...TOOLS, SUMMARISE]);
    expect(changed.status.discoveredTools).toEqual(['database-query', 'summarise']);
    expect(changed.status.toolsChangedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(lines.join('')).toContain('MCP tool list changed');

    await stop();
    // Stopping the operator ends the watcher's session and stream.
    expect(tools.openSessions()).toBe(0);
    await waitFor('the stream closed', () => (tools.openStreams() === 0 ? true : undefined));
    expect(tools.seen.at(-1)?.http).toBe('DELETE');
  });
});
