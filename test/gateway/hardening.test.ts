// Attacks on the gateways, run as an attacker would against consumer → (mTLS) provider → sim, each asserting the bound
// the gateway keeps (numbered as the describe blocks below): a deeply nested body at the size limit (2), refused
// connections and the connection cap (3), client headers at the site boundary (4), dot segments (7), non-JSON content
// types, a byte-order mark and a malformed Transfer-Encoding (8).
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../daemons/gateway/filters/json-scan.ts';
import { call, chatBody, waitFor } from './helpers.ts';
import { GRID_TOKEN, openFds, rawExchange, rawStatus, rssBytes, startGrid } from './grid-fixture.ts';
import type { Grid } from './grid-fixture.ts';

const MAX_CONNECTIONS = 128;
const HEADER_TIMEOUT_MS = 1_000;
const MAX_BODY_BYTES = 10 * 1024 * 1024;

let grid: Grid;
let consumerUrl: string;
let providerUrl: string;

beforeAll(async () => {
  grid = await startGrid({
    consumerListener: {
      max_connections: MAX_CONNECTIONS,
      header_timeout_ms: HEADER_TIMEOUT_MS,
      request_timeout_ms: 5_000,
    },
  });
  consumerUrl = `http://127.0.0.1:${grid.consumerPort}`;
  providerUrl = `https://127.0.0.1:${grid.providerPort}`;
}, 60_000);

afterAll(async () => {
  const logs = grid.consumer.stdout() + grid.consumer.stderr() + grid.provider.stdout() + grid.provider.stderr();
  expect(await grid.close()).toEqual([0, 0]);
  expect(logs).not.toContain(GRID_TOKEN);
});

/** Opens `count` connections that each send `bytes` and never close; resolves once all are connected. */
async function holdConnections(
  port: number,
  count: number,
  bytes: string,
): Promise<{ sockets: Socket[]; replies: string[] }> {
  const replies = Array.from({ length: count }, () => '');
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<Socket>((resolve) => {
          const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
          socket.on('connect', () => {
            if (bytes !== '') socket.write(bytes);
            resolve(socket);
          });
          socket.on('data', (chunk: Buffer) => {
            replies[i] += chunk.toString('latin1');
          });
          socket.on('error', () => resolve(socket));
        }),
    ),
  );
  return { sockets, replies };
}

describe('finding 2: a 10 MiB deeply nested body', () => {
  it('is refused with 400 at the depth bound while /v1/models keeps answering, and RSS stays bounded', async () => {
    // Valid JSON: 5 million levels of arrays, closed, then the object (the shape that stalled the gateway).
    const prefix = '{"model":"m1","x":';
    const levels = Math.floor((MAX_BODY_BYTES - prefix.length - 1) / 2);
    const body = `${prefix}${'['.repeat(levels)}${']'.repeat(levels)}}`.padEnd(MAX_BODY_BYTES, ' ');
    expect(Buffer.byteLength(body)).toBe(MAX_BODY_BYTES);
    const rssBefore = rssBytes(grid.consumer.proc.pid!);
    let slowest = 0;
    let done = false;
    const big = call(`${consumerUrl}/v1/chat/completions`, { body }).finally(() => {
      done = true;
    });
    const probes = (async () => {
      let count = 0;
      while (!done || count === 0) {
        const started = performance.now();
        expect((await call(`${consumerUrl}/v1/models`)).status).toBe(200);
        slowest = Math.max(slowest, performance.now() - started);
        count++;
      }
      return count;
    })();
    const reply = await big;
    await probes;
    expect(reply.status).toBe(400);
    expect(reply.json().error).toMatchObject({
      code: 'invalid_json',
      message: expect.stringContaining(`deeper than ${MAX_JSON_DEPTH} levels`),
    });
    const grown = rssBytes(grid.consumer.proc.pid!) - rssBefore;
    console.log(
      `finding 2: slowest parallel /v1/models ${slowest.toFixed(0)} ms, consumer RSS ${grown >= 0 ? '+' : ''}${(grown / 2 ** 20).toFixed(1)} MiB`,
    );
    expect(slowest).toBeLessThan(1_000);
    expect(grown).toBeLessThan(64 * 1024 * 1024);
    // The provider scans the same way (after the hop checks).
    const atProvider = await call(`${providerUrl}/v1/chat/completions`, {
      body,
      headers: grid.hop(),
      dispatcher: grid.edge,
    });
    expect(atProvider.status).toBe(400);
    expect(atProvider.json().error.code).toBe('invalid_json');
  });
});

describe('finding 3: refused connections and the connection cap', () => {
  it('closes sockets it answered 408 or 400 while the clients keep theirs open: no file descriptor stays held', async () => {
    const pid = grid.consumer.proc.pid!;
    const before = openFds(pid);
    const slow = await holdConnections(grid.consumerPort, 50, 'GET /v1/models HTTP/1.1\r\nHost: x\r\n');
    const garbage = await holdConnections(grid.consumerPort, 50, 'GARBAGE\r\n\r\n');
    try {
      await waitFor(
        'every refused connection answered',
        () => [...slow.replies, ...garbage.replies].every((r) => r !== '') || undefined,
        HEADER_TIMEOUT_MS * 5,
      );
      expect(slow.replies.every((r) => r.startsWith('HTTP/1.1 408'))).toBe(true);
      expect(garbage.replies.every((r) => r.startsWith('HTTP/1.1 400'))).toBe(true);
      // The clients have not closed (allowHalfOpen): only the gateway can have released these descriptors.
      await waitFor('descriptors released', () => openFds(pid) - before < 10 || undefined, 2_000).catch(
        () => undefined,
      );
      expect(openFds(pid) - before).toBeLessThan(10);
    } finally {
      for (const s of [...slow.sockets, ...garbage.sockets]) s.destroy();
    }
  });

  it(`holds at most max_connections (${MAX_CONNECTIONS}) at once and closes the next at accept; serves again after`, async () => {
    const extra = 20;
    const held = await holdConnections(
      grid.consumerPort,
      MAX_CONNECTIONS + extra,
      'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    try {
      const refusedNow = (): number =>
        held.sockets.filter((s, i) => held.replies[i] === '' && (s.destroyed || s.readableEnded)).length;
      const answeredNow = (): number => held.replies.filter((r) => r.startsWith('HTTP/1.1 200')).length;
      await waitFor(
        'every connection answered or closed',
        () => answeredNow() + refusedNow() === MAX_CONNECTIONS + extra || undefined,
        5_000,
      ).catch(() => undefined);
      const answered = answeredNow();
      const refused = refusedNow();
      // Connections left over from earlier tests' keep-alive clients may take some of the slots.
      expect(answered).toBeLessThanOrEqual(MAX_CONNECTIONS);
      expect(answered).toBeGreaterThan(MAX_CONNECTIONS - 20);
      expect(refused).toBeGreaterThanOrEqual(extra);
      expect(answered + refused).toBe(MAX_CONNECTIONS + extra);
    } finally {
      for (const s of held.sockets) s.destroy();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect((await call(`${consumerUrl}/v1/models`)).status).toBe(200);
  });
});

describe('finding 4: client headers at the site boundary', () => {
  const forbidden = {
    authorization: 'Bearer caller-key-must-not-cross',
    cookie: 'session=caller',
    'x-api-key': 'caller-api-key',
    'api-key': 'caller-azure-key',
    'openai-organization': 'org-caller',
    'openai-project': 'proj-caller',
    'x-forwarded-for': '203.0.113.7',
    'x-forwarded-host': 'evil.example',
    'x-forwarded-proto': 'http',
    forwarded: 'for=203.0.113.7',
    'x-custom-debug': '1',
  };
  const allowed = {
    accept: 'application/json',
    'user-agent': 'hardening-test/1',
    'x-request-id': 'req-123',
    'openai-beta': 'responses=v1',
  };

  it("consumer → provider → backend: none of the caller's credentials or forwarding headers reach the backend", async () => {
    grid.sim.requests.length = 0;
    const reply = await call(`${consumerUrl}/v1/chat/completions`, {
      body: chatBody('m1'),
      headers: { ...forbidden, ...allowed },
    });
    // 200 means the sim saw exactly the provider's injected token, not the caller's.
    expect(reply.status).toBe(200);
    const seen = grid.sim.requests.at(-1)!.headerNames;
    for (const name of Object.keys(forbidden)) if (name !== 'authorization') expect(seen, name).not.toContain(name);
    for (const name of [
      ...Object.keys(allowed),
      'content-type',
      'x-gateway-model-name',
      'x-ai-provider-request-id',
      'x-ai-provider-attribution',
    ]) {
      expect(seen, name).toContain(name);
    }
  });

  it('a provider drops the same headers from a peer that sends them, and keeps the allowlisted ones', async () => {
    grid.sim.requests.length = 0;
    const reply = await call(`${providerUrl}/v1/chat/completions`, {
      body: chatBody('m1'),
      headers: { ...forbidden, ...allowed, ...grid.hop() },
      dispatcher: grid.edge,
    });
    expect(reply.status).toBe(200);
    const seen = grid.sim.requests.at(-1)!.headerNames;
    for (const name of Object.keys(forbidden)) if (name !== 'authorization') expect(seen, name).not.toContain(name);
    for (const name of Object.keys(allowed)) expect(seen, name).toContain(name);
  });
});

describe('finding 7: dot segments', () => {
  const paths = [
    '/v1/responses/../cancel',
    '/v1/responses/%2e%2e/cancel',
    '/v1/responses/%2E./cancel',
    '/v1/./chat/completions',
    '/v1//chat/completions',
    '/v1/responses/resp_1/.',
  ];
  const head = (path: string, extra = ''): string =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nx-gateway-model-name: m1\r\ncontent-type: application/json\r\ncontent-length: 14\r\n${extra}connection: close\r\n\r\n{"model":"m1"}`;

  it('are refused with 400 by the consumer and by the provider, and never reach the backend', async () => {
    grid.sim.requests.length = 0;
    for (const path of paths) {
      const consumer = await rawExchange(grid.consumerPort, head(path));
      expect(rawStatus(consumer), `consumer ${path}`).toBe(400);
      expect(consumer.text).toContain('"code":"invalid_path"');
      const hop = Object.entries(grid.hop())
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const provider = await rawExchange(grid.providerPort, head(path, hop), { tls: grid.pki });
      expect(rawStatus(provider), `provider ${path}`).toBe(400);
      expect(provider.text).toContain('"code":"invalid_path"');
    }
    expect(grid.sim.requests).toEqual([]);
  });
});

describe('finding 8: content types, byte-order marks, malformed Transfer-Encoding', () => {
  it('answers 415 for a text/plain body at both gateways', async () => {
    const consumer = await call(`${consumerUrl}/v1/chat/completions`, {
      body: JSON.stringify(chatBody('m1')),
      headers: { 'content-type': 'text/plain' },
    });
    expect(consumer.status).toBe(415);
    expect(consumer.json().error.code).toBe('unsupported_media_type');
    const provider = await call(`${providerUrl}/v1/chat/completions`, {
      body: JSON.stringify(chatBody('m1')),
      headers: { 'content-type': 'text/plain', ...grid.hop() },
      dispatcher: grid.edge,
    });
    expect(provider.status).toBe(415);
    // application/json with a charset is JSON.
    expect(
      (
        await call(`${consumerUrl}/v1/chat/completions`, {
          body: chatBody('m1'),
          headers: { 'content-type': 'application/json; charset=utf-8' },
        })
      ).status,
    ).toBe(200);
  });

  it('refuses a body with a byte-order mark with 400 at the gateway, as the backend does', async () => {
    const body = `\ufeff${JSON.stringify(chatBody('m1'))}`;
    const direct = await call(`http://127.0.0.1:${grid.sim.port}/v1/chat/completions`, {
      body,
      headers: { authorization: `Bearer ${GRID_TOKEN}` },
    });
    expect(direct.status).toBe(400);
    const viaGateway = await call(`${consumerUrl}/v1/chat/completions`, { body });
    expect(viaGateway.status).toBe(400);
    // Refused by the gateway itself (its code), not relayed from the backend.
    expect(viaGateway.json().error).toMatchObject({
      code: 'invalid_json',
      message: expect.stringContaining('byte-order mark'),
    });
  });

  it('answers 400 and closes on a malformed Transfer-Encoding or chunk, at both gateways', async () => {
    const bodies = [
      'Transfer-Encoding: xchunked\r\n\r\n{"model":"m1"}',
      'Transfer-Encoding: chunked\r\n\r\nzz\r\n{"model":"m1"}\r\n0\r\n\r\n',
      'Transfer-Encoding: chunked, identity\r\n\r\n',
    ];
    for (const tail of bodies) {
      const consumer = await rawExchange(
        grid.consumerPort,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${tail}`,
      );
      expect(rawStatus(consumer), `consumer ${tail}`).toBe(400);
      expect(consumer.closed).toBe(true);
      const hop = Object.entries(grid.hop())
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const provider = await rawExchange(
        grid.providerPort,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${hop}${tail}`,
        { tls: grid.pki },
      );
      expect(rawStatus(provider), `provider ${tail}`).toBe(400);
      expect(provider.closed).toBe(true);
    }
    expect((await call(`${consumerUrl}/v1/chat/completions`, { body: chatBody('m1') })).status).toBe(200);
  });
});
