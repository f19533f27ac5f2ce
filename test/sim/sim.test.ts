// The sim backend as a user of it sees it: a real process on loopback with a bearer token, OpenAI-shaped
// answers (plain and SSE), its engine set from its flags, metrics a test can force through /admin/state, and its name
// on every answer.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { call, chatBody, metricSample, spawnDaemon, tempDir, waitForPort } from '../gateway/helpers.ts';
import type { Daemon } from '../gateway/helpers.ts';

const TOKEN = 'sim-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
let sim: Daemon;
let base: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('sim'));
  await writeFile(join(dir, 'token'), `${TOKEN}\n`);
  sim = spawnDaemon('daemons/sim/main.ts', [
    '--name',
    'sim-x',
    '--models',
    'alpha,beta',
    '--token-file',
    join(dir, 'token'),
    '--completion-tokens',
    '10',
    '--max-num-seqs',
    '8',
    '--num-gpu-blocks',
    '9000',
    '--block-size',
    '32',
    '--max-model-len',
    '4096',
    '--step-overhead-ms',
    '2',
  ]);
  base = `http://127.0.0.1:${await waitForPort(sim, 'sim')}`;
});

afterAll(async () => {
  expect(await sim?.stop()).toBe(0);
  expect(sim.stdout() + sim.stderr()).not.toContain(TOKEN);
  await cleanup();
});

describe('sim backend', () => {
  it('requires the bearer token on the API and names itself on every answer', async () => {
    const attempts: Record<string, string>[] = [{}, { authorization: 'Bearer wrong' }, { authorization: TOKEN }];
    for (const headers of attempts) {
      const reply = await call(`${base}/v1/chat/completions`, { body: chatBody('alpha'), headers });
      expect(reply.status).toBe(401);
      expect(reply.headers['x-sim-provider']).toBe('sim-x');
      expect(reply.json().error.code).toBe('invalid_api_key');
    }
    const ok = await call(`${base}/v1/chat/completions`, { body: chatBody('alpha'), headers: auth });
    expect(ok.status).toBe(200);
    expect(ok.headers['x-sim-provider']).toBe('sim-x');
    expect(ok.json().usage.completion_tokens).toBe(10);
  });

  it('lists its models and rejects others with 404', async () => {
    expect((await call(`${base}/v1/models`, { headers: auth })).json().data.map((m: { id: string }) => m.id)).toEqual([
      'alpha',
      'beta',
    ]);
    expect((await call(`${base}/v1/chat/completions`, { body: chatBody('gamma'), headers: auth })).status).toBe(404);
  });

  it('answers completions, embeddings and responses in their OpenAI shapes', async () => {
    expect(
      (await call(`${base}/v1/completions`, { body: { model: 'alpha', prompt: 'x' }, headers: auth })).json().object,
    ).toBe('text_completion');
    const emb = (
      await call(`${base}/v1/embeddings`, { body: { model: 'beta', input: ['a', 'b'] }, headers: auth })
    ).json();
    expect(emb.data).toHaveLength(2);
    const resp = (await call(`${base}/v1/responses`, { body: { model: 'alpha', input: 'x' }, headers: auth })).json();
    expect(resp.output[0].content[0].type).toBe('output_text');
    expect((await call(`${base}/v1/responses/${resp.id}`, { headers: auth })).json().id).toBe(resp.id);
  });

  it('streams SSE at the configured token rate', async () => {
    await call(`${base}/admin/state`, { body: { tokens_per_second: 50 }, headers: auth });
    const started = Date.now();
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify(chatBody('alpha', { stream: true })),
    });
    const text = await res.body.text();
    expect(Date.now() - started).toBeGreaterThanOrEqual(180);
    expect(text.match(/^data: /gm)).toHaveLength(13);
    await call(`${base}/admin/state`, { body: { tokens_per_second: 0 }, headers: auth });
  });

  it('reports the queue depth and KV-cache utilisation forced through /admin/state until cleared', async () => {
    const labels = '{model_name="alpha",engine="0"}';
    expect((await call(`${base}/admin/state`, { headers: auth })).json()).toMatchObject({
      queue_depth: null,
      kv_cache_utilization: null,
    });
    const set = await call(`${base}/admin/state`, {
      body: { queue_depth: 0.42, kv_cache_utilization: 0.91 },
      headers: auth,
    });
    expect(set.status).toBe(200);
    let metrics = (await call(`${base}/metrics`)).text;
    expect(metrics).toMatch(/^sim_queue_depth 0\.42$/m);
    expect(metrics).toMatch(/^sim_kv_cache_utilization 0\.91$/m);
    // The forced depth as the full batch it stands for: 8 running (max_num_seqs) and round(0.42 x 8 / 0.58) = 6 waiting,
    // so the vLLM preset's waiting / (waiting + running) reads 6/14 = 0.43, the nearest whole count.
    expect(metricSample(metrics, `vllm:num_requests_waiting${labels}`)).toBe(6);
    expect(metricSample(metrics, `vllm:num_requests_running${labels}`)).toBe(8);
    expect(metricSample(metrics, `vllm:kv_cache_usage_perc${labels}`)).toBe(0.91);
    expect(metrics).not.toContain('vllm:gpu_cache_usage_perc');
    // A forced 1 is a queue with nothing running: the preset reads 1.
    await call(`${base}/admin/state`, { body: { queue_depth: 1 }, headers: auth });
    metrics = (await call(`${base}/metrics`)).text;
    expect([
      metricSample(metrics, `vllm:num_requests_waiting${labels}`),
      metricSample(metrics, `vllm:num_requests_running${labels}`),
    ]).toEqual([8, 0]);
    // null clears a forced value: the idle engine's own are reported again.
    await call(`${base}/admin/state`, { body: { queue_depth: null, kv_cache_utilization: null }, headers: auth });
    metrics = (await call(`${base}/metrics`)).text;
    expect(metrics).toMatch(/^sim_queue_depth 0$/m);
    expect(metricSample(metrics, `vllm:num_requests_waiting${labels}`)).toBe(0);
    expect(metricSample(metrics, `vllm:num_requests_running${labels}`)).toBe(0);
    expect(metricSample(metrics, `vllm:kv_cache_usage_perc${labels}`)).toBe(0);
  });

  it('runs its engine with the parameters its flags set', async () => {
    const metrics = (await call(`${base}/metrics`)).text;
    expect(metricSample(metrics, 'sim_max_num_seqs')).toBe(8);
    expect(metrics).toMatch(
      /^vllm:cache_config_info\{block_size="32",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="9000",prefix_caching_hash_algo="sha256",engine="0"\} 1$/m,
    );
    const refused = await call(`${base}/v1/completions`, {
      body: { model: 'alpha', prompt: 'x', max_tokens: 4095 },
      headers: auth,
    });
    expect(refused.status).toBe(400);
    expect(refused.json().error.message).toContain("This model's maximum context length is 4096 tokens");
  });

  it('refuses bad engine flags with one line naming the flag', async () => {
    const cases: [string[], string][] = [
      [['--max-num-seqs', '0'], '--max-num-seqs must be a positive integer, got "0"'],
      [['--block-size', 'big'], '--block-size must be a positive integer, got "big"'],
      [['--step-overhead-ms=-1'], '--step-overhead-ms must be a non-negative number, got "-1"'],
      [['--completion-tokens-spread', '3'], '--completion-tokens-spread must be a number in [0, 1], got 3'],
      [
        ['--max-num-seqs', '64', '--max-num-batched-tokens', '32'],
        '--max-num-batched-tokens (32) must be at least --max-num-seqs (64)',
      ],
      [
        ['--num-gpu-blocks', '10'],
        '--num-gpu-blocks x --block-size (10 x 16 = 160 tokens) must hold one request of --max-model-len (131072) tokens',
      ],
    ];
    const help = spawnDaemon('daemons/sim/main.ts', ['--help']);
    expect(await help.stop('SIGCONT')).toBe(0);
    for (const flag of [
      '--max-num-seqs',
      '--num-gpu-blocks',
      '--step-overhead-ms',
      '--tokens-per-second',
      '--latency-ms',
    ])
      expect(help.stdout()).toContain(flag);
    for (const [flags, message] of cases) {
      const daemon = spawnDaemon('daemons/sim/main.ts', ['--name', 'x', '--models', 'a', ...flags], {
        SIM_TOKEN: 'tok',
      });
      expect(await daemon.stop('SIGCONT')).toBe(2);
      expect(daemon.stderr()).toContain(`sim: ${message} (usage:`);
      expect(daemon.stderr().trimEnd().split('\n')).toHaveLength(1);
    }
  });

  it('publishes the llm-d EPP pool series only once given a pool capacity: its answers plus the background load run up to it and wait beyond it', async () => {
    expect((await call(`${base}/metrics`)).text).not.toContain('llm_d_epp_');
    await call(`${base}/admin/state`, {
      body: { pool_capacity: 4, pool_background: 6, pool_skewed_queue: 1 },
      headers: auth,
    });
    const metrics = (await call(`${base}/metrics`)).text;
    expect(metrics).toMatch(/^llm_d_epp_average_running_requests 4$/m);
    expect(metrics).toMatch(/^llm_d_epp_average_queue_size 3$/m);
    expect(metrics).toMatch(/^llm_d_epp_ready_endpoints 1$/m);
    expect(
      (await call(`${base}/admin/state`, { body: { pool_background: -1 }, headers: auth })).json().error.message,
    ).toBe('pool_background must be a number in [0, 1000000]');
    await call(`${base}/admin/state`, {
      body: { pool_capacity: 0, pool_background: 0, pool_skewed_queue: 0 },
      headers: auth,
    });
    expect((await call(`${base}/metrics`)).text).not.toContain('llm_d_epp_');
  });

  it('rejects a bad state update naming the field, and needs the token to change state', async () => {
    const bad = await call(`${base}/admin/state`, { body: { queue_depth: 3 }, headers: auth });
    expect(bad.status).toBe(400);
    expect(bad.json().error.message).toBe('queue_depth must be a number in [0, 1]');
    expect((await call(`${base}/admin/state`, { body: { colour: 'red' }, headers: auth })).json().error.message).toBe(
      'unknown state field "colour"',
    );
    expect((await call(`${base}/admin/state`, { body: { queue_depth: 0 } })).status).toBe(401);
  });

  it('reports unhealthy on /health when told to', async () => {
    expect((await call(`${base}/health`)).status).toBe(200);
    await call(`${base}/admin/state`, { body: { healthy: false }, headers: auth });
    expect((await call(`${base}/health`)).status).toBe(503);
    await call(`${base}/admin/state`, { body: { healthy: true }, headers: auth });
  });

  it('refuses to start without a token', async () => {
    const daemon = spawnDaemon('daemons/sim/main.ts', ['--name', 'x', '--models', 'a'], { SIM_TOKEN: '' });
    expect(await daemon.stop('SIGCONT')).toBe(2);
    expect(daemon.stderr()).toContain('no bearer token');
  });
});
