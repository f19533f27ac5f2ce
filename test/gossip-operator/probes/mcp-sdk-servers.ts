// Real MCP servers built with the official TypeScript SDKs, in the forms their documentation gives, for the probe's
// tests: v1 (`@modelcontextprotocol/sdk`) streamable HTTP stateful (a transport per session, Mcp-Session-Id) and
// stateless (a transport per request), a v1 low-level server that pages its tools, and a v2
// (`@modelcontextprotocol/server`) createMcpHandler endpoint serving the stateless 2026-07-28 revision.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer as McpServerV1, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server as ServerV1 } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema, CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpServer as McpServerV2, createMcpHandler } from '@modelcontextprotocol/server';

export interface SdkServer {
  readonly url: string;
  /** Every request the server received: method, JSON-RPC method (when a POST carried one) and session header. */
  readonly seen: { http: string; rpc?: string; session?: string }[];
  /** Sessions the server holds open now (stateful form only). */
  readonly openSessions: () => number;
  /** Replaces the tool list (names and descriptions) the server answers with from its next request. */
  setTools(tools: readonly { name: string; description: string }[]): void;
  close(): Promise<void>;
}

export type Tools = readonly { name: string; description: string }[];

/** The stateful form, which a test can also make change its tools live and drop its streams and sessions. */
export interface StatefulSdkServer extends SdkServer {
  /**
   * Replaces the tool list, and in every open session adds and removes the tools as the SDK's McpServer does
   * (registerTool, RegisteredTool.remove), so the SDK itself announces notifications/tools/list_changed on the
   * session's GET stream; a low-level Server is told to announce it (sendToolListChanged).
   */
  changeTools(tools: Tools): void;
  /** Ends every session's GET stream (the SDK's closeStandaloneSSEStream), as a server restarting its streams. */
  closeStreams(): void;
  /** Closes every session's transport: the server forgets them and answers their requests 400, as after a restart. */
  dropSessions(): Promise<void>;
  /** GET requests holding a stream open now. */
  readonly openStreams: () => number;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export interface ServeOptions {
  /**
   * Refuse (401) every request without `Authorization: Bearer <token>`, as a server behind a credential does; a
   * function is asked at each request (a token the grid generates after the server started).
   */
  requireToken?: string | (() => string | undefined);
}

async function listen(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: unknown) => Promise<void>,
  extra: Omit<SdkServer, 'url' | 'close' | 'seen'>,
  seen: SdkServer['seen'],
  options: ServeOptions = {},
): Promise<SdkServer> {
  const server = http.createServer((req, res) => {
    void (async () => {
      const token = typeof options.requireToken === 'function' ? options.requireToken() : options.requireToken;
      if (
        options.requireToken !== undefined &&
        (token === undefined || req.headers.authorization !== `Bearer ${token}`)
      ) {
        seen.push({ http: req.method ?? '', rpc: 'unauthorized' });
        res
          .writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' })
          .end('{"error":"unauthorized"}');
        return;
      }
      const text = await readBody(req);
      let body: unknown;
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = undefined;
      }
      const session = req.headers['mcp-session-id'];
      seen.push({
        http: req.method ?? '',
        ...(typeof (body as { method?: unknown })?.method === 'string'
          ? { rpc: (body as { method: string }).method }
          : {}),
        ...(typeof session === 'string' ? { session } : {}),
      });
      await handler(req, res, body);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    ...extra,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The tools each v1Server registered, by name, so changeTools can remove them the SDK's way. */
const registered = new WeakMap<McpServerV1, Map<string, RegisteredTool>>();

function register(server: McpServerV1, tool: Tools[number]): void {
  const handle = server.registerTool(tool.name, { description: tool.description }, async () => ({
    content: [{ type: 'text', text: `${tool.name} ran` }],
  }));
  registered.get(server)!.set(tool.name, handle);
}

export function v1Server(tools: () => Tools): McpServerV1 {
  const server = new McpServerV1({ name: 'sdk-v1-tools', version: '1.0.0' });
  registered.set(server, new Map());
  for (const tool of tools()) register(server, tool);
  return server;
}

/**
 * The SDK's documented stateful streamable-HTTP wiring: a transport per session, keyed by Mcp-Session-Id, made on
 * `initialize` and connected to a server `makeServer` builds; anything else without a known session is refused.
 */
export async function startStateful(
  makeServer: (tools: () => Tools) => McpServerV1 | ServerV1,
  initialTools: Tools,
  options: ServeOptions = {},
): Promise<StatefulSdkServer> {
  let tools = initialTools;
  const seen: SdkServer['seen'] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers = new Map<StreamableHTTPServerTransport, McpServerV1 | ServerV1>();
  let streams = 0;
  const changeTools = (next: Tools): void => {
    tools = next;
    for (const server of servers.values()) {
      const handles = server instanceof McpServerV1 ? registered.get(server) : undefined;
      if (server instanceof ServerV1 || handles === undefined) {
        void (server as ServerV1).sendToolListChanged();
        continue;
      }
      for (const [name, handle] of handles) {
        if (!next.some((t) => t.name === name)) {
          handle.remove();
          handles.delete(name);
        }
      }
      for (const tool of next) if (!handles.has(tool.name)) register(server, tool);
    }
  };
  const sdk = await listen(
    async (req, res, body) => {
      const sessionId = req.headers['mcp-session-id'];
      let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
      if (transport === undefined) {
        if (req.method !== 'POST' || (body as { method?: string } | undefined)?.method !== 'initialize') {
          res.writeHead(400, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              jsonrpc: '2.0',
              error: { code: -32000, message: 'Bad Request: No valid session ID provided' },
              id: null,
            }),
          );
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void transports.set(id, created),
        });
        created.onclose = () => {
          if (created.sessionId !== undefined) transports.delete(created.sessionId);
          servers.delete(created);
        };
        const server = makeServer(() => tools);
        servers.set(created, server);
        await server.connect(created);
        transport = created;
      }
      if (req.method === 'GET') {
        streams += 1;
        res.on('close', () => void (streams -= 1));
      }
      await transport.handleRequest(req, res, body);
    },
    { openSessions: () => transports.size, setTools: (t) => void (tools = t) },
    seen,
    options,
  );
  return {
    ...sdk,
    changeTools,
    closeStreams: () => {
      for (const transport of transports.values()) transport.closeStandaloneSSEStream();
    },
    dropSessions: async () => {
      await Promise.all([...transports.values()].map((t) => t.close()));
    },
    openStreams: () => streams,
  };
}

/** The SDK's documented stateful server: McpServer with registered tools. */
export async function startStatefulV1(initialTools: Tools, options: ServeOptions = {}): Promise<StatefulSdkServer> {
  return await startStateful((tools) => v1Server(tools), initialTools, options);
}

/** The SDK's documented stateless form: a new server and transport for every request, no session. */
export async function startStatelessV1(initialTools: Tools, options: ServeOptions = {}): Promise<SdkServer> {
  let tools = initialTools;
  const seen: SdkServer['seen'] = [];
  return await listen(
    async (req, res, body) => {
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const server = v1Server(() => tools);
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    },
    { openSessions: () => 0, setTools: (t) => void (tools = t) },
    seen,
    options,
  );
}

/** A v1 low-level server answering tools/list `pageSize` tools at a time with nextCursor (stateful). */
export async function startPagedV1(
  initialTools: Tools,
  pageSize: number,
  options: ServeOptions = {},
): Promise<StatefulSdkServer> {
  return await startStateful(
    (tools) => {
      const server = new ServerV1({ name: 'sdk-v1-paged', version: '1.0.0' }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async (request) => {
        const start = request.params?.cursor === undefined ? 0 : Number(request.params.cursor);
        const page = tools()
          .slice(start, start + pageSize)
          .map((t) => ({ ...t, inputSchema: { type: 'object' as const } }));
        return start + pageSize < tools().length
          ? { tools: page, nextCursor: String(start + pageSize) }
          : { tools: page };
      });
      server.setRequestHandler(CallToolRequestSchema, async (request) => ({
        content: [{ type: 'text', text: `${request.params.name} ran` }],
      }));
      return server;
    },
    initialTools,
    options,
  );
}

/** A v2 SDK endpoint (createMcpHandler): 2026-07-28 stateless, with the SDK's stateless fallback for older clients. */
export async function startModernV2(initialTools: Tools): Promise<SdkServer> {
  let tools = initialTools;
  const seen: SdkServer['seen'] = [];
  const handler = createMcpHandler(() => {
    const server = new McpServerV2({ name: 'sdk-v2-tools', version: '2.0.0' });
    for (const tool of tools)
      server.registerTool(tool.name, { description: tool.description }, async () => ({
        content: [{ type: 'text', text: `${tool.name} ran` }],
      }));
    return server;
  });
  const sdk = await listen(
    async (req, res, body) => {
      // node:http to the handler's web-standard face, as @modelcontextprotocol/node's toNodeHandler does.
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
      const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body === undefined || req.method === 'GET' || req.method === 'DELETE'
          ? {}
          : { body: JSON.stringify(body) }),
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
      res.end(Buffer.from(await response.arrayBuffer()));
    },
    { openSessions: () => 0, setTools: (t) => void (tools = t) },
    seen,
  );
  return {
    ...sdk,
    close: async () => {
      await handler.close();
      await sdk.close();
    },
  };
}
