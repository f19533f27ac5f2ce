/**
 * Agents end to end on the compiled example grid run locally, manifests as compiled: the example's MCP tool
 * server (east-db-tools, at db-tools.tools.svc.cluster.local:8080) and A2A agent (west-claims-agent, at
 * claims-agent.agents.svc.cluster.local:8080) are served by servers built with the official SDKs, standing where
 * the manifests say those Services are. Each site's operator probes them into status; the agents' own SDK clients
 * call them through east's consumer gateways with a demo caller key: the tool through east's provider gateway (the
 * token its compiled credential_inject reads), the agent across sites through west's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { AGENT_TO_AGENT_PROVIDER, AGENT_TOOL_PROVIDER, SECRET } from '../../daemons/gossip-operator/kinds.ts';
import { secretDataOf } from '../../daemons/local-grid/secrets.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { waitFor } from '../../daemons/local-grid/traffic.ts';
import { startPagedV1 } from '../gossip-operator/probes/mcp-sdk-servers.ts';
import type { SdkServer } from '../gossip-operator/probes/mcp-sdk-servers.ts';
import { type A2aAgent, startA2aAgent } from '../gossip-operator/probes/a2a-sdk-agents.ts';

const runDir = mkdtempSync(join(tmpdir(), 'agn-agents-'));
let grid: LocalGrid;
let tools: SdkServer;
let agent: A2aAgent;
let toolToken: string | undefined;

const consumer = (i = 0): string => `http://${grid.byRole('consumer-gateway', 'east')[i]!.listenAddress!}`;
const keyHeaders = (): Record<string, string> => ({ authorization: `Bearer ${grid.demoKey('team-a')!}` });

beforeAll(async () => {
  // The example declares database-query; the server also has a tool nobody published. It pages tools/list one tool
  // at a time (nextCursor), so the operator's probe and the caller's listing both page through the grid.
  tools = await startPagedV1(
    [
      { name: 'database-query', description: 'Query the database' },
      { name: 'drop-database', description: 'Not published' },
    ],
    1,
    {
      requireToken: () => toolToken,
    },
  );
  agent = await startA2aAgent({
    name: 'west-claims-agent',
    skills: [
      { id: 'claims-processing', name: 'Process a claim' },
      { id: 'document-review', name: 'Review a document' },
    ],
    steps: 3,
    stepDelayMs: 150,
  });
  grid = await startLocalGrid({
    distDir: join(REPO_ROOT, 'dist'),
    stateDir: join(runDir, 'state'),
    profile: 'fast',
    backends: [
      { site: 'east', address: 'db-tools.tools.svc.cluster.local:8080', endpoint: new URL(tools.url).host },
      { site: 'west', address: 'claims-agent.agents.svc.cluster.local:8080', endpoint: new URL(agent.url).host },
    ],
  });
  // The token the runner generated for the Secret the compiled provider gateway mounts (db-tools-credential).
  const secret = await grid.site('east').store.get(SECRET, { name: 'db-tools-credential', namespace: 'grid-system' });
  toolToken = secretDataOf(secret)?.['token']?.toString('utf8');
  expect(toolToken).toBeTruthy();
}, 120_000);

afterAll(async () => {
  await grid?.stop();
  await Promise.all([tools?.close(), agent?.close()]);
  rmSync(runDir, { recursive: true, force: true });
});

describe('tool servers and agents on the local example grid', { timeout: 90_000 }, () => {
  it("each site's operator probes its server into status: the tools, the agent's card", async () => {
    const toolStatus = await waitFor(
      'east-db-tools Available',
      async () => {
        const status = (await grid.site('east').store.get(AGENT_TOOL_PROVIDER, { name: 'east-db-tools' }))?.[
          'status'
        ] as { phase?: string; tools?: { name: string }[]; protocolVersion?: string } | undefined;
        return status?.phase === 'Available' ? status : undefined;
      },
      60_000,
      250,
    );
    expect(toolStatus.tools?.map((t) => t.name)).toEqual(['database-query', 'drop-database']);
    expect(toolStatus.protocolVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const agentStatus = await waitFor(
      'west-claims-agent Available',
      async () => {
        const status = (await grid.site('west').store.get(AGENT_TO_AGENT_PROVIDER, { name: 'west-claims-agent' }))?.[
          'status'
        ] as { phase?: string; agentName?: string; skills?: { id: string }[] } | undefined;
        return status?.phase === 'Available' ? status : undefined;
      },
      60_000,
      250,
    );
    expect(agentStatus.agentName).toBe('west-claims-agent');
    expect(agentStatus.skills?.map((s) => s.id)).toEqual(['claims-processing', 'document-review']);
  });

  it('an MCP client lists and calls the tool through either consumer; an unpublished tool and a missing key are refused', async () => {
    const url = (i: number) => new URL(`${consumer(i)}/mcp/east-db-tools`);
    // Routable once the overlay carries the probed tools.
    await waitFor(
      'east-db-tools in the overlay',
      async () => {
        const reply = await fetch(url(0), {
          method: 'POST',
          headers: {
            ...keyHeaders(),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        });
        await reply.body?.cancel();
        return reply.status !== 404 ? true : undefined;
      },
      60_000,
      250,
    );
    // (The operator's first probes may predate the token this test reads after the grid started: only what follows counts.)
    const from = tools.seen.length;
    const transport = new StreamableHTTPClientTransport(url(0), { requestInit: { headers: keyHeaders() } });
    const client = new Client({ name: 'e2e-agent', version: '1.0.0' });
    await client.connect(transport);
    const page = await client.listTools();
    expect(page.tools.map((t) => t.name)).toEqual(['database-query']);
    expect((await client.listTools({ cursor: page.nextCursor! })).tools.map((t) => t.name)).toEqual(['drop-database']);
    expect((await client.callTool({ name: 'database-query', arguments: {} })).content).toEqual([
      { type: 'text', text: 'database-query ran' },
    ]);
    await expect(client.callTool({ name: 'drop-database', arguments: {} })).rejects.toMatchObject({ code: -32602 });
    // The session continues through the other consumer replica.
    const other = new Client({ name: 'e2e-agent', version: '1.0.0' });
    await other.connect(
      new StreamableHTTPClientTransport(url(1), {
        sessionId: transport.sessionId!,
        requestInit: { headers: keyHeaders() },
      }),
    );
    expect((await other.callTool({ name: 'database-query', arguments: {} })).content).toEqual([
      { type: 'text', text: 'database-query ran' },
    ]);
    expect(tools.seen.slice(from).filter((s) => s.rpc === 'tools/call')).toHaveLength(2);
    expect(tools.seen.slice(from).some((s) => s.rpc === 'unauthorized')).toBe(false);
    // A JSON-RPC answer of the server arrives as the SSE stream it sent (the SDK's default streamable-HTTP answer).
    const raw = await fetch(url(0), {
      method: 'POST',
      headers: {
        ...keyHeaders(),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': transport.sessionId!,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 77, method: 'tools/list' }),
    });
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await raw.text()).toMatch(/^event: message\ndata: \{"result":\{"tools":\[/m);
    await client.close();
    await other.close();
    const anonymous = await fetch(url(1), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
    });
    expect(anonymous.status).toBe(401);
  });

  it('answers a forged session, an oversized message and a tool server that is gone with clear errors', async () => {
    const url = `${consumer(0)}/mcp/east-db-tools`;
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(url, {
        method: 'POST',
        headers: {
          ...keyHeaders(),
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body,
      });
    const forged = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
      'mcp-session-id': 'agn1.ZWFzdA.r0.not-a-session',
    });
    // A well-formed pin to east reaches the server, which does not know the session and says so.
    expect(forged.status).toBe(400);
    expect(await forged.text()).toContain('No valid session ID');
    const foreign = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
      'mcp-session-id': 'made-up',
    });
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as { error: { code: number; message: string } }).error).toMatchObject({
      code: -32001,
      message: expect.stringContaining('not a session this grid issued'),
    });
    const big = await post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'database-query', arguments: { sql: 'x'.repeat(1_100_000) } },
      }),
    );
    expect(big.status).toBe(413);
    // The server goes away: the operator's probe marks the provider Unavailable, the overlay drops its tools, and
    // the consumer answers 404 naming it (a request in between reaches nothing and is answered 502).
    await tools.close();
    await waitFor(
      'east-db-tools Unavailable',
      async () => {
        const status = (await grid.site('east').store.get(AGENT_TOOL_PROVIDER, { name: 'east-db-tools' }))?.[
          'status'
        ] as { phase?: string; reason?: string } | undefined;
        return status?.phase === 'Unavailable' ? status : undefined;
      },
      60_000,
      250,
    ).then((status) => expect(status.reason).toBe('McpEndpointUnreachable'));
    const gone = await waitFor(
      'the tool server withdrawn from the overlay',
      async () => {
        const reply = await post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'initialize', params: {} }));
        if (reply.status === 404) return reply;
        await reply.body?.cancel();
        return undefined;
      },
      60_000,
      250,
    );
    expect(((await gone.json()) as { error: { message: string } }).error.message).toContain(
      'no tool server "east-db-tools"',
    );
  });

  it('an A2A client streams a task across sites to the agent and fetches it', async () => {
    const base = `${consumer(0)}/a2a/west-claims-agent/`;
    const fetchWithKey: typeof fetch = (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...keyHeaders() },
      });
    // The caller key on every request the SDK makes: the card's and the JSON-RPC ones.
    const client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl: fetchWithKey })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchWithKey }),
    }).createFromUrl(base);
    const kinds: string[] = [];
    let taskId = '';
    for await (const event of client.sendMessageStream({
      tenant: '',
      message: {
        messageId: 'e2e-1',
        contextId: '',
        taskId: '',
        role: Role.ROLE_USER,
        parts: [
          { content: { $case: 'text', value: 'review this claim' }, metadata: undefined, filename: '', mediaType: '' },
        ],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: undefined,
      metadata: undefined,
    })) {
      kinds.push(event.payload?.$case ?? '');
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
    }
    expect(kinds).toEqual([
      'task',
      'statusUpdate',
      'artifactUpdate',
      'artifactUpdate',
      'artifactUpdate',
      'statusUpdate',
    ]);
    expect((await client.getTask({ tenant: '', id: taskId, historyLength: undefined })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect(agent.tasks).toEqual([taskId]);
  });
});
