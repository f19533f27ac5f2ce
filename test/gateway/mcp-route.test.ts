// MCP through the grid, as a user's agent calls it: the official SDK's Client and StreamableHTTPClientTransport
// against two consumer gateway replicas (mcp_route), across the mTLS provider hop (agent_provider_route, which
// injects the tool server's token), to tool servers built with the official SDK in its documented forms (stateful
// with two replicas, stateless, paged). Every gateway is a real process; nothing between the SDKs is a stand-in.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { stableId } from '../../schemas/fnv1a.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import {
  EDGE_ORG,
  PROVIDER_SNI,
  call,
  makePki,
  metricSample,
  payload,
  spawnDaemon,
  startConsumer,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
} from './helpers.ts';
import type { Daemon, Pki } from './helpers.ts';
import { startPagedV1, startStateful, startStatelessV1 } from '../gossip-operator/probes/mcp-sdk-servers.ts';
import type { SdkServer, Tools } from '../gossip-operator/probes/mcp-sdk-servers.ts';

const TOKEN = 'mcp-backend-token-0b5e2c9d';
const TOOLS: Tools = [
  { name: 'echo', description: 'Echoes its text' },
  { name: 'countdown', description: 'Counts down with progress notifications' },
];

/** The stateful server of these tests: echo answers at once, countdown sends a progress notification every 150 ms. */
function toolServer(): McpServer {
  const server = new McpServer({ name: 'db-tools', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'Echoes its text', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  );
  server.registerTool(
    'countdown',
    { description: 'Counts down', inputSchema: { from: z.number() } },
    async ({ from }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = from; i > 0; i--) {
        if (token !== undefined)
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: from - i + 1, total: from },
          });
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      return { content: [{ type: 'text', text: 'liftoff' }] };
    },
  );
  // A tool the server has but the overlay does not list for this grid's callers.
  server.registerTool('drop_tables', { description: 'Not published' }, async () => ({
    content: [{ type: 'text', text: 'dropped' }],
  }));
  return server;
}

function toolCandidates(server: string, tools: readonly string[], site = 'east'): OverlayCandidate[] {
  const cluster = `tool/${server}`;
  return tools.map((tool) => ({
    kind: 'mcp_tool',
    name: tool,
    site,
    cluster,
    fresh: true,
    stable_id: stableId('mcp_tool', tool, site, cluster),
    admission_state: 'new_and_existing',
    selection_tier: 'same_site',
  }));
}

function providerConfig(pki: Pki, tokenFile: string, backends: Record<string, string[]>): Record<string, unknown> {
  const servers = Object.keys(backends).map((name) => ({
    protocol: 'mcp',
    name,
    cluster: `backend-${name}`,
    path: '/mcp',
    credential: { secretRef: { name: 'tools-token', namespace: 'grid-system', key: 'token' } },
  }));
  return {
    listeners: [
      {
        name: 'provider',
        address: '127.0.0.1:0',
        filter_chains: ['provider-agents'],
        tls: {
          certificates: [{ cert_path: pki.providerCertPath, key_path: pki.providerKeyPath }],
          client_ca: { ca_path: pki.caPath },
          client_cert_mode: 'require',
        },
      },
    ],
    filter_chains: [
      {
        name: 'provider-agents',
        filters: [
          { filter: 'peer_identity_trust', trusted_peers: [{ organization: EDGE_ORG }] },
          { filter: 'agent_provider_route', servers, max_body_bytes: 65536 },
          {
            filter: 'credential_inject',
            credentials: [
              {
                strategy: 'bearer_token',
                name: 'tools-token',
                namespace: 'grid-system',
                key: 'token',
                file: tokenFile,
              },
            ],
          },
          {
            filter: 'load_balancer',
            clusters: Object.entries(backends).map(([name, endpoints]) => ({ name: `backend-${name}`, endpoints })),
          },
        ],
      },
    ],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
  };
}

function consumerConfig(
  pki: Pki,
  overlayPath: string,
  providerPort: number,
  servers: readonly string[],
): Record<string, unknown> {
  const tls = {
    ca: { ca_path: pki.caPath },
    client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
    sni: PROVIDER_SNI,
    verify: true,
  };
  const clusters = servers.map((name) => ({ name: `tool/${name}`, endpoints: [`127.0.0.1:${providerPort}`], tls }));
  const scope = { network: 'grid', gateway: 'edge', namespace: 'grid-system', local_site: 'west' };
  return {
    listeners: [{ name: 'edge', address: '127.0.0.1:0', filter_chains: ['main'] }],
    filter_chains: [
      {
        name: 'main',
        filters: [
          {
            filter: 'intelligent_route',
            overlay_file: overlayPath,
            expected_overlay_scope: scope,
            reload: { enabled: true, debounce_ms: 20 },
          },
          {
            filter: 'mcp_route',
            overlay_file: overlayPath,
            expected_overlay_scope: scope,
            provider_hop_clusters: clusters.map((c) => c.name),
            max_body_bytes: 32768,
          },
          { filter: 'load_balancer', clusters },
        ],
      },
    ],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
  };
}

describe('mcp_route and agent_provider_route: MCP across the grid with the official SDK', { timeout: 60_000 }, () => {
  let cleanup: () => Promise<void>;
  let overlayPath: string;
  let replicas: SdkServer[];
  let stateless: SdkServer;
  let paged: SdkServer;
  let provider: Daemon;
  let consumers: { daemon: Daemon; base: string; admin: string }[];
  const clients: Client[] = [];
  const published = (): OverlayCandidate[] => [
    ...toolCandidates('db-tools', ['echo', 'countdown']),
    ...toolCandidates('stateless-tools', ['alpha', 'beta']),
    ...toolCandidates('paged-tools', ['t0', 't1', 't2', 't3', 't4']),
  ];

  beforeAll(async () => {
    const temp = await tempDir('mcp-route');
    const dir = temp.dir;
    const pki = await makePki(dir);
    replicas = [
      await startStateful(() => toolServer(), TOOLS, { requireToken: TOKEN }),
      await startStateful(() => toolServer(), TOOLS, { requireToken: TOKEN }),
    ];
    stateless = await startStatelessV1(
      [
        { name: 'alpha', description: 'a' },
        { name: 'beta', description: 'b' },
      ],
      { requireToken: TOKEN },
    );
    paged = await startPagedV1(
      ['t0', 't1', 't2', 't3', 't4'].map((name) => ({ name, description: name })),
      2,
      { requireToken: TOKEN },
    );
    const hostOf = (url: string): string => new URL(url).host;
    const tokenFile = join(dir, 'tools-token');
    await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const providerPath = join(dir, 'provider.json');
    await writeFile(
      providerPath,
      JSON.stringify(
        providerConfig(pki, tokenFile, {
          'db-tools': replicas.map((r) => hostOf(r.url)),
          'stateless-tools': [hostOf(stateless.url)],
          'paged-tools': [hostOf(paged.url)],
        }),
      ),
    );
    provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerPath]);
    const providerPort = await waitForPort(provider, 'provider');
    overlayPath = join(dir, 'overlay.json');
    await writeOverlay(overlayPath, payload(published()));
    const consumerPath = join(dir, 'consumer.json');
    await writeFile(
      consumerPath,
      JSON.stringify(consumerConfig(pki, overlayPath, providerPort, ['db-tools', 'stateless-tools', 'paged-tools'])),
    );
    consumers = await Promise.all([startConsumer(consumerPath), startConsumer(consumerPath)]);
    cleanup = async () => {
      for (const client of clients) await client.close().catch(() => undefined);
      await Promise.all([...consumers.map((c) => c.daemon.stop()), provider.stop()]);
      await Promise.all([...replicas, stateless, paged].map((s) => s.close()));
      await temp.cleanup();
    };
  });
  afterAll(async () => {
    await cleanup?.();
  });

  async function connect(
    base: string,
    server: string,
    sessionId?: string,
  ): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const transport = new StreamableHTTPClientTransport(
      new URL(`${base}/mcp/${server}`),
      sessionId === undefined ? {} : { sessionId },
    );
    const client = new Client({ name: 'grid-test-agent', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  }

  it('lists and calls the tools of a stateful server, the backend token injected by the provider gateway', async () => {
    const { client, transport } = await connect(consumers[0]!.base, 'db-tools');
    expect(transport.sessionId).toMatch(/^agn1\.ZWFzdA\.r[01]\./);
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name).sort()).toEqual(['countdown', 'drop_tables', 'echo']);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi grid' } });
    expect(result.content).toEqual([{ type: 'text', text: 'echo: hi grid' }]);
    // The session the backend created is one of exactly one replica; no request reached a replica unauthenticated.
    const inner = transport.sessionId!.split('.').slice(3).join('.');
    const holders = replicas.filter((r) => r.seen.some((s) => s.session === inner));
    expect(holders).toHaveLength(1);
    expect(replicas.flatMap((r) => r.seen).filter((s) => s.rpc === 'unauthorized')).toEqual([]);
  });

  it('passes an SSE stream through as it arrives: progress before the result', async () => {
    const { client } = await connect(consumers[0]!.base, 'db-tools');
    const started = Date.now();
    const progressAt: number[] = [];
    const result = await client.callTool({ name: 'countdown', arguments: { from: 4 } }, undefined, {
      onprogress: () => void progressAt.push(Date.now() - started),
    });
    const doneAt = Date.now() - started;
    expect(result.content).toEqual([{ type: 'text', text: 'liftoff' }]);
    expect(progressAt).toHaveLength(4);
    // Buffered, every notification would arrive with the result, ~600 ms after the call began.
    expect(progressAt[0]!).toBeLessThan(doneAt - 300);
  });

  it('pins a session to its replica through either consumer gateway', async () => {
    // Two sessions, one through each consumer: the provider's round robin gives them different replicas.
    const first = await connect(consumers[0]!.base, 'db-tools');
    const second = await connect(consumers[1]!.base, 'db-tools');
    const innerOf = (id: string): string => id.split('.').slice(3).join('.');
    const replicaOf = (id: string): number => Number(id.split('.')[2]!.slice(1));
    // The first session continued through the other consumer replica, many times: every call succeeds, so every one
    // reached the replica holding it (another replica answers 400 to a session it does not know).
    const resumed = await connect(consumers[1]!.base, 'db-tools', first.transport.sessionId);
    for (let i = 0; i < 6; i++) {
      const result = await resumed.client.callTool({ name: 'echo', arguments: { text: `n${i}` } });
      expect(result.content).toEqual([{ type: 'text', text: `echo: n${i}` }]);
      await second.client.callTool({ name: 'echo', arguments: { text: `m${i}` } });
    }
    for (const session of [first.transport.sessionId!, second.transport.sessionId!]) {
      const holder = replicas[replicaOf(session)]!;
      const calls = holder.seen.filter((s) => s.session === innerOf(session) && s.rpc === 'tools/call');
      expect(calls.length).toBeGreaterThanOrEqual(6);
      expect(replicas[1 - replicaOf(session)]!.seen.some((s) => s.session === innerOf(session))).toBe(false);
    }
  });

  it('routes a stateless server without a session, and pages a paginated tools/list', async () => {
    const { client, transport } = await connect(consumers[1]!.base, 'stateless-tools');
    expect(transport.sessionId).toBeUndefined();
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['alpha', 'beta']);
    expect((await client.callTool({ name: 'beta', arguments: {} })).content).toEqual([
      { type: 'text', text: 'beta ran' },
    ]);
    const pagedClient = (await connect(consumers[0]!.base, 'paged-tools')).client;
    const page1 = await pagedClient.listTools();
    expect(page1.tools.map((t) => t.name)).toEqual(['t0', 't1']);
    const page2 = await pagedClient.listTools({ cursor: page1.nextCursor! });
    expect(page2.tools.map((t) => t.name)).toEqual(['t2', 't3']);
  });

  it('answers a tool the overlay does not list with -32602 and never sends it', async () => {
    const { client } = await connect(consumers[0]!.base, 'db-tools');
    const calls = (): number => replicas.flatMap((r) => r.seen).filter((s) => s.rpc === 'tools/call').length;
    const before = calls();
    await expect(client.callTool({ name: 'drop_tables', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown tool: "drop_tables"'),
    });
    expect(calls()).toBe(before);
    const metrics = (await call(`${consumers[0]!.admin}/metrics`)).text;
    expect(metricSample(metrics, 'grid_gateway_mcp_refused_total{server="db-tools",reason="unknown_tool"}')).toBe(1);
  });

  it('refuses bad requests with clear JSON-RPC errors, before any reaches a server', async () => {
    const base = consumers[0]!.base;
    const before = replicas.reduce((n, r) => n + r.seen.length, 0);
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      call(`${base}${path}`, {
        method: 'POST',
        body,
        headers: { accept: 'application/json, text/event-stream', ...headers },
      });
    const forged = await post('/mcp/db-tools', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
      'mcp-session-id': 'not-a-grid-session',
    });
    expect(forged.status).toBe(404);
    expect(forged.json()).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32001, message: expect.stringContaining('Session not found') },
    });
    const tooBig = await post(
      '/mcp/db-tools',
      JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'x'.repeat(40_000) } },
      }),
    );
    expect(tooBig.status).toBe(413);
    expect(tooBig.json().error.message).toContain('exceeds 32768 bytes');
    const notJson = await post('/mcp/db-tools', '{"jsonrpc":');
    expect(notJson.status).toBe(400);
    expect(notJson.json().error.code).toBe(-32700);
    const notRpc = await post('/mcp/db-tools', JSON.stringify({ id: 3, method: 'tools/list' }));
    expect(notRpc.json().error).toMatchObject({ code: -32600, message: expect.stringContaining('"jsonrpc": "2.0"') });
    const unknown = await post(
      '/mcp/no-such-server',
      JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'initialize', params: {} }),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.json().error.message).toContain('no tool server "no-such-server"');
    const put = await call(`${base}/mcp/db-tools`, { method: 'PUT', body: '{}' });
    expect(put.status).toBe(405);
    expect(put.headers['allow']).toBe('POST, GET, DELETE');
    expect(replicas.reduce((n, r) => n + r.seen.length, 0)).toBe(before);
  });

  it('counts messages and tool calls per server, tool, site and tenant', async () => {
    const pages = await Promise.all(consumers.map(async (c) => (await call(`${c.admin}/metrics`)).text));
    const sum = (series: string): number => pages.reduce((n, page) => n + (metricSample(page, series) ?? 0), 0);
    // 1 echo in the first test, 6 + 6 in the pinning one; one countdown; four sessions initialized on db-tools.
    expect(sum('grid_gateway_mcp_tool_calls_total{server="db-tools",tool="echo",site="east",tenant="none"}')).toBe(13);
    expect(sum('grid_gateway_mcp_tool_calls_total{server="db-tools",tool="countdown",site="east",tenant="none"}')).toBe(
      1,
    );
    expect(sum('grid_gateway_mcp_messages_total{server="db-tools",method="initialize",site="east"}')).toBe(5);
    for (const page of pages) expect(page).not.toContain(TOKEN);
  });

  it('fails a session clearly once its replica is gone, and every request once the overlay drops the server', async () => {
    const { client, transport } = await connect(consumers[0]!.base, 'db-tools');
    const holder = replicas[Number(transport.sessionId!.split('.')[2]!.slice(1))]!;
    await holder.close();
    const gone = await call(`${consumers[0]!.base}/mcp/db-tools`, {
      method: 'POST',
      headers: {
        accept: 'application/json, text/event-stream',
        'mcp-session-id': transport.sessionId!,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(gone.status).toBe(502);
    expect(gone.json().error.code).toBe('upstream_unreachable');
    // The tool server withdrawn from the overlay (its provider Unavailable): the session and new ones answer 404.
    await writeOverlay(overlayPath, payload(published().filter((c) => c.cluster !== 'tool/db-tools')));
    await waitFor('the overlay without db-tools', async () => {
      const reply = await call(`${consumers[0]!.base}/mcp/db-tools`, {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
      });
      return reply.status === 404 ? reply : undefined;
    });
    await expect(client.listTools()).rejects.toThrow(/no tool server .*db-tools/);
  });
});
