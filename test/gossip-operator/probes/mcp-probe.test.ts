import { afterEach, describe, expect, it } from 'vitest';
import { parseToolsList, probeMcpTools } from '../../../daemons/gossip-operator/probes/mcp-probe.ts';
import { type TestServer, startServer } from './servers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const toolsResult = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'database-query', description: 'q' }, { name: 'search' }] } };

describe('AgentToolProvider MCP tools/list probe', () => {
  it('posts a JSON-RPC tools/list and reads the tool names from a JSON answer', async () => {
    const server = await startServer((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(toolsResult));
    });
    servers.push(server);
    expect(await probeMcpTools({ endpoint: `${server.url}/mcp`, bearerToken: 'tool-tok', timeoutMs: 2000 })).toEqual({ ok: true, tools: ['database-query', 'search'] });
    const sent = server.requests[0]!;
    expect(sent.method).toBe('POST');
    expect(JSON.parse(sent.body)).toMatchObject({ jsonrpc: '2.0', method: 'tools/list' });
    expect(sent.headers.authorization).toBe('Bearer tool-tok');
  });

  it('reads the answer from a text/event-stream response (streamable HTTP)', async () => {
    const server = await startServer((_q, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`event: message\ndata: ${JSON.stringify(toolsResult)}\n\n`);
    });
    servers.push(server);
    expect(await probeMcpTools({ endpoint: server.url, timeoutMs: 2000 })).toEqual({ ok: true, tools: ['database-query', 'search'] });
  });

  it.each([
    ['a JSON-RPC error', JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'no' } }), /JSON-RPC error \(code -32601\)/],
    ['no tools array', JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} }), /no result.tools array/],
    ['a nameless tool', JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{}] } }), /tools\[0\]\.name/],
    ['not JSON', '<html>', /not JSON/],
  ])('fails on %s', (_name, body, message) => {
    expect(parseToolsList(body, false)).toMatch(message);
  });

  it('fails (Unavailable) on a non-2xx answer', async () => {
    const server = await startServer((_q, res) => {
      res.writeHead(404);
      res.end();
    });
    servers.push(server);
    expect(await probeMcpTools({ endpoint: server.url, timeoutMs: 2000 })).toMatchObject({ ok: false, reason: 'http_status' });
  });
});
