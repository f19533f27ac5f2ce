import { describe, expect, it } from 'vitest';
import { parsePrometheusText, signalValue } from '../../../daemons/gossip-operator/probes/prometheus-text.ts';

const PAGE = `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m",engine="0"} 3
vllm:num_requests_waiting{model_name="m",engine="1"} 5 1700000000000
vllm:gpu_cache_usage_perc 0.25
llm_d_epp_average_queue_size{name="pool-a"} 0.4
llm_d_epp_average_queue_size{name="pool-b"} 0.9
weird_escapes{path="a\\"b\\\\c",note="x\\ny"} 1e-3
nan_metric NaN
inf_metric +Inf
neg_inf_metric -Inf
hex_is_not_allowed 0x10
not a metric line at all
broken{label="unterminated 1
`;

describe('Prometheus text parsing', () => {
  const samples = parsePrometheusText(PAGE);

  it('reads names, labels (with escapes) and values, ignoring comments and timestamps', () => {
    expect(samples.find((s) => s.name === 'vllm:gpu_cache_usage_perc')).toEqual({
      name: 'vllm:gpu_cache_usage_perc',
      labels: {},
      value: 0.25,
    });
    expect(samples.find((s) => s.name === 'weird_escapes')).toEqual({
      name: 'weird_escapes',
      labels: { path: 'a"b\\c', note: 'x\ny' },
      value: 0.001,
    });
  });

  it('drops NaN and ±Inf at parse time and skips lines that are not samples', () => {
    const names = samples.map((s) => s.name);
    expect(names).not.toContain('nan_metric');
    expect(names).not.toContain('inf_metric');
    expect(names).not.toContain('neg_inf_metric');
    expect(names).not.toContain('hex_is_not_allowed');
    expect(names).not.toContain('broken');
    expect(names).not.toContain('not');
  });

  it('averages the series of one signal and filters by labels', () => {
    expect(signalValue(samples, 'vllm:num_requests_waiting')).toBe(4);
    expect(signalValue(samples, 'llm_d_epp_average_queue_size', { name: 'pool-b' })).toBe(0.9);
    expect(signalValue(samples, 'llm_d_epp_average_queue_size', { name: 'pool-c' })).toBeUndefined();
    expect(signalValue(samples, 'absent')).toBeUndefined();
  });
});
