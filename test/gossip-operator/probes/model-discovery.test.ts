import { afterEach, describe, expect, it } from 'vitest';
import { isBlockedAddress, isBlockedHostname } from '../../../daemons/gossip-operator/probes/blocked-addresses.ts';
import { discoverModels, parseModelList } from '../../../daemons/gossip-operator/probes/model-discovery.ts';
import { type TestServer, startServer } from './servers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

// The test servers can only live on loopback, which the default policy blocks; this policy blocks nothing else.
const allowLoopback = (address: string) => isBlockedAddress(address) && !address.startsWith('127.');

describe('model discovery address policy (seed 001 "Discovery refuses loopback, localhost, link-local, unspecified, and cloud metadata addresses")', () => {
  it.each([
    '127.0.0.1',
    '127.8.9.10',
    '0.0.0.0',
    '169.254.169.254',
    '169.254.170.23',
    '::1',
    '::',
    'fe80::1',
    '[fe80::abcd]',
    'fd00:ec2::254',
    'fd00:ec2::23',
    '::ffff:127.0.0.1',
    '::ffff:169.254.169.254',
  ])('blocks %s', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  it.each(['10.1.2.3', '192.168.1.1', '8.8.8.8', 'fd12:3456::1', '2001:db8::1', 'fd00:ec2::1'])(
    'allows %s (other unique-local IPv6 too)',
    (address) => {
      expect(isBlockedAddress(address)).toBe(false);
    },
  );

  it.each(['localhost', 'LOCALHOST', 'api.localhost', 'metadata.google.internal'])('blocks the hostname %s', (host) => {
    expect(isBlockedHostname(host)).toBe(true);
  });

  it('reports a literal blocked IP or localhost URL as config, without connecting', async () => {
    expect(await discoverModels({ endpoint: 'http://127.0.0.1:9', timeoutMs: 500 })).toMatchObject({
      outcome: 'config',
    });
    expect(await discoverModels({ endpoint: 'http://localhost:9', timeoutMs: 500 })).toMatchObject({
      outcome: 'config',
    });
    expect(await discoverModels({ endpoint: 'http://[::1]:9', timeoutMs: 500 })).toMatchObject({ outcome: 'config' });
  });

  it('reports a hostname that resolves to a blocked address as unreachable', async () => {
    const resolve = async () => [{ address: '169.254.169.254', family: 4 }];
    expect(await discoverModels({ endpoint: 'http://models.example:80', resolve, timeoutMs: 500 })).toMatchObject({
      outcome: 'unreachable',
    });
  });

  it('requires HTTPS when a bearer token is configured', async () => {
    expect(await discoverModels({ endpoint: 'http://models.example', bearerToken: 't', timeoutMs: 500 })).toMatchObject(
      { outcome: 'config' },
    );
  });
});

describe('model discovery response bounds', () => {
  it('reads data[].id from a real server, connecting to the vetted address while keeping the URL host', async () => {
    const server = await startServer((_q, res) =>
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'a' }, { id: 'b' }] })),
    );
    servers.push(server);
    const port = new URL(server.url).port;
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const result = await discoverModels({
      endpoint: `http://models.example:${port}`,
      resolve,
      isBlocked: allowLoopback,
      timeoutMs: 2000,
    });
    expect(result).toEqual({ outcome: 'ok', models: ['a', 'b'], url: `http://models.example:${port}/v1/models` });
    expect(server.requests[0]?.headers.host).toBe(`models.example:${port}`);
  });

  it.each([
    ['not JSON', 'nope', /not JSON/],
    ['no data array', '{"models":[]}', /no data\[\] array/],
    ['a blank id', '{"data":[{"id":" "}]}', /blank/],
    ['a duplicate id', '{"data":[{"id":"a"},{"id":"a"}]}', /repeats/],
    ['a control character', '{"data":[{"id":"a\\u0007"}]}', /control characters/],
    ['an id over 256 bytes', JSON.stringify({ data: [{ id: 'x'.repeat(257) }] }), /longer than 256/],
    [
      '257 models',
      JSON.stringify({ data: Array.from({ length: 257 }, (_, i) => ({ id: `m${i}` })) }),
      /257 models, limit is 256/,
    ],
  ])('rejects %s as a whole', (_name, body, message) => {
    expect(parseModelList(Buffer.from(body))).toMatch(message);
  });

  it('accepts an empty list (the backend serves no models)', () => {
    expect(parseModelList(Buffer.from('{"data":[]}'))).toEqual([]);
  });

  it.each([
    [500, 'http_status'],
    [401, 'credential'],
    [403, 'credential'],
  ] as const)('classifies HTTP %d as %s', async (status, outcome) => {
    const server = await startServer((_q, res) => {
      res.writeHead(status);
      res.end();
    });
    servers.push(server);
    expect(await discoverModels({ endpoint: server.url, isBlocked: allowLoopback, timeoutMs: 2000 })).toMatchObject({
      outcome,
    });
  });

  it('abandons a response over 1 MiB as invalid_response', async () => {
    const server = await startServer((_q, res) => res.end(`{"data":[${'{"id":"x"},'.repeat(120_000)}]}`));
    servers.push(server);
    expect(await discoverModels({ endpoint: server.url, isBlocked: allowLoopback, timeoutMs: 5000 })).toMatchObject({
      outcome: 'invalid_response',
    });
  });
});
