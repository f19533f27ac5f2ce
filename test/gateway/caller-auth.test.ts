// caller_auth: caller keys minted by `agn key mint`, checked against salted hashes at a real consumer gateway in
// front of a real upstream that records what reaches it. Missing, unknown, malformed and revoked keys get
// OpenAI's 401; a reload (SIGHUP) applies a revocation at once (caller-keys-reload.test.ts follows the file without
// one); the key never travels upstream; neither key nor hash ever appears in a log line, a metric or an error body.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallerKeyTable, callerKeysProblems, mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { ConfigError, resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { ROOT, call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';

const NODE = process.execPath;
const AGN = join(ROOT, 'daemons/cli/agn.ts');

function agn(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(NODE, [AGN, ...args], { encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe('caller key table', () => {
  const a = mintCallerKey('tenant-a');
  const b = mintCallerKey('tenant-b');
  const table = new CallerKeyTable({ keys: [a.entry, { ...b.entry, revoked: true }] });

  it('accepts a minted key and names its tenant', () => {
    expect(a.key).toMatch(/^agn_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    expect(table.verify(a.key)).toEqual({ ok: true, tenant: 'tenant-a', id: a.entry.id });
  });

  it('refuses a revoked key, a key with a known id and another secret, an unknown id and a malformed key', () => {
    expect(table.verify(b.key)).toEqual({ ok: false, reason: 'revoked' });
    const forged = `${a.key.slice(0, 21)}${'A'.repeat(43)}`;
    expect(table.verify(forged)).toEqual({ ok: false, reason: 'unknown' });
    expect(table.verify(mintCallerKey('tenant-a').key)).toEqual({ ok: false, reason: 'unknown' });
    for (const bad of ['', 'sk-abc', `${a.key}x`, a.key.toUpperCase(), `agn_${a.entry.id}_short`]) {
      expect(table.verify(bad).ok).toBe(false);
    }
  });

  it('stores a salted hash: the same key under two salts hashes differently, and the key is nowhere in the entry', () => {
    expect(JSON.stringify(a.entry)).not.toContain(a.key.slice(21));
    const again = mintCallerKey('tenant-a');
    expect(again.entry.salt).not.toBe(a.entry.salt);
    expect(again.entry.hash).not.toBe(a.entry.hash);
  });

  it('names what is wrong with a keys file without quoting a hash', () => {
    expect(callerKeysProblems({ keys: [a.entry] })).toEqual([]);
    expect(callerKeysProblems({ keys: [a.entry, a.entry] })).toEqual(['/keys/1: id repeats an earlier entry']);
    expect(callerKeysProblems({ keys: [{ ...a.entry, hash: 'zz' }] })[0]).toMatch(
      /^\/keys\/0\/hash: must match pattern/,
    );
    expect(callerKeysProblems({ keys: [{ ...a.entry, hash: 'zz' }] })[0]).not.toContain(a.entry.salt);
    expect(callerKeysProblems({ keys: [{ ...a.entry, extra: 1 }] })[0]).toBe(
      '/keys/0: must NOT have additional properties (extra)',
    );
    expect(callerKeysProblems([])[0]).toMatch(/^\/: must be object/);
  });
});

describe('agn key', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('agn-key'));
  });
  afterAll(async () => cleanup());

  it('mints: prints the key once on stdout, writes only its hash (0600), appends to an existing file', () => {
    const file = join(dir, 'keys.json');
    const first = agn('key', 'mint', '--tenant', 'tenant-a', '--keys-file', file);
    expect(first.status).toBe(0);
    const key = first.stdout.trim();
    expect(key).toMatch(/^agn_[0-9a-f]{16}_/);
    expect(first.stderr).not.toContain(key);
    const second = agn('key', 'mint', '--tenant', 'tenant-b', '--keys-file', file);
    expect(second.status).toBe(0);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(key.slice(21));
    const document = JSON.parse(text) as { keys: { tenant: string }[] };
    expect(document.keys.map((k) => k.tenant)).toEqual(['tenant-a', 'tenant-b']);
    expect(new CallerKeyTable(document as never).verify(key)).toMatchObject({ ok: true, tenant: 'tenant-a' });
  });

  it('revokes by id; refuses an unknown id, a bad tenant and missing flags with the documented exit codes', () => {
    const file = join(dir, 'revoke.json');
    const key = agn('key', 'mint', '--tenant', 't1', '--keys-file', file).stdout.trim();
    const id = key.slice(4, 20);
    expect(agn('key', 'revoke', '--id', id, '--keys-file', file).status).toBe(0);
    expect(new CallerKeyTable(JSON.parse(readFileSync(file, 'utf8'))).verify(key)).toEqual({
      ok: false,
      reason: 'revoked',
    });
    const unknown = agn('key', 'revoke', '--id', '0000000000000000', '--keys-file', file);
    expect([unknown.status, unknown.stderr]).toEqual([1, `agn: ${file}: no key with id "0000000000000000"\n`]);
    const badTenant = agn('key', 'mint', '--tenant', 'has space', '--keys-file', file);
    expect(badTenant.status).toBe(2);
    expect(badTenant.stderr.split('\n').length).toBe(2);
    expect(agn('key', 'mint', '--keys-file', file).status).toBe(2);
    const help = agn('key', 'mint', '--help');
    expect([help.status, help.stdout.startsWith('usage: agn key mint --tenant TENANT --keys-file FILE')]).toEqual([
      0,
      true,
    ]);
  });
});

describe('caller_auth config', () => {
  const base = (filters: Record<string, unknown>[]): Record<string, unknown> => ({
    ...consumerConfig({ overlayPath: '/tmp/o.json', clusters: [{ name: 'c', endpoints: ['127.0.0.1:1'] }] }),
    filter_chains: [{ name: 'main', filters }],
  });
  const route = { filter: 'intelligent_route', overlay_file: '/tmp/o.json' };
  const lb = { filter: 'load_balancer', clusters: [{ name: 'c', endpoints: ['127.0.0.1:1'] }] };
  const auth = { filter: 'caller_auth', keys_file: 'keys.json' };

  it('is accepted first in a consumer pipeline', () => {
    expect(resolveConfig(base([auth, route, lb]), 'c.json').role).toBe('consumer');
  });

  it('is refused anywhere else, without a keys_file, or with a traversing path', () => {
    expect(() => resolveConfig(base([route, auth, lb]), 'c.json')).toThrow(
      /caller_auth must be the first filter \(found intelligent_route first\)/,
    );
    expect(() => resolveConfig(base([{ filter: 'caller_auth' }, route, lb]), 'c.json')).toThrow(
      new ConfigError('c.json: missing key "keys_file" at /filter_chains/0/filters/0'),
    );
    expect(() => resolveConfig(base([{ ...auth, keys_file: '../x' }, route, lb]), 'c.json')).toThrow(/keys_file/);
  });
});

describe('caller_auth at a consumer gateway', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let upstream: Server;
  const seen: IncomingHttpHeaders[] = [];
  let gateway: GatewayInstance;
  let base: string;
  let keysFile: string;
  const logs: string[] = [];
  const a = mintCallerKey('tenant-a');
  const b = mintCallerKey('tenant-b');

  const chat = (headers: Record<string, string>) =>
    call(`${base}/v1/chat/completions`, { body: { model: 'm1', messages: [] }, headers });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('caller-auth'));
    upstream = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'backend-id-1' });
        res.end(
          JSON.stringify({
            id: 'x',
            object: 'chat.completion',
            choices: [],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    keysFile = join(dir, 'keys.json');
    writeFileSync(keysFile, JSON.stringify({ keys: [a.entry, b.entry] }));
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(overlayPath, payload([candidate('m1', 'west', 'c')]));
    const config = consumerConfig({
      overlayPath,
      clusters: [{ name: 'c', endpoints: [`127.0.0.1:${(upstream.address() as AddressInfo).port}`] }],
    });
    const chain = (config['filter_chains'] as { filters: unknown[] }[])[0]!;
    chain.filters.unshift({ filter: 'caller_auth', keys_file: 'keys.json' });
    const logger = createLogger({
      name: 'gateway',
      level: 'debug',
      destination: { write: (line: string) => void logs.push(line) },
    });
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
    await waitFor('overlay', () => gateway.overlay?.current() ?? undefined);
  });

  afterAll(async () => {
    const metrics = (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
    const status = (await call(`http://127.0.0.1:${gateway.adminPort}/status`)).text;
    await gateway.close();
    await new Promise<void>((r) => upstream.close(() => r()));
    for (const text of [logs.join(''), metrics, status]) {
      for (const secret of [a.key, b.key, a.entry.hash, b.entry.hash, a.entry.salt]) expect(text).not.toContain(secret);
    }
    await cleanup();
  });

  it('answers OpenAI-shaped 401s for a missing, unknown or malformed key, before anything reaches the upstream', async () => {
    const before = seen.length;
    const missing = await chat({});
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer');
    expect(missing.json()).toEqual({
      error: {
        message: expect.stringMatching(/didn't provide an API key/),
        type: 'invalid_request_error',
        code: 'missing_api_key',
      },
    });
    const refusedHeaders: Record<string, string>[] = [
      { authorization: `Bearer ${mintCallerKey('tenant-a').key}` },
      { authorization: 'Bearer sk-not-ours' },
      { authorization: `Basic ${a.key}` },
      // The last character changed: a 32-byte base64url key ends in one of 16 characters, 'A' among them.
      { 'x-api-key': `${a.key.slice(0, -1)}${a.key.endsWith('A') ? 'B' : 'A'}` },
    ];
    for (const headers of refusedHeaders) {
      const reply = await chat(headers);
      expect(reply.status).toBe(401);
      expect(reply.json().error.code).toBe('invalid_api_key');
      expect(reply.text).not.toContain(a.key.slice(21, 40));
    }
    const models = await call(`${base}/v1/models`);
    expect(models.status).toBe(401);
    expect(seen.length).toBe(before);
  });

  it('lets a valid key through as Bearer or x-api-key and never forwards it', async () => {
    expect((await chat({ authorization: `Bearer ${a.key}` })).status).toBe(200);
    expect((await chat({ 'x-api-key': b.key })).status).toBe(200);
    expect((await call(`${base}/v1/models`, { headers: { authorization: `Bearer ${a.key}` } })).status).toBe(200);
    const last = seen.slice(-2);
    expect(last).toHaveLength(2);
    for (const headers of last) {
      expect(headers['authorization']).toBeUndefined();
      expect(headers['x-api-key']).toBeUndefined();
      expect(JSON.stringify(headers)).not.toContain('agn_');
    }
  });

  it('answers x-request-id on every response (errors too), keeps the backend id beside it, and names the routed site', async () => {
    const refused = await chat({});
    const served = await chat({ authorization: `Bearer ${b.key}` });
    const missing = await call(`${base}/nope`, { headers: { authorization: `Bearer ${b.key}` } });
    const ids = [refused, served, missing].map((r) => r.headers['x-request-id']);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(3);
    expect(served.headers['x-upstream-request-id']).toBe('backend-id-1');
    expect(served.headers['x-agn-routed-site']).toBe('west');
    expect(refused.headers['x-agn-routed-site']).toBeUndefined();
  });

  it('stops a revoked key as soon as a reload returns, and keeps the last good keys when the file turns bad', async () => {
    expect((await chat({ authorization: `Bearer ${a.key}` })).status).toBe(200);
    expect(agn('key', 'revoke', '--id', a.entry.id, '--keys-file', keysFile).status).toBe(0);
    await gateway.reloadFiles();
    const revoked = await chat({ authorization: `Bearer ${a.key}` });
    expect([revoked.status, revoked.json().error.code]).toEqual([401, 'invalid_api_key']);
    expect((await chat({ authorization: `Bearer ${b.key}` })).status).toBe(200);

    writeFileSync(keysFile, '{"keys": [');
    await gateway.reloadFiles();
    expect((await chat({ authorization: `Bearer ${b.key}` })).status).toBe(200);
    expect((await chat({ authorization: `Bearer ${a.key}` })).status).toBe(401);
    expect(logs.join('')).toContain('caller_keys unusable; the previous one stays in force');
  });
});
