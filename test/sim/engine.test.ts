// The sim's engine model on a scripted clock: continuous batching up to max_num_seqs with a FIFO waiting queue,
// chunked prefill within the step's token budget, the step timing every TTFT and inter-token latency follows from,
// prefix caching over hashed full blocks, LRU eviction, preemption when the cache runs out, a seeded output-length draw,
// and the refusals a vLLM server answers with a 400. Every expected number is worked out by hand in the comments.
import { describe, expect, it } from 'vitest';
import { BlockPool, blockHash } from '../../daemons/sim/engine/block-pool.ts';
import { renderChat } from '../../daemons/sim/engine/chat-template.ts';
import { DEFAULT_ENGINE_CONFIG, EngineConfigError, resolveEngineConfig } from '../../daemons/sim/engine/config.ts';
import type { EngineConfig } from '../../daemons/sim/engine/config.ts';
import { Engine, isRefusal } from '../../daemons/sim/engine/engine.ts';
import type { EngineRequest, FinishedRequest, StepResult } from '../../daemons/sim/engine/engine.ts';
import { outputTokenText, tokenize, tokenPieces } from '../../daemons/sim/engine/tokenizer.ts';

// Round numbers so the arithmetic in the comments stays readable: a step costs 10 ms, plus 1 ms per prompt token it
// computes, plus 2 ms per sequence it decodes.
const TIMING: Partial<EngineConfig> = { stepOverheadMs: 10, prefillMsPerToken: 1, decodeMsPerSeq: 2 };
const SMALL: Partial<EngineConfig> = {
  ...TIMING,
  blockSize: 4,
  numGpuBlocks: 64,
  maxNumSeqs: 2,
  maxNumBatchedTokens: 8,
  maxModelLen: 64,
};

/** `count` distinct token ids starting at `from`. */
const ids = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);

type Arrival = { at: number } & EngineRequest;

/** Feeds the arrivals at their times (those at the same time together) and runs the engine until idle; returns every step. */
function run(engine: Engine, arrivals: readonly Arrival[]): StepResult[] {
  const steps: StepResult[] = [];
  let last: number | undefined;
  for (const { at, ...request } of arrivals) {
    if (at !== last) steps.push(...engine.advanceTo(at));
    last = at;
    const admission = engine.add(request, at);
    if (isRefusal(admission)) throw new Error(admission.message);
  }
  steps.push(...engine.advanceTo(Number.POSITIVE_INFINITY));
  return steps;
}

/** When each request's tokens came out. */
function tokenTimes(steps: readonly StepResult[]): Record<string, number[]> {
  const times: Record<string, number[]> = {};
  for (const step of steps) for (const t of step.tokens) (times[t.requestId] ??= []).push(t.atMs);
  return times;
}

function finished(steps: readonly StepResult[], id: string): FinishedRequest {
  return steps.flatMap((s) => s.finished).find((f) => f.requestId === id)!;
}

describe('continuous batching', () => {
  it('runs up to max_num_seqs sequences at once; the next request waits its turn', () => {
    const engine = new Engine(SMALL);
    for (const [id, from] of [
      ['a', 100],
      ['b', 200],
      ['c', 300],
    ] as const)
      engine.add({ id, promptTokenIds: ids(from, 2), maxTokens: 2 }, 0);
    engine.advanceTo(0);
    expect(engine.snapshot()).toMatchObject({ running: 2, waiting: 1 });
    // [0, 14]  a and b prefill 2 tokens each: 10 + 4 = 14; both get their first token at 14.
    // [14, 28] a and b decode: 10 + 2 x 2 = 14; their second token ends them at 28.
    // [28, 40] c, admitted once a seat is free, prefills 2 tokens: 10 + 2 = 12.
    // [40, 52] c decodes: 10 + 2 = 12.
    const steps = engine.advanceTo(Number.POSITIVE_INFINITY);
    expect(steps.map((s) => [s.startMs, s.endMs])).toEqual([
      [0, 14],
      [14, 28],
      [28, 40],
      [40, 52],
    ]);
    expect(tokenTimes(steps)).toEqual({ a: [14, 28], b: [14, 28], c: [40, 52] });
    expect(finished(steps, 'c')).toMatchObject({
      queueMs: 28,
      prefillMs: 12,
      decodeMs: 12,
      e2eMs: 52,
      finishReason: 'length',
      completionTokens: 2,
    });
    expect(engine.snapshot()).toMatchObject({ running: 0, waiting: 0, kvCacheUsage: 0 });
  });

  it('admits waiting requests in arrival order', () => {
    const engine = new Engine({ ...SMALL, maxNumSeqs: 1 });
    // One seat: each request prefills 2 tokens (10 + 2 = 12 ms) and ends on its first token.
    const steps = run(
      engine,
      ['x', 'y', 'z'].map((id, i) => ({ at: i, id, promptTokenIds: ids(100 * (i + 1), 2), maxTokens: 1 })),
    );
    expect(tokenTimes(steps)).toEqual({ x: [12], y: [24], z: [36] });
  });

  it('chunks a long prefill into the step budget beside running decodes: TTFT and inter-token latency by hand', () => {
    const engine = new Engine(SMALL);
    // a (2-token prompt, 4 tokens out) at 0; b (20-token prompt, 1 token out) at 5; a budget of 8 tokens a step.
    // [0, 12]  a prefills 2: 10 + 2 = 12. b arrives at 5, while the step runs, and waits for the next one.
    // [12, 31] a decodes (1 token, 7 left), b prefills a chunk of 7: 10 + 7 + 2 = 19.
    // [31, 50] a decodes, b prefills 7 more (14 of 20): 19.
    // [50, 68] a decodes its last token, b prefills the last 6: 10 + 6 + 2 = 18; b's first token comes out at 68.
    const steps = run(engine, [
      { at: 0, id: 'a', promptTokenIds: ids(100, 2), maxTokens: 4 },
      { at: 5, id: 'b', promptTokenIds: ids(200, 20), maxTokens: 1 },
    ]);
    expect(steps.map((s) => [s.startMs, s.endMs, s.prefillTokens, s.decodeSeqs])).toEqual([
      [0, 12, 2, 0],
      [12, 31, 7, 1],
      [31, 50, 7, 1],
      [50, 68, 6, 1],
    ]);
    expect(tokenTimes(steps)).toEqual({ a: [12, 31, 50, 68], b: [68] });
    // TTFT: a 12 - 0 = 12, b 68 - 5 = 63. a's inter-token latencies grow while b's prefill shares its steps.
    expect(steps.flatMap((s) => s.timeToFirstTokenMs)).toEqual([12, 63]);
    expect(steps.flatMap((s) => s.interTokenLatencyMs)).toEqual([19, 19, 18]);
    expect(finished(steps, 'b')).toMatchObject({ queueMs: 7, prefillMs: 56, e2eMs: 63 });
    expect(finished(steps, 'a')).toMatchObject({ queueMs: 0, prefillMs: 12, decodeMs: 56, inferenceMs: 68 });
  });

  it('holds KV blocks for the sequences in the batch and frees them when they end', () => {
    const engine = new Engine({ ...SMALL, numGpuBlocks: 16 });
    engine.add({ id: 'a', promptTokenIds: ids(100, 6), maxTokens: 3 }, 0);
    engine.add({ id: 'b', promptTokenIds: ids(200, 2), maxTokens: 3 }, 0);
    engine.advanceTo(0);
    // a needs ceil(6 / 4) = 2 blocks, b 1: 3 of 16 in use while their prefill runs.
    expect(engine.snapshot().kvCacheUsage).toBe(3 / 16);
    engine.advanceTo(Number.POSITIVE_INFINITY);
    expect(engine.snapshot()).toMatchObject({ kvCacheUsage: 0, freeBlocks: 16 });
  });

  it("floors every step at the minimum step time (the sim's --tokens-per-second), and takes new step costs from the next step", () => {
    const engine = new Engine(SMALL);
    engine.setTiming({ minStepMs: 50 });
    // Each step would take 12 ms; the floor makes it 50.
    const steps = run(engine, [{ at: 0, id: 'a', promptTokenIds: ids(100, 2), maxTokens: 3 }]);
    expect(tokenTimes(steps)).toEqual({ a: [50, 100, 150] });
    // Without the floor and with a 1 ms overhead: [200, 203] prefill 2 (1 + 2), [203, 206] decode (1 + 2).
    engine.setTiming({ minStepMs: 0, stepOverheadMs: 1 });
    expect(engine.timing).toEqual({ stepOverheadMs: 1, prefillMsPerToken: 1, decodeMsPerSeq: 2, minStepMs: 0 });
    expect(tokenTimes(run(engine, [{ at: 200, id: 'b', promptTokenIds: ids(200, 2), maxTokens: 2 }]))).toEqual({
      b: [203, 206],
    });
    expect(() => engine.setTiming({ minStepMs: -1 })).toThrow(
      'minStepMs must be a non-negative number of milliseconds, got -1',
    );
    expect(() => engine.setTiming({ decodeMsPerSeq: Number.NaN })).toThrow(/decodeMsPerSeq/);
    expect(engine.timing.stepOverheadMs).toBe(1);
  });

  it("frees an aborted request's blocks at once and never emits its tokens", () => {
    const engine = new Engine(SMALL);
    engine.add({ id: 'a', promptTokenIds: ids(100, 8), maxTokens: 4 }, 0);
    engine.advanceTo(0);
    expect(engine.snapshot().kvCacheUsage).toBe(2 / 64);
    expect(engine.abort('a')).toBe(true);
    expect(engine.abort('a')).toBe(false);
    expect(engine.snapshot()).toMatchObject({ kvCacheUsage: 0, running: 0 });
    expect(engine.advanceTo(Number.POSITIVE_INFINITY).flatMap((s) => s.tokens)).toEqual([]);
  });
});

describe('prefix caching', () => {
  const system = ids(1, 8); // two blocks of 4

  it('gives a request sharing a 2-block system prompt exactly those 8 tokens cached, and a TTFT shorter by their prefill time', () => {
    // A budget of 16 tokens, so that each prefill fits one step.
    const roomy = { ...SMALL, maxNumBatchedTokens: 16 };
    const engine = new Engine(roomy);
    // x: system + 2 tokens. [0, 20] prefill 10: 10 + 10 = 20. Its 2 full system blocks are registered as computed.
    // y at 100: system + 3 tokens (11). It may hit floor((11 - 1) / 4) = 2 blocks; both are cached, so it computes
    // only its last 3 tokens: [100, 113], TTFT 13.
    const steps = run(engine, [
      { at: 0, id: 'x', promptTokenIds: [...system, 91, 92], maxTokens: 1 },
      { at: 100, id: 'y', promptTokenIds: [...system, 93, 94, 95], maxTokens: 1 },
    ]);
    expect(finished(steps, 'x').cachedTokens).toBe(0);
    expect(finished(steps, 'y').cachedTokens).toBe(8);
    const cachedTtft = steps.flatMap((s) => s.timeToFirstTokenMs)[1]!;
    expect(cachedTtft).toBe(13);
    // The same request on a cold engine computes all 11 tokens: 10 + 11 = 21, exactly 8 tokens x 1 ms longer.
    const cold = run(new Engine(roomy), [{ at: 100, id: 'y', promptTokenIds: [...system, 93, 94, 95], maxTokens: 1 }]);
    expect(cold.flatMap((s) => s.timeToFirstTokenMs)).toEqual([21]);
    expect(21 - cachedTtft).toBe(8 * 1);
    // Queried: every prompt token at admission (10 + 11); hit: the 8 cached.
    expect(engine.snapshot().totals).toMatchObject({ prefixCacheQueries: 21, prefixCacheHits: 8, promptTokens: 21 });
  });

  it('hits the previous turn of a chat, its answer included, through the chat template and tokenizer', () => {
    const engine = new Engine({ ...SMALL, maxModelLen: 256 });
    const turn1 = tokenize(renderChat([{ role: 'user', content: 'Tell me about caches.' }]));
    const steps = run(engine, [{ at: 0, id: 't1', promptTokenIds: turn1, maxTokens: 5 }]);
    const answer = steps
      .flatMap((s) => s.tokens)
      .map((t) => t.text)
      .join('');
    expect(answer).toBe('tok0 tok1 tok2 tok3 tok4');
    const turn2 = tokenize(
      renderChat([
        { role: 'user', content: 'Tell me about caches.' },
        { role: 'assistant', content: answer },
        { role: 'user', content: 'And eviction?' },
      ]),
    );
    // The second turn's prompt starts with the first turn's prompt and answer, token for token.
    expect(turn2.slice(0, turn1.length + 5)).toEqual([...turn1, ...tokenize(answer)]);
    const second = run(engine, [{ at: 1000, id: 't2', promptTokenIds: turn2, maxTokens: 1 }]);
    // The first turn computed its prompt and 4 of its 5 answer tokens (the last is sampled, never computed):
    // turn1.length + 4 tokens, of which the full blocks of 4 were cached.
    expect(turn1.length).toBe(21);
    expect(finished(second, 't2').cachedTokens).toBe(Math.floor((21 + 4) / 4) * 4);
    expect(finished(second, 't2').cachedTokens).toBe(24);
  });

  it('evicts the least recently freed cached block first, keeping a more recent one for a later hit', () => {
    const engine = new Engine({
      ...TIMING,
      blockSize: 4,
      numGpuBlocks: 4,
      maxNumSeqs: 2,
      maxNumBatchedTokens: 8,
      maxModelLen: 16,
    });
    const a = ids(100, 5);
    const b = ids(200, 5);
    const c = ids(300, 5);
    // Each 5-token prompt takes 2 blocks from the front of the free queue and leaves its first (full) block cached
    // when it ends, freed after its tail: a takes [0 1] -> free [2 3 1 0]; b takes [2 3] -> free [1 0 3 2];
    // c takes [1 0], evicting a's cached block 0 -> free [3 2 0 1]. b's block 2 is still cached.
    run(engine, [{ at: 0, id: 'a', promptTokenIds: a, maxTokens: 1 }]);
    run(engine, [{ at: 100, id: 'b', promptTokenIds: b, maxTokens: 1 }]);
    expect(engine.snapshot()).toMatchObject({ cachedBlocks: 2, evictions: 0, freeBlocks: 4 });
    run(engine, [{ at: 200, id: 'c', promptTokenIds: c, maxTokens: 1 }]);
    expect(engine.snapshot()).toMatchObject({ cachedBlocks: 2, evictions: 1 });
    expect(finished(run(engine, [{ at: 300, id: 'b2', promptTokenIds: b, maxTokens: 1 }]), 'b2').cachedTokens).toBe(4);
    expect(finished(run(engine, [{ at: 400, id: 'a2', promptTokenIds: a, maxTokens: 1 }]), 'a2').cachedTokens).toBe(0);
  });

  it('reports no hits with prefix caching off', () => {
    const engine = new Engine({ ...SMALL, enablePrefixCaching: false });
    const steps = run(engine, [
      { at: 0, id: 'x', promptTokenIds: [...system, 91, 92], maxTokens: 1 },
      { at: 100, id: 'y', promptTokenIds: [...system, 93, 94, 95], maxTokens: 1 },
    ]);
    expect(finished(steps, 'y').cachedTokens).toBe(0);
    expect(engine.snapshot()).toMatchObject({ cachedBlocks: 0, totals: { prefixCacheHits: 0 } });
  });
});

describe('the block pool', () => {
  it('hands out free blocks front first, evicting cached ones in the order they were freed; a hit moves a block to the back', () => {
    const pool = new BlockPool(3);
    const [h0, h1, h2] = [blockHash(undefined, [1]), blockHash(undefined, [2]), blockHash(undefined, [3])];
    expect(pool.allocate(3)).toEqual([0, 1, 2]);
    expect(pool.allocate(1)).toBeUndefined();
    pool.register(0, h0);
    pool.register(1, h1);
    pool.register(2, h2);
    pool.release([2]);
    pool.release([0]);
    pool.release([1]);
    expect([pool.numFree, pool.usage, pool.numCached]).toEqual([3, 0, 3]);
    // A hit on block 0 takes it out of the free queue; released again, it is the most recently freed.
    expect(pool.lookup([h0, h1])).toEqual([0, 1]);
    pool.touch([0]);
    expect(pool.usage).toBeCloseTo(1 / 3, 12);
    pool.release([0]);
    expect(pool.allocate(1)).toEqual([2]);
    expect(pool.lookup([h2])).toEqual([]);
    expect(pool.allocate(1)).toEqual([1]);
    expect(pool.lookup([h0, h1])).toEqual([0]);
    expect(pool.evictions).toBe(2);
  });

  it("chains a block's hash to its parent's, so equal blocks under different prefixes differ", () => {
    const first = blockHash(undefined, [1, 2]);
    expect(blockHash(undefined, [1, 2])).toBe(first);
    expect(blockHash(first, [3, 4])).not.toBe(blockHash(blockHash(undefined, [9, 9]), [3, 4]));
    expect(first).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('preemption', () => {
  it('preempts the most recently started sequence when the cache is full, frees its tail first, and recomputes it from the front of the queue', () => {
    // 4 blocks of 4 tokens. a and b each have a 4-token prompt and want 8 tokens out (12 in all: 3 blocks each).
    const engine = new Engine({
      ...TIMING,
      blockSize: 4,
      numGpuBlocks: 4,
      maxNumSeqs: 2,
      maxNumBatchedTokens: 16,
      maxModelLen: 16,
    });
    // [0, 18]   a and b prefill 4 each (a block each: 0, 1): 10 + 8 = 18; first tokens; blocks 0 and 1 registered.
    // [18, 32]  both decode and each needs a second block (2, 3): the cache is full. 10 + 2 x 2 = 14.
    // [32, 74]  three more decode steps of 14 ms: tokens at 46, 60, 74; at 74 both second blocks are full and registered.
    // [74, 86]  a needs a third block, none is free: b (started after a) is preempted. Its blocks go back tail first
    //           (3 then 1), and a takes block 3, evicting b's second block. Nobody is admitted after a preemption.
    //           a decodes alone: 10 + 2 = 12.
    // [86, 110] b waits at the front of the queue: its 9 tokens (4 prompt + 5 out) could reuse block 1 (its cached
    //           first block) but need 2 more blocks and only block 1 is free. a decodes at 98 and ends at 110.
    // [110, 125] a's 3 blocks are free: b takes block 1 from the cache (4 tokens) and recomputes the other 5:
    //           10 + 5 = 15; it samples its sixth token at 125, 51 ms after its fifth.
    // [125, 149] b decodes its last two tokens at 137 and 149.
    const steps = run(engine, [
      { at: 0, id: 'a', promptTokenIds: ids(100, 4), maxTokens: 8 },
      { at: 0, id: 'b', promptTokenIds: ids(200, 4), maxTokens: 8 },
    ]);
    expect(tokenTimes(steps)).toEqual({ a: [18, 32, 46, 60, 74, 86, 98, 110], b: [18, 32, 46, 60, 74, 125, 137, 149] });
    expect(steps.map((s) => s.preempted)).toEqual([[], [], [], [], [], ['b'], [], [], [], [], []]);
    expect(steps[8]).toMatchObject({ startMs: 110, endMs: 125, prefillTokens: 5, decodeSeqs: 0 });
    expect(finished(steps, 'b')).toMatchObject({ preemptions: 1, cachedTokens: 0, completionTokens: 8, e2eMs: 149 });
    expect(finished(steps, 'a').preemptions).toBe(0);
    // Every step reports the latencies it produced: b's include the 51 ms it spent preempted.
    expect(steps.flatMap((s) => s.interTokenLatencyMs)).toEqual([
      14, 14, 14, 14, 14, 14, 14, 14, 12, 12, 12, 51, 12, 12,
    ]);
    // Queried at each admission: a 4, b 4, b again 9 (found 4). Evicted: b's second block at 74, a's second at 110.
    expect(engine.snapshot()).toMatchObject({
      evictions: 2,
      totals: { preemptions: 1, prefixCacheQueries: 17, prefixCacheHits: 4, generationTokens: 16 },
    });
  });
});

describe('output length', () => {
  const trace = (seed: number): StepResult[] => {
    const engine = new Engine({ ...SMALL, maxModelLen: 256, completionTokens: 20, completionTokensSpread: 0.5, seed });
    return run(
      engine,
      Array.from({ length: 6 }, (_, i) => ({ at: i * 7, id: `r${i}`, promptTokenIds: ids(100 * i, 3 + i) })),
    );
  };

  it('draws it from the seed when the request sets no max_tokens: the same seed and trace give the same outputs', () => {
    const one = trace(7);
    expect(trace(7)).toEqual(one);
    const lengths = (steps: StepResult[]): number[] =>
      steps
        .flatMap((s) => s.finished)
        .sort((x, y) => x.requestId.localeCompare(y.requestId))
        .map((f) => f.completionTokens);
    for (const n of lengths(one)) {
      expect(n).toBeGreaterThanOrEqual(10);
      expect(n).toBeLessThanOrEqual(30);
    }
    expect(lengths(trace(8))).not.toEqual(lengths(one));
    expect(one.flatMap((s) => s.finished).every((f) => f.finishReason === 'stop')).toBe(true);
  });

  it('gives exactly completion_tokens with no spread, and never more than the context leaves', () => {
    const engine = new Engine({ ...SMALL, completionTokens: 16 });
    expect(engine.add({ id: 'a', promptTokenIds: ids(1, 10) }, 0)).toEqual({ outputTokens: 16, finishReason: 'stop' });
    expect(engine.add({ id: 'b', promptTokenIds: ids(1, 10), completionTokens: 3 }, 0)).toEqual({
      outputTokens: 3,
      finishReason: 'stop',
    });
    // 64 - 60 = 4 tokens of context left.
    expect(engine.add({ id: 'c', promptTokenIds: ids(1, 60) }, 0)).toEqual({ outputTokens: 4, finishReason: 'stop' });
    expect(engine.add({ id: 'd', promptTokenIds: ids(1, 10), maxTokens: 54 }, 0)).toEqual({
      outputTokens: 54,
      finishReason: 'length',
    });
  });
});

describe('bad input', () => {
  it("refuses a prompt that does not fit the context, or max_tokens past it, in vLLM's words", () => {
    const engine = new Engine(SMALL);
    const refused = (request: EngineRequest) => engine.add(request, 0);
    expect(refused({ id: 'a', promptTokenIds: ids(1, 64) })).toEqual({
      message:
        "This model's maximum context length is 64 tokens. However, your request has 64 input tokens. Please reduce the length of the input messages.",
      param: 'input_tokens',
    });
    expect(refused({ id: 'b', promptTokenIds: ids(1, 60), maxTokens: 5 })).toEqual({
      message:
        "This model's maximum context length is 64 tokens. However, you requested 5 output tokens and your prompt contains 60 input tokens, for a total of 65 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
      param: 'max_tokens',
    });
    expect(refused({ id: 'c', promptTokenIds: ids(1, 4), maxTokens: 0 })).toEqual({
      message: 'max_tokens must be at least 1, got 0.',
      param: 'max_tokens',
    });
    expect(refused({ id: 'd', promptTokenIds: ids(1, 4), maxTokens: 2.5 })).toMatchObject({ param: 'max_tokens' });
    expect(refused({ id: 'e', promptTokenIds: [] })).toMatchObject({
      param: 'input_tokens',
      message: expect.stringContaining('empty'),
    });
    expect(engine.snapshot()).toMatchObject({ waiting: 0, running: 0 });
  });

  it('refuses non-positive and inconsistent parameters, naming them', () => {
    const bad: [Partial<EngineConfig>, string][] = [
      [{ maxNumSeqs: 0 }, 'max_num_seqs must be a positive integer, got 0'],
      [{ blockSize: 1.5 }, 'block_size must be a positive integer, got 1.5'],
      [{ numGpuBlocks: -3 }, 'num_gpu_blocks must be a positive integer, got -3'],
      [{ maxModelLen: Number.NaN }, 'max_model_len must be a positive integer, got NaN'],
      [{ maxNumBatchedTokens: 0 }, 'max_num_batched_tokens must be a positive integer, got 0'],
      [{ completionTokens: 0 }, 'completion_tokens must be a positive integer, got 0'],
      [{ stepOverheadMs: -1 }, 'step_overhead_ms must be a non-negative number of milliseconds, got -1'],
      [
        { prefillMsPerToken: Number.POSITIVE_INFINITY },
        'prefill_ms_per_token must be a non-negative number of milliseconds, got Infinity',
      ],
      [{ completionTokensSpread: 2 }, 'completion_tokens_spread must be a number in [0, 1], got 2'],
      [{ seed: 0.5 }, 'seed must be an integer, got 0.5'],
      [{ maxNumSeqs: 64, maxNumBatchedTokens: 32 }, 'max_num_batched_tokens (32) must be at least max_num_seqs (64)'],
      [
        { numGpuBlocks: 10, blockSize: 16, maxModelLen: 200 },
        'num_gpu_blocks x block_size (10 x 16 = 160 tokens) must hold one request of max_model_len (200) tokens',
      ],
    ];
    for (const [overrides, message] of bad) {
      expect(() => resolveEngineConfig(overrides)).toThrow(EngineConfigError);
      expect(() => new Engine(overrides)).toThrow(message);
    }
    expect(resolveEngineConfig()).toEqual(DEFAULT_ENGINE_CONFIG);
  });

  it('refuses a request out of time order or under an id already in it', () => {
    const engine = new Engine(SMALL);
    engine.add({ id: 'a', promptTokenIds: ids(1, 2), maxTokens: 1 }, 10);
    expect(() => engine.add({ id: 'b', promptTokenIds: ids(1, 2) }, 9)).toThrow(/time order/);
    expect(() => engine.add({ id: 'a', promptTokenIds: ids(1, 2) }, 10)).toThrow(/already/);
  });
});

describe("arrivals between a step's end and the next advance", () => {
  it('leave a request out of any step that began before it arrived', () => {
    const engine = new Engine(SMALL);
    engine.add({ id: 'a', promptTokenIds: ids(100, 2), maxTokens: 3 }, 0);
    engine.advanceTo(0);
    // a's prefill ends at 12 and its decode steps start at 12 and 26; b arrives at 20, before anyone advanced past 12.
    // [12, 24] a decodes alone: b was not there when it began. [24, 38] a decodes, b prefills 2: 10 + 2 + 2 = 14.
    engine.add({ id: 'b', promptTokenIds: ids(200, 2), maxTokens: 1 }, 20);
    const steps = engine.advanceTo(Number.POSITIVE_INFINITY);
    expect(steps.map((s) => [s.startMs, s.endMs])).toEqual([
      [0, 12],
      [12, 24],
      [24, 38],
    ]);
    expect(tokenTimes(steps)).toEqual({ a: [12, 24, 38], b: [38] });
    expect(finished(steps, 'b').queueMs).toBe(4);
  });

  it('start an idle engine at the arrival, not at the end of its last step', () => {
    const engine = new Engine(SMALL);
    engine.add({ id: 'a', promptTokenIds: ids(100, 2), maxTokens: 1 }, 0);
    engine.advanceTo(0);
    // a ends at 12; nobody advances until 50; b arrived at 30.
    engine.add({ id: 'b', promptTokenIds: ids(200, 2), maxTokens: 1 }, 30);
    expect(engine.nextEventMs()).toBe(12);
    const steps = engine.advanceTo(50);
    expect(steps.map((s) => [s.startMs, s.endMs])).toEqual([
      [0, 12],
      [30, 42],
    ]);
    expect(engine.nextEventMs()).toBeUndefined();
  });
});

describe('the tokenizer and chat template', () => {
  it('cuts text into pieces by the documented rule, ids hashed from the text', () => {
    expect(tokenPieces('Hello world, how are  you?\n')).toEqual([
      'Hell',
      'o',
      ' worl',
      'd',
      ',',
      ' how',
      ' are',
      ' ',
      ' you',
      '?',
      '\n',
    ]);
    expect(tokenPieces('<|eot_id|>héllo 42')).toEqual(['<|eot_id|>', 'héll', 'o', ' 42']);
    expect(tokenize('same text')).toEqual(tokenize('same text'));
    expect(tokenize('a b')).not.toEqual(tokenize('a c'));
    expect([0, 1, 9, 10, 11].map(outputTokenText)).toEqual(['tok0', ' tok1', ' tok9', ' tok0', ' tok1']);
  });

  it('renders a chat as the Llama 3 template does, so a shared system prompt is a shared token prefix', () => {
    const system = { role: 'system', content: 'You are terse.' };
    expect(renderChat([system, { role: 'user', content: ' hi ' }])).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
    const one = tokenize(renderChat([system, { role: 'user', content: 'first question' }]));
    const two = tokenize(renderChat([system, { role: 'user', content: 'another one' }]));
    const shared = tokenize(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n',
    );
    expect(one.slice(0, shared.length)).toEqual(shared);
    expect(two.slice(0, shared.length)).toEqual(shared);
    // An empty conversation is 8 tokens: <|begin_of_text|> <|start_header_id|> assi stan t <|end_header_id|> \n \n
    expect(tokenize(renderChat([]))).toHaveLength(8);
  });
});
