/**
 * Agents on the compiled example grid with the stateless form of MCP server in the example's tool-server slot
 * (db-tools.tools.svc.cluster.local:8080): the SDK's documented stateless streamable-HTTP server (a server and a
 * transport per request, no session), probed by east's operator and called by the SDK's own client through both of
 * east's consumer gateways, with no session id anywhere on the way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AGENT_TOOL_PROVIDER, SECRET } from '../../daemons/gossip-operator/kinds.ts';
import { secretDataOf } from '../../daemons/local-grid/secrets.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { waitFor } from '../../daemons/local-grid/traffic.ts';
import { startStatelessV1 } from '../gossip-operator/probes/mcp-sdk-servers.ts';
import type { SdkServer } from '../gossip-operator/probes/mcp-sdk-servers.ts';

const runDir = mkdtempSync(join(tmpdir(), 'agn-agents-stateless-'));
let grid: LocalGrid;
let tools: SdkServer;
let token: string | undefined;

beforeAll(async () => {
  tools = await startStatelessV1([{ name: 'database-query', description: 'Query the database' }], {
    requireToken: () => token,
  });
  grid = await startLocalGrid({
    distDir: join(REPO_ROOT, 'dist'),
    stateDir: join(runDir, 'state'),
    profile: 'fast',
    backends: [{ site: 'east', address: 'db-tools.tools.svc.cluster.local:8080', endpoint: new URL(tools.url).host }],
  });
  token = secretDataOf(
    await grid.site('east').store.get(SECRET, { name: 'db-tools-credential', namespace: 'grid-system' }),
  )?.['token']?.toString('utf8');
}, 120_000);

afterAll(async () => {
  await grid?.stop();
  await tools?.close();
  rmSync(runDir, { recursive: true, force: true });
});

describe('a stateless MCP server on the local example grid', { timeout: 90_000 }, () => {
  it('is probed without a session and called through both consumers without one', async () => {
    const status = await waitFor(
      'east-db-tools Available',
      async () => {
        const s = (await grid.site('east').store.get(AGENT_TOOL_PROVIDER, { name: 'east-db-tools' }))?.['status'] as
          | { phase?: string; session?: boolean; protocolVersion?: string }
          | undefined;
        return s?.phase === 'Available' ? s : undefined;
      },
      60_000,
      250,
    );
    expect(status.session).toBe(false);
    const headers = { authorization: `Bearer ${grid.demoKey('team-a')!}` };
    for (const consumer of grid.byRole('consumer-gateway', 'east')) {
      const url = new URL(`http://${consumer.listenAddress!}/mcp/east-db-tools`);
      await waitFor(
        `east-db-tools routable at ${consumer.listenAddress}`,
        async () => {
          const reply = await fetch(url, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
          });
          await reply.body?.cancel();
          return reply.status !== 404 ? true : undefined;
        },
        60_000,
        250,
      );
      const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
      const client = new Client({ name: 'e2e-agent', version: '1.0.0' });
      await client.connect(transport);
      expect(transport.sessionId).toBeUndefined();
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['database-query']);
      expect((await client.callTool({ name: 'database-query', arguments: {} })).content).toEqual([
        { type: 'text', text: 'database-query ran' },
      ]);
      await client.close();
    }
    const calls = tools.seen.filter((s) => s.rpc === 'tools/call');
    expect(calls).toHaveLength(2);
    expect(calls.every((s) => s.session === undefined)).toBe(true);
  });
});
