// The operator's spans (OpenTelemetry, on when the OTEL_* environment asks: daemons/shared/otel-env.ts): one per
// reconcile, and inside a GridNetwork reconcile one for the routing render, the step that grows with the grid, so a
// slow render shows which network, how many candidates and how long. The reconcile's span is the current context
// of everything its controller does (AsyncLocalStorage), so a step adds a child without the span being passed down.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';

const current = new AsyncLocalStorage<Context>();

/** Runs `work` as a span named `name` under the current one (a root span outside any); ends it with the outcome. */
export async function inSpan<T>(
  tracer: Tracer | undefined,
  name: string,
  attributes: Attributes,
  work: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (tracer === undefined) return await work(undefined);
  const parent = current.getStore() ?? ROOT_CONTEXT;
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
  try {
    return await current.run(trace.setSpan(parent, span), () => work(span));
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute('error.type', error instanceof Error ? error.name : 'Error');
    throw error;
  } finally {
    span.end();
  }
}

/** The synchronous form, for a step such as the render that does not wait. */
export function inSpanSync<T>(
  tracer: Tracer | undefined,
  name: string,
  attributes: Attributes,
  work: (span: Span | undefined) => T,
): T {
  if (tracer === undefined) return work(undefined);
  const parent = current.getStore() ?? ROOT_CONTEXT;
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
  try {
    return work(span);
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}
