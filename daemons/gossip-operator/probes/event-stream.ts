/**
 * A long-lived GET for a text/event-stream (the MCP list watcher's stream), with the probes' rules: no redirect is
 * followed (a 3xx is just an answer, so a bearer token never travels to another origin), the same TLS and
 * connection options as every probe (http-probe.ts), network errors classified and never quoted. What differs from
 * a probe is the bound: the stream has no end to wait for, so the limits are a time to the response headers and a
 * size for each event, and the caller's AbortSignal ends it.
 * The events are read by sse-parser.ts.
 */
import http from 'node:http';
import https from 'node:https';
import { classify, connectionOptions, type ProbeFailure, type ProbeTls } from './http-probe.ts';
import { SseParser, type SseEvent } from './sse-parser.ts';

export interface EventStreamRequest {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly tls?: ProbeTls;
  /** Time to the response headers; the stream itself may stay quiet for as long as it likes. */
  readonly headersTimeoutMs: number;
  /** An event larger than this (its lines together) ends the stream as `too_large`. */
  readonly maxEventBytes: number;
  readonly signal: AbortSignal;
  /** The server answered 200 with an event stream: the stream is open. */
  readonly onOpen?: () => void;
  readonly onEvent: (event: SseEvent) => void;
}

/** How a stream request ended. */
export type EventStreamEnd =
  /** Answered without a stream: any status but 200 (405: the server offers no GET stream). */
  | { readonly kind: 'status'; readonly status: number }
  /** 200, but not text/event-stream. */
  | { readonly kind: 'not_event_stream'; readonly contentType: string }
  /** The server ended a stream that was open. */
  | { readonly kind: 'ended' }
  | { readonly kind: 'failed'; readonly failure: ProbeFailure; readonly detail: string }
  /** The caller's signal ended it. */
  | { readonly kind: 'aborted' };

// An idle stream is a quiet TCP connection: keep-alive probes find a peer that vanished without closing it.
const TCP_KEEPALIVE_MS = 30_000;

export function openEventStream(request: EventStreamRequest): Promise<EventStreamEnd> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (end: EventStreamEnd): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.signal.removeEventListener('abort', onAbort);
      req.destroy();
      resolve(end);
    };
    const onAbort = (): void => finish({ kind: 'aborted' });
    if (request.signal.aborted) {
      resolve({ kind: 'aborted' });
      return;
    }
    request.signal.addEventListener('abort', onAbort);
    const options: https.RequestOptions = {
      method: 'GET',
      headers: { ...request.headers },
      ...connectionOptions(request),
    };
    const req = (request.url.protocol === 'https:' ? https : http).request(request.url, options, (res) => {
      clearTimeout(timer);
      const status = res.statusCode ?? 0;
      if (status !== 200) {
        finish({ kind: 'status', status });
        return;
      }
      const contentType = String(res.headers['content-type'] ?? '');
      if (!/^text\/event-stream\b/i.test(contentType.trim())) {
        finish({ kind: 'not_event_stream', contentType: contentType.slice(0, 64) });
        return;
      }
      request.onOpen?.();
      const parser = new SseParser(request.maxEventBytes, request.onEvent);
      res.on('data', (chunk: Buffer) => {
        if (!parser.push(chunk))
          finish({
            kind: 'failed',
            failure: 'too_large',
            detail: `an event of the stream exceeds ${request.maxEventBytes} bytes`,
          });
      });
      res.on('end', () => finish({ kind: 'ended' }));
      res.on('error', (error) => finish({ kind: 'failed', ...failureOf(classify(error)) }));
      // A connection cut mid-stream may close the response without 'end' or 'error'.
      res.on('close', () => finish({ kind: 'ended' }));
    });
    const timer = setTimeout(
      () =>
        finish({
          kind: 'failed',
          failure: 'timeout',
          detail: `no response headers within ${request.headersTimeoutMs} ms`,
        }),
      request.headersTimeoutMs,
    );
    req.on('socket', (socket) => socket.setKeepAlive(true, TCP_KEEPALIVE_MS));
    req.on('error', (error) => finish({ kind: 'failed', ...failureOf(classify(error)) }));
    req.end();
  });
}

function failureOf(failure: { failure: ProbeFailure; detail: string }): { failure: ProbeFailure; detail: string } {
  return { failure: failure.failure, detail: failure.detail };
}
