// The consumer/edge gateway under change and abuse: overlay hot reload and last-known-good, the Kubernetes
// ..data symlink swap, cold start, huge bodies and heads, slow clients, hanging and resetting upstreams,
// streaming pass-through and client disconnects.
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createLogger } from '../../daemons/shared/log.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { TOKEN, useConsumerFixture, withCred } from './consumer-fixture.ts';
import {
  call,
  candidate,
  chatBody,
  consumerConfig,
  metricSample,
  payload,
  tempDir,
  waitFor,
  writeOverlay,
  writeRaw,
} from './helpers.ts';

const f = useConsumerFixture();

/** grid_gateway_ready as the admin port's /metrics reports it now. */
async function readyGauge(adminPort: number): Promise<number> {
  const value = metricSample((await call(`http://127.0.0.1:${adminPort}/metrics`)).text, 'grid_gateway_ready');
  if (value === undefined) throw new Error('/metrics has no grid_gateway_ready');
  return value;
}

describe('overlay hot reload', () => {
  it('swaps to a new revision and reports accepted and serving revisions', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-a');
    const revision = await f.useOverlay([withCred(candidate('m1', 'b', 'cb'))]);
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-b');
    const text = (await call(`http://127.0.0.1:${f.gateway.adminPort}/metrics`)).text;
    expect(text).toContain(`grid_gateway_overlay_accepted_revision_info{revision="${revision}",format="envelope"} 1`);
    expect(text).toContain(`grid_gateway_overlay_serving_revision_info{revision="${revision}"} 1`);
  });

  it('keeps the last-known-good snapshot when the replacement is invalid, and counts the reason', async () => {
    const good = await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    const cases: [string, string][] = [
      ['malformed', '{"schema_version": "1.0.0", "revision": '],
      [
        'scope_mismatch',
        JSON.stringify({
          ...JSON.parse(await readFile(f.overlayPath, 'utf8')),
          scope: { network: 'grid', gateway: 'someone-else', namespace: 'grid-system', local_site: 'west' },
        }),
      ],
    ];
    for (const [reason, content] of cases) {
      const before = await f.metric(
        new RegExp(`grid_gateway_overlay_reloads_total\\{outcome="rejected",reason="${reason}"\\}`),
      );
      await writeRaw(f.overlayPath, content);
      await waitFor(
        `${reason} rejection`,
        async () => (await f.metric(new RegExp(`outcome="rejected",reason="${reason}"`))) > before,
      );
      expect(f.gateway.overlay?.current()?.revision).toBe(good);
      expect((await f.chat('m1')).status).toBe(200);
      expect(f.gateway.isReady()).toBe(true);
    }
  });

  it('does not swap the snapshot when only the timestamps change (same revision), so round-robin continues', async () => {
    const list = [
      withCred(candidate('m1', 'a', 'ca', { selection_group: 0 })),
      withCred(candidate('m1', 'b', 'cb', { selection_group: 0 })),
    ];
    await f.useOverlay(list, 'roundRobin');
    const snapshot = f.gateway.overlay?.current();
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-a');
    const before = await f.metric(/outcome="unchanged",reason="same_revision"/);
    await new Promise((r) => setTimeout(r, 5));
    await writeOverlay(f.overlayPath, payload(list, 'roundRobin'));
    await waitFor(
      'unchanged revision',
      async () => (await f.metric(/outcome="unchanged",reason="same_revision"/)) > before,
    );
    expect(f.gateway.overlay?.current()).toBe(snapshot);
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-b');
  });
});

describe('bad input and failing upstreams', () => {
  it('answers 413 for a body over the limit, whether declared or streamed', async () => {
    const big = JSON.stringify(chatBody('m1', { pad: 'x'.repeat(5000) }));
    expect((await call(`${f.base}/v1/chat/completions`, { body: big })).status).toBe(413);
    const chunked = await request(`${f.base}/v1/chat/completions`, {
      method: 'POST',
      body: Readable.from(Array.from({ length: 10 }, () => Buffer.alloc(1000, 0x20))),
    });
    expect(chunked.statusCode).toBe(413);
    await chunked.body.dump();
  });

  it('answers 431 for a request head over the limit and stays up', async () => {
    const reply = await request(`${f.base}/v1/models`, { headers: { 'x-big': 'a'.repeat(10_000) } });
    expect(reply.statusCode).toBe(431);
    await reply.body.dump();
    expect((await call(`${f.base}/v1/models`)).status).toBe(200);
  });

  it('drops a slow-loris client that never finishes its headers', async () => {
    const socket = connect(f.gateway.listeners[0]!.port, '127.0.0.1');
    const started = Date.now();
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: ');
    const drip = setInterval(() => socket.writable && socket.write('a'), 100);
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    clearInterval(drip);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });

  it('answers 504 when the upstream never answers, within the cluster response timeout', async () => {
    await f.useOverlay([withCred(candidate('m1', 'c', 'cslow'))]);
    f.simC.state.fault = 'hang';
    const started = Date.now();
    const reply = await f.chat('m1');
    expect(reply.status).toBe(504);
    expect(reply.json().error.code).toBe('upstream_timeout');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('answers 502 when the upstream resets the connection before responding', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    f.simA.state.fault = 'reset';
    const reply = await f.chat('m1');
    expect(reply.status).toBe(502);
    expect(reply.json().error.type).toBe('upstream_error');
    f.simA.state.fault = 'none';
    expect((await f.chat('m1')).status).toBe(200);
  });

  it('cuts the client connection when the upstream resets mid-stream (no silent truncation)', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    Object.assign(f.simA.state, { fault: 'reset_mid_stream', completion_tokens: 20, tokens_per_second: 200 });
    const res = await request(`${f.base}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chatBody('m1', { stream: true })),
    });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow();
  });
});

describe('streaming', () => {
  it('passes SSE chunks through as they are produced, not buffered to the end', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    Object.assign(f.simA.state, { completion_tokens: 10, tokens_per_second: 20 });
    const started = Date.now();
    const res = await request(`${f.base}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chatBody('m1', { stream: true })),
    });
    expect(res.headers['content-type']).toBe('text/event-stream');
    let firstAt = 0;
    let text = '';
    for await (const chunk of res.body) {
      if (firstAt === 0) firstAt = Date.now() - started;
      text += chunk.toString();
    }
    const total = Date.now() - started;
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(total).toBeGreaterThanOrEqual(450);
    expect(firstAt).toBeLessThan(total - 300);
  });

  it('aborts the upstream request when the client disconnects', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    Object.assign(f.simA.state, { completion_tokens: 200, tokens_per_second: 20 });
    const controller = new AbortController();
    const res = await request(`${f.base}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chatBody('m1', { stream: true })),
      signal: controller.signal,
    });
    for await (const _chunk of res.body) break;
    const running = async (): Promise<number | undefined> =>
      metricSample(
        (await call(`http://127.0.0.1:${f.simA.port}/metrics`)).text,
        'vllm:num_requests_running{model_name="m1",engine="0"}',
      );
    expect(await running()).toBe(1);
    controller.abort();
    // The sim would stream for 10 s; its engine must drop the request as soon as the gateway aborts upstream.
    await waitFor('upstream aborted', async () => ((await running()) === 0 ? true : undefined), 3_000);
  });

  it('routes the Responses API, streaming and not', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    const plain = await call(`${f.base}/v1/responses`, { body: { model: 'm1', input: 'hello' } });
    expect(plain.status).toBe(200);
    expect(plain.json().object).toBe('response');
    const stream = await call(`${f.base}/v1/responses`, { body: { model: 'm1', input: 'hello', stream: true } });
    expect(stream.text).toContain('event: response.output_text.delta');
    expect(stream.text).toContain('event: response.completed');
    const id = plain.json().id as string;
    const fetched = await call(`${f.base}/v1/responses/${id}`, { headers: { 'x-gateway-model-name': 'm1' } });
    expect(fetched.status).toBe(200);
    expect(fetched.json().id).toBe(id);
  });
});

describe('Kubernetes projected volume', () => {
  it('follows the ..data symlink swap of a ConfigMap mount', async () => {
    const { dir: mount, cleanup: mountCleanup } = await tempDir('projected');
    const publish = async (version: string, candidates: OverlayCandidate[]): Promise<string> => {
      const dataDir = join(mount, `..${version}`);
      await mkdir(dataDir);
      const revision = await writeOverlay(join(dataDir, 'routing-overlay.json'), payload(candidates));
      await symlink(`..${version}`, join(mount, '..data_tmp'));
      await rename(join(mount, '..data_tmp'), join(mount, '..data'));
      return revision;
    };
    const first = await publish('2026_11_29_v1', [withCred(candidate('m1', 'a', 'ca'))]);
    await symlink('..data/routing-overlay.json', join(mount, 'routing-overlay.json'));
    const logger = createLogger({ name: 'gateway', level: 'silent' });
    const projected = await startGateway(
      resolveConfig(
        consumerConfig({
          overlayPath: join(mount, 'routing-overlay.json'),
          credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', value: TOKEN }],
          clusters: [
            { name: 'ca', endpoints: [`127.0.0.1:${f.simA.port}`] },
            { name: 'cb', endpoints: [`127.0.0.1:${f.simB.port}`] },
          ],
        }),
        'c.json',
      ),
      { configDir: mount, logger, processMetrics: false, overlayPollIntervalMs: 0 },
    );
    try {
      expect(projected.overlay?.current()?.revision).toBe(first);
      const second = await publish('2026_11_29_v2', [withCred(candidate('m1', 'b', 'cb'))]);
      await waitFor('swap through ..data', () => projected.overlay?.current()?.revision === second);
      const reply = await call(`http://127.0.0.1:${projected.listeners[0]!.port}/v1/chat/completions`, {
        body: chatBody('m1'),
      });
      expect(reply.headers['x-sim-provider']).toBe('sim-b');
    } finally {
      await projected.close();
      await mountCleanup();
    }
  });
});

describe('cold start', () => {
  it('stays not ready on a missing or invalid overlay, and becomes ready once a valid one arrives; grid_gateway_ready says so at each scrape', async () => {
    const { dir: coldDir, cleanup: coldCleanup } = await tempDir('cold');
    const path = join(coldDir, 'overlay.json');
    await writeFile(path, '{"not": "an overlay"');
    const logger = createLogger({ name: 'gateway', level: 'silent' });
    const cold = await startGateway(
      resolveConfig(
        consumerConfig({ overlayPath: path, clusters: [{ name: 'ca', endpoints: [`127.0.0.1:${f.simA.port}`] }] }),
        'c.json',
      ),
      { configDir: coldDir, logger, processMetrics: false, overlayPollIntervalMs: 0 },
    );
    try {
      expect(cold.isReady()).toBe(false);
      expect((await call(`http://127.0.0.1:${cold.adminPort}/readyz`)).status).toBe(503);
      expect((await call(`http://127.0.0.1:${cold.adminPort}/livez`)).status).toBe(200);
      expect(await readyGauge(cold.adminPort!)).toBe(0);
      const reply = await call(`http://127.0.0.1:${cold.listeners[0]!.port}/v1/chat/completions`, {
        body: chatBody('m1'),
      });
      expect(reply.status).toBe(503);
      expect(reply.json().error.code).toBe('overlay_not_loaded');
      await writeOverlay(path, payload([candidate('m1', 'a', 'ca')]));
      await waitFor('ready', async () => (await call(`http://127.0.0.1:${cold.adminPort}/readyz`)).status === 200);
      // The same scrape moment as /readyz, not a value sampled up to half a second before.
      expect(await readyGauge(cold.adminPort!)).toBe(1);
      const closing = cold.close();
      expect(cold.isReady()).toBe(false);
      expect(await readyGauge(cold.adminPort!)).toBe(0);
      await closing;
    } finally {
      await cold.close();
      await coldCleanup();
    }
  });
});
