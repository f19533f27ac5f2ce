// One request's spans (OpenTelemetry): the gateway's server span, continuing the caller's W3C trace context; a span
// for the route decision; one client span per upstream attempt, whose context goes upstream as `traceparent`, so a
// provider gateway continues the same trace and the backend sees it. GenAI attributes name the operation, models,
// token usage and time to first token; no header value, body byte, query string or credential is ever recorded.
// A request carries one of these only when tracing is on (tracing.ts): with it off the request path pays an
// optional-chain check per hook and nothing else.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Context, Span, TextMapGetter, TextMapSetter, Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

const propagator = new W3CTraceContextPropagator();

const incomingGetter: TextMapGetter<Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};
const upstreamSetter: TextMapSetter<Map<string, string | string[]>> = {
  set: (carrier, key, value) => void carrier.set(key, value),
};

/** gen_ai.operation.name of each inference path (OpenTelemetry GenAI semantic conventions). */
const OPERATIONS: Readonly<Record<string, string>> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'text_completion',
  '/v1/embeddings': 'embeddings',
  '/v1/responses': 'chat',
};

export interface RouteDecision {
  readonly site?: string | undefined;
  readonly candidate?: string | undefined;
  readonly cluster?: string | undefined;
  readonly model?: string | undefined;
  /** The GenAI operation when the path does not say it (an MCP tool call, an A2A message). */
  readonly operation?: string | undefined;
}

// performance.now(), not an epoch: the SDK anchors a performance.now() start time to the Date clock it stamps its
// own spans with, so spans timed here and spans it times itself order correctly. timeOrigin + now() drifts from
// Date.now() as a process ages, and a route span could then start after the upstream span that followed it.
const nowMs = (): number => performance.now();

export class RequestTrace {
  readonly #tracer: Tracer;
  readonly #server: Span;
  readonly #context: Context;
  readonly #receivedAtMs: number;
  #upstream: Span | undefined;
  #firstByte = false;

  constructor(
    tracer: Tracer,
    role: 'consumer' | 'provider',
    method: string,
    path: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
  ) {
    this.#tracer = tracer;
    this.#receivedAtMs = nowMs();
    const parent = propagator.extract(ROOT_CONTEXT, headers, incomingGetter);
    const operation = OPERATIONS[path];
    this.#server = tracer.startSpan(
      operation === undefined ? `${method} ${role} gateway` : `${operation} ${role} gateway`,
      {
        kind: SpanKind.SERVER,
        startTime: this.#receivedAtMs,
        attributes: {
          'http.request.method': method,
          // The path only: a query string may carry what a caller should not have sent (a key).
          'url.path': path.length > 256 ? path.slice(0, 256) : path,
          'grid.gateway.role': role,
          ...(operation === undefined ? {} : { 'gen_ai.operation.name': operation }),
        },
      },
      parent,
    );
    this.#context = trace.setSpan(parent, this.#server);
  }

  /** Milliseconds on the span clock, for a filter that times its own step. */
  now(): number {
    return nowMs();
  }

  /** The route decision: a child span from `startedAtMs` to now, and its outcome on the server span. */
  routed(decision: RouteDecision, startedAtMs: number): void {
    const attributes: Record<string, string> = {};
    if (decision.site !== undefined) attributes['grid.site'] = decision.site;
    if (decision.candidate !== undefined) attributes['grid.candidate'] = decision.candidate;
    if (decision.cluster !== undefined) {
      attributes['grid.cluster'] = decision.cluster;
      // As the usage metrics name it: the upstream cluster serving the model (a provider of the grid).
      attributes['gen_ai.provider.name'] = decision.cluster;
    }
    if (decision.model !== undefined) attributes['gen_ai.request.model'] = decision.model;
    if (decision.operation !== undefined) attributes['gen_ai.operation.name'] = decision.operation;
    this.#tracer
      .startSpan('grid.route', { kind: SpanKind.INTERNAL, startTime: startedAtMs, attributes }, this.#context)
      .end();
    this.#server.setAttributes(attributes);
  }

  /** An upstream attempt begins: its client span, whose context replaces any `traceparent` going upstream. */
  upstreamStart(cluster: string, endpoint: string, hop: boolean, headers: Map<string, string | string[]>): void {
    // A retry ends the attempt before it, which reached nothing.
    if (this.#upstream !== undefined) this.upstreamEnd(undefined, 'retried');
    this.#upstream = this.#tracer.startSpan(
      hop ? 'grid.provider_hop' : 'grid.upstream',
      { kind: SpanKind.CLIENT, attributes: { 'grid.cluster': cluster, 'server.address': endpoint } },
      this.#context,
    );
    headers.delete('traceparent');
    headers.delete('tracestate');
    propagator.inject(trace.setSpan(this.#context, this.#upstream), headers, upstreamSetter);
  }

  upstreamHead(status: number): void {
    this.#upstream?.setAttribute('http.response.status_code', status);
  }

  /** The first body byte from upstream: time to first token for a streamed answer. */
  firstByte(): void {
    if (this.#firstByte) return;
    this.#firstByte = true;
    const seconds = (nowMs() - this.#receivedAtMs) / 1000;
    this.#server.setAttribute('gen_ai.server.time_to_first_token', seconds);
    this.#upstream?.addEvent('first byte');
  }

  upstreamEnd(status: number | undefined, error?: string): void {
    const span = this.#upstream;
    if (span === undefined) return;
    this.#upstream = undefined;
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    if (error !== undefined) {
      span.setAttribute('error.type', error);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }

  /** Token usage read from the answer (usage_meter). */
  usage(inputTokens: number, outputTokens: number, responseModel: string | undefined): void {
    this.#server.setAttributes({
      'gen_ai.usage.input_tokens': inputTokens,
      'gen_ai.usage.output_tokens': outputTokens,
    });
    if (responseModel !== undefined) this.#server.setAttribute('gen_ai.response.model', responseModel);
  }

  /** The response closed: complete, or broken off (the caller left, the upstream failed mid-stream). */
  end(status: number, complete: boolean): void {
    if (this.#upstream !== undefined) this.upstreamEnd(undefined, complete ? undefined : 'broken_off');
    this.#server.setAttribute('http.response.status_code', status);
    if (status >= 500 || !complete) {
      this.#server.setAttribute('error.type', complete ? String(status) : 'broken_off');
      this.#server.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.#server.end();
  }
}
