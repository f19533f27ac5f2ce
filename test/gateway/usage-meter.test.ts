// usage_meter: token usage read from JSON answers and SSE streams as they pass (split at every byte), the usage
// chunk asked for on the caller's behalf removed, and at a real consumer gateway in front of real sims: tokens and
// priced spend per tenant, model, provider and site, equal to what the caller's own responses say.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { priceOf, withIncludeUsage } from '../../daemons/gateway/filters/usage-meter.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { jsonUsageTap, sseUsageTap, usageOf } from '../../daemons/gateway/usage/usage-tap.ts';
import type { UsageTap } from '../../daemons/gateway/usage/usage-tap.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { call, candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay } from './helpers.ts';

const chunk = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const STREAM = [
  chunk({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content: 'héllo' }, finish_reason: null }],
  }),
  chunk({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
  chunk({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [],
    usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
  }),
  'data: [DONE]\n\n',
];

/** Feeds `text` to a tap split into pieces of `size` bytes; returns what the caller would receive. */
function feed(tap: UsageTap, text: string, size: number): string {
  const bytes = Buffer.from(text, 'utf8');
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(tap.push(bytes.subarray(i, i + size)));
  out.push(tap.end());
  return Buffer.concat(out).toString('utf8');
}

describe('usage tap', () => {
  it('reads chat, completions and Responses usage shapes, and nothing from objects without it', () => {
    expect(usageOf({ usage: { prompt_tokens: 3, completion_tokens: 4 } })).toEqual({ inputTokens: 3, outputTokens: 4 });
    expect(usageOf({ usage: { input_tokens: 5, output_tokens: 6 } })).toEqual({ inputTokens: 5, outputTokens: 6 });
    expect(usageOf({ usage: { prompt_tokens: 9, total_tokens: 9 } })).toEqual({ inputTokens: 9, outputTokens: 0 });
    for (const bad of [
      null,
      {},
      { usage: null },
      { usage: { prompt_tokens: -1, completion_tokens: 1 } },
      { usage: { prompt_tokens: 1.5 } },
      { usage: { completion_tokens: 2 } },
    ]) {
      expect(usageOf(bad)).toBeUndefined();
    }
  });

  it.each([1, 3, 7, 64, 100_000])(
    'passes a stream through unchanged and finds its usage (pieces of %i bytes)',
    (size) => {
      const tap = sseUsageTap({ stripUsageChunk: false });
      expect(feed(tap, STREAM.join(''), size)).toBe(STREAM.join(''));
      expect(tap.usage()).toEqual({ inputTokens: 11, outputTokens: 7 });
    },
  );

  it.each([1, 5, 100_000])(
    'removes the usage-only chunk it asked for and keeps every other byte (pieces of %i bytes)',
    (size) => {
      const tap = sseUsageTap({ stripUsageChunk: true });
      expect(feed(tap, STREAM.join(''), size)).toBe([STREAM[0], STREAM[1], STREAM[3]].join(''));
      expect(tap.usage()).toEqual({ inputTokens: 11, outputTokens: 7 });
    },
  );

  it('keeps CRLF framing, and reads the Responses response.completed event', () => {
    const crlf = STREAM.join('').replace(/\n/g, '\r\n');
    const tap = sseUsageTap({ stripUsageChunk: true });
    expect(feed(tap, crlf, 9)).not.toContain('"usage"');
    expect(tap.usage()).toEqual({ inputTokens: 11, outputTokens: 7 });
    const responses = sseUsageTap({ stripUsageChunk: false });
    const completed = `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response: { usage: { input_tokens: 8, output_tokens: 2 } } })}\n\n`;
    feed(responses, `event: response.created\ndata: {"type":"response.created"}\n\n${completed}`, 4);
    expect(responses.usage()).toEqual({ inputTokens: 8, outputTokens: 2 });
  });

  it('a stream without usage, or with a broken usage event, reports none', () => {
    const tap = sseUsageTap({ stripUsageChunk: true });
    const text = `${STREAM[0]}data: {"usage": {"prompt_tokens": 1\n\n`;
    expect(feed(tap, text, 2)).toBe(text);
    expect(tap.usage()).toBeUndefined();
  });

  it('reads a JSON body at its end and ignores a body that is not JSON', () => {
    const tap = jsonUsageTap();
    expect(feed(tap, JSON.stringify({ choices: [], usage: { prompt_tokens: 2, completion_tokens: 3 } }), 5)).toContain(
      '"usage"',
    );
    expect(tap.usage()).toEqual({ inputTokens: 2, outputTokens: 3 });
    const broken = jsonUsageTap();
    feed(broken, '{"usage": {"prompt_tokens": 2', 5);
    expect(broken.usage()).toBeUndefined();
  });

  it('asks for the usage chunk only on a streamed request that does not already', () => {
    const asked = withIncludeUsage(Buffer.from('{"model":"m","stream":true,"stream_options":{"foo":1}}'));
    expect(JSON.parse(asked!.toString())).toEqual({
      model: 'm',
      stream: true,
      stream_options: { foo: 1, include_usage: true },
    });
    for (const body of [
      '{"model":"m"}',
      '{"stream":false}',
      '{"stream":true,"stream_options":{"include_usage":true}}',
      '{"stream":true,"stream_options":3}',
      '[1]',
      'nope',
    ]) {
      expect(withIncludeUsage(Buffer.from(body))).toBeUndefined();
    }
  });

  it('prices per million tokens, and at 0 without a price', () => {
    expect(
      priceOf(
        { inputTokens: 1_000_000, outputTokens: 500_000 },
        { per_million_input_tokens: 0.15, per_million_output_tokens: 0.6 },
      ),
    ).toBeCloseTo(0.45, 12);
    expect(priceOf({ inputTokens: 10, outputTokens: 10 }, undefined)).toBe(0);
  });
});

describe('usage_meter at a consumer gateway', () => {
  const PRICE = { per_million_input_tokens: 150_000, per_million_output_tokens: 600_000 };
  let dir: string;
  let cleanup: () => Promise<void>;
  let sim: SimServer;
  let gateway: GatewayInstance;
  let base: string;
  const a = mintCallerKey('tenant-a');
  const b = mintCallerKey('tenant-b');
  /** What the test computes from the usage the caller received: USD per tenant. */
  const expected: Record<string, number> = {};
  const account = (tenant: string, input: number, output: number): void => {
    expected[tenant] =
      (expected[tenant] ?? 0) +
      (input * PRICE.per_million_input_tokens + output * PRICE.per_million_output_tokens) / 1e6;
  };

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('usage'));
    sim = await startSim({ name: 'sim-west', models: ['m1'], token: 'sim-token-x' });
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ keys: [a.entry, b.entry] }));
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(
      overlayPath,
      payload([
        {
          ...candidate('m1', 'west', 'west-sim'),
          credential: { strategy: 'bearer_token', secretRef: { name: 't', namespace: 'n', key: 'k' } },
        },
      ]),
    );
    const config = consumerConfig({
      overlayPath,
      credentials: [{ name: 't', namespace: 'n', key: 'k', value: 'sim-token-x' }],
      clusters: [{ name: 'west-sim', endpoints: [`127.0.0.1:${sim.port}`] }],
    });
    const chain = (config['filter_chains'] as { filters: unknown[] }[])[0]!;
    chain.filters.unshift({ filter: 'caller_auth', keys_file: 'keys.json' });
    chain.filters.splice(2, 0, { filter: 'usage_meter', prices: [{ cluster: 'west-sim', ...PRICE }] });
    const logger = createLogger({ name: 'gateway', level: 'warn', destination: { write: () => undefined } });
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
    await gateway?.close();
    await sim?.close();
    await cleanup();
  });

  async function stream(path: string, key: string, body: Record<string, unknown>): Promise<string> {
    const res = await request(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm1', stream: true, ...body }),
    });
    expect(res.statusCode).toBe(200);
    return res.body.text();
  }

  const usageEvents = (text: string): { prompt_tokens: number; completion_tokens: number }[] =>
    text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {') && e.includes('"usage"'))
      .map((e) => JSON.parse(e.slice(6)).usage);

  it('meters non-streamed chat and completions answers per tenant, priced by the routed cluster', async () => {
    sim.state.completion_tokens = 5;
    const chat = await call(`${base}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${a.key}` },
      body: { model: 'm1', messages: [] },
    });
    const { prompt_tokens, completion_tokens } = chat.json().usage;
    account('tenant-a', prompt_tokens, completion_tokens);
    const completion = await call(`${base}/v1/completions`, {
      headers: { 'x-api-key': b.key },
      body: { model: 'm1', prompt: 'x' },
    });
    account('tenant-b', completion.json().usage.prompt_tokens, completion.json().usage.completion_tokens);
    expect(gateway.spend.snapshot()['tenant-a']).toBeCloseTo(expected['tenant-a']!, 9);
    expect(gateway.spend.snapshot()['tenant-b']).toBeCloseTo(expected['tenant-b']!, 9);
  });

  it('asks a stream for its usage chunk, meters it, and does not pass it to a caller that did not ask', async () => {
    sim.state.completion_tokens = 9;
    const before = gateway.spend.snapshot()['tenant-a'] ?? 0;
    const text = await stream('/v1/chat/completions', a.key, { messages: [] });
    expect(usageEvents(text)).toEqual([]);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect((text.match(/tok\d/g) ?? []).length).toBe(9);
    // The caller saw no usage: an empty chat is 8 prompt tokens under the sim's chat template, and completion_tokens as set.
    account('tenant-a', 8, 9);
    expect((gateway.spend.snapshot()['tenant-a'] ?? 0) - before).toBeCloseTo(
      (8 * PRICE.per_million_input_tokens + 9 * PRICE.per_million_output_tokens) / 1e6,
      9,
    );
  });

  it('passes the usage chunk to a caller that asked for it, and meters streamed completions and Responses', async () => {
    sim.state.completion_tokens = 3;
    const text = await stream('/v1/chat/completions', b.key, { messages: [], stream_options: { include_usage: true } });
    const [usage] = usageEvents(text);
    expect(usage).toMatchObject({ prompt_tokens: 8, completion_tokens: 3 });
    account('tenant-b', usage!.prompt_tokens, usage!.completion_tokens);
    const completions = await stream('/v1/completions', b.key, { prompt: 'x' });
    expect(usageEvents(completions)).toEqual([]);
    // The prompt "x" is 2 tokens to the sim: the beginning-of-text token and "x".
    account('tenant-b', 2, 3);
    const responses = await stream('/v1/responses', b.key, { input: 'x' });
    const completed = responses.split('\n\n').find((e) => e.includes('response.completed'))!;
    const ru = JSON.parse(completed.split('data: ')[1]!).response.usage;
    account('tenant-b', ru.input_tokens, ru.output_tokens);
    expect(gateway.spend.snapshot()['tenant-b']).toBeCloseTo(expected['tenant-b']!, 9);
    expect(gateway.spend.snapshot()['tenant-a']).toBeCloseTo(expected['tenant-a']!, 9);
  });

  it('exports GenAI token counters and cost per tenant, model, provider and site, with no key in them', async () => {
    const text = (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
    const value = (pattern: RegExp): number =>
      Number(
        text
          .split('\n')
          .find((l) => pattern.test(l))
          ?.split(' ')
          .pop(),
      );
    expect(
      value(
        /^grid_gateway_gen_ai_client_cost_usd_total\{tenant="tenant-b",gen_ai_request_model="m1",gen_ai_provider_name="west-sim",site="west"\}/,
      ),
    ).toBeCloseTo(expected['tenant-b']!, 9);
    expect(
      value(
        /^grid_gateway_gen_ai_client_token_usage_total\{tenant="tenant-a",gen_ai_request_model="m1",gen_ai_provider_name="west-sim",site="west",gen_ai_token_type="output"\}/,
      ),
    ).toBe(5 + 9);
    expect(text).not.toContain(a.key);
    expect(text).not.toContain(a.entry.hash);
  });
});
