// The gateway's tracing (daemons/shared/otel-env.ts reads the OTEL_* environment): a RequestTrace per request.
import { RequestTrace } from './request-trace.ts';
import { tracerFromEnv } from '../../shared/otel-env.ts';

export { TracingEnvError, checkTracingEnv } from '../../shared/otel-env.ts';

export interface GatewayTracing {
  readonly endpoint: string;
  begin(
    role: 'consumer' | 'provider',
    method: string,
    path: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
  ): RequestTrace;
  /** Sends what is queued and stops (at shutdown). */
  close(): Promise<void>;
}

/** The tracing of a gateway process, or undefined when the environment leaves it off. Throws TracingEnvError. */
export function tracingFromEnv(env: NodeJS.ProcessEnv, role: 'consumer' | 'provider'): GatewayTracing | undefined {
  const traced = tracerFromEnv(env, `${role}-gateway`, 'agn-gateway');
  if (traced === undefined) return undefined;
  return {
    endpoint: traced.endpoint,
    begin: (spanRole, method, path, headers) => new RequestTrace(traced.tracer, spanRole, method, path, headers),
    close: traced.close,
  };
}
