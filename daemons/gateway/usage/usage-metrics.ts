// Usage counters on the gateway's registry, named after the OpenTelemetry GenAI semantic conventions where they fit
// (gen_ai.client.token.usage with gen_ai.token.type input|output, gen_ai.request.model, gen_ai.provider.name) as
// Prometheus counters, plus the priced cost. Label values are bounded: tenants come from the keys file, models,
// providers (upstream clusters) and sites from the accepted snapshot.
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

type UsageLabels = 'tenant' | 'gen_ai_request_model' | 'gen_ai_provider_name' | 'site';

export interface UsageMetrics {
  readonly tokens: Counter<UsageLabels | 'gen_ai_token_type'>;
  readonly costUsd: Counter<UsageLabels>;
  readonly unmetered: Counter<'reason'>;
}

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
  };
}
