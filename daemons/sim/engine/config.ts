// The engine's parameters, their defaults and their validation. The defaults describe one vLLM V1 server running
// Llama-3.1-8B-Instruct (bf16) on one H100 80GB with vLLM's own defaults; daemons/sim/README.md gives the source or
// the arithmetic behind each number.

export interface EngineConfig {
  /** Sequences in the running batch at most (vLLM --max-num-seqs). */
  readonly maxNumSeqs: number;
  /** Tokens one engine step may schedule, prefill chunks and decodes together (vLLM --max-num-batched-tokens). */
  readonly maxNumBatchedTokens: number;
  /** Tokens per KV-cache block (vLLM --block-size). */
  readonly blockSize: number;
  /** KV-cache blocks in all (vLLM profiles this from GPU memory; --num-gpu-blocks-override sets it). */
  readonly numGpuBlocks: number;
  /** Prompt plus output tokens of one request at most (vLLM --max-model-len). */
  readonly maxModelLen: number;
  /** Automatic prefix caching (vLLM --enable-prefix-caching, on by default in V1). */
  readonly enablePrefixCaching: boolean;
  /** Milliseconds every step costs whatever it holds: the weight read and the kernel launches. */
  readonly stepOverheadMs: number;
  /** Milliseconds per prompt token computed in a step (cached prompt tokens cost nothing). */
  readonly prefillMsPerToken: number;
  /** Milliseconds per sequence decoding one token in a step. */
  readonly decodeMsPerSeq: number;
  /** Output tokens of a request that sets no max_tokens: the centre of the draw. */
  readonly completionTokens: number;
  /** Width of that draw as a fraction of completionTokens: uniform in [n(1-s), n(1+s)]; 0 gives exactly n. */
  readonly completionTokensSpread: number;
  /** Seed of the random source behind the output-length draw. */
  readonly seed: number;
}

export const DEFAULT_ENGINE_CONFIG: EngineConfig = {
  maxNumSeqs: 1024,
  maxNumBatchedTokens: 8192,
  blockSize: 16,
  numGpuBlocks: 28_000,
  maxModelLen: 131_072,
  enablePrefixCaching: true,
  stepOverheadMs: 6.4,
  prefillMsPerToken: 0.035,
  decodeMsPerSeq: 0.04,
  completionTokens: 16,
  completionTokensSpread: 0,
  seed: 0,
};

/** Steps that take no time: for tests whose sim should answer as fast as the event loop allows. */
export const INSTANT_TIMING: Pick<EngineConfig, 'stepOverheadMs' | 'prefillMsPerToken' | 'decodeMsPerSeq'> = {
  stepOverheadMs: 0,
  prefillMsPerToken: 0,
  decodeMsPerSeq: 0,
};

export class EngineConfigError extends Error {}

const INTEGERS = [
  'maxNumSeqs',
  'maxNumBatchedTokens',
  'blockSize',
  'numGpuBlocks',
  'maxModelLen',
  'completionTokens',
] as const;
const DURATIONS = ['stepOverheadMs', 'prefillMsPerToken', 'decodeMsPerSeq'] as const;

/** vLLM's spelling of a parameter, which is also the sim's flag without its dashes. */
export function parameterName(key: keyof EngineConfig): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The defaults with `overrides` on top, checked; throws EngineConfigError naming the first bad parameter. */
export function resolveEngineConfig(overrides: Partial<EngineConfig> = {}): EngineConfig {
  const config: EngineConfig = { ...DEFAULT_ENGINE_CONFIG, ...overrides };
  for (const key of INTEGERS) {
    const v = config[key];
    if (!Number.isSafeInteger(v) || v < 1)
      throw new EngineConfigError(`${parameterName(key)} must be a positive integer, got ${String(v)}`);
  }
  for (const key of DURATIONS) {
    const v = config[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      throw new EngineConfigError(
        `${parameterName(key)} must be a non-negative number of milliseconds, got ${String(v)}`,
      );
  }
  const spread = config.completionTokensSpread;
  if (typeof spread !== 'number' || !Number.isFinite(spread) || spread < 0 || spread > 1) {
    throw new EngineConfigError(`completion_tokens_spread must be a number in [0, 1], got ${String(spread)}`);
  }
  if (!Number.isSafeInteger(config.seed))
    throw new EngineConfigError(`seed must be an integer, got ${String(config.seed)}`);
  if (typeof config.enablePrefixCaching !== 'boolean')
    throw new EngineConfigError('enable_prefix_caching must be true or false');
  // vLLM refuses both at start-up: a batch of max_num_seqs decodes must fit one step's budget, and the cache must hold
  // one request of max_model_len tokens (else a lone long request could never run).
  if (config.maxNumBatchedTokens < config.maxNumSeqs) {
    throw new EngineConfigError(
      `max_num_batched_tokens (${config.maxNumBatchedTokens}) must be at least max_num_seqs (${config.maxNumSeqs})`,
    );
  }
  if (config.numGpuBlocks * config.blockSize < config.maxModelLen) {
    throw new EngineConfigError(
      `num_gpu_blocks x block_size (${config.numGpuBlocks} x ${config.blockSize} = ${config.numGpuBlocks * config.blockSize} tokens) must hold one request of max_model_len (${config.maxModelLen}) tokens`,
    );
  }
  return config;
}
