// Usage counters on the gateway's registry, named after the OpenTelemetry GenAI semantic conventions where they fit
// (gen_ai.client.token.usage with gen_ai.token.type input|output, gen_ai.request.model, gen_ai.provider.name) as
// Prometheus counters, plus the priced cost. Label values are bounded: tenants come from the keys file, models,
// providers (upstream clusters) and sites from the accepted snapshot.
import { Counter, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

type UsageLabels = 'tenant' | 'gen_ai_request_model' | 'gen_ai_provider_name' | 'site';

type GenAiLabels = 'gen_ai_operation_name' | 'gen_ai_request_model' | 'gen_ai_provider_name';

export interface UsageMetrics {
  readonly tokens: Counter<UsageLabels | 'gen_ai_token_type'>;
  readonly costUsd: Counter<UsageLabels>;
  readonly unmetered: Counter<'reason'>;
  /** The OpenTelemetry GenAI metrics as Prometheus histograms, with the conventions' advisory buckets. */
  readonly genAi: {
    readonly tokenUsage: Histogram<GenAiLabels | 'gen_ai_token_type'>;
    readonly operationDuration: Histogram<GenAiLabels | 'error_type'>;
    readonly timeToFirstToken: Histogram<GenAiLabels>;
    readonly timePerOutputToken: Histogram<GenAiLabels>;
  };
}

const GEN_AI_LABELS = ['gen_ai_operation_name', 'gen_ai_request_model', 'gen_ai_provider_name'] as const;

export function createUsageMetrics(registry: Registry): UsageMetrics {
  const registers = [registry];
  return {
    tokens: new Counter({
      name: 'grid_gateway_gen_ai_client_token_usage_total',
      help: 'Tokens of answered requests by tenant, model, provider (upstream cluster), site and gen_ai_token_type (input, output).',
      labelNames: ['tenant', 'gen_ai_request_model', 'gen_ai_provider_name', 'site', 'gen_ai_token_type'],
      registers,
    }),
    costUsd: new Counter({
      name: 'grid_gateway_gen_ai_client_cost_usd_total',
      help: 'Priced cost in USD of answered requests (usage_meter prices, from InferenceProvider.spec.cost).',
      labelNames: ['tenant', 'gen_ai_request_model', 'gen_ai_provider_name', 'site'],
      registers,
    }),
    unmetered: new Counter({
      name: 'grid_gateway_unmetered_responses_total',
      help: 'Successful answers whose usage could not be read (no usage in the body, body too large, response broken off).',
      labelNames: ['reason'],
      registers,
    }),
    genAi: {
      tokenUsage: new Histogram({
        name: 'gen_ai_client_token_usage',
        help: 'gen_ai.client.token.usage: tokens per answered request, by gen_ai_token_type (input, output).',
        labelNames: [...GEN_AI_LABELS, 'gen_ai_token_type'],
        buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
        registers,
      }),
      operationDuration: new Histogram({
        name: 'gen_ai_client_operation_duration_seconds',
        help: 'gen_ai.client.operation.duration: from the request to the end of its answer (the last event of a stream); error_type is the status of a refused answer, broken_off for one cut short, empty otherwise.',
        labelNames: [...GEN_AI_LABELS, 'error_type'],
        buckets: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
        registers,
      }),
      timeToFirstToken: new Histogram({
        name: 'gen_ai_server_time_to_first_token_seconds',
        help: 'gen_ai.server.time_to_first_token: from the request to the first event of a streamed answer.',
        labelNames: [...GEN_AI_LABELS],
        buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
        registers,
      }),
      timePerOutputToken: new Histogram({
        name: 'gen_ai_server_time_per_output_token_seconds',
        help: 'gen_ai.server.time_per_output_token: after the first event of a streamed answer, its time per further output token.',
        labelNames: [...GEN_AI_LABELS],
        buckets: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
        registers,
      }),
    },
  };
}
