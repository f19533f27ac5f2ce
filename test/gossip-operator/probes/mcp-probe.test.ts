// The AgentToolProvider probe against real MCP servers built with the official SDKs (mcp-sdk-servers.ts) in both
// generations, and against hand-written servers for what no SDK server does wrong on purpose.
import { afterEach, describe, expect, it } from 'vitest';
import { answerOf, MAX_PAGES, parseTools, probeMcpTools } from '../../../daemons/gossip-operator/probes/mcp-probe.ts';
import { probeReason } from '../../../daemons/gossip-operator/controllers/agent-tool-provider.ts';
import { type SdkServer, startModernV2, startPagedV1, startStatefulV1, startStatelessV1 } from './mcp-sdk-servers.ts';
import { type TestServer, startServer } from './servers.ts';

const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function keep<T extends { close(): Promise<void> }>(server: Promise<T>): Promise<T> {
  const s = await server;
  servers.push(s);
  return s;
}

const TOOLS = [
  { name: 'database-query', description: 'Runs a read-only SQL query.' },
  { name: 'search', description: 'Searches the catalogue.' },
];

describe('MCP probe against the official SDK servers', () => {
  it('stateful v1 server: initialize, notifications/initialized, tools/list in the session, then DELETE ends it', async () => {
    const server = await keep<SdkServer>(startStatefulV1(TOOLS));
    const result = await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 });
    expect(result).toEqual({
      ok: true,
      tools: TOOLS,
      protocolVersion: '2025-11-25',
      session: true,
      toolsListChanged: true,
    });
    // server/discover first (refused without a session: HTTP 400), then the handshake and one session for the rest.
    expect(server.seen.map((s) => `${s.http} ${s.rpc ?? ''}`.trim())).toEqual([
      'POST server/discover',
      'POST initialize',
      'POST notifications/initialized',
      'POST tools/list',
      'DELETE',
    ]);
    const session = server.seen[2]!.session;
    expect(session).toMatch(/^[0-9a-f-]{36}$/);
    expect(server.seen.slice(2).every((s) => s.session === session)).toBe(true);
    expect(server.openSessions()).toBe(0);
  });

  it('stateless v1 server: the same handshake, no session, nothing to end', async () => {
    const server = await keep<SdkServer>(startStatelessV1(TOOLS));
    expect(await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 })).toEqual({
      ok: true,
      tools: TOOLS,
      protocolVersion: '2025-11-25',
      session: false,
      toolsListChanged: true,
    });
    expect(server.seen.map((s) => s.http)).not.toContain('DELETE');
  });

  it('v2 server (2026-07-28): server/discover, then tools/list with the revision on the request, no initialize', async () => {
    const server = await keep<SdkServer>(startModernV2(TOOLS));
    expect(await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 })).toEqual({
      ok: true,
      tools: TOOLS,
      protocolVersion: '2026-07-28',
      session: false,
      toolsListChanged: false,
    });
    expect(server.seen.map((s) => s.rpc)).toEqual(['server/discover', 'tools/list']);
  });

  it('follows nextCursor across pages and keeps every tool once', async () => {
    const many = Array.from({ length: 23 }, (_, i) => ({
      name: `tool-${String(i).padStart(2, '0')}`,
      description: `Tool ${i}.`,
    }));
    const server = await keep<SdkServer>(startPagedV1(many, 5));
    const result = await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 });
    // A low-level server declaring `tools: {}` does not advertise listChanged: nothing to watch.
    expect(result).toMatchObject({ ok: true, session: true, toolsListChanged: false });
    expect(result.ok && result.tools.map((t) => t.name)).toEqual(many.map((t) => t.name));
    expect(server.seen.filter((s) => s.rpc === 'tools/list')).toHaveLength(5);
  });

  it('sees a changed tool list at the next probe', async () => {
    const server = await keep<SdkServer>(startStatefulV1(TOOLS));
    const first = await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 });
    server.setTools([...TOOLS, { name: 'summarise', description: 'Summarises a document.' }]);
    const second = await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 });
    expect(first.ok && first.tools.map((t) => t.name)).toEqual(['database-query', 'search']);
    expect(second.ok && second.tools.map((t) => t.name)).toEqual(['database-query', 'search', 'summarise']);
  });
});

describe('MCP probe failures, each with its step and a clear reason', () => {
  /** A server that refuses server/discover like a session server and answers initialize with `init`. */
  async function legacy(
    init: (res: import('node:http').ServerResponse) => void,
    rest?: (body: { method?: string; id?: number }, res: import('node:http').ServerResponse) => void,
  ): Promise<TestServer> {
    return await keep(
      startServer((_req, res, text) => {
        const body = text === '' ? {} : (JSON.parse(text) as { method?: string; id?: number });
        if (body.method === 'server/discover') return void res.writeHead(400).end();
        if (body.method === 'initialize') return init(res);
        if (rest !== undefined) return rest(body, res);
        res.writeHead(202).end();
      }),
    );
  }
  const json = (res: import('node:http').ServerResponse, message: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(message));
  };

  it('refuses a server that negotiates a revision this client does not speak', async () => {
    const server = await legacy((res) =>
      json(res, {
        jsonrpc: '2.0',
        id: 1,
        result: { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'old', version: '0' } },
      }),
    );
    const result = await probeMcpTools({ endpoint: server.url, timeoutMs: 3000 });
    expect(result).toMatchObject({ ok: false, reason: 'unsupported_version', step: 'initialize' });
    expect(result.ok === false && result.detail).toMatch(
      /negotiated "2024-11-05"; this client speaks 2025-11-25, 2025-06-18, 2025-03-26/,
    );
    expect(result.ok === false && probeReason(result)).toBe('McpProtocolVersionUnsupported');
  });

  it('reports a refused credential as McpAuthRejected at discover, without trying initialize', async () => {
    const server = await keep(startServer((_req, res) => void res.writeHead(401).end()));
    const result = await probeMcpTools({ endpoint: server.url, bearerToken: 'tool-tok', timeoutMs: 3000 });
    expect(result).toMatchObject({ ok: false, reason: 'http_status', step: 'discover' });
    expect(result.ok === false && probeReason(result)).toBe('McpAuthRejected');
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.headers.authorization).toBe('Bearer tool-tok');
  });

  it('fails the handshake on an initialize error or a session id that is not visible ASCII', async () => {
    const refused = await legacy((res) =>
      json(res, { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'bad' } }),
    );
    const a = await probeMcpTools({ endpoint: refused.url, timeoutMs: 3000 });
    expect(a).toMatchObject({
      ok: false,
      reason: 'invalid_response',
      step: 'initialize',
      detail: 'initialize returned a JSON-RPC error (code -32602)',
    });
    expect(a.ok === false && probeReason(a)).toBe('McpInitializeFailed');
    const badSession = await legacy((res) =>
      json(
        res,
        { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-06-18', capabilities: {} } },
        { 'mcp-session-id': 'has space' },
      ),
    );
    expect(await probeMcpTools({ endpoint: badSession.url, timeoutMs: 3000 })).toMatchObject({
      ok: false,
      step: 'initialize',
      detail: expect.stringMatching(/Mcp-Session-Id/),
    });
  });

  it('fails on a paging loop and on a server that never stops paging, and still ends the session', async () => {
    const init = (res: import('node:http').ServerResponse) =>
      json(
        res,
        { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-06-18', capabilities: {} } },
        { 'mcp-session-id': 's-1' },
      );
    const loop = await legacy(init, (body, res) =>
      body.method === 'tools/list'
        ? json(res, { jsonrpc: '2.0', id: body.id, result: { tools: [{ name: 'x' }], nextCursor: 'same' } })
        : res.writeHead(202).end(),
    );
    const a = await probeMcpTools({ endpoint: loop.url, timeoutMs: 3000 });
    expect(a).toMatchObject({
      ok: false,
      reason: 'invalid_response',
      step: 'tools/list',
      detail: expect.stringMatching(/paging loop/),
    });
    expect(a.ok === false && probeReason(a)).toBe('McpToolsListInvalidResponse');
    expect(loop.requests.at(-1)).toMatchObject({
      method: 'DELETE',
      headers: { 'mcp-session-id': 's-1', 'mcp-protocol-version': '2025-06-18' },
    });
    let page = 0;
    const endless = await legacy(init, (body, res) =>
      body.method === 'tools/list'
        ? json(res, { jsonrpc: '2.0', id: body.id, result: { tools: [], nextCursor: `c${page++}` } })
        : res.writeHead(202).end(),
    );
    expect(await probeMcpTools({ endpoint: endless.url, timeoutMs: 5000 })).toMatchObject({
      ok: false,
      detail: `tools/list still had a nextCursor after ${MAX_PAGES} pages`,
    });
  });

  it('reads the answer with its own id from an event stream that sends a notification first', () => {
    const stream = `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\nevent: message\ndata: {"jsonrpc":"2.0","id":3,"result":{"tools":[]}}\n\n`;
    expect(answerOf(stream, true, 3)).toEqual({ jsonrpc: '2.0', id: 3, result: { tools: [] } });
    expect(() => answerOf(stream, true, 4)).toThrow(/no message with id 4/);
    expect(() => answerOf('<html>', false, 1)).toThrow(/not JSON/);
  });

  it('reads an answer stream as the event-stream format has it: CR or CRLF line ends, split data, no last blank line', () => {
    const crlf = ': keep-alive\r\nid: 7\r\ndata: {"jsonrpc":"2.0",\r\ndata: "id":5,"result":{}}\r\n\r\n';
    expect(answerOf(crlf, true, 5)).toEqual({ jsonrpc: '2.0', id: 5, result: {} });
    expect(answerOf('data:{"jsonrpc":"2.0","id":6,"result":{}}\r\r', true, 6)).toEqual({
      jsonrpc: '2.0',
      id: 6,
      result: {},
    });
    expect(answerOf('event: message\ndata: {"jsonrpc":"2.0","id":8,"result":{}}', true, 8)).toEqual({
      jsonrpc: '2.0',
      id: 8,
      result: {},
    });
    expect(() => answerOf('data: {"id":9\n\n', true, 9)).toThrow(/not JSON/);
  });

  it.each([
    ['no tools array', {}, /no result.tools array/],
    ['a nameless tool', [{}], /tools\[0\]\.name/],
    ['a name over 128 bytes', [{ name: 'x'.repeat(129) }], /tools\[0\]\.name/],
    ['a control character', [{ name: 'a\u0007b' }], /control characters/],
  ])('refuses a tools page with %s', (_name, tools, message) => {
    expect(parseTools(tools)).toMatch(message);
  });

  it('keeps descriptions, cut to 512 characters', () => {
    expect(parseTools([{ name: 'a', description: 'd'.repeat(600) }, { name: 'b' }])).toEqual([
      { name: 'a', description: 'd'.repeat(512) },
      { name: 'b' },
    ]);
  });

  it('reports an endpoint that is not there as unreachable', async () => {
    const server = await startServer((_q, res) => void res.end());
    const url = server.url;
    await server.close();
    const result = await probeMcpTools({ endpoint: url, timeoutMs: 2000 });
    expect(result).toMatchObject({ ok: false, reason: 'unreachable', step: 'discover' });
    expect(result.ok === false && probeReason(result)).toBe('McpEndpointUnreachable');
  });
});
