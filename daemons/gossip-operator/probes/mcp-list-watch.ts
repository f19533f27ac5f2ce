/**
 * Hears an MCP server announce a changed tool list (`notifications/tools/list_changed`), so a provider's tools in
 * status follow the server within a moment rather than at the next probe. For a session-revision server
 * (2025-03-26 to 2025-11-25) whose initialize advertised `capabilities.tools.listChanged`: the watcher opens a
 * session of its own (the probe's handshake, mcp-probe.ts openSession), then holds the session's GET stream
 * (Accept: text/event-stream, with Mcp-Session-Id and MCP-Protocol-Version) where the server sends what it says
 * unasked. It only hears; the probe that the change triggers reads the new list.
 *
 * Bounded whatever the server does: events have a size limit; a stream that ends or fails is reopened after a
 * delay doubling from 1 s to 60 s (back to 1 s only after a stream stayed up a while, so a server that closes
 * every stream at once is not asked again every second); a server that forgot the session (404, or the 400 the SDK's
 * documented example answers for an unknown session) gets a fresh one, on the same schedule. A 405 means the
 * server offers no GET stream: the watcher reports that and stops (no watch, nothing retried). stop() aborts
 * what is in flight and ends the session with DELETE.
 *
 * A notification sent while no stream is open is lost (a server need not keep them), so a stream opened again
 * after one was up is reported as a possible change too ('reconnected'): the caller probes, and a list that changed
 * meanwhile is not missed until the next poll. Last-Event-ID is sent on such a reconnect for a server that replays.
 *
 * The bearer token goes only into request headers: reports quote statuses and failure categories, never headers.
 */
import { type EventStreamEnd, openEventStream } from './event-stream.ts';
import type { SseEvent } from './sse-parser.ts';
import type { ProbeTls } from './http-probe.ts';
import { bearer, Exchange, type McpSession, openSession } from './mcp-probe.ts';

export interface McpListWatchOptions {
  readonly endpoint: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  /** Budget of one handshake (initialize and initialized), and the time to a stream's response headers. */
  readonly timeoutMs: number;
  /** The server announced a change ('notification'), or a stream is open again after a gap ('reconnected'). */
  readonly onChanged: (cause: 'notification' | 'reconnected') => void;
  /** What the watcher is doing, for logs: never carries the token. */
  readonly onReport?: (report: McpListWatchReport) => void;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** A stream that stayed open this long resets the backoff. Default: maxBackoffMs. */
  readonly stableAfterMs?: number;
  readonly maxEventBytes?: number;
}

export type McpListWatchReport =
  /** The GET stream is open: changes are heard from now on. */
  | { readonly state: 'watching'; readonly protocolVersion: string; readonly session: boolean }
  /** Something failed; the watcher tries again after retryInMs. */
  | { readonly state: 'retrying'; readonly detail: string; readonly retryInMs: number }
  /** The server cannot be watched (405 on GET, or its session no longer advertises listChanged): stopped for good. */
  | { readonly state: 'unsupported'; readonly detail: string };

export const DEFAULT_INITIAL_BACKOFF_MS = 1_000;
export const DEFAULT_MAX_BACKOFF_MS = 60_000;
/** A list_changed notification is a few dozen bytes; anything far larger on this stream is not one. */
export const DEFAULT_MAX_EVENT_BYTES = 64 * 1024;
const DELETE_TIMEOUT_MS = 2_000;

export class McpListWatch {
  readonly #options: McpListWatchOptions;
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;
  #session: McpSession | undefined;
  #unsupported = false;

  /** Starts watching at once. */
  constructor(options: McpListWatchOptions) {
    this.#options = options;
    this.#done = this.#run();
  }

  /** True once the server said it cannot be watched; the watcher has stopped itself. */
  get unsupported(): boolean {
    return this.#unsupported;
  }

  /** Aborts the stream or handshake in flight and ends the session (DELETE, best effort, 2 s at most). */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }

  async #run(): Promise<void> {
    const options = this.#options;
    const initial = options.initialBackoffMs ?? DEFAULT_INITIAL_BACKOFF_MS;
    const max = options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
    const stableAfter = options.stableAfterMs ?? max;
    const signal = this.#abort.signal;
    let failures = 0;
    let wasOpen = false;
    let lastEventId: string | undefined;
    const retry = async (detail: string): Promise<void> => {
      const delay = Math.min(max, initial * 2 ** Math.min(failures, 30));
      failures += 1;
      options.onReport?.({ state: 'retrying', detail, retryInMs: delay });
      await sleep(delay, signal);
    };
    try {
      while (!signal.aborted) {
        if (this.#session === undefined) {
          const opened = await openSession(
            new Exchange({ ...this.#connection(), timeoutMs: options.timeoutMs, signal }),
          );
          if (signal.aborted) break;
          if ('ok' in opened) {
            await retry(opened.detail);
            continue;
          }
          this.#session = opened;
          lastEventId = undefined;
          if (!opened.toolsListChanged) {
            this.#stopForGood('initialize no longer advertises capabilities.tools.listChanged');
            break;
          }
        }
        const session = this.#session;
        let openedAt: number | undefined;
        const end = await openEventStream({
          url: new URL(options.endpoint),
          headers: {
            accept: 'text/event-stream',
            ...session.headers,
            ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
            ...bearer(options),
          },
          ...(options.tls !== undefined ? { tls: options.tls } : {}),
          headersTimeoutMs: options.timeoutMs,
          maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
          signal,
          onOpen: () => {
            openedAt = Date.now();
            options.onReport?.({
              state: 'watching',
              protocolVersion: session.protocolVersion,
              session: session.sessionId !== undefined,
            });
            if (wasOpen) options.onChanged('reconnected');
            wasOpen = true;
          },
          onEvent: (event) => {
            if (event.lastEventId !== undefined) lastEventId = event.lastEventId;
            if (announcesToolsChanged(event)) options.onChanged('notification');
          },
        });
        if (end.kind === 'aborted' || signal.aborted) break;
        if (openedAt !== undefined && Date.now() - openedAt >= stableAfter) failures = 0;
        if (end.kind === 'status' && end.status === 405) {
          this.#stopForGood('the server answers GET with HTTP 405: it offers no stream for server-initiated messages');
          break;
        }
        if (end.kind === 'status' && session.sessionId !== undefined && (end.status === 404 || end.status === 400)) {
          // The server no longer knows the session (restarted, expired). A 400 might mean something else: end the
          // session in case it still exists, so the fresh one does not leave it behind.
          if (end.status === 400) await this.#end(session);
          this.#session = undefined;
          await retry(`GET answered HTTP ${end.status} for the session; opening a fresh one`);
          continue;
        }
        await retry(describe(end));
      }
    } finally {
      if (this.#session !== undefined) await this.#end(this.#session);
      this.#session = undefined;
    }
  }

  #stopForGood(detail: string): void {
    this.#unsupported = true;
    this.#options.onReport?.({ state: 'unsupported', detail });
  }

  #connection(): { endpoint: string; tls?: ProbeTls; bearerToken?: string } {
    const { endpoint, tls, bearerToken } = this.#options;
    return { endpoint, ...(tls !== undefined ? { tls } : {}), ...(bearerToken !== undefined ? { bearerToken } : {}) };
  }

  async #end(session: McpSession): Promise<void> {
    if (session.sessionId === undefined) return;
    // Its own budget and no signal: this runs after stop() aborted everything else.
    await new Exchange({ ...this.#connection(), timeoutMs: DELETE_TIMEOUT_MS }).end(session.headers);
  }
}

/** Whether an event carries notifications/tools/list_changed (alone, or in a JSON-RPC batch of 2025-03-26). */
export function announcesToolsChanged(event: SseEvent): boolean {
  if (event.type !== 'message') return false;
  let message: unknown;
  try {
    message = JSON.parse(event.data);
  } catch {
    return false;
  }
  const messages = Array.isArray(message) ? message : [message];
  return messages.some(
    (m) =>
      typeof m === 'object' &&
      m !== null &&
      (m as { method?: unknown }).method === 'notifications/tools/list_changed' &&
      !('id' in m),
  );
}

function describe(end: Exclude<EventStreamEnd, { kind: 'aborted' }>): string {
  switch (end.kind) {
    case 'status':
      return `GET answered HTTP ${end.status}`;
    case 'not_event_stream':
      return `GET answered 200 with ${end.contentType === '' ? 'no content type' : JSON.stringify(end.contentType)}, not an event stream`;
    case 'ended':
      return 'the server ended the stream';
    case 'failed':
      return `the stream failed: ${end.detail}`;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
