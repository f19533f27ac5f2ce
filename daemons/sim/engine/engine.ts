// A small model of a vLLM V1 engine, pure and deterministic: requests arrive with their prompt tokens, a scheduler runs
// continuous batching with chunked prefill over a paged KV cache with prefix caching, and every engine step takes a
// time computed from the work it holds. Time is whatever the caller says it is (milliseconds on any monotonic clock);
// the only randomness is the seeded draw of an output length. The HTTP server feeds it requests and runs its steps in
// real time; the tests run it on a scripted clock.
//
// The scheduler follows vLLM V1's: each step has a budget of max_num_batched_tokens. The running sequences come first,
// oldest first, each scheduling the tokens it has not computed yet (one for a decode, a chunk of the prompt for a
// prefill); when the KV cache has no block left for one, the most recently started running sequence is preempted (its
// blocks freed, its computed tokens dropped, and it goes back to the front of the waiting queue to be recomputed).
// Then, if nothing was preempted, waiting requests are admitted in FIFO order while the batch has fewer than
// max_num_seqs sequences and the budget and the cache allow, each starting after the longest run of its full blocks
// found in the prefix cache. A step that completes a sequence's known tokens samples its next token.
import { BlockPool, blockHash } from './block-pool.ts';
import { resolveEngineConfig } from './config.ts';
import type { EngineConfig } from './config.ts';
import { seededRandom } from './random.ts';
import { outputTokenText, tokenId } from './tokenizer.ts';

export type FinishReason = 'stop' | 'length';

export interface EngineRequest {
  readonly id: string;
  readonly promptTokenIds: readonly number[];
  /** The request's max_tokens: exactly this many tokens come out, finishing with "length". */
  readonly maxTokens?: number | undefined;
  /** Without maxTokens: the centre of the seeded draw of the output length (finishing with "stop"). */
  readonly completionTokens?: number | undefined;
  /** When the request reached the server, before any front-end delay (TTFT and e2e latency count from here). */
  readonly arrivalMs?: number | undefined;
}

/** Why a request was refused, worded as a vLLM server words it in its 400 answer. */
export interface EngineRefusal {
  readonly message: string;
  readonly param: 'input_tokens' | 'max_tokens';
}

export function isRefusal(answer: Admission | EngineRefusal): answer is EngineRefusal {
  return 'message' in answer;
}

export interface Admission {
  /** Output tokens the request will get. */
  readonly outputTokens: number;
  readonly finishReason: FinishReason;
}

export interface TokenEvent {
  readonly requestId: string;
  /** 0 for the first output token. */
  readonly index: number;
  readonly text: string;
  readonly atMs: number;
  /** Set on the request's last token. */
  readonly finish?: FinishedRequest;
}

/** A finished request's usage and timings, as vLLM records them for its request histograms. */
export interface FinishedRequest {
  readonly requestId: string;
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens found in the prefix cache when the request was first scheduled (usage cached_tokens). */
  readonly cachedTokens: number;
  readonly maxTokens: number | undefined;
  readonly e2eMs: number;
  /** From entering the engine to being scheduled the first time. */
  readonly queueMs: number;
  /** From first scheduled to the first token. */
  readonly prefillMs: number;
  /** From the first token to the last. */
  readonly decodeMs: number;
  /** From first scheduled to the last token. */
  readonly inferenceMs: number;
  readonly preemptions: number;
}

/** What one engine step did, reported when it ends (vLLM's per-iteration stats). */
export interface StepResult {
  readonly startMs: number;
  readonly endMs: number;
  /** Prompt (or recomputed) tokens computed, and sequences that decoded one token. */
  readonly prefillTokens: number;
  readonly decodeSeqs: number;
  readonly tokens: readonly TokenEvent[];
  /** Prompt lengths of the requests that produced their first token in this step. */
  readonly promptTokens: number;
  readonly timeToFirstTokenMs: readonly number[];
  readonly interTokenLatencyMs: readonly number[];
  readonly finished: readonly FinishedRequest[];
  readonly preempted: readonly string[];
}

/** What a step costs, in milliseconds. */
export interface StepTiming {
  readonly stepOverheadMs: number;
  readonly prefillMsPerToken: number;
  readonly decodeMsPerSeq: number;
  /** A floor on a step's duration. */
  readonly minStepMs: number;
}

export interface EngineTotals {
  /** Prompt tokens of requests that produced their first token, cached or not (vLLM's prompt_tokens). */
  promptTokens: number;
  generationTokens: number;
  /** Tokens looked up in the prefix cache at admission, and how many of them were found. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  preemptions: number;
  finished: Record<FinishReason, number>;
}

export interface EngineSnapshot {
  readonly waiting: number;
  readonly running: number;
  /** Fraction of KV blocks in use (vLLM's kv_cache_usage_perc). */
  readonly kvCacheUsage: number;
  readonly freeBlocks: number;
  readonly cachedBlocks: number;
  readonly evictions: number;
  readonly totals: Readonly<EngineTotals>;
}

interface Sequence {
  readonly id: string;
  /** Prompt then output token ids. */
  readonly tokens: number[];
  readonly promptLen: number;
  readonly outputTokens: number;
  readonly finishReason: FinishReason;
  readonly maxTokens: number | undefined;
  readonly arrivalMs: number;
  readonly queuedMs: number;
  numComputed: number;
  blocks: number[];
  /** Hashes of the sequence's full blocks, in order, as far as computed so far. */
  readonly blockHashes: string[];
  /** Leading blocks already registered in the prefix cache. */
  registeredBlocks: number;
  scheduledMs: number | undefined;
  firstTokenMs: number | undefined;
  lastTokenMs: number | undefined;
  cachedTokens: number;
  preemptions: number;
  state: 'waiting' | 'running' | 'done';
}

interface Step {
  readonly startMs: number;
  readonly endMs: number;
  readonly work: readonly { seq: Sequence; tokens: number }[];
  readonly prefillTokens: number;
  readonly decodeSeqs: number;
  readonly preempted: readonly string[];
}

export class Engine {
  readonly config: EngineConfig;
  readonly #pool: BlockPool;
  readonly #random: () => number;
  readonly #waiting: Sequence[] = [];
  readonly #running: Sequence[] = [];
  readonly #byId = new Map<string, Sequence>();
  readonly #totals: EngineTotals = {
    promptTokens: 0,
    generationTokens: 0,
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    preemptions: 0,
    finished: { stop: 0, length: 0 },
  };
  #inFlight: Step | undefined;
  /** Model time: where the next step starts when there is work and none in flight. */
  #clockMs = 0;
  #timing: StepTiming;
  #lastArrivalMs = Number.NEGATIVE_INFINITY;

  constructor(config: Partial<EngineConfig> = {}) {
    this.config = resolveEngineConfig(config);
    this.#pool = new BlockPool(this.config.numGpuBlocks);
    this.#random = seededRandom(this.config.seed);
    const { stepOverheadMs, prefillMsPerToken, decodeMsPerSeq } = this.config;
    this.#timing = { stepOverheadMs, prefillMsPerToken, decodeMsPerSeq, minStepMs: 0 };
  }

  /** The step costs in force: the configured ones until setTiming changes them. */
  get timing(): Readonly<StepTiming> {
    return this.#timing;
  }

  /**
   * Changes the step costs from the next step on; minStepMs is a floor on every step's duration (the sim's
   * --tokens-per-second caps each sequence at 1000 / minStepMs tokens a second).
   */
  setTiming(timing: Partial<StepTiming>): void {
    for (const [key, ms] of Object.entries(timing)) {
      if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)
        throw new RangeError(`${key} must be a non-negative number of milliseconds, got ${String(ms)}`);
    }
    this.#timing = { ...this.#timing, ...timing };
  }

  /**
   * Queues a request at `nowMs`, or refuses it as vLLM does when it cannot fit the model's context. Requests come in
   * time order; one added after a step ended that has not been advanced past yet waits for a step that starts after it.
   */
  add(request: EngineRequest, nowMs: number): Admission | EngineRefusal {
    if (nowMs < this.#lastArrivalMs)
      throw new Error(`engine: requests must arrive in time order (${nowMs} ms after ${this.#lastArrivalMs} ms)`);
    if (this.#byId.has(request.id)) throw new Error(`engine: request id ${request.id} is already in the engine`);
    const { maxModelLen } = this.config;
    const promptLen = request.promptTokenIds.length;
    if (promptLen === 0)
      return { message: 'The prompt is empty: it must contain at least one token.', param: 'input_tokens' };
    if (promptLen >= maxModelLen) {
      return {
        message: `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptLen} input tokens. Please reduce the length of the input messages.`,
        param: 'input_tokens',
      };
    }
    const { maxTokens } = request;
    if (maxTokens !== undefined && (!Number.isSafeInteger(maxTokens) || maxTokens < 1)) {
      return { message: `max_tokens must be at least 1, got ${String(maxTokens)}.`, param: 'max_tokens' };
    }
    if (maxTokens !== undefined && promptLen + maxTokens > maxModelLen) {
      return {
        message:
          `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${maxTokens} output tokens and your prompt contains ` +
          `${promptLen} input tokens, for a total of ${promptLen + maxTokens} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`,
        param: 'max_tokens',
      };
    }
    const outputTokens =
      maxTokens ??
      Math.min(
        this.#drawOutputTokens(request.completionTokens ?? this.config.completionTokens),
        maxModelLen - promptLen,
      );
    const finishReason: FinishReason = maxTokens === undefined ? 'stop' : 'length';
    const seq: Sequence = {
      id: request.id,
      tokens: [...request.promptTokenIds],
      promptLen,
      outputTokens,
      finishReason,
      maxTokens,
      arrivalMs: request.arrivalMs ?? nowMs,
      queuedMs: nowMs,
      numComputed: 0,
      blocks: [],
      blockHashes: [],
      registeredBlocks: 0,
      scheduledMs: undefined,
      firstTokenMs: undefined,
      lastTokenMs: undefined,
      cachedTokens: 0,
      preemptions: 0,
      state: 'waiting',
    };
    this.#byId.set(seq.id, seq);
    this.#waiting.push(seq);
    this.#lastArrivalMs = nowMs;
    return { outputTokens, finishReason };
  }

  /** Drops a request (its client went away), freeing its blocks. False when it is not in the engine. */
  abort(id: string): boolean {
    const seq = this.#byId.get(id);
    if (seq === undefined) return false;
    this.#byId.delete(id);
    const queue = seq.state === 'running' ? this.#running : this.#waiting;
    queue.splice(queue.indexOf(seq), 1);
    this.#freeBlocks(seq);
    seq.state = 'done';
    return true;
  }

  /** Completes every step that ends by `nowMs` and starts the next one, returning what the completed steps did. */
  advanceTo(nowMs: number, maxSteps = Number.POSITIVE_INFINITY): StepResult[] {
    const results: StepResult[] = [];
    while (results.length < maxSteps) {
      if (this.#inFlight !== undefined) {
        if (this.#inFlight.endMs > nowMs) break;
        const step = this.#inFlight;
        this.#inFlight = undefined;
        this.#clockMs = step.endMs;
        results.push(this.#complete(step));
      }
      if (this.#waiting.length === 0 && this.#running.length === 0) break;
      // An idle engine starts its next step when the first waiting request arrived.
      if (this.#running.length === 0) this.#clockMs = Math.max(this.#clockMs, this.#waiting[0]!.queuedMs);
      if (this.#clockMs > nowMs) break;
      this.#inFlight = this.#schedule(this.#clockMs);
    }
    return results;
  }

  /** When the engine next has something to do: the end of the step in flight, else when work waits, else undefined. */
  nextEventMs(): number | undefined {
    if (this.#inFlight !== undefined) return this.#inFlight.endMs;
    if (this.#running.length > 0) return this.#clockMs;
    return this.#waiting.length > 0 ? Math.max(this.#clockMs, this.#waiting[0]!.queuedMs) : undefined;
  }

  snapshot(): EngineSnapshot {
    return {
      waiting: this.#waiting.length,
      running: this.#running.length,
      kvCacheUsage: this.#pool.usage,
      freeBlocks: this.#pool.numFree,
      cachedBlocks: this.#pool.numCached,
      evictions: this.#pool.evictions,
      totals: { ...this.#totals, finished: { ...this.#totals.finished } },
    };
  }

  #drawOutputTokens(centre: number): number {
    const spread = this.config.completionTokensSpread;
    const low = Math.max(1, Math.round(centre * (1 - spread)));
    const high = Math.max(low, Math.round(centre * (1 + spread)));
    return low + Math.floor(this.#random() * (high - low + 1));
  }

  #schedule(startMs: number): Step {
    const { blockSize, maxNumSeqs } = this.config;
    let budget = this.config.maxNumBatchedTokens;
    const work: { seq: Sequence; tokens: number }[] = [];
    const preempted: string[] = [];
    for (let i = 0; i < this.#running.length && budget > 0; i++) {
      const seq = this.#running[i]!;
      const tokens = Math.min(seq.tokens.length - seq.numComputed, budget);
      let fits = this.#allocate(seq, seq.numComputed + tokens, []);
      while (!fits) {
        const victim = this.#running.pop()!;
        this.#preempt(victim);
        preempted.push(victim.id);
        if (victim === seq) break;
        fits = this.#allocate(seq, seq.numComputed + tokens, []);
      }
      if (!fits) break;
      work.push({ seq, tokens });
      budget -= tokens;
    }
    // As in vLLM, a step that had to preempt admits nobody: the cache is short already.
    while (preempted.length === 0 && this.#waiting.length > 0 && budget > 0 && this.#running.length < maxNumSeqs) {
      const seq = this.#waiting[0]!;
      if (seq.queuedMs > startMs) break; // arrived after this step began
      // At least one token is always computed, so that the step can sample the next one from it.
      const hits = this.config.enablePrefixCaching
        ? this.#pool.lookup(this.#hashes(seq).slice(0, Math.floor((seq.tokens.length - 1) / blockSize)))
        : [];
      const cached = hits.length * blockSize;
      const tokens = Math.min(seq.tokens.length - cached, budget);
      if (!this.#allocate(seq, cached + tokens, hits)) break;
      this.#waiting.shift();
      this.#running.push(seq);
      seq.state = 'running';
      seq.numComputed = cached;
      seq.registeredBlocks = hits.length;
      this.#totals.prefixCacheQueries += seq.tokens.length;
      this.#totals.prefixCacheHits += cached;
      if (seq.scheduledMs === undefined) {
        seq.scheduledMs = startMs;
        seq.cachedTokens = cached;
      }
      work.push({ seq, tokens });
      budget -= tokens;
    }
    if (work.length === 0) throw new Error('engine: a step with work waiting scheduled nothing');
    let prefillTokens = 0;
    let decodeSeqs = 0;
    for (const { seq, tokens } of work) {
      if (tokens === 1 && seq.tokens.length > seq.promptLen && seq.numComputed === seq.tokens.length - 1) decodeSeqs++;
      else prefillTokens += tokens;
    }
    const { stepOverheadMs, prefillMsPerToken, decodeMsPerSeq, minStepMs } = this.#timing;
    const duration = Math.max(
      minStepMs,
      stepOverheadMs + prefillMsPerToken * prefillTokens + decodeMsPerSeq * decodeSeqs,
    );
    return { startMs, endMs: startMs + duration, work, prefillTokens, decodeSeqs, preempted };
  }

  /** Gives `seq` blocks for its first `tokens` tokens, reusing the cached `hits` first; false when the cache is short. */
  #allocate(seq: Sequence, tokens: number, hits: readonly number[]): boolean {
    const needed = Math.ceil(tokens / this.config.blockSize) - seq.blocks.length - hits.length;
    if (needed > this.#pool.numFree - this.#pool.countFree(hits)) return false;
    this.#pool.touch(hits);
    seq.blocks.push(...hits);
    if (needed > 0) seq.blocks.push(...this.#pool.allocate(needed)!);
    return true;
  }

  #preempt(seq: Sequence): void {
    this.#freeBlocks(seq);
    seq.numComputed = 0;
    seq.preemptions++;
    seq.state = 'waiting';
    this.#waiting.unshift(seq);
    this.#totals.preemptions++;
  }

  /** Frees the blocks last first, so that a sequence's tail is evicted before its prefix (as vLLM does). */
  #freeBlocks(seq: Sequence): void {
    this.#pool.release([...seq.blocks].reverse());
    seq.blocks = [];
    seq.registeredBlocks = 0;
  }

  /** Hashes of every full block of the sequence's tokens. */
  #hashes(seq: Sequence): readonly string[] {
    const { blockSize } = this.config;
    for (let i = seq.blockHashes.length; (i + 1) * blockSize <= seq.tokens.length; i++) {
      seq.blockHashes.push(blockHash(seq.blockHashes[i - 1], seq.tokens.slice(i * blockSize, (i + 1) * blockSize)));
    }
    return seq.blockHashes;
  }

  #complete(step: Step): StepResult {
    const tokens: TokenEvent[] = [];
    const timeToFirstTokenMs: number[] = [];
    const interTokenLatencyMs: number[] = [];
    const finished: FinishedRequest[] = [];
    let promptTokens = 0;
    const at = step.endMs;
    for (const { seq, tokens: computed } of step.work) {
      if (seq.state !== 'running') continue; // aborted while the step ran
      seq.numComputed += computed;
      this.#register(seq);
      if (seq.numComputed < seq.tokens.length) continue; // a prefill chunk short of the end
      const index = seq.tokens.length - seq.promptLen;
      const text = outputTokenText(index);
      seq.tokens.push(tokenId(text));
      this.#totals.generationTokens++;
      if (seq.firstTokenMs === undefined) {
        seq.firstTokenMs = at;
        timeToFirstTokenMs.push(at - seq.arrivalMs);
        promptTokens += seq.promptLen;
      } else {
        interTokenLatencyMs.push(at - seq.lastTokenMs!);
      }
      seq.lastTokenMs = at;
      if (index + 1 < seq.outputTokens) {
        tokens.push({ requestId: seq.id, index, text, atMs: at });
        continue;
      }
      const done = this.#finish(seq, at);
      finished.push(done);
      tokens.push({ requestId: seq.id, index, text, atMs: at, finish: done });
    }
    this.#totals.promptTokens += promptTokens;
    return {
      startMs: step.startMs,
      endMs: step.endMs,
      prefillTokens: step.prefillTokens,
      decodeSeqs: step.decodeSeqs,
      tokens,
      promptTokens,
      timeToFirstTokenMs,
      interTokenLatencyMs,
      finished,
      preempted: step.preempted,
    };
  }

  /** Registers the sequence's computed full blocks in the prefix cache. */
  #register(seq: Sequence): void {
    if (!this.config.enablePrefixCaching) return;
    const full = Math.floor(seq.numComputed / this.config.blockSize);
    const hashes = this.#hashes(seq);
    for (let i = seq.registeredBlocks; i < full; i++) this.#pool.register(seq.blocks[i]!, hashes[i]!);
    seq.registeredBlocks = Math.max(seq.registeredBlocks, full);
  }

  #finish(seq: Sequence, at: number): FinishedRequest {
    this.#running.splice(this.#running.indexOf(seq), 1);
    this.#byId.delete(seq.id);
    this.#freeBlocks(seq);
    seq.state = 'done';
    this.#totals.finished[seq.finishReason]++;
    const scheduled = seq.scheduledMs!;
    const first = seq.firstTokenMs!;
    return {
      requestId: seq.id,
      finishReason: seq.finishReason,
      promptTokens: seq.promptLen,
      completionTokens: seq.outputTokens,
      cachedTokens: seq.cachedTokens,
      maxTokens: seq.maxTokens,
      e2eMs: at - seq.arrivalMs,
      queueMs: scheduled - seq.queuedMs,
      prefillMs: first - scheduled,
      decodeMs: at - first,
      inferenceMs: at - scheduled,
      preemptions: seq.preemptions,
    };
  }
}
