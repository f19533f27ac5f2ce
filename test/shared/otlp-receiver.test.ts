// The test OTLP receiver against the real OpenTelemetry JS SDK and exporter: what the SDK recorded comes out of the
// wire decoder exactly (ids, parent links, every attribute kind, events, status, resource), over protobuf, gzip and
// OTLP/JSON; and what is not a well-formed export is refused with 400 (or the status the spec gives) and counted.
import { gzipSync } from 'node:zlib';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { type OtlpReceiver, type ReceivedSpan, SPAN_KIND, startOtlpReceiver } from './otlp-receiver.ts';
import { decodeTraceRequestJson, decodeTraceRequestProtobuf } from './otlp-wire.ts';

const open: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  open.push(r);
  return r;
}

const RESOURCE = {
  'service.name': 'consumer-gateway',
  'grid.site': 'east',
  'k8s.namespace.name': 'grid-system',
  'deployment.count': 3,
};

/** A provider exporting to `url` through `processor` (the real OTLP/HTTP protobuf exporter), and what it recorded. */
function provider(
  exporter: OTLPTraceExporter,
  batch = false,
): { tracerProvider: TracerProvider; recorded: InMemorySpanExporter } {
  const recorded = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({
    resource: resourceFromAttributes(RESOURCE),
    spanProcessors: [
      batch ? new BatchSpanProcessor({ exporter, scheduledDelayMillis: 50 }) : new SimpleSpanProcessor({ exporter }),
      new SimpleSpanProcessor({ exporter: recorded }),
    ],
  });
  open.push({ close: () => tracerProvider.shutdown() });
  return { tracerProvider, recorded };
}

/** A parent server span with a child client span carrying every attribute kind, an event and an error status. */
function recordTrace(tracerProvider: TracerProvider): void {
  const tracer = tracerProvider.getTracer('agn-test', '1.2.3');
  const parent = tracer.startSpan('POST /v1/chat/completions', {
    kind: SpanKind.SERVER,
    attributes: { 'http.request.method': 'POST' },
  });
  const child = tracer.startSpan(
    'upstream',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.request.model': 'm1',
        'gen_ai.usage.input_tokens': 42,
        'grid.ratio': 0.25,
        'grid.big': 2 ** 40,
        'grid.negative': -7,
        'grid.streamed': true,
        'grid.sites': ['east', 'west'],
        'grid.ports': [8443, 9901],
        'grid.flags': [true, false],
      },
    },
    trace.setSpan(context.active(), parent),
  );
  child.addEvent('first_token', { 'gen_ai.server.time_to_first_token': 0.125, 'grid.chunk': 1 });
  child.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream 503' });
  child.end();
  parent.end();
}

function byName(spans: readonly ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.find((s) => s.name === name);
  if (found === undefined) throw new Error(`no span ${name} in [${spans.map((s) => s.name).join(', ')}]`);
  return found;
}

/** An SDK HrTime as the exact nanoseconds OTLP carries. */
function nanos([seconds, nanoseconds]: readonly [number, number]): bigint {
  return BigInt(Math.trunc(seconds)) * 1_000_000_000n + BigInt(Math.trunc(nanoseconds));
}

/** Every field the SDK recorded, checked against what the receiver decoded. */
function expectSameAsRecorded(received: readonly ReceivedSpan[], recorded: readonly ReadableSpan[]): void {
  expect(received).toHaveLength(recorded.length);
  for (const sdk of recorded) {
    const span = byName(received, sdk.name);
    expect(span.traceId).toBe(sdk.spanContext().traceId);
    expect(span.spanId).toBe(sdk.spanContext().spanId);
    expect(span.parentSpanId).toBe(sdk.parentSpanContext?.spanId ?? '');
    expect(span.kind).toBe(sdk.kind + 1); // OTLP's SpanKind counts from UNSPECIFIED = 0
    expect(span.startTimeUnixNano).toBe(nanos(sdk.startTime));
    expect(span.endTimeUnixNano).toBe(nanos(sdk.endTime));
    expect(span.attributes).toEqual(sdk.attributes);
    expect(span.events.map((e) => ({ name: e.name, attributes: e.attributes }))).toEqual(
      sdk.events.map((e) => ({ name: e.name, attributes: e.attributes ?? {} })),
    );
    expect(span.events.map((e) => e.timeUnixNano)).toEqual(sdk.events.map((e) => nanos(e.time)));
    expect(span.status).toEqual({ code: sdk.status.code, message: sdk.status.message ?? '' });
    expect(span.resource).toEqual(expect.objectContaining(RESOURCE));
    expect(span.serviceName).toBe('consumer-gateway');
    expect(span.scope).toEqual({ name: 'agn-test', version: '1.2.3' });
  }
}

describe('the OTLP receiver with the SDK exporting protobuf', () => {
  it('decodes a parent and child span exactly as the SDK recorded them', async () => {
    const r = await receiver();
    const { tracerProvider, recorded } = provider(new OTLPTraceExporter({ url: `${r.url}/v1/traces` }));
    recordTrace(tracerProvider);
    const spans = await r.waitForSpans((all) => all.length >= 2);
    expectSameAsRecorded(spans, recorded.getFinishedSpans());

    const parent = byName(spans, 'POST /v1/chat/completions');
    const child = byName(spans, 'upstream');
    expect(parent.parentSpanId).toBe('');
    expect(child.parentSpanId).toBe(parent.spanId);
    expect(child.traceId).toBe(parent.traceId);
    expect(parent.kind).toBe(SPAN_KIND.server);
    expect(child.kind).toBe(SPAN_KIND.client);
    expect(child.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(child.spanId).toMatch(/^[0-9a-f]{16}$/);
    // On the wire an int stays an int and a double a double, arrays keep their element kinds.
    const kinds = Object.fromEntries(
      child.typedAttributes.map((kv) => [
        kv.key,
        kv.value.kind === 'array' ? `array of ${kv.value.value.map((v) => v.kind).join(',')}` : kv.value.kind,
      ]),
    );
    expect(kinds).toEqual({
      'gen_ai.request.model': 'string',
      'gen_ai.usage.input_tokens': 'int',
      'grid.ratio': 'double',
      'grid.big': 'int',
      'grid.negative': 'int',
      'grid.streamed': 'bool',
      'grid.sites': 'array of string,string',
      'grid.ports': 'array of int,int',
      'grid.flags': 'array of bool,bool',
    });
    expect(child.attributes['grid.negative']).toBe(-7);
    expect(child.attributes['grid.big']).toBe(2 ** 40);
    expect(child.events).toEqual([
      expect.objectContaining({
        name: 'first_token',
        attributes: { 'gen_ai.server.time_to_first_token': 0.125, 'grid.chunk': 1 },
      }),
    ]);
    expect(child.status).toEqual({ code: 2, message: 'upstream 503' });
    expect(child.encoding).toBe('protobuf');
    expect(r.refused).toEqual([]);
  });

  it('takes a gzip body from a batching exporter', async () => {
    const r = await receiver();
    const { tracerProvider, recorded } = provider(
      new OTLPTraceExporter({
        url: `${r.url}/v1/traces`,
        compression: 'gzip' as NonNullable<ConstructorParameters<typeof OTLPTraceExporter>[0]>['compression'],
      }),
      true,
    );
    recordTrace(tracerProvider);
    await tracerProvider.forceFlush();
    const spans = await r.waitForSpans((all) => all.length >= 2);
    expectSameAsRecorded(spans, recorded.getFinishedSpans());
    expect(r.rawBodies.length).toBeGreaterThan(0);
    expect(r.rawBodies.every((body) => body[0] === 0x1f && body[1] === 0x8b)).toBe(true);
  });

  it('is found through OTEL_EXPORTER_OTLP_ENDPOINT, the base URL the constructs render', async () => {
    const r = await receiver();
    const saved = process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
    process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = r.url;
    let exporter: OTLPTraceExporter;
    try {
      exporter = new OTLPTraceExporter();
    } finally {
      if (saved === undefined) delete process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
      else process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = saved;
    }
    const { tracerProvider } = provider(exporter);
    recordTrace(tracerProvider);
    expect((await r.waitForSpans((all) => all.length >= 2)).map((s) => s.name).sort()).toEqual([
      'POST /v1/chat/completions',
      'upstream',
    ]);
  });
});

describe('the OTLP receiver with OTLP/JSON', () => {
  it('decodes the JSON encoding of the same spans to what the protobuf encoding decodes to', async () => {
    const r = await receiver();
    const recorded = new InMemorySpanExporter();
    const tracerProvider = new TracerProvider({
      resource: resourceFromAttributes(RESOURCE),
      spanProcessors: [new SimpleSpanProcessor({ exporter: recorded })],
    });
    open.push({ close: () => tracerProvider.shutdown() });
    recordTrace(tracerProvider);
    const finished = recorded.getFinishedSpans();
    const json = Buffer.from(JsonTraceSerializer.serializeRequest(finished)!);
    const response = await fetch(`${r.url}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: json,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({});
    const spans = await r.waitForSpans((all) => all.length >= 2);
    expectSameAsRecorded(spans, finished);
    expect(spans.every((s) => s.encoding === 'json')).toBe(true);
    // Field for field, JSON and protobuf decode to the same request (ids hex, 64-bit numbers exact).
    const protobuf = Buffer.from(ProtobufTraceSerializer.serializeRequest(finished)!);
    expect(decodeTraceRequestJson(json)).toEqual(decodeTraceRequestProtobuf(protobuf));
  });
});

describe('what the OTLP receiver refuses', () => {
  async function post(
    r: OtlpReceiver,
    body: Buffer | string,
    headers: Record<string, string>,
    path = '/v1/traces',
    method = 'POST',
  ): Promise<{ status: number; body: Buffer }> {
    const response = await fetch(`${r.url}${path}`, { method, headers, ...(method === 'POST' ? { body } : {}) });
    return { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
  }

  async function validProtobuf(): Promise<Buffer> {
    const recorded = new InMemorySpanExporter();
    const tracerProvider = new TracerProvider({
      resource: resourceFromAttributes(RESOURCE),
      spanProcessors: [new SimpleSpanProcessor({ exporter: recorded })],
    });
    open.push({ close: () => tracerProvider.shutdown() });
    recordTrace(tracerProvider);
    return Buffer.from(ProtobufTraceSerializer.serializeRequest(recorded.getFinishedSpans())!);
  }

  it('answers a truncated body 400 with a google.rpc.Status, counts it and keeps no span of it', async () => {
    const r = await receiver();
    const whole = await validProtobuf();
    const protobuf = { 'content-type': 'application/x-protobuf' };
    for (const cut of [whole.length - 1, Math.floor(whole.length / 2), 3]) {
      const answer = await post(r, whole.subarray(0, cut), protobuf);
      expect(answer.status, `cut at ${cut} of ${whole.length}`).toBe(400);
      // Status { code: 3 (INVALID_ARGUMENT), message }
      expect(answer.body[0]).toBe(0x08);
      expect(answer.body[1]).toBe(3);
      expect(answer.body.subarray(4).toString()).toMatch(/truncated/);
    }
    expect(r.spans).toEqual([]);
    expect(r.refused).toHaveLength(3);
    expect(r.rawBodies).toHaveLength(3);
    // The whole body is fine: the refusals were about the cut, not the content.
    expect((await post(r, whole, protobuf)).status).toBe(200);
    expect(r.spans).toHaveLength(2);
  });

  it('answers 400 to bytes that are not an ExportTraceServiceRequest', async () => {
    const r = await receiver();
    const protobuf = { 'content-type': 'application/x-protobuf' };
    const cases: [string, Buffer][] = [
      ['plain text', Buffer.from('hello, collector')],
      ['an end-group wire type', Buffer.from([0x0c])],
      ['field number zero', Buffer.from([0x02, 0x00])],
      ['resource_spans as a varint', Buffer.from([0x08, 0x01])],
      // resource_spans { scope_spans { spans { trace_id: 3 bytes } } }
      ['a short trace id', Buffer.from([0x0a, 0x09, 0x12, 0x07, 0x12, 0x05, 0x0a, 0x03, 0x01, 0x02, 0x03])],
      // resource_spans { scope_spans { spans { name: 0xff } } }
      ['a name that is not UTF-8', Buffer.from([0x0a, 0x07, 0x12, 0x05, 0x12, 0x03, 0x2a, 0x01, 0xff])],
    ];
    for (const [what, body] of cases) expect((await post(r, body, protobuf)).status, what).toBe(400);
    expect(r.refused.map((x) => x.status)).toEqual(cases.map(() => 400));
    expect(r.spans).toEqual([]);
  });

  it('answers 400 to a body that is not gzip or not OTLP/JSON', async () => {
    const r = await receiver();
    expect(
      (await post(r, Buffer.from('not gzip'), { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }))
        .status,
    ).toBe(400);
    expect(
      (
        await post(r, gzipSync(Buffer.from('{"resourceSpans": [')), {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
        })
      ).status,
    ).toBe(400);
    const badId = await post(
      r,
      JSON.stringify({
        resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: 'AAAA', spanId: '0011223344556677' }] }] }],
      }),
      { 'content-type': 'application/json' },
    );
    expect(badId.status).toBe(400);
    expect(JSON.parse(badId.body.toString())).toEqual({
      code: 3,
      message: expect.stringMatching(/traceId is not 32 hex digits/),
    });
    expect((await post(r, JSON.stringify({ resourceSpans: {} }), { 'content-type': 'application/json' })).status).toBe(
      400,
    );
    expect(r.refused).toHaveLength(4);
  });

  it('answers 415, 404 and 405 to the wrong media type, path and method', async () => {
    const r = await receiver();
    const body = await validProtobuf();
    expect((await post(r, body, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post(r, body, { 'content-type': 'application/x-protobuf', 'content-encoding': 'br' })).status).toBe(
      415,
    );
    expect((await post(r, body, { 'content-type': 'application/x-protobuf' }, '/v1/metrics')).status).toBe(404);
    expect((await post(r, body, {}, '/v1/traces', 'GET')).status).toBe(405);
    expect(r.refused.map((x) => x.status)).toEqual([415, 415, 404, 405]);
    expect(r.spans).toEqual([]);
  });

  it('makes waitForSpans fail in time, saying what did arrive', async () => {
    const r = await receiver();
    expect((await post(r, await validProtobuf(), { 'content-type': 'application/x-protobuf' })).status).toBe(200);
    await expect(r.waitForSpans((all) => all.length >= 3, 200)).rejects.toThrow(
      /within 200 ms; got 2 \(consumer-gateway\/upstream, consumer-gateway\/POST/,
    );
    expect((await r.waitForSpans((all) => all.some((s) => s.name === 'upstream'), 200)).length).toBe(2);
  });
});
