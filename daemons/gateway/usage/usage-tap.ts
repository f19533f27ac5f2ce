// Reads token usage out of a response while it streams to the caller, without holding the stream back: a JSON
// body's `usage` (chat completions, completions, embeddings: prompt/completion tokens; Responses: input/output
// tokens) and, in an SSE stream, the chat/completions chunk that carries `usage` or the Responses
// `response.completed` event. When the gateway itself asked the backend for the usage chunk
// (`stream_options.include_usage`), `stripUsageChunk` removes that extra chunk so the caller sees the stream it
// asked for. Only then are events held, and only until their terminating blank line. Pure.

export interface TokenUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** The model the answer names (gen_ai.response.model), when it names one. */
  readonly model?: string;
}

/** A JSON body larger than this is forwarded unmetered (a completion that big is not a usage-bearing answer we can afford to copy). */
export const MAX_METERED_JSON_BYTES = 8 * 1024 * 1024;
/** An SSE event larger than this is passed on as it is and not inspected. */
export const MAX_SSE_EVENT_BYTES = 1024 * 1024;

const count = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;

/** Usage of one OpenAI-shaped object (`{usage: {...}}`), or undefined when it carries none. */
export function usageOf(value: unknown): TokenUsage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const usage = (value as { usage?: unknown }).usage;
  if (typeof usage !== 'object' || usage === null) return undefined;
  const u = usage as Record<string, unknown>;
  const input = count(u['prompt_tokens']) ?? count(u['input_tokens']);
  const output = count(u['completion_tokens']) ?? count(u['output_tokens']) ?? (input === undefined ? undefined : 0);
  if (input === undefined || output === undefined) return undefined;
  const model = (value as { model?: unknown }).model;
  return typeof model === 'string' && model.length > 0 && model.length <= 256
    ? { inputTokens: input, outputTokens: output, model }
    : { inputTokens: input, outputTokens: output };
}

export interface UsageTap {
  /** Bytes to write to the caller for this upstream chunk (possibly empty, never delayed past the event). */
  push(chunk: Buffer): Buffer;
  /** Bytes still to write at the end of the upstream body. */
  end(): Buffer;
  /** The usage seen so far (final once `end` ran); undefined when the response carried none. */
  usage(): TokenUsage | undefined;
}

const EMPTY = Buffer.alloc(0);

export function jsonUsageTap(): UsageTap {
  const parts: Buffer[] = [];
  let size = 0;
  let result: TokenUsage | undefined;
  return {
    push(chunk) {
      size += chunk.length;
      if (size <= MAX_METERED_JSON_BYTES) parts.push(chunk);
      return chunk;
    },
    end() {
      if (size <= MAX_METERED_JSON_BYTES) {
        try {
          result = usageOf(JSON.parse(Buffer.concat(parts).toString('utf8')));
        } catch {
          result = undefined;
        }
      }
      parts.length = 0;
      return EMPTY;
    },
    usage: () => result,
  };
}

/** Event boundary: a blank line (LF LF, or CRLF CRLF). Shared with the A2A task scanner (agents/a2a-tasks.ts). */
export function boundary(text: string, from: number): { at: number; length: number } | undefined {
  const lf = text.indexOf('\n\n', from);
  const crlf = text.indexOf('\r\n\r\n', from);
  if (lf === -1 && crlf === -1) return undefined;
  if (crlf !== -1 && (lf === -1 || crlf < lf)) return { at: crlf, length: 4 };
  return { at: lf, length: 2 };
}

export function sseUsageTap(options: { stripUsageChunk: boolean }): UsageTap {
  let pending = '';
  let result: TokenUsage | undefined;

  /** Inspects one event; true when it is the usage-only chunk the gateway asked for on the caller's behalf. */
  function inspect(event: string): boolean {
    if (!event.includes('"usage"')) return false;
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
      .join('\n');
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return false;
    }
    if (typeof parsed !== 'object' || parsed === null) return false;
    const record = parsed as Record<string, unknown>;
    if (record['type'] === 'response.completed') {
      result = usageOf(record['response']) ?? result;
      return false;
    }
    const usage = usageOf(record);
    if (usage === undefined) return false;
    result = usage;
    return Array.isArray(record['choices']) && record['choices'].length === 0;
  }

  function drain(final: boolean): string {
    let out = '';
    let from = 0;
    for (;;) {
      const b = boundary(pending, from);
      if (b === undefined) break;
      const event = pending.slice(from, b.at);
      const whole = pending.slice(from, b.at + b.length);
      from = b.at + b.length;
      const isExtra = inspect(event);
      if (!(options.stripUsageChunk && isExtra)) out += whole;
    }
    pending = pending.slice(from);
    if (final || Buffer.byteLength(pending) > MAX_SSE_EVENT_BYTES) {
      out += pending;
      pending = '';
    }
    return out;
  }

  // UTF-8 may split inside a character at a chunk edge: decode with a streaming decoder.
  const decoder = new TextDecoder('utf-8');
  return {
    push(chunk) {
      pending += decoder.decode(chunk, { stream: true });
      const out = drain(false);
      if (!options.stripUsageChunk) return chunk;
      return Buffer.from(out, 'utf8');
    },
    end() {
      pending += decoder.decode();
      const out = drain(true);
      return options.stripUsageChunk ? Buffer.from(out, 'utf8') : EMPTY;
    },
    usage: () => result,
  };
}
