/**
 * A long-lived GET for a text/event-stream (the MCP list watcher's stream), with the probes' rules: no redirect is
 * followed (a 3xx is just an answer, so a bearer token never travels to another origin), the same TLS and
 * connection options as every probe (http-probe.ts), network errors classified and never quoted. What differs from
 * a probe is the bound: the stream has no end to wait for, so the limits are a time to the response headers and a
 * size for each event, and the caller's AbortSignal ends it.
 *
 * The parser follows the HTML event-stream format: lines end at CRLF, LF or CR; `data` lines join with newlines;
 * `event` names the type; `id` sets the last event id (kept across events); lines starting with ':' are comments
 * (keep-alives). It works on bytes, so a multi-byte character split between chunks is decoded whole.
 */
import http from 'node:http';
import https from 'node:https';
import { classify, connectionOptions, type ProbeFailure, type ProbeTls } from './http-probe.ts';

export interface SseEvent {
  /** The event type; 'message' when the server named none. */
  readonly type: string;
  readonly data: string;
  /** The last event id the stream set, for Last-Event-ID on a reconnect. */
  readonly lastEventId: string | undefined;
}

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
    const options: https.RequestOptions = { method: 'GET', headers: { ...request.headers }, ...connectionOptions(request) };
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
        if (!parser.push(chunk)) finish({ kind: 'failed', failure: 'too_large', detail: `an event of the stream exceeds ${request.maxEventBytes} bytes` });
      });
      res.on('end', () => finish({ kind: 'ended' }));
      res.on('error', (error) => finish({ kind: 'failed', ...failureOf(classify(error)) }));
      // A connection cut mid-stream may close the response without 'end' or 'error'.
      res.on('close', () => finish({ kind: 'ended' }));
    });
    const timer = setTimeout(() => finish({ kind: 'failed', failure: 'timeout', detail: `no response headers within ${request.headersTimeoutMs} ms` }), request.headersTimeoutMs);
    req.on('socket', (socket) => socket.setKeepAlive(true, TCP_KEEPALIVE_MS));
    req.on('error', (error) => finish({ kind: 'failed', ...failureOf(classify(error)) }));
    req.end();
  });
}

function failureOf(failure: { failure: ProbeFailure; detail: string }): { failure: ProbeFailure; detail: string } {
  return { failure: failure.failure, detail: failure.detail };
}

const LF = 0x0a;
const CR = 0x0d;

/** Incremental event-stream parser; push() answers false once the event being read outgrows maxEventBytes. */
export class SseParser {
  readonly #maxEventBytes: number;
  readonly #onEvent: (event: SseEvent) => void;
  #pending: Buffer = Buffer.alloc(0);
  /** Bytes of the lines already read into the current event. */
  #eventBytes = 0;
  #data: string[] = [];
  #type = '';
  #lastEventId: string | undefined;
  /** The previous chunk ended in CR: an LF starting this one belongs to that line end. */
  #afterCr = false;
  #started = false;

  constructor(maxEventBytes: number, onEvent: (event: SseEvent) => void) {
    this.#maxEventBytes = maxEventBytes;
    this.#onEvent = onEvent;
  }

  push(chunk: Buffer): boolean {
    let bytes = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    let start = 0;
    if (this.#afterCr && bytes.length > 0) {
      this.#afterCr = false;
      if (bytes[0] === LF) start = 1;
    }
    for (let i = start; i < bytes.length; i++) {
      const byte = bytes[i];
      if (byte !== LF && byte !== CR) continue;
      this.#eventBytes += i + 1 - start;
      if (this.#eventBytes > this.#maxEventBytes) return false;
      this.#line(bytes.subarray(start, i).toString('utf8'));
      if (byte === CR) {
        if (i + 1 < bytes.length) {
          if (bytes[i + 1] === LF) i++;
        } else {
          this.#afterCr = true;
        }
      }
      start = i + 1;
    }
    // Copied: a subarray would keep the whole chunk alive behind a short tail.
    this.#pending = Buffer.from(bytes.subarray(start));
    bytes = this.#pending;
    return this.#eventBytes + bytes.length <= this.#maxEventBytes;
  }

  #line(raw: string): void {
    // A byte order mark may open the stream, and only there.
    const line = !this.#started && raw.startsWith('\ufeff') ? raw.slice(1) : raw;
    this.#started = true;
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#type = value;
    else if (field === 'id' && !value.includes('\u0000')) this.#lastEventId = value === '' ? undefined : value;
    // `retry` and unknown fields are ignored: the watcher keeps its own reconnect schedule.
  }

  #dispatch(): void {
    const data = this.#data.join('\n');
    const type = this.#type === '' ? 'message' : this.#type;
    this.#data = [];
    this.#type = '';
    this.#eventBytes = 0;
    // An event without data (a priming event, `data:` alone) is not dispatched, as in the format's own rules.
    if (data !== '') this.#onEvent({ type, data, lastEventId: this.#lastEventId });
  }
}
