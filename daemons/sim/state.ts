// The sim backend's adjustable state: how it answers, and values forced over what its engine reports on /metrics.
// Tests change it through POST /admin/state to drive the operator's scoring and admission and the gateway's failure
// handling.

export type SimFault = 'none' | 'hang' | 'reset' | 'reset_mid_stream' | 'status_500';

export interface SimState {
  /**
   * A normalized queue depth q in [0, 1] forced over the engine's: reported as sim_queue_depth, and as a full batch
   * (vllm:num_requests_running = max_num_seqs) with vllm:num_requests_waiting = round(q x max_num_seqs / (1 - q)),
   * so waiting / (waiting + running) is q; q = 1 is max_num_seqs waiting and none running. null reports the engine's.
   */
  queue_depth: number | null;
  /** A KV-cache utilisation in [0, 1] forced over the engine's (sim_kv_cache_utilization, vllm:kv_cache_usage_perc); null reports the engine's. */
  kv_cache_utilization: number | null;
  healthy: boolean;
  /** Front-end delay before a request reaches the engine, milliseconds (counted in its TTFT, as a slow API server's would be). */
  latency_ms: number;
  /** A cap on each sequence's decode speed: no engine step shorter than 1000 / tokens_per_second ms; 0 leaves the engine's pace. */
  tokens_per_second: number;
  /** Output tokens of a request that sets no max_tokens (the centre of the engine's draw; at least 1 come out). */
  completion_tokens: number;
  /** The engine's step costs (--step-overhead-ms, --prefill-ms-per-token, --decode-ms-per-seq), from the next step on. */
  step_overhead_ms: number;
  prefill_ms_per_token: number;
  decode_ms_per_seq: number;
  fault: SimFault;
  /**
   * The llm-d EPP pool series (llm_d_epp_*) for the gateway's site choice: 0 publishes none (a vLLM-only site); above
   * 0 it is the pool's capacity, and the inference requests the sim is answering plus `pool_background` run up to it
   * and wait beyond it.
   */
  pool_capacity: number;
  /** Requests the pool holds from elsewhere (other gateways), on top of the ones this sim is answering. */
  pool_background: number;
  /** Work waiting at one busy endpoint while the pool as a whole is under capacity (an unbalanced pool). */
  pool_skewed_queue: number;
}

const FAULTS: readonly SimFault[] = ['none', 'hang', 'reset', 'reset_mid_stream', 'status_500'];
/** The numeric fields and the largest value each takes (checked in this order). */
const MAXIMA = {
  latency_ms: 600_000,
  tokens_per_second: 1_000_000,
  completion_tokens: 100_000,
  step_overhead_ms: 60_000,
  prefill_ms_per_token: 60_000,
  decode_ms_per_seq: 60_000,
  pool_capacity: 1_000_000,
  pool_background: 1_000_000,
  pool_skewed_queue: 1_000_000,
} as const;
type NumericField = keyof typeof MAXIMA;

/** Applies a partial update; returns an error message naming the first bad field, or undefined. */
export function applyStateUpdate(state: SimState, update: unknown): string | undefined {
  if (typeof update !== 'object' || update === null || Array.isArray(update))
    return 'state update must be a JSON object';
  const u = update as Record<string, unknown>;
  const unit = (key: 'queue_depth' | 'kv_cache_utilization'): string | undefined => {
    if (u[key] === undefined || u[key] === null) return undefined;
    const v = u[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1) return `${key} must be a number in [0, 1]`;
    return undefined;
  };
  const nonNegative = (key: NumericField, max: number): string | undefined => {
    if (u[key] === undefined) return undefined;
    const v = u[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > max)
      return `${key} must be a number in [0, ${max}]`;
    return undefined;
  };
  for (const key of Object.keys(u)) {
    if (!['queue_depth', 'kv_cache_utilization', 'healthy', 'fault', ...Object.keys(MAXIMA)].includes(key)) {
      return `unknown state field "${key}"`;
    }
  }
  const problem =
    unit('queue_depth') ??
    unit('kv_cache_utilization') ??
    (Object.keys(MAXIMA) as NumericField[]).reduce<string | undefined>(
      (found, key) => found ?? nonNegative(key, MAXIMA[key]),
      undefined,
    ) ??
    (u['healthy'] !== undefined && typeof u['healthy'] !== 'boolean' ? 'healthy must be a boolean' : undefined) ??
    (u['fault'] !== undefined && !FAULTS.includes(u['fault'] as SimFault)
      ? `fault must be one of ${FAULTS.join(', ')}`
      : undefined);
  if (problem !== undefined) return problem;
  Object.assign(state, u);
  if (u['completion_tokens'] !== undefined) state.completion_tokens = Math.floor(state.completion_tokens);
  return undefined;
}
