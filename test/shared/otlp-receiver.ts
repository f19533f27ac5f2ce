// A real OTLP/HTTP trace receiver for tests: what an OpenTelemetry Collector's otlphttp receiver does for traces, on a
// loopback port. It takes `POST /v1/traces` as protobuf (application/x-protobuf) or OTLP/JSON (application/json),
// plain or gzip, answers 200 with an empty ExportTraceServiceResponse, and refuses what is not a well-formed request
// with the status the OTLP/HTTP spec gives (400 with a google.rpc.Status body for a body it cannot decode). The raw
// bodies are kept so a test can scan the exact bytes a daemon sent for secrets and prompt text.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { closeServer } from '../../daemons/shared/close-server.ts';
import { listen } from '../../daemons/shared/listen.ts';
import { readBoundedBody } from '../../daemons/shared/http-body.ts';
import {
  decodeTraceRequestJson,
  decodeTraceRequestProtobuf,
  type DecodedEvent,
  type DecodedLink,
  type DecodedSpan,
  type DecodedTraceRequest,
  encodeRpcStatusProtobuf,
  type KeyValue,
  OtlpDecodeError,
  plainAttributes,
  type PlainValue,
} from './otlp-wire.ts';

export const TRACES_PATH = '/v1/traces';
/** The largest body accepted, compressed or not (the Collector's default is 20 MiB; tests send far less). */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;
/** google.rpc.Code INVALID_ARGUMENT: the code of a 400's Status body. */
const INVALID_ARGUMENT = 3;

/** One span as a test reads it: hex ids, plain attributes, its resource and scope beside it. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly traceState: string;
  readonly flags: number;
  readonly name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer (SPAN_KIND below). */
  readonly kind: number;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: Record<string, PlainValue>;
  /** The attributes as they came on the wire, with their AnyValue kinds (an int and a double stay apart). */
  readonly typedAttributes: readonly KeyValue[];
  readonly events: readonly {
    readonly name: string;
    readonly timeUnixNano: bigint;
    readonly attributes: Record<string, PlainValue>;
  }[];
  readonly links: readonly DecodedLink[];
  readonly status: { readonly code: number; readonly message: string };
  readonly resource: Record<string, PlainValue>;
  /** resource `service.name`, or '' when absent. */
  readonly serviceName: string;
  readonly scope: { readonly name: string; readonly version: string };
  /** How the request that carried it was encoded. */
  readonly encoding: 'protobuf' | 'json';
}

export const SPAN_KIND = { unspecified: 0, internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** A request the receiver refused, and why. */
export interface RefusedRequest {
  readonly status: number;
  readonly reason: string;
}

export interface OtlpReceiver {
  /** Base URL (`http://127.0.0.1:PORT`): what OTEL_EXPORTER_OTLP_ENDPOINT is set to; traces go to `${url}/v1/traces`. */
  readonly url: string;
  /** Every span accepted so far, in arrival order. */
  readonly spans: readonly ReceivedSpan[];
  /** The body of every POST to /v1/traces as received (still compressed if it was), accepted or not. */
  readonly rawBodies: readonly Buffer[];
  /** Every refused request. */
  readonly refused: readonly RefusedRequest[];
  /**
   * Resolves with every span received once `predicate` holds for them (checked now and after each accepted export);
   * rejects after `timeoutMs` naming what did arrive.
   */
  waitForSpans(
    predicate: (spans: readonly ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<readonly ReceivedSpan[]>;
  close(): Promise<void>;
}

class Refusal extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function flatten(request: DecodedTraceRequest, encoding: ReceivedSpan['encoding']): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans) {
    const resource = plainAttributes(resourceSpans.resource.attributes);
    const serviceName = typeof resource['service.name'] === 'string' ? resource['service.name'] : '';
    for (const scopeSpans of resourceSpans.scopeSpans) {
      for (const span of scopeSpans.spans)
        out.push(receivedSpan(span, resource, serviceName, scopeSpans.scope, encoding));
    }
  }
  return out;
}

function receivedSpan(
  span: DecodedSpan,
  resource: Record<string, PlainValue>,
  serviceName: string,
  scope: { name: string; version: string },
  encoding: ReceivedSpan['encoding'],
): ReceivedSpan {
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId,
    traceState: span.traceState,
    flags: span.flags,
    name: span.name,
    kind: span.kind,
    startTimeUnixNano: span.startTimeUnixNano,
    endTimeUnixNano: span.endTimeUnixNano,
    attributes: plainAttributes(span.attributes),
    typedAttributes: span.attributes,
    events: span.events.map((event: DecodedEvent) => ({
      name: event.name,
      timeUnixNano: event.timeUnixNano,
      attributes: plainAttributes(event.attributes),
    })),
    links: span.links,
    status: span.status,
    resource,
    serviceName,
    scope: { name: scope.name, version: scope.version },
    encoding,
  };
}

/** The media type without parameters (`application/json; charset=utf-8` is JSON). */
function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

function decodeBody(
  req: IncomingMessage,
  body: Buffer,
): { request: DecodedTraceRequest; encoding: ReceivedSpan['encoding'] } {
  const type = mediaType(req);
  const encoding = type === 'application/x-protobuf' ? 'protobuf' : type === 'application/json' ? 'json' : undefined;
  if (encoding === undefined)
    throw new Refusal(
      415,
      `content-type ${JSON.stringify(type)} is neither application/x-protobuf nor application/json`,
    );
  const contentEncoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  let bytes: Buffer;
  if (contentEncoding === 'gzip') {
    try {
      bytes = gunzipSync(body, { maxOutputLength: MAX_BODY_BYTES });
    } catch (error) {
      throw new Refusal(400, `gzip body does not decompress: ${(error as Error).message}`);
    }
  } else if (contentEncoding === 'identity' || contentEncoding === '') {
    bytes = body;
  } else {
    throw new Refusal(415, `content-encoding ${JSON.stringify(contentEncoding)} is not supported (gzip or none)`);
  }
  try {
    return {
      request: encoding === 'protobuf' ? decodeTraceRequestProtobuf(bytes) : decodeTraceRequestJson(bytes),
      encoding,
    };
  } catch (error) {
    if (error instanceof OtlpDecodeError) throw new Refusal(400, error.message);
    throw error;
  }
}

function answer(res: ServerResponse, status: number, json: boolean, body: Buffer | string): void {
  res.writeHead(status, {
    'content-type': json ? 'application/json' : 'application/x-protobuf',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Starts a receiver on a free loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rawBodies: Buffer[] = [];
  const refused: RefusedRequest[] = [];
  const waiters = new Set<() => void>();

  const refuse = (res: ServerResponse, json: boolean, status: number, reason: string): void => {
    refused.push({ status, reason });
    const body = json
      ? JSON.stringify({ code: INVALID_ARGUMENT, message: reason })
      : encodeRpcStatusProtobuf(INVALID_ARGUMENT, reason);
    answer(res, status, json, body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const json = mediaType(req) === 'application/json';
    const path = (req.url ?? '/').split('?')[0];
    if (path !== TRACES_PATH)
      return refuse(res, json, 404, `no OTLP signal at ${path} (this receiver takes traces at ${TRACES_PATH})`);
    if (req.method !== 'POST') return refuse(res, json, 405, `${req.method ?? '?'} ${TRACES_PATH}: only POST`);
    let body: Buffer;
    try {
      body = await readBoundedBody(req, MAX_BODY_BYTES, (max) => new Refusal(413, `body over ${max} bytes`));
    } catch (error) {
      if (error instanceof Refusal) return refuse(res, json, error.status, error.message);
      throw error;
    }
    rawBodies.push(body);
    try {
      const { request, encoding } = decodeBody(req, body);
      spans.push(...flatten(request, encoding));
    } catch (error) {
      if (error instanceof Refusal) return refuse(res, json, error.status, error.message);
      throw error;
    }
    // An empty ExportTraceServiceResponse: no partial_success, so every span was accepted.
    answer(res, 200, json, json ? '{}' : Buffer.alloc(0));
    for (const wake of [...waiters]) wake();
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      refused.push({ status: 500, reason: String(error) });
      if (!res.headersSent) answer(res, 500, true, JSON.stringify({ code: 13, message: 'receiver failed' }));
      else res.destroy();
    });
  });
  const address = await listen(server, 0, '127.0.0.1');

  return {
    url: `http://127.0.0.1:${address.port}`,
    spans,
    rawBodies,
    refused,
    waitForSpans(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          if (!predicate(spans)) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve([...spans]);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          const names = spans.map((s) => `${s.serviceName}/${s.name}`).join(', ');
          reject(
            new Error(
              `OTLP receiver: spans did not match within ${timeoutMs} ms; got ${spans.length} (${names})${refused.length > 0 ? `; refused ${refused.length}: ${refused.map((r) => `${r.status} ${r.reason}`).join('; ')}` : ''}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => closeServer(server),
  };
}
