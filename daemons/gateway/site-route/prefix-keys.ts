// Block keys of a request's prompt (reference praxis-proxy/grid docs/architecture/prefix-affinity.md, "What it keys
// on"): the prompt as a byte stream of tool definitions (keys sorted), each message's role and text, and tool call
// names and arguments, cut into 256-byte blocks, each key chained over the ones before it so a key names the whole
// prefix up to its block. Generation parameters, reasoning and field order do not change the keys; the model and a
// cache_salt do. Pure. The gateway does not tokenize.
import { createHash } from 'node:crypto';

export const BLOCK_BYTES = 256;
export const MAX_KEYS = 512;
/** "A tool list, tool call arguments, or other JSON value over 16 KiB keys by a digest of its bytes as sent". */
const CANONICAL_LIMIT_BYTES = 16 * 1024;

export interface PromptKeys {
  /** Chained block keys, at most MAX_KEYS. */
  readonly keys: readonly string[];
}

/** Thrown inside the walk when the body holds something that gets no keys (token arrays, an unknown part type). */
class Unkeyable extends Error {}

class BlockWriter {
  readonly keys: string[] = [];
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #previous: Buffer;
  constructor(seed: string) {
    this.#previous = createHash('sha256').update(seed).digest();
  }
  get done(): boolean {
    return this.keys.length >= MAX_KEYS;
  }
  write(text: string): void {
    if (this.done) return;
    let bytes = Buffer.from(text, 'utf8');
    while (bytes.length > 0 && !this.done) {
      const take = Math.min(bytes.length, BLOCK_BYTES - this.#pendingBytes);
      this.#pending.push(bytes.subarray(0, take));
      this.#pendingBytes += take;
      bytes = bytes.subarray(take);
      if (this.#pendingBytes === BLOCK_BYTES) this.#flush();
    }
  }
  #flush(): void {
    const hash = createHash('sha256').update(this.#previous);
    for (const part of this.#pending) hash.update(part);
    this.#previous = hash.digest();
    this.keys.push(this.#previous.toString('base64url', 0, 16));
    this.#pending = [];
    this.#pendingBytes = 0;
  }
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/** JSON with object keys sorted, or a digest of the value as serialized when that is over 16 KiB. */
function canonical(value: unknown): string {
  const sent = JSON.stringify(value) ?? 'null';
  if (sent.length > CANONICAL_LIMIT_BYTES) return `#${digest(sent)}`;
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value));
}

const record = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** Media parts count as one fixed digest each, by vLLM's `uuid` when the part has one. */
function mediaDigest(part: Record<string, unknown>): string {
  const uuid = part['uuid'];
  return `\u0002${typeof uuid === 'string' ? `uuid:${uuid}` : digest(canonical(part))}\u0002`;
}

const TEXT_PARTS = new Set(['text', 'input_text', 'output_text']);
const MEDIA_PARTS = new Set([
  'image_url',
  'input_audio',
  'file',
  'video_url',
  'input_image',
  'input_file',
  'image',
  'document',
]);

function writeContent(out: BlockWriter, content: unknown): void {
  if (content === undefined || content === null) return;
  if (typeof content === 'string') {
    out.write(content);
    return;
  }
  if (!Array.isArray(content)) throw new Unkeyable();
  for (const raw of content) {
    if (out.done) return;
    const part = record(raw);
    if (part === undefined) throw new Unkeyable();
    const type = part['type'];
    if (typeof type !== 'string') throw new Unkeyable();
    if (TEXT_PARTS.has(type)) {
      if (typeof part['text'] !== 'string') throw new Unkeyable();
      out.write(part['text']);
    } else if (MEDIA_PARTS.has(type)) {
      out.write(mediaDigest(part));
    } else if (type === 'tool_use') {
      out.write(`\u0003${String(part['name'])}\u0003${canonical(part['input'])}`);
    } else if (type === 'tool_result') {
      writeContent(out, part['content']);
    } else if (type === 'thinking' || type === 'redacted_thinking' || type === 'reasoning') {
    } else {
      throw new Unkeyable();
    }
  }
}

function writeToolCalls(out: BlockWriter, calls: unknown): void {
  if (!Array.isArray(calls)) return;
  for (const raw of calls) {
    const fn = record(record(raw)?.['function']);
    if (fn === undefined) throw new Unkeyable();
    const args = fn['arguments'];
    out.write(`\u0003${String(fn['name'])}\u0003${typeof args === 'string' ? args : canonical(args)}`);
  }
}

function writeMessages(out: BlockWriter, messages: unknown): void {
  if (!Array.isArray(messages)) throw new Unkeyable();
  for (const raw of messages) {
    if (out.done) return;
    const message = record(raw);
    if (message === undefined) throw new Unkeyable();
    out.write(`\u0001${String(message['role'])}\u0001`);
    writeContent(out, message['content']);
    writeToolCalls(out, message['tool_calls']);
  }
}

function writeResponsesInput(out: BlockWriter, input: unknown): void {
  if (typeof input === 'string') {
    out.write(`\u0001user\u0001${input}`);
    return;
  }
  if (!Array.isArray(input)) throw new Unkeyable();
  for (const raw of input) {
    if (out.done) return;
    const item = record(raw);
    if (item === undefined) throw new Unkeyable();
    const type = item['type'] ?? 'message';
    if (type === 'message') {
      out.write(`\u0001${String(item['role'])}\u0001`);
      writeContent(out, item['content']);
    } else if (type === 'function_call') {
      const args = item['arguments'];
      out.write(`\u0003${String(item['name'])}\u0003${typeof args === 'string' ? args : canonical(args)}`);
    } else if (type === 'function_call_output') {
      const output = item['output'];
      out.write(`\u0004${typeof output === 'string' ? output : canonical(output)}`);
    } else if (type === 'reasoning') {
    } else {
      throw new Unkeyable();
    }
  }
}

/**
 * The block keys of a request body for Chat Completions, Completions, Anthropic Messages and Responses; undefined
 * when the body gets no keys ("A body it cannot read, token arrays, or a part type it does not know gets no keys and
 * routes on load alone").
 */
export function promptKeys(path: string, body: unknown, model: string): PromptKeys | undefined {
  const request = record(body);
  if (request === undefined) return undefined;
  const salt = request['cache_salt'];
  // "A cache_salt gives its own keys, and so does each model."
  const out = new BlockWriter(`${model}\u0000${typeof salt === 'string' ? salt : ''}`);
  try {
    if (request['tools'] !== undefined) out.write(`\u0005${canonical(request['tools'])}`);
    switch (path) {
      case '/v1/chat/completions':
        writeMessages(out, request['messages']);
        break;
      case '/v1/messages':
        if (request['system'] !== undefined) {
          out.write('\u0001system\u0001');
          writeContent(out, request['system']);
        }
        writeMessages(out, request['messages']);
        break;
      case '/v1/completions': {
        const prompt = request['prompt'];
        if (typeof prompt === 'string') out.write(prompt);
        else if (Array.isArray(prompt) && prompt.every((p) => typeof p === 'string')) out.write(prompt.join('\u0001'));
        else throw new Unkeyable();
        break;
      }
      case '/v1/responses':
        if (typeof request['instructions'] === 'string') out.write(`\u0001system\u0001${request['instructions']}`);
        writeResponsesInput(out, request['input']);
        break;
      default:
        return undefined;
    }
  } catch (error) {
    if (error instanceof Unkeyable) return undefined;
    throw error;
  }
  return { keys: out.keys };
}
