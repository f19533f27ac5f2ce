/**
 * An incremental text/event-stream parser (the HTML event-stream format): lines end at CRLF, LF or CR; `data`
 * lines join with newlines; `event` names the type; `id` sets the last event id (kept across events); lines
 * starting with ':' are comments (keep-alives). It works on bytes, so a multi-byte character split between chunks
 * is decoded whole. The list watcher's held stream and the probe's one-answer streams both read events with it.
 */
export interface SseEvent {
  /** The event type; 'message' when the server named none. */
  readonly type: string;
  readonly data: string;
  /** The last event id the stream set, for Last-Event-ID on a reconnect. */
  readonly lastEventId: string | undefined;
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
