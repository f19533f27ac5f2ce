// The engine's state and history as a vLLM server exports them on /metrics: the same names, units, labels
// (model_name, engine) and histogram buckets as vllm/v1/metrics/loggers.py, so a scraper written for vLLM reads the sim
// unchanged. Two sim-only gauges stay for the example grid's signal names (sim_queue_depth, sim_kv_cache_utilization),
// and sim_max_num_seqs publishes the scheduler limit a queue count is normalised by (vLLM exports no metric for it).
// A value forced through /admin/state replaces the engine's in every gauge it stands for, until cleared.
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { Engine, FinishReason, StepResult } from './engine/engine.ts';
import type { SimState } from './state.ts';

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
  640.0, 2560.0,
];
const ITL_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
const REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
  7680.0,
];
const ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
const FINISH_REASONS: readonly FinishReason[] = ['stop', 'length'];

/** vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to `max`. */
export function oneTwoFiveBuckets(max: number): number[] {
  const buckets: number[] = [];
  for (let scale = 1; ; scale *= 10) {
    for (const m of [1, 2, 5]) {
      if (m * scale > max) return buckets;
      buckets.push(m * scale);
    }
  }
}

export interface EngineMetrics {
  /** Observes what completed steps did (latency and size histograms). */
  record(steps: readonly StepResult[]): void;
}

export function registerEngineMetrics(
  registry: Registry,
  engine: Engine,
  state: SimState,
  modelName: string,
): EngineMetrics {
  const registers = [registry];
  const labelNames = ['model_name', 'engine'] as const;
  const labels = { model_name: modelName, engine: '0' };
  const { config } = engine;
  const gauge = (name: string, help: string, value: () => number): void =>
    void new Gauge({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.set(labels, value());
      },
    });
  const counter = (name: string, help: string, value: () => number): void =>
    void new Counter({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        this.inc(labels, value());
      },
    });
  const histogram = (name: string, help: string, buckets: number[]): Histogram<'model_name' | 'engine'> =>
    new Histogram({ name, help, labelNames, buckets, registers });

  // A forced queue depth q reads as a full batch (running = max_num_seqs) with q·M/(1 − q) requests waiting, so what
  // an engine preset normalises as waiting / (waiting + running) is q (exactly when that count is whole, else to the
  // nearest request); q = 1 is a queue with nothing running.
  const forcedWaiting = (q: number): number =>
    q >= 1 ? config.maxNumSeqs : Math.round((q * config.maxNumSeqs) / (1 - q));
  const waiting = (): number =>
    state.queue_depth === null ? engine.snapshot().waiting : forcedWaiting(state.queue_depth);
  const running = (): number =>
    state.queue_depth === null ? engine.snapshot().running : state.queue_depth >= 1 ? 0 : config.maxNumSeqs;
  const kvUsage = (): number => state.kv_cache_utilization ?? engine.snapshot().kvCacheUsage;

  gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', running);
  gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', waiting);
  gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', kvUsage);
  counter(
    'vllm:prefix_cache_queries_total',
    'Prefix cache queries, in terms of number of queried tokens.',
    () => engine.snapshot().totals.prefixCacheQueries,
  );
  counter(
    'vllm:prefix_cache_hits_total',
    'Prefix cache hits, in terms of number of cached tokens.',
    () => engine.snapshot().totals.prefixCacheHits,
  );
  counter(
    'vllm:num_preemptions_total',
    'Cumulative number of preemption from the engine.',
    () => engine.snapshot().totals.preemptions,
  );
  counter(
    'vllm:prompt_tokens_total',
    'Number of prefill tokens processed.',
    () => engine.snapshot().totals.promptTokens,
  );
  counter(
    'vllm:generation_tokens_total',
    'Number of generation tokens processed.',
    () => engine.snapshot().totals.generationTokens,
  );
  new Counter({
    name: 'vllm:request_success_total',
    help: 'Count of successfully processed requests.',
    labelNames: [...labelNames, 'finished_reason'],
    registers,
    collect() {
      this.reset();
      const { finished } = engine.snapshot().totals;
      for (const reason of FINISH_REASONS) this.inc({ ...labels, finished_reason: reason }, finished[reason]);
    },
  });
  // vLLM's CacheConfig as an info metric (a gauge fixed at 1 whose labels carry the values); a subset of its fields.
  const cacheInfo = {
    block_size: String(config.blockSize),
    cache_dtype: 'auto',
    enable_prefix_caching: config.enablePrefixCaching ? 'True' : 'False',
    num_gpu_blocks: String(config.numGpuBlocks),
    prefix_caching_hash_algo: 'sha256',
    engine: '0',
  };
  new Gauge({
    name: 'vllm:cache_config_info',
    help: 'Information of the LLMEngine CacheConfig',
    labelNames: Object.keys(cacheInfo),
    registers,
  }).set(cacheInfo, 1);

  new Gauge({
    name: 'sim_max_num_seqs',
    help: "The scheduler's max_num_seqs: the running batch at most.",
    registers,
  }).set(config.maxNumSeqs);
  new Gauge({
    name: 'sim_queue_depth',
    help: 'Requests waiting over max_num_seqs, at most 1 (or the value forced through /admin/state).',
    registers,
    collect() {
      this.set(state.queue_depth ?? Math.min(1, engine.snapshot().waiting / config.maxNumSeqs));
    },
  });
  new Gauge({
    name: 'sim_kv_cache_utilization',
    help: 'Fraction of KV-cache blocks in use (or the value forced through /admin/state).',
    registers,
    collect() {
      this.set(kvUsage());
    },
  });

  const ttft = histogram(
    'vllm:time_to_first_token_seconds',
    'Histogram of time to first token in seconds.',
    TTFT_BUCKETS,
  );
  const itl = histogram(
    'vllm:inter_token_latency_seconds',
    'Histogram of inter-token latency in seconds.',
    ITL_BUCKETS,
  );
  const tpot = histogram(
    'vllm:request_time_per_output_token_seconds',
    'Histogram of time_per_output_token_seconds per request.',
    ITL_BUCKETS,
  );
  const e2e = histogram(
    'vllm:e2e_request_latency_seconds',
    'Histogram of e2e request latency in seconds.',
    REQUEST_LATENCY_BUCKETS,
  );
  const queue = histogram(
    'vllm:request_queue_time_seconds',
    'Histogram of time spent in WAITING phase for request.',
    REQUEST_LATENCY_BUCKETS,
  );
  const inference = histogram(
    'vllm:request_inference_time_seconds',
    'Histogram of time spent in RUNNING phase for request.',
    REQUEST_LATENCY_BUCKETS,
  );
  const prefill = histogram(
    'vllm:request_prefill_time_seconds',
    'Histogram of time spent in PREFILL phase for request.',
    REQUEST_LATENCY_BUCKETS,
  );
  const decode = histogram(
    'vllm:request_decode_time_seconds',
    'Histogram of time spent in DECODE phase for request.',
    REQUEST_LATENCY_BUCKETS,
  );
  const promptTokens = histogram(
    'vllm:request_prompt_tokens',
    'Number of prefill tokens processed.',
    oneTwoFiveBuckets(config.maxModelLen),
  );
  const generationTokens = histogram(
    'vllm:request_generation_tokens',
    'Number of generation tokens processed.',
    oneTwoFiveBuckets(config.maxModelLen),
  );
  const iterationTokens = histogram(
    'vllm:iteration_tokens_total',
    'Histogram of number of tokens per engine_step.',
    ITERATION_TOKEN_BUCKETS,
  );
  const seconds = (ms: number): number => ms / 1000;

  return {
    record(steps) {
      for (const step of steps) {
        iterationTokens.observe(labels, step.prefillTokens + step.decodeSeqs);
        for (const ms of step.timeToFirstTokenMs) ttft.observe(labels, seconds(ms));
        for (const ms of step.interTokenLatencyMs) itl.observe(labels, seconds(ms));
        for (const done of step.finished) {
          e2e.observe(labels, seconds(done.e2eMs));
          queue.observe(labels, seconds(done.queueMs));
          prefill.observe(labels, seconds(done.prefillMs));
          decode.observe(labels, seconds(done.decodeMs));
          inference.observe(labels, seconds(done.inferenceMs));
          promptTokens.observe(labels, done.promptTokens);
          generationTokens.observe(labels, done.completionTokens);
          if (done.completionTokens > 1) tpot.observe(labels, seconds(done.decodeMs / (done.completionTokens - 1)));
        }
      }
    },
  };
}
