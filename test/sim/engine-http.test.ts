// The sim as a small inference engine, seen over HTTP on a real port: its /metrics are the engine's state under vLLM's
// names and units (waiting and running as counts, KV-cache use as a fraction of blocks, prefix-cache tokens,
// preemptions, latency histograms), its usage is exact (cached prompt tokens included), it streams at the pace of the
// engine's steps, and it refuses a prompt longer than its context with vLLM's 400.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { renderChat } from '../../daemons/sim/engine/chat-template.ts';
import { tokenize } from '../../daemons/sim/engine/tokenizer.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimOptions, SimServer } from '../../daemons/sim/server.ts';
import { call, metricSample, waitFor } from '../gateway/helpers.ts';

const TOKEN = 'sim-engine-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const LABELS = '{model_name="m1",engine="0"}';
let sim: SimServer | undefined;

afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: Partial<SimOptions>): Promise<string> {
  sim = await startSim({ name: 'sim-engine', models: ['m1'], token: TOKEN, ...options });
  return `http://127.0.0.1:${sim.port}`;
}

const metrics = async (base: string): Promise<string> => (await call(`${base}/metrics`)).text;
const sample = async (base: string, name: string, labels = LABELS): Promise<number | undefined> =>
  metricSample(await metrics(base), `${name}${labels}`);
const chat = (base: string, content: string, extra: Record<string, unknown> = {}) =>
  call(`${base}/v1/chat/completions`, {
    headers: auth,
    body: { model: 'm1', messages: [{ role: 'user', content }], ...extra },
  });

describe('sim engine over HTTP', () => {
  it('reports requests beyond max_num_seqs as waiting, counted, while they wait, and neither once answered', async () => {
    // Two seats; each request decodes 10 tokens at 20 ms a step, so five at once keep three waiting for ~200 ms.
    const base = await start({
      completionTokens: 10,
      engine: { maxNumSeqs: 2, stepOverheadMs: 20, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    const answers = Promise.all(Array.from({ length: 5 }, (_, i) => chat(base, `question ${i}`)));
    const seen = await waitFor(
      'three requests waiting',
      async () => ((await sample(base, 'vllm:num_requests_waiting')) === 3 ? true : undefined),
      2_000,
    );
    expect(seen).toBe(true);
    expect(await sample(base, 'vllm:num_requests_running')).toBe(2);
    // The example grid's normalised gauge: waiting over max_num_seqs, at most 1.
    expect(metricSample(await metrics(base), 'sim_queue_depth')).toBe(1);
    const replies = await answers;
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(replies.map((r) => r.json().usage.completion_tokens)).toEqual([10, 10, 10, 10, 10]);
    const text = await metrics(base);
    expect(metricSample(text, `vllm:num_requests_waiting${LABELS}`)).toBe(0);
    expect(metricSample(text, `vllm:num_requests_running${LABELS}`)).toBe(0);
    expect(metricSample(text, 'vllm:request_success_total{model_name="m1",engine="0",finished_reason="stop"}')).toBe(5);
    expect(metricSample(text, `vllm:generation_tokens_total${LABELS}`)).toBe(50);
    expect(metricSample(text, `vllm:e2e_request_latency_seconds_count${LABELS}`)).toBe(5);
    expect(metricSample(text, `vllm:request_queue_time_seconds_count${LABELS}`)).toBe(5);
    expect(metricSample(text, 'sim_max_num_seqs')).toBe(2);
  });

  it('reports KV-cache use rising with load and falling after, and its cache config as vLLM does', async () => {
    // 40 blocks of 16 tokens; each request holds ceil((prompt + 20) / 16) blocks while it runs.
    const base = await start({
      completionTokens: 20,
      engine: { numGpuBlocks: 40, maxModelLen: 512, stepOverheadMs: 10, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    expect(await sample(base, 'vllm:kv_cache_usage_perc')).toBe(0);
    const long = 'word '.repeat(60);
    const answers = Promise.all(Array.from({ length: 4 }, (_, i) => chat(base, `${i} ${long}`)));
    const peak = await waitFor(
      'KV blocks in use',
      async () => {
        const usage = await sample(base, 'vllm:kv_cache_usage_perc');
        return usage !== undefined && usage >= 0.3 ? usage : undefined;
      },
      2_000,
    );
    expect(peak).toBeLessThanOrEqual(1);
    expect(metricSample(await metrics(base), 'sim_kv_cache_utilization')).toBeGreaterThan(0);
    await answers;
    expect(await sample(base, 'vllm:kv_cache_usage_perc')).toBe(0);
    expect(await metrics(base)).toMatch(
      /^vllm:cache_config_info\{[^}]*block_size="16"[^}]*num_gpu_blocks="40"[^}]*\} 1$/m,
    );
  });

  it('serves a shared system prompt from the prefix cache: cached_tokens in usage, hits in /metrics', async () => {
    const base = await start({
      completionTokens: 4,
      engine: { stepOverheadMs: 1, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    const system = { role: 'system', content: 'You are the grid assistant. '.repeat(8) };
    const ask = (question: string) =>
      call(`${base}/v1/chat/completions`, {
        headers: auth,
        body: { model: 'm1', messages: [system, { role: 'user', content: question }] },
      });
    const first = (await ask('Which site is closest?')).json();
    const second = (await ask('Which site is cheapest?')).json();
    // Exactly the full 16-token blocks of the prompt text both share.
    const a = tokenize(renderChat([system, { role: 'user', content: 'Which site is closest?' }]));
    const b = tokenize(renderChat([system, { role: 'user', content: 'Which site is cheapest?' }]));
    let shared = 0;
    while (a[shared] === b[shared]) shared++;
    const cached = Math.floor(shared / 16) * 16;
    expect(cached).toBeGreaterThanOrEqual(32);
    expect(first.usage).toEqual({
      prompt_tokens: a.length,
      completion_tokens: 4,
      total_tokens: a.length + 4,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(second.usage).toEqual({
      prompt_tokens: b.length,
      completion_tokens: 4,
      total_tokens: b.length + 4,
      prompt_tokens_details: { cached_tokens: cached },
    });
    const text = await metrics(base);
    expect(metricSample(text, `vllm:prefix_cache_queries_total${LABELS}`)).toBe(a.length + b.length);
    expect(metricSample(text, `vllm:prefix_cache_hits_total${LABELS}`)).toBe(cached);
    expect(metricSample(text, `vllm:prompt_tokens_total${LABELS}`)).toBe(a.length + b.length);
  });

  it('streams each token when the engine step that made it ends', async () => {
    // Every step takes 30 ms: the first token 30 ms after arrival, the next seven 30 ms apart.
    const base = await start({
      completionTokens: 8,
      engine: { stepOverheadMs: 30, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    const started = performance.now();
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        model: 'm1',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(res.headers['content-type']).toBe('text/event-stream');
    const arrivals: number[] = [];
    let text = '';
    for await (const chunk of res.body) {
      const piece = chunk.toString();
      text += piece;
      for (const _ of piece.matchAll(/"content":"[^"]+"/g)) arrivals.push(performance.now() - started);
    }
    expect(arrivals).toHaveLength(8);
    // Token i ends step i + 1, 30 (i + 1) ms after the request arrived; the timer may be late, never early.
    for (const [i, at] of arrivals.entries()) expect(at).toBeGreaterThanOrEqual(30 * (i + 1) - 1);
    // And they come out as they are made, not all at the end: the first 210 ms of model time before the last.
    expect(arrivals[7]! - arrivals[0]!).toBeGreaterThan(100);
    const usage = text
      .split('\n\n')
      .filter((e) => e.includes('"usage"'))
      .map((e) => JSON.parse(e.slice(6)).usage)[0];
    expect(usage).toMatchObject({
      completion_tokens: 8,
      prompt_tokens: tokenize(renderChat([{ role: 'user', content: 'hi' }])).length,
    });
    expect(text.match(/tok\d/g)).toHaveLength(8);
    // In model time each inter-token latency is exactly one 30 ms step: all seven in the (0.025, 0.05] bucket.
    const page = await metrics(base);
    expect(metricSample(page, 'vllm:inter_token_latency_seconds_bucket{le="0.025",model_name="m1",engine="0"}')).toBe(
      0,
    );
    expect(metricSample(page, 'vllm:inter_token_latency_seconds_bucket{le="0.05",model_name="m1",engine="0"}')).toBe(7);
    expect(metricSample(page, `vllm:inter_token_latency_seconds_sum${LABELS}`)).toBeCloseTo(0.21, 9);
    expect(metricSample(page, `vllm:time_to_first_token_seconds_count${LABELS}`)).toBe(1);
  });

  it('takes new step costs through /admin/state from the next step on, and refuses bad ones naming the field', async () => {
    const base = await start({
      completionTokens: 3,
      engine: { stepOverheadMs: 0, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    const quick = performance.now();
    await chat(base, 'hi');
    const fast = performance.now() - quick;
    const set = await call(`${base}/admin/state`, { headers: auth, body: { step_overhead_ms: 60 } });
    expect(set.json()).toMatchObject({ step_overhead_ms: 60, prefill_ms_per_token: 0, decode_ms_per_seq: 0 });
    const slow = performance.now();
    await chat(base, 'hi');
    // Three steps of 60 ms now.
    expect(performance.now() - slow).toBeGreaterThanOrEqual(179);
    expect(fast).toBeLessThan(179);
    const bad = await call(`${base}/admin/state`, { headers: auth, body: { decode_ms_per_seq: -1 } });
    expect([bad.status, bad.json().error.message]).toEqual([400, 'decode_ms_per_seq must be a number in [0, 60000]']);
  });

  it('preempts when the KV cache runs out, counts it, and still answers every request in full', async () => {
    // 8 blocks of 16 tokens; two requests of ~50 prompt and 60 output tokens need 7 blocks each.
    const base = await start({
      completionTokens: 60,
      engine: { numGpuBlocks: 8, maxModelLen: 128, stepOverheadMs: 2, prefillMsPerToken: 0, decodeMsPerSeq: 0 },
    });
    const prompt = 'grid '.repeat(40);
    const replies = await Promise.all([chat(base, `a ${prompt}`), chat(base, `b ${prompt}`)]);
    expect(replies.map((r) => r.json().usage.completion_tokens)).toEqual([60, 60]);
    expect(await sample(base, 'vllm:num_preemptions_total')).toBeGreaterThanOrEqual(1);
  });

  it("refuses a prompt longer than its context, and max_tokens past it, with vLLM's 400", async () => {
    const base = await start({ engine: { maxModelLen: 64, numGpuBlocks: 8 } });
    const long = await chat(base, 'many words '.repeat(40));
    expect(long.status).toBe(400);
    expect(long.json().error).toMatchObject({ type: 'BadRequestError', code: 400, param: 'input_tokens' });
    expect(long.json().error.message).toMatch(
      /^This model's maximum context length is 64 tokens\. However, your request has \d+ input tokens\./,
    );
    const greedy = await chat(base, 'hi', { max_tokens: 100 });
    expect(greedy.status).toBe(400);
    expect(greedy.json().error.message).toContain('you requested 100 output tokens');
    expect((await chat(base, 'hi', { max_tokens: 0 })).json().error.message).toBe(
      'max_tokens must be at least 1, got 0.',
    );
    expect((await chat(base, 'hi', { max_completion_tokens: 'lots' })).json().error.message).toBe(
      'max_completion_tokens must be a positive integer',
    );
    const bad = await call(`${base}/v1/chat/completions`, { headers: auth, body: { model: 'm1', messages: 'hello' } });
    expect([bad.status, bad.json().error.message]).toEqual([
      400,
      'messages must be an array of {role, content} objects',
    ]);
    // Nothing refused reached the engine.
    expect(await sample(base, 'vllm:prefix_cache_queries_total')).toBe(0);
  });

  it('answers exactly max_tokens tokens with finish_reason "length", on every API', async () => {
    const base = await start({ engine: { stepOverheadMs: 1, prefillMsPerToken: 0, decodeMsPerSeq: 0 } });
    const plain = (await chat(base, 'count', { max_tokens: 3 })).json();
    expect(plain.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'tok0 tok1 tok2' } });
    const completion = (
      await call(`${base}/v1/completions`, { headers: auth, body: { model: 'm1', prompt: 'x', max_tokens: 2 } })
    ).json();
    // "<|begin_of_text|>" and "x".
    expect(completion.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 2 });
    expect(completion.choices[0].finish_reason).toBe('length');
    const response = (
      await call(`${base}/v1/responses`, { headers: auth, body: { model: 'm1', input: 'x', max_output_tokens: 5 } })
    ).json();
    expect(response.usage).toMatchObject({ output_tokens: 5, input_tokens_details: { cached_tokens: 0 } });
    expect(response.status).toBe('incomplete');
  });
});
