// HTTP fuzzing at scale against a live consumer and provider gateway: generated requests (methods, paths
// with dot segments and encodings, headers, bodies broken in every way a JSON body can be) over keep-alive pools,
// and broken framing over raw sockets. Seeded: the seed is printed and FUZZ_SEED=<seed> replays the same requests.
// Each run asserts the gateways stay alive, serve a good request afterwards, return to within a bound of their
// starting RSS and open descriptors, never stall their event loop over 100 ms, never answer 500 and never put the
// provider's token in a response or a log line.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Pool } from 'undici';
import { MAX_JSON_DEPTH } from '../../daemons/gateway/filters/json-scan.ts';
import { PROVIDER_SNI, call, chatBody } from './helpers.ts';
import { GRID_TOKEN, rawExchange, rawStatus, startGrid } from './grid-fixture.ts';
import type { Grid } from './grid-fixture.ts';
import { fuzzSeed, gatewayHealth, mib, runPool, seededRandom, stallReadingBound, watchLoopLag } from './fuzz.ts';
import type { Random } from './fuzz.ts';

const SEED = fuzzSeed();
const REQUESTS = 10_000;
/** Share of the requests sent as raw bytes on their own connection (framing cases). */
const RAW_SHARE = 0.06;
const CONCURRENCY = 8;
const MAX_BODY_BYTES = 65_536;
const RSS_BOUND = 64 * 2 ** 20;
const FD_BOUND = 16;
const LAG_BOUND_MS = 100;

let grid: Grid;

beforeAll(async () => {
  const listener = {
    max_body_bytes: MAX_BODY_BYTES,
    max_header_bytes: 8_192,
    header_timeout_ms: 2_000,
    request_timeout_ms: 5_000,
  };
  grid = await startGrid({ consumerListener: listener, providerListener: listener });
}, 60_000);

afterAll(async () => {
  await grid?.close();
});

const PATHS = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/responses',
  '/v1/models',
  '/v1/responses/resp_1',
  '/v1/responses/resp_1/cancel',
  '/v1/responses/resp_1/input_items',
];
const METHODS = ['POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS'];
const MODELS: unknown[] = [
  'm1',
  'm1',
  'm1',
  'unknown-model',
  '',
  ' ',
  'x'.repeat(300),
  'm\u0000',
  'm\r\nx-injected: 1',
  '\ud800',
  42,
  null,
  ['m1'],
  { id: 'm1' },
  'ｍ１',
];
const CONTENT_TYPES = [
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'APPLICATION/JSON',
  'application/jsonp',
  '',
];
const HEADERS: [string, () => string][] = [
  ['authorization', () => 'Bearer caller-key'],
  ['cookie', () => 'a=b; agn_session=x'],
  ['x-api-key', () => 'k'],
  ['openai-organization', () => 'org-x'],
  ['x-forwarded-for', () => '203.0.113.9'],
  ['forwarded', () => 'for=x'],
  ['x-ai-routing-candidate', () => 'spoofed'],
  ['x-ai-routing-request-id', () => '0'.repeat(32)],
  ['x-ai-routing-revision', () => 'zz'],
  ['x-ai-provider-attribution', () => 'spoof'],
  ['x-gateway-model-name', () => 'm1'],
  ['x-session-id', () => 's'],
  ['accept-encoding', () => 'gzip'],
  ['x-filler', () => 'f'.repeat(2_000)],
];

function mutatePath(random: Random, path: string): string {
  switch (random.int(10)) {
    case 0:
      return path.replace(
        '/v1/',
        random.pick(['/v1/../v1/', '/v1/./', '/v1//', '/v1/%2e/', '/v1/%2E%2e/', '/v1/.%2e/']),
      );
    case 1:
      return `${path}${random.pick(['/..', '/.', '/', '//', '%2f..', '?a=1', '?model=m2', '#frag', '%00', '/%2e%2e'])}`;
    case 2:
      return `/v1/responses/${random.pick(['..', '.', '%2e%2e', 'a'.repeat(300), 'x%20y', 'r..1', '.hidden', '\u00e9'])}${random.pick(['', '/cancel', '/input_items', '/other'])}`;
    case 3:
      return `${path}?${'q='.repeat(random.int(50))}`;
    default:
      return path;
  }
}

function nest(random: Random, depth: number): string {
  const open = random.chance(0.5) ? '[' : '{"a":';
  const close = open === '[' ? ']' : '}';
  return `${open.repeat(depth)}1${close.repeat(depth)}`;
}

function makeBody(random: Random): Buffer | string | undefined {
  const model = random.pick(MODELS);
  const base = chatBody(
    typeof model === 'string' || random.chance(0.9) ? (model as string) : 'm1',
    random.chance(0.2) ? { stream: true } : {},
  );
  const text = JSON.stringify(base);
  switch (random.int(14)) {
    case 0:
      return undefined;
    case 1:
      return '';
    case 2: // Byte mutations of a valid body.
      {
        const bytes = Buffer.from(text);
        for (let k = random.int(4) + 1; k > 0; k--) bytes[random.int(bytes.length)] = random.int(256);
        return bytes;
      }
    case 3:
      return `\ufeff${text}`;
    case 4:
      return text.replace('{', `{"model":"${random.pick(['m1', 'm2'])}",`);
    case 5:
      return text.replace(
        '"messages"',
        `"deep":${nest(random, random.pick([MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH + 1, 1_000, 5_000]))},"messages"`,
      );
    case 6:
      return text.slice(0, random.int(text.length));
    case 7:
      return random.bytes(random.int(512));
    case 8:
      return `${text}${random.pick(['x', ' ', '\n', '{}', ',', '\u0000'])}`;
    case 9:
      return text.replace('"hello"', JSON.stringify('y'.repeat(random.int(MAX_BODY_BYTES + 1_000))));
    case 10:
      return random.pick([
        '[]',
        'null',
        '"m1"',
        '1',
        '{',
        '}',
        '{"model":}',
        '{"model":"m1",}',
        '{"m\\u006fdel":"m1"}',
        '{"model":"m\\u0031"}',
      ]);
    default:
      return text;
  }
}

interface Outcome {
  status: number;
  text: string;
}

async function viaPool(pool: Pool, random: Random, provider: boolean): Promise<Outcome> {
  const method = random.pick(METHODS);
  const path = mutatePath(random, random.pick(PATHS));
  const headers: Record<string, string> = provider ? grid.hop() : {};
  if (provider && random.chance(0.1))
    headers['x-ai-routing-candidate'] = random.pick(['nope', '', 'x'.repeat(300)]) || 'y';
  const contentType = random.pick(CONTENT_TYPES);
  if (contentType !== '') headers['content-type'] = contentType;
  for (const [name, value] of HEADERS) if (random.chance(0.08)) headers[name] = value();
  const body = method === 'GET' || method === 'HEAD' ? undefined : makeBody(random);
  // A gateway that never answers fails the case instead of hanging the suite.
  const res = await pool.request({
    path,
    method: method as 'POST',
    headers,
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(5_000),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

function rawCase(random: Random, hop: string): string {
  const body = JSON.stringify(chatBody('m1'));
  const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${hop}`;
  switch (random.int(14)) {
    case 0:
      return `${head}Transfer-Encoding: ${random.pick(['xchunked', 'chunked, identity', 'gzip', ' chunked', 'chunked\u000b', 'identity'])}\r\n\r\n${body}`;
    case 1:
      return `${head}Transfer-Encoding: chunked\r\n\r\n${random.pick(['zz', '-1', 'fffffffffffffffff', '5;ext', ''])}\r\n${body}\r\n0\r\n\r\n`;
    case 2:
      return `${head}Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`;
    case 3:
      return `${head}Content-Length: ${body.length}\r\nContent-Length: ${body.length + 1}\r\n\r\n${body}`;
    case 4:
      return `${head}Content-Length: ${random.pick(['-1', 'abc', '1e3', '99999999999999999999', `${body.length} `])}\r\n\r\n${body}`;
    case 5:
      return `${random.pick(['GET', 'G ET', 'get', '\u0000', 'POST\t'])} /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`;
    case 6:
      return `GET /v1/models HTTP/${random.pick(['1.0', '2.0', '0.9', '1.1x', '9'])}\r\nHost: x\r\n\r\n`;
    case 7:
      return `GET /v1/models HTTP/1.1\nHost: x\n\n`;
    case 8:
      return `GET /v1/models HTTP/1.1\r\nHost: x\r\nx-big: ${'b'.repeat(random.pick([1_000, 9_000, 20_000]))}\r\n\r\n`;
    case 9:
      return `${head}Content-Length: ${body.length}\r\n\r\n${body}GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`;
    case 10:
      return `GET ${random.pick(['/v1/../admin', '*', 'http://evil/v1/models', '/v1/models\u0000', '/v1/mod els', '//v1/models'])} HTTP/1.1\r\nHost: x\r\n\r\n`;
    case 11:
      return `${head}Content-Length: ${body.length}\r\n${random.pick(['bad header', 'Expect: 100-continue', 'Expect: nonsense', ': empty', 'x-a:\u0000'])}\r\n\r\n${body}`;
    case 12:
      return random.bytes(random.int(200) + 1).toString('latin1');
    default:
      return `${head}Content-Length: ${body.length}\r\nconnection: close\r\n\r\n${body}`;
  }
}

it(`survives ${REQUESTS} generated requests against a live consumer and provider gateway`, async () => {
  console.log(`http fuzz seed ${SEED} (FUZZ_SEED=${SEED} reproduces)`);
  const started = performance.now();
  const consumerPool = new Pool(`http://127.0.0.1:${grid.consumerPort}`, { connections: 8, pipelining: 1 });
  const providerPool = new Pool(`https://127.0.0.1:${grid.providerPort}`, {
    connections: 8,
    connect: { ca: grid.pki.caPem, cert: grid.pki.edgePem.cert, key: grid.pki.edgePem.key, servername: PROVIDER_SNI },
  });
  // Warm-up: the figures below are compared with a gateway that has already served both paths.
  await runPool(200, CONCURRENCY, async (i) => {
    await (i % 2 === 0 ? consumerPool : providerPool)
      .request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(i % 2 === 0 ? {} : grid.hop()) },
        body: JSON.stringify(chatBody('m1')),
      })
      .then((r) => r.body.text());
  });
  const before = {
    consumer: await gatewayHealth(grid.consumerAdmin),
    provider: await gatewayHealth(grid.providerAdmin),
  };
  const lag = { consumer: watchLoopLag(grid.consumerAdmin), provider: watchLoopLag(grid.providerAdmin) };

  const statuses = new Map<string, number>();
  const failures: string[] = [];
  let raw = 0;
  await runPool(REQUESTS, CONCURRENCY, async (index) => {
    const random = seededRandom((SEED + Math.imul(index + 1, 0x9e3779b1)) >>> 0);
    const provider = random.chance(0.5);
    const where = `${provider ? 'provider' : 'consumer'} case ${index} (FUZZ_SEED=${SEED})`;
    let outcome: Outcome;
    if (random.chance(RAW_SHARE)) {
      raw++;
      const hop = provider
        ? Object.entries(grid.hop())
            .map(([k, v]) => `${k}: ${v}\r\n`)
            .join('')
        : '';
      const reply = await rawExchange(provider ? grid.providerPort : grid.consumerPort, rawCase(random, hop), {
        waitMs: 300,
        ...(provider ? { tls: grid.pki } : {}),
      });
      outcome = { status: rawStatus(reply), text: reply.text };
    } else {
      try {
        outcome = await viaPool(provider ? providerPool : consumerPool, random, provider);
      } catch (error) {
        failures.push(`${where}: client error ${(error as Error).message}`);
        return;
      }
    }
    const key = `${provider ? 'p' : 'c'}${outcome.status}`;
    statuses.set(key, (statuses.get(key) ?? 0) + 1);
    if (outcome.status === 500) failures.push(`${where}: 500 ${outcome.text.slice(0, 200)}`);
    if (outcome.text.includes(GRID_TOKEN)) failures.push(`${where}: the provider token is in a response`);
  });
  const worstLag = { consumer: await lag.consumer.stop(), provider: await lag.provider.stop() };
  await consumerPool.close();
  await providerPool.close();

  // Afterwards: alive, serving, and back within bounds.
  expect(grid.consumer.proc.exitCode).toBeNull();
  expect(grid.provider.proc.exitCode).toBeNull();
  expect(
    (await call(`http://127.0.0.1:${grid.consumerPort}/v1/chat/completions`, { body: chatBody('m1') })).status,
  ).toBe(200);
  await new Promise((r) => setTimeout(r, 300));
  const after = {
    consumer: await gatewayHealth(grid.consumerAdmin),
    provider: await gatewayHealth(grid.providerAdmin),
  };
  const logs = grid.consumer.stdout() + grid.consumer.stderr() + grid.provider.stdout() + grid.provider.stderr();
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const byStatus = [...statuses.entries()]
    .sort()
    .map(([k, v]) => `${k}:${v}`)
    .join(' ');
  console.log(
    `http fuzz: seed ${SEED}, ${REQUESTS} requests (${raw} raw framing) in ${seconds} s; ` +
      `consumer rss ${mib(before.consumer.rssBytes)}→${mib(after.consumer.rssBytes)} MiB fds ${before.consumer.openFds}→${after.consumer.openFds} max loop lag ${worstLag.consumer.toFixed(0)} ms; ` +
      `provider rss ${mib(before.provider.rssBytes)}→${mib(after.provider.rssBytes)} MiB fds ${before.provider.openFds}→${after.provider.openFds} max loop lag ${worstLag.provider.toFixed(0)} ms; ` +
      `statuses (c consumer, p provider) ${byStatus}; failures ${failures.length}`,
  );
  expect(failures.slice(0, 20)).toEqual([]);
  expect(logs).not.toContain(GRID_TOKEN);
  for (const role of ['consumer', 'provider'] as const) {
    expect(after[role].rssBytes - before[role].rssBytes, `${role} RSS growth`).toBeLessThan(RSS_BOUND);
    expect(after[role].openFds - before[role].openFds, `${role} open fds`).toBeLessThan(FD_BOUND);
    expect(worstLag[role], `${role} event-loop stall`).toBeLessThan(stallReadingBound(LAG_BOUND_MS));
  }
}, 120_000);
