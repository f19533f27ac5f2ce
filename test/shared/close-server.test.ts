// closeServer on real sockets: a request already running finishes with its answer, a new connection is refused at
// once, an idle keep-alive connection does not hold the close, and a request still running at the grace is cut.
import { createServer, request, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer } from '../../daemons/shared/close-server.ts';

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
});

/** A server whose handler answers only when `release` is called; `arrived` resolves once a request is in. */
async function holdingServer(): Promise<{ port: number; arrived: Promise<void>; release: () => void }> {
  let onArrive!: () => void;
  const arrived = new Promise<void>((resolve) => (onArrive = resolve));
  let released = false;
  const waiting: Array<() => void> = [];
  server = createServer((req, res) => {
    const answer = (): void => {
      res.end(`answered ${req.url}`);
    };
    if (req.url === '/hold' && !released) {
      waiting.push(answer);
      onArrive();
    } else answer();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    arrived,
    release: () => {
      released = true;
      for (const answer of waiting.splice(0)) answer();
    },
  };
}

function get(port: number, path: string, agent?: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, ...(agent !== undefined ? { agent } : {}) }, (res) => {
      let body = '';
      res
        .setEncoding('utf8')
        .on('data', (chunk: string) => (body += chunk))
        .on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function connectError(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
  });
}

describe('closeServer', () => {
  it('lets a request already running finish with its answer and refuses new connections meanwhile', async () => {
    const s = await holdingServer();
    const inFlight = get(s.port, '/hold');
    await s.arrived;
    let closed = false;
    const closing = closeServer(server!, 5_000).then(() => (closed = true));
    expect(await connectError(s.port)).toBe('ECONNREFUSED');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(closed).toBe(false);
    s.release();
    expect(await inFlight).toEqual({ status: 200, body: 'answered /hold' });
    await closing;
  });

  it('does not wait for an idle keep-alive connection', async () => {
    const s = await holdingServer();
    const agent = new Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    expect((await get(s.port, '/once', agent)).status).toBe(200);
    const t0 = Date.now();
    await closeServer(server!, 5_000);
    expect(Date.now() - t0).toBeLessThan(1_000);
    agent.destroy();
  });

  it('closes a keep-alive connection once its request in flight has been answered', async () => {
    const s = await holdingServer();
    const agent = new Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    const inFlight = get(s.port, '/hold', agent);
    await s.arrived;
    const t0 = Date.now();
    const closing = closeServer(server!, 5_000);
    setTimeout(s.release, 100);
    expect((await inFlight).body).toBe('answered /hold');
    await closing;
    expect(Date.now() - t0).toBeLessThan(1_500);
    agent.destroy();
  });

  it('cuts a request still running when the grace runs out', async () => {
    const s = await holdingServer();
    const inFlight = get(s.port, '/hold');
    await s.arrived;
    const t0 = Date.now();
    await closeServer(server!, 200);
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(150);
    expect(elapsed).toBeLessThan(1_500);
    await expect(inFlight).rejects.toThrow(/socket hang up|ECONNRESET/);
  });
});
