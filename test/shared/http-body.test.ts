// readBoundedBody over a real node:http server and raw TCP clients, so each case controls how the request reaches the
// server: head and body in one write (the whole body is buffered by the request's first 'readable' event), the body in
// pieces after the head, chunked, over the bound, cut off, or empty; and a keep-alive connection that carries a second
// request after the first body was read.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readBoundedBody } from '../../daemons/shared/http-body.ts';

const MAX = 64;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

class TooLarge extends Error {}

interface Read {
  body?: string;
  error?: Error;
  /** The request's readableFlowing when the read settled: null when the body was taken without flowing mode. */
  flowing: boolean | null;
}

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  if (server !== undefined) {
    server.closeAllConnections();
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
  }
});

/** A server whose every request is read with readBoundedBody(MAX); each outcome is queued and answered 200 or 413. */
async function bodyServer(): Promise<{ port: number; next: () => Promise<Read> }> {
  const reads: Read[] = [];
  const waiters: ((read: Read) => void)[] = [];
  const settle = (read: Read): void => {
    const waiter = waiters.shift();
    if (waiter === undefined) reads.push(read);
    else waiter(read);
  };
  server = createServer((req: IncomingMessage, res) => {
    readBoundedBody(req, MAX, (max) => new TooLarge(`over ${max} bytes`)).then(
      (body) => {
        settle({ body: body.toString('utf8'), flowing: req.readableFlowing });
        res.end(`read ${body.length}`);
      },
      (error: Error) => {
        settle({ error, flowing: req.readableFlowing });
        if (!res.destroyed) res.writeHead(error instanceof TooLarge ? 413 : 400, { connection: 'close' }).end();
      },
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const next = (): Promise<Read> => {
    const read = reads.shift();
    return read !== undefined ? Promise.resolve(read) : new Promise((resolve) => waiters.push(resolve));
  };
  return { port: (server.address() as AddressInfo).port, next };
}

async function client(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  await once(socket, 'connect');
  socket.setNoDelay(true);
  return socket;
}

const head = (length: number | 'chunked'): string =>
  `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${length === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${length}`}\r\n\r\n`;

/** Collects what the server answers on `socket` until it holds `count` complete responses. */
async function responses(socket: Socket, count: number): Promise<string> {
  let text = '';
  while ((text.match(/HTTP\/1\.1 /g) ?? []).length < count || !/read \d+$|\r\n\r\n$/.test(text)) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    text += chunk.toString('latin1');
  }
  return text;
}

describe('readBoundedBody', () => {
  it('takes a body that arrived with its head in one read(), without flowing mode', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    const body = '{"model":"m1","messages":[]}';
    socket.write(head(body.length) + body);
    const read = await next();
    expect(read).toEqual({ body, flowing: null });
    expect(await responses(socket, 1)).toContain(`read ${body.length}`);
  });

  it('reads a body that arrives in pieces after its head, whole and in order', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    const body = '{"model":"m1","messages":[{"role":"user","content":"hi"}]}';
    socket.write(head(body.length));
    await sleep(30);
    socket.write(body.slice(0, 10));
    await sleep(30);
    socket.write(body.slice(10));
    expect((await next()).body).toBe(body);
  });

  it('reads a chunked body whole', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(`${head('chunked')}5\r\n{"a":\r\n`);
    await sleep(30);
    socket.write('3\r\n"b"\r\n1\r\n}\r\n0\r\n\r\n');
    expect((await next()).body).toBe('{"a":"b"}');
  });

  it('returns an empty buffer for an empty body', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(head(0));
    expect(await next()).toEqual({ body: '', flowing: null });
  });

  it('refuses a declared Content-Length over the bound before reading a byte', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(head(MAX + 1));
    const read = await next();
    expect(read.error).toBeInstanceOf(TooLarge);
    expect(await responses(socket, 1)).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('refuses a chunked body over the bound, whether it arrived whole or crosses the bound later', async () => {
    const { port, next } = await bodyServer();
    const whole = await client(port);
    const big = 'x'.repeat(MAX + 1);
    whole.write(`${head('chunked')}${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`);
    expect((await next()).error).toBeInstanceOf(TooLarge);

    const later = await client(port);
    later.write(`${head('chunked')}20\r\n${'y'.repeat(32)}\r\n`);
    await sleep(30);
    later.write(`28\r\n${'z'.repeat(40)}\r\n`);
    expect((await next()).error).toBeInstanceOf(TooLarge);
  });

  it('rejects, instead of hanging, when the client closes before the whole body', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(`${head(40)}{"model":`);
    await sleep(30);
    socket.destroy();
    const read = await next();
    expect(read.error?.message).toMatch(/closed the connection before sending the whole body|aborted/);
  });

  it('rejects, instead of hanging, when the chunked framing breaks in the packet that carried the head', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(`${head('chunked')}zz\r\n`);
    expect((await next()).error).toBeInstanceOf(Error);
  });

  it('leaves a keep-alive connection ready for the next request after reading a body', async () => {
    const { port, next } = await bodyServer();
    const socket = await client(port);
    socket.write(`${head(7)}{"a":1}${head(7)}{"b":2}`);
    expect((await next()).body).toBe('{"a":1}');
    expect((await next()).body).toBe('{"b":2}');
    const text = await responses(socket, 2);
    expect(text.match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
  });
});
