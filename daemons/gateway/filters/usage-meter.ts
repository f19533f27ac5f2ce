// usage_meter (consumer, after intelligent_route): attaches a response observer that reads each answer's token
// usage as it streams back through the load balancer, prices it by the routed cluster, and records it per
// tenant, model, provider and site (metrics and the spend ledger the operator reporter drains). A streamed chat
// or completions request that did not ask for usage is asked for it (`stream_options.include_usage`), and the
// extra usage-only chunk is removed from what the caller receives.
import type { UsageMeterFilter } from '../../../schemas/generated/gateway-config.ts';
import type { Filter, GatewayRequest, ResponseObserver } from '../context.ts';
import { chainObservers } from '../context.ts';
import type { KeyQuota } from '../usage/key-quota.ts';
import type { SpendLedger } from '../usage/spend-ledger.ts';
import type { UsageMetrics } from '../usage/usage-metrics.ts';
import { jsonUsageTap, sseUsageTap } from '../usage/usage-tap.ts';
import type { TokenUsage, UsageTap } from '../usage/usage-tap.ts';

const STREAM_USAGE_PATHS = new Set(['/v1/chat/completions', '/v1/completions']);
/** gen_ai.operation.name of each metered path (OpenTelemetry GenAI semantic conventions). */
const OPERATIONS: Readonly<Record<string, string>> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'text_completion',
  '/v1/embeddings': 'embeddings',
  '/v1/responses': 'chat',
};
const METERED_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
/** Label of requests no caller_auth attributed. */
export const NO_TENANT = 'none';

export interface UsageRecord {
  readonly tenant: string;
  readonly model: string;
  readonly provider: string;
  readonly site: string;
  readonly usage: TokenUsage;
  readonly costUsd: number;
}

export function priceOf(
  usage: TokenUsage,
  price: { per_million_input_tokens: number; per_million_output_tokens: number } | undefined,
): number {
  if (price === undefined) return 0;
  return (
    (usage.inputTokens * price.per_million_input_tokens + usage.outputTokens * price.per_million_output_tokens) /
    1_000_000
  );
}

/**
 * Adds `stream_options.include_usage: true` to a streamed request that lacks it; returns the new body, or undefined
 * when the body is left alone (not streamed, already asking, not a JSON object).
 */
export function withIncludeUsage(body: Buffer): Buffer | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const record = parsed as Record<string, unknown>;
  if (record['stream'] !== true) return undefined;
  const options = record['stream_options'];
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options)))
    return undefined;
  if ((options as Record<string, unknown> | undefined)?.['include_usage'] === true) return undefined;
  return Buffer.from(
    JSON.stringify({ ...record, stream_options: { ...(options as object | undefined), include_usage: true } }),
    'utf8',
  );
}

export function createUsageMeter(
  config: UsageMeterFilter,
  metrics: UsageMetrics,
  ledger: SpendLedger,
  quota: KeyQuota,
): Filter {
  const prices = new Map((config.prices ?? []).map((p) => [p.cluster, p]));

  /** The GenAI histograms of one answer: its duration, and for a stream its first-token and per-token times. */
  function timings(
    request: GatewayRequest,
    status: number,
    complete: boolean,
    firstEventNs: bigint | undefined,
    usage: TokenUsage | undefined,
  ): void {
    const nowNs = process.hrtime.bigint();
    const labels = {
      gen_ai_operation_name: OPERATIONS[request.path] ?? 'chat',
      gen_ai_request_model: request.labels.model,
      gen_ai_provider_name: request.labels.cluster,
    };
    const errorType = status >= 400 ? String(status) : complete ? '' : 'broken_off';
    metrics.genAi.operationDuration.observe(
      { ...labels, error_type: errorType },
      Number(nowNs - request.receivedAtNs) / 1e9,
    );
    if (firstEventNs === undefined) return;
    metrics.genAi.timeToFirstToken.observe(labels, Number(firstEventNs - request.receivedAtNs) / 1e9);
    if (complete && usage !== undefined && usage.outputTokens > 1)
      metrics.genAi.timePerOutputToken.observe(labels, Number(nowNs - firstEventNs) / 1e9 / (usage.outputTokens - 1));
  }

  function record(request: GatewayRequest, usage: TokenUsage): void {
    const provider = request.labels.cluster;
    const entry: UsageRecord = {
      tenant: request.tenant ?? NO_TENANT,
      model: request.labels.model,
      provider,
      site: request.routedSite ?? 'none',
      usage,
      costUsd: priceOf(usage, prices.get(provider)),
    };
    const labels = {
      tenant: entry.tenant,
      gen_ai_request_model: entry.model,
      gen_ai_provider_name: entry.provider,
      site: entry.site,
    };
    metrics.tokens.inc({ ...labels, gen_ai_token_type: 'input' }, usage.inputTokens);
    metrics.tokens.inc({ ...labels, gen_ai_token_type: 'output' }, usage.outputTokens);
    const genAi = {
      gen_ai_operation_name: OPERATIONS[request.path] ?? 'chat',
      gen_ai_request_model: entry.model,
      gen_ai_provider_name: provider,
    };
    metrics.genAi.tokenUsage.observe({ ...genAi, gen_ai_token_type: 'input' }, usage.inputTokens);
    metrics.genAi.tokenUsage.observe({ ...genAi, gen_ai_token_type: 'output' }, usage.outputTokens);
    metrics.costUsd.inc(labels, entry.costUsd);
    if (request.tenant !== undefined) ledger.add(request.tenant, entry.costUsd);
    if (request.callerKeyId !== undefined)
      quota.consumeTokens(request.callerKeyId, usage.inputTokens + usage.outputTokens);
    request.trace?.usage(usage.inputTokens, usage.outputTokens, usage.model);
  }

  return {
    name: 'usage_meter',
    apply(request: GatewayRequest): void {
      if (request.method !== 'POST' || !METERED_PATHS.has(request.path) || request.body === null) return;
      let added = false;
      if (STREAM_USAGE_PATHS.has(request.path) && request.body.includes('"stream"')) {
        const body = withIncludeUsage(request.body);
        if (body !== undefined) {
          request.body = body;
          added = true;
        }
      }
      let tap: UsageTap | undefined;
      let ended = false;
      let status = 0;
      let streamed = false;
      let firstEventNs: bigint | undefined;
      const observer: ResponseObserver = {
        start(answered, headers) {
          tap = undefined;
          ended = false;
          status = answered;
          firstEventNs = undefined;
          if (status < 200 || status > 299) return;
          const type = String(headers['content-type'] ?? '').toLowerCase();
          streamed = type.startsWith('text/event-stream');
          if (streamed) tap = sseUsageTap({ stripUsageChunk: added });
          else if (type.startsWith('application/json')) tap = jsonUsageTap();
          else metrics.unmetered.inc({ reason: 'content_type' });
        },
        push(chunk) {
          if (streamed && firstEventNs === undefined) firstEventNs = process.hrtime.bigint();
          return tap === undefined ? chunk : tap.push(chunk);
        },
        end(complete) {
          if (ended) return Buffer.alloc(0);
          ended = true;
          if (tap === undefined) {
            timings(request, status, complete, firstEventNs, undefined);
            return Buffer.alloc(0);
          }
          const tail = complete ? tap.end() : Buffer.alloc(0);
          const usage = tap.usage();
          if (usage !== undefined) record(request, usage);
          else metrics.unmetered.inc({ reason: complete ? 'no_usage' : 'broken_off' });
          timings(request, status, complete, firstEventNs, usage);
          return tail;
        },
      };
      // A route filter's observer (grid_site_route tags stored ids) sees the bytes after this one has read them.
      request.responseObserver =
        request.responseObserver === undefined ? observer : chainObservers(observer, request.responseObserver);
    },
  };
}
