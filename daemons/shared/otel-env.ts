// Tracing on or off for a daemon, from the standard OpenTelemetry environment: on when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, exporting OTLP over HTTP/protobuf in batches; off otherwise, and
// off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. The sampler follows OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on, as the SDK's; TracerProvider does not read them itself),
// the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (percent-encoded values, as the constructs render
// them). Export runs off the daemon's work: spans are queued and sent by the batch processor.
import type { Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { Sampler } from '@opentelemetry/sdk-trace';

export class TracingEnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TracingEnvError';
  }
}

function sampler(env: NodeJS.ProcessEnv): Sampler {
  const name = (env['OTEL_TRACES_SAMPLER'] ?? 'parentbased_always_on').trim();
  const arg = env['OTEL_TRACES_SAMPLER_ARG'];
  const ratio = (): number => {
    const value = arg === undefined ? 1 : Number(arg);
    if (!Number.isFinite(value) || value < 0 || value > 1)
      throw new TracingEnvError(
        `OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "${String(arg).slice(0, 32)}"`,
      );
    return value;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      throw new TracingEnvError(
        `OTEL_TRACES_SAMPLER "${name.slice(0, 64)}" is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`,
      );
  }
}

/** OTEL_RESOURCE_ATTRIBUTES: key=value pairs, comma separated, values percent-encoded (the SDK's format). */
export function resourceAttributes(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined || text.trim() === '') return out;
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new TracingEnvError(`OTEL_RESOURCE_ATTRIBUTES: "${pair.slice(0, 64)}" is not key=value`);
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new TracingEnvError(
        `OTEL_RESOURCE_ATTRIBUTES: the value of "${pair.slice(0, eq).trim().slice(0, 64)}" is not percent-encoded correctly`,
      );
    }
    out[pair.slice(0, eq).trim()] = value;
  }
  return out;
}

/** The traces endpoint URL, or undefined when tracing is off. */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') return undefined;
  if ((env['OTEL_TRACES_EXPORTER'] ?? 'otlp').trim().toLowerCase() === 'none') return undefined;
  const specific = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim();
  const base = env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim();
  const url =
    specific !== undefined && specific !== ''
      ? specific
      : base !== undefined && base !== ''
        ? `${base.replace(/\/+$/, '')}/v1/traces`
        : undefined;
  if (url === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Not echoed: a malformed URL may still carry a password.
    throw new TracingEnvError('the OTLP traces endpoint is not a URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new TracingEnvError(`the OTLP traces endpoint must be http or https, got ${parsed.protocol}`);
  if (parsed.username !== '' || parsed.password !== '')
    throw new TracingEnvError(
      'the OTLP traces endpoint carries credentials in its URL; use OTEL_EXPORTER_OTLP_HEADERS',
    );
  const protocol = (
    env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ??
    env['OTEL_EXPORTER_OTLP_PROTOCOL'] ??
    'http/protobuf'
  ).trim();
  if (protocol !== 'http/protobuf')
    throw new TracingEnvError(
      `OTLP protocol "${protocol.slice(0, 32)}" is not supported; this gateway exports http/protobuf`,
    );
  return parsed.toString();
}

/** OTEL_BSP_SCHEDULE_DELAY: milliseconds between batch exports (1000 here unless set; the SDK's own default is 5000). */
function scheduleDelay(env: NodeJS.ProcessEnv): number {
  const text = env['OTEL_BSP_SCHEDULE_DELAY'];
  if (text === undefined || text.trim() === '') return 1000;
  const ms = Number(text);
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > 3_600_000)
    throw new TracingEnvError(
      `OTEL_BSP_SCHEDULE_DELAY must be milliseconds from 0 to 3600000, got "${text.slice(0, 32)}"`,
    );
  return ms;
}

/** Checks the tracing environment without starting anything (the supervisor of --workers); throws TracingEnvError. */
export function checkTracingEnv(env: NodeJS.ProcessEnv): void {
  if (tracesEndpoint(env) === undefined) return;
  resourceAttributes(env['OTEL_RESOURCE_ATTRIBUTES']);
  sampler(env);
  scheduleDelay(env);
}

/** A daemon's tracer and how to flush it, or undefined when the environment leaves tracing off. Throws TracingEnvError. */
export function tracerFromEnv(
  env: NodeJS.ProcessEnv,
  defaultServiceName: string,
  scope: string,
): { tracer: Tracer; endpoint: string; close(): Promise<void> } | undefined {
  const endpoint = tracesEndpoint(env);
  if (endpoint === undefined) return undefined;
  const attributes = resourceAttributes(env['OTEL_RESOURCE_ATTRIBUTES']);
  const serviceName = env['OTEL_SERVICE_NAME']?.trim() || attributes['service.name'] || defaultServiceName;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...attributes, 'service.name': serviceName }),
    sampler: sampler(env),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: endpoint }),
        scheduledDelayMillis: scheduleDelay(env),
      }),
    ],
  });
  return { tracer: provider.getTracer(scope), endpoint, close: () => provider.shutdown() };
}
