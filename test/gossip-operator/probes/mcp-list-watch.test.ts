// The MCP list watcher against real servers of the official SDK (mcp-sdk-servers.ts): the SDK's own
// notifications/tools/list_changed reaches onChanged, a stream the server ends or a session it forgets is picked up
// again, a 405 on GET is no watch. Hand-written servers cover what no SDK server does on purpose (404 for a session,
// an oversized event, a batch), and the event-stream parser has its own cases.
import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { SseParser, type SseEvent } from '../../../daemons/gossip-operator/probes/sse-parser.ts';
import {
  DEFAULT_INITIAL_BACKOFF_MS,
  DEFAULT_MAX_BACKOFF_MS,
  McpListWatch,
  type McpListWatchOptions,
  type McpListWatchReport,
} from '../../../daemons/gossip-operator/probes/mcp-list-watch.ts';
import { probeMcpTools } from '../../../daemons/gossip-operator/probes/mcp-probe.ts';
import { closedPort } from '../../closed-port.ts';
import { waitFor } from '../helpers.ts';
import { type StatefulSdkServer, startStatefulV1, startStatelessV1 } from './mcp-sdk-servers.ts';
import { startServer, type TestServer } from './servers.ts';

const TOOLS = [
  { name: 'database-query', description: 'Runs a read-only SQL query.' },
  { name: 'search', description: 'Searches the catalogue.' },
];
const SUMMARISE = { name: 'summarise', description: 'Summarises a document.' };
const TOKEN = 'watch-s3cr3t-token';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function keep<T extends { close(): Promise<void> }>(server: Promise<T>): Promise<T> {
  const s = await server;
  cleanups.push(() => s.close());
  return s;
}

interface Watching {
  readonly watch: McpListWatch;
  readonly changes: { cause: string; atMs: number }[];
  readonly reports: McpListWatchReport[];
}

function watch(options: Omit<McpListWatchOptions, 'onChanged' | 'onReport'>): Watching {
  const changes: Watching['changes'] = [];
  const reports: McpListWatchReport[] = [];
  const w = new McpListWatch({
    ...options,
    onChanged: (cause) => changes.push({ cause, atMs: Date.now() }),
    onReport: (r) => reports.push(r),
  });
  cleanups.push(() => w.stop());
  return { watch: w, changes, reports };
}

const watchingCount = (w: Watching) => w.reports.filter((r) => r.state === 'watching').length;
const rpcs = (server: StatefulSdkServer) => server.seen.map((s) => `${s.http} ${s.rpc ?? ''}`.trim());

describe('MCP list watcher against the official SDK server', () => {
  it('hears the SDK announce a changed tool list within a second, and ends its session on stop', async () => {
    const server = await keep(startStatefulV1(TOOLS));
    const probe = await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 });
    expect(probe).toMatchObject({ ok: true, toolsListChanged: true });
    server.seen.length = 0;
    const w = watch({ endpoint: server.url, timeoutMs: 5000 });
    await waitFor('the stream open', () => (watchingCount(w) === 1 && server.openStreams() === 1 ? true : undefined));
    expect(w.reports[0]).toEqual({ state: 'watching', protocolVersion: '2025-11-25', session: true });
    expect(rpcs(server)).toEqual(['POST initialize', 'POST notifications/initialized', 'GET']);
    const session = server.seen[0 + 1]!.session;
    expect(server.seen[2]!.session).toBe(session);
    expect(w.changes).toEqual([]);

    const announced = Date.now();
    server.changeTools([...TOOLS, SUMMARISE]);
    await waitFor('the announcement', () => (w.changes.length > 0 ? true : undefined), 1_000);
    expect(w.changes[0]!.cause).toBe('notification');
    expect(w.changes[0]!.atMs - announced).toBeLessThan(1_000);
    // Removing a tool is announced too (RegisteredTool.remove in the SDK).
    server.changeTools(TOOLS);
    await waitFor('the second announcement', () => (w.changes.length > 1 ? true : undefined), 1_000);
    expect(w.changes.map((c) => c.cause)).toEqual(['notification', 'notification']);

    await w.watch.stop();
    expect(server.seen.at(-1)).toMatchObject({ http: 'DELETE', session });
    expect(server.openSessions()).toBe(0);
    await waitFor('the stream closed', () => (server.openStreams() === 0 ? true : undefined));
  });

  it('reopens a stream the server ended, in the same session, and reports the gap as a possible change', async () => {
    const server = await keep(startStatefulV1(TOOLS));
    const w = watch({ endpoint: server.url, timeoutMs: 5000, initialBackoffMs: 50 });
    await waitFor('the stream open', () => (server.openStreams() === 1 ? true : undefined));
    server.closeStreams();
    await waitFor(
      'the stream open again',
      () => (watchingCount(w) === 2 && server.openStreams() === 1 ? true : undefined),
      3_000,
    );
    expect(w.reports.find((r) => r.state === 'retrying')).toEqual({
      state: 'retrying',
      detail: 'the server ended the stream',
      retryInMs: 50,
    });
    expect(w.changes.map((c) => c.cause)).toEqual(['reconnected']);
    // No new handshake: the same session's stream was opened again.
    expect(rpcs(server).filter((r) => r === 'POST initialize')).toHaveLength(1);
    const sessions = new Set(server.seen.filter((s) => s.http === 'GET').map((s) => s.session));
    expect(sessions.size).toBe(1);
    server.changeTools([...TOOLS, SUMMARISE]);
    await waitFor(
      'the announcement on the new stream',
      () => (w.changes.some((c) => c.cause === 'notification') ? true : undefined),
      1_000,
    );
  });

  it('opens a fresh session when the server forgot the one it had (the SDK example answers 400)', async () => {
    const server = await keep(startStatefulV1(TOOLS));
    const w = watch({ endpoint: server.url, timeoutMs: 5000, initialBackoffMs: 50 });
    await waitFor('the stream open', () => (server.openStreams() === 1 ? true : undefined));
    const first = server.seen.find((s) => s.http === 'GET')!.session;
    await server.dropSessions();
    await waitFor(
      'a stream in a new session',
      () => (watchingCount(w) === 2 && server.openStreams() === 1 ? true : undefined),
      5_000,
    );
    const gets = server.seen.filter((s) => s.http === 'GET');
    expect(gets.at(-1)!.session).not.toBe(first);
    expect(rpcs(server).filter((r) => r === 'POST initialize')).toHaveLength(2);
    expect(
      w.reports.some(
        (r) => r.state === 'retrying' && r.detail === 'GET answered HTTP 400 for the session; opening a fresh one',
      ),
    ).toBe(true);
    server.changeTools([...TOOLS, SUMMARISE]);
    await waitFor(
      'the announcement in the new session',
      () => (w.changes.some((c) => c.cause === 'notification') ? true : undefined),
      1_000,
    );
    expect(server.openSessions()).toBe(1);
  });

  it('is no watch on a server that answers GET with 405, and does not ask again', async () => {
    const server = await keep(startStatelessV1(TOOLS));
    // The stateless SDK form still advertises listChanged (McpServer always does), yet has no stream to offer.
    expect(await probeMcpTools({ endpoint: server.url, timeoutMs: 5000 })).toMatchObject({
      ok: true,
      session: false,
      toolsListChanged: true,
    });
    server.seen.length = 0;
    const w = watch({ endpoint: server.url, timeoutMs: 5000, initialBackoffMs: 10 });
    await waitFor('the verdict', () => (w.watch.unsupported ? true : undefined));
    expect(w.reports).toEqual([
      {
        state: 'unsupported',
        detail: 'the server answers GET with HTTP 405: it offers no stream for server-initiated messages',
      },
    ]);
    await new Promise((r) => setTimeout(r, 300));
    expect(server.seen.map((s) => s.http)).toEqual(['POST', 'POST', 'GET']);
    expect(w.changes).toEqual([]);
  });

  it('sends the bearer token on every request, and a refused one is retried without quoting it', async () => {
    const server = await keep(startStatefulV1(TOOLS, { requireToken: TOKEN }));
    const good = watch({ endpoint: server.url, bearerToken: TOKEN, timeoutMs: 5000 });
    await waitFor('the stream open', () => (server.openStreams() === 1 ? true : undefined));
    await good.watch.stop();
    expect(server.seen.map((s) => s.rpc)).not.toContain('unauthorized');
    const bad = watch({
      endpoint: server.url,
      bearerToken: 'not-the-token',
      timeoutMs: 5000,
      initialBackoffMs: 20,
      maxBackoffMs: 40,
    });
    await waitFor('three refusals', () => (bad.reports.length >= 3 ? true : undefined));
    expect(bad.reports.slice(0, 3)).toEqual(
      [20, 40, 40].map((retryInMs) => ({ state: 'retrying', detail: 'initialize answered HTTP 401', retryInMs })),
    );
    expect(JSON.stringify([good.reports, bad.reports])).not.toMatch(/s3cr3t|not-the-token/);
  });
});

describe('MCP list watcher against hand-written servers', () => {
  /**
   * A session server that answers initialize with session `s-<n>` and lets `get` answer the GET stream; GETs and
   * DELETEs are recorded with the session they named.
   */
  async function scripted(
    get: (res: http.ServerResponse, session: string, count: number) => void,
    capabilities: unknown = { tools: { listChanged: true } },
  ): Promise<TestServer & { gets: string[]; deletes: string[] }> {
    let sessions = 0;
    const gets: string[] = [];
    const deletes: string[] = [];
    const server = await keep(
      startServer((req, res, text) => {
        const session = String(req.headers['mcp-session-id'] ?? '');
        if (req.method === 'GET') {
          gets.push(session);
          return get(res, session, gets.length);
        }
        if (req.method === 'DELETE') {
          deletes.push(session);
          return void res.writeHead(200).end();
        }
        const body = JSON.parse(text) as { method?: string; id?: number };
        if (body.method === 'initialize') {
          sessions += 1;
          res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': `s-${sessions}` });
          return void res.end(
            JSON.stringify({
              jsonrpc: '2.0',
              id: body.id,
              result: { protocolVersion: '2025-06-18', capabilities, serverInfo: { name: 'scripted', version: '0' } },
            }),
          );
        }
        res.writeHead(202).end();
      }),
    );
    return Object.assign(server, { gets, deletes });
  }
  // Headers sent at once, as the SDK does: node:http would otherwise hold them until the first write.
  const sse = (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
    return res;
  };

  it('opens a fresh session on 404 without ending the one the server no longer knows', async () => {
    const server = await scripted((res, session) => {
      if (session === 's-1')
        return void res
          .writeHead(404, { 'content-type': 'application/json' })
          .end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
      sse(res);
      res.write(': connected\n\n');
    });
    const w = watch({ endpoint: server.url, timeoutMs: 3000, initialBackoffMs: 20 });
    await waitFor('a stream in session s-2', () => (watchingCount(w) === 1 ? true : undefined));
    expect(server.gets).toEqual(['s-1', 's-2']);
    expect(server.deletes).toEqual([]);
    expect(server.requests.find((r) => r.method === 'GET')!.headers).toMatchObject({
      accept: 'text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    });
    await w.watch.stop();
    expect(server.deletes).toEqual(['s-2']);
  });

  it('reads a batch, skips comments, other events and requests, and resumes with Last-Event-ID', async () => {
    const server = await scripted((res, _session, count) => {
      sse(res);
      if (count === 1) {
        res.write(
          ': keep-alive\n\nid: e-1\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n',
        );
        res.write('event: other\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n');
        res.write('data: {"jsonrpc":"2.0","id":7,"method":"notifications/tools/list_changed"}\n\n');
        res.write(
          'id: e-2\ndata: [{"jsonrpc":"2.0","method":"notifications/resources/list_changed"},\r\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]\r\n\r\n',
        );
        res.end();
      }
    });
    const w = watch({ endpoint: server.url, timeoutMs: 3000, initialBackoffMs: 20 });
    await waitFor('the second stream', () => (watchingCount(w) === 2 ? true : undefined));
    expect(w.changes.map((c) => c.cause)).toEqual(['notification', 'reconnected']);
    expect(server.requests.filter((r) => r.method === 'GET').map((r) => r.headers['last-event-id'])).toEqual([
      undefined,
      'e-2',
    ]);
  });

  it('drops a stream whose event outgrows the limit, and opens it again', async () => {
    const server = await scripted((res, _session, count) => {
      sse(res);
      if (count === 1) res.write(`data: ${'x'.repeat(5000)}`);
    });
    const w = watch({ endpoint: server.url, timeoutMs: 3000, initialBackoffMs: 20, maxEventBytes: 4096 });
    await waitFor('the second stream', () => (watchingCount(w) === 2 ? true : undefined));
    expect(w.reports.find((r) => r.state === 'retrying')).toEqual({
      state: 'retrying',
      detail: 'the stream failed: an event of the stream exceeds 4096 bytes',
      retryInMs: 20,
    });
  });

  it('retries a GET answered with something other than an event stream, doubling the delay', async () => {
    const server = await scripted((res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    const w = watch({ endpoint: server.url, timeoutMs: 3000, initialBackoffMs: 10, maxBackoffMs: 80 });
    await waitFor('five attempts', () => (w.reports.length >= 5 ? true : undefined));
    expect(w.reports.slice(0, 5)).toEqual(
      [10, 20, 40, 80, 80].map((retryInMs) => ({
        state: 'retrying',
        detail: 'GET answered 200 with "application/json", not an event stream',
        retryInMs,
      })),
    );
    // Never a stream, so no possible change to report either.
    expect(w.changes).toEqual([]);
  });

  it('stops when its own session no longer advertises tools.listChanged, and ends that session', async () => {
    const server = await scripted(() => undefined, { tools: {} });
    const w = watch({ endpoint: server.url, timeoutMs: 3000 });
    await waitFor('the verdict', () => (w.watch.unsupported ? true : undefined));
    expect(w.reports).toEqual([
      { state: 'unsupported', detail: 'initialize no longer advertises capabilities.tools.listChanged' },
    ]);
    await waitFor('the session ended', () => (server.deletes.length === 1 ? true : undefined));
    expect(server.gets).toEqual([]);
  });

  it('stop() ends a backoff wait and a stream at once', async () => {
    const port = await closedPort();
    const w = watch({ endpoint: `http://127.0.0.1:${port}/mcp`, timeoutMs: 3000 });
    await waitFor('the first failure', () => (w.reports.length === 1 ? true : undefined));
    expect(w.reports[0]).toEqual({
      state: 'retrying',
      detail: 'initialize: connection failed (ECONNREFUSED)',
      retryInMs: DEFAULT_INITIAL_BACKOFF_MS,
    });
    let started = Date.now();
    await w.watch.stop();
    expect(Date.now() - started).toBeLessThan(500);

    const server = await scripted((res) => void sse(res).write(': open\n\n'));
    const open = watch({ endpoint: server.url, timeoutMs: 3000 });
    await waitFor('the stream open', () => (watchingCount(open) === 1 ? true : undefined));
    started = Date.now();
    await open.watch.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(server.deletes).toEqual(['s-1']);
    expect(DEFAULT_MAX_BACKOFF_MS).toBe(60_000);
  });
});

describe('event-stream parser', () => {
  function parse(chunks: (string | Buffer)[], max = 1024): { events: SseEvent[]; ok: boolean } {
    const events: SseEvent[] = [];
    const parser = new SseParser(max, (e) => events.push(e));
    let ok = true;
    for (const chunk of chunks) ok = parser.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk) && ok;
    return { events, ok };
  }

  it('splits lines at LF, CRLF and CR, also across chunks', () => {
    const { events } = parse(['data: a\r', '\ndata: b\r\r', 'event: x\ndata:c\n', '\n', 'data: d\n\n']);
    expect(events).toEqual([
      { type: 'message', data: 'a\nb', lastEventId: undefined },
      { type: 'x', data: 'c', lastEventId: undefined },
      { type: 'message', data: 'd', lastEventId: undefined },
    ]);
  });

  it('decodes a character split between chunks, drops a leading BOM, ignores comments and empty events', () => {
    const bytes = Buffer.from('\ufeffdata: é€\n\n');
    const { events } = parse([
      bytes.subarray(0, 9),
      bytes.subarray(9),
      ': comment\n\nid: 1\ndata:\n\n',
      'data: after\n\n',
    ]);
    expect(events).toEqual([
      { type: 'message', data: 'é€', lastEventId: undefined },
      { type: 'message', data: 'after', lastEventId: '1' },
    ]);
  });

  it('refuses an event over the limit, whether its lines are complete or not', () => {
    expect(parse([`data: ${'x'.repeat(30)}\n`, `data: ${'y'.repeat(30)}\n`], 64).ok).toBe(false);
    expect(parse([`data: ${'x'.repeat(70)}`], 64).ok).toBe(false);
    expect(parse([`data: ${'x'.repeat(40)}\n\n`, `data: ${'y'.repeat(40)}\n\n`], 64)).toMatchObject({
      ok: true,
      events: [{ data: 'x'.repeat(40) }, { data: 'y'.repeat(40) }],
    });
  });
});
