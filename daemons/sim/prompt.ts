// What the engine needs from an OpenAI-shaped request body: the prompt's tokens (a chat or a Responses input through the
// chat template, a completion prompt after the beginning-of-text token) and the output limit the caller set. A field of
// the wrong shape is an error naming it; a missing one is an empty prompt, as the sim has always accepted.
import { BEGIN_OF_TEXT, renderChat, renderCompletion } from './engine/chat-template.ts';
import type { ChatTurn } from './engine/chat-template.ts';
import { tokenize } from './engine/tokenizer.ts';

export interface Prompt {
  readonly tokenIds: number[];
  readonly maxTokens: number | undefined;
}

type Body = Record<string, unknown>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A string, or the text parts of a content array joined (images and other parts carry no text here). */
function contentText(content: unknown): string | undefined {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  return content.map((part) => (isObject(part) && typeof part['text'] === 'string' ? part['text'] : '')).join('');
}

/** The first output limit present among `fields`: an integer of at least 1, or an error naming the field. */
function outputLimit(body: Body, fields: readonly string[]): number | undefined | string {
  for (const field of fields) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) return `${field} must be a positive integer`;
    if (v < 1) return `${field} must be at least 1, got ${v}.`;
    return v;
  }
  return undefined;
}

function turns(items: unknown, what: string): ChatTurn[] | string {
  if (items === undefined || items === null) return [];
  if (!Array.isArray(items)) return `${what} must be an array of {role, content} objects`;
  const out: ChatTurn[] = [];
  for (const [i, item] of items.entries()) {
    if (!isObject(item) || typeof item['role'] !== 'string')
      return `${what} must be an array of {role, content} objects`;
    const content = contentText(item['content']);
    if (content === undefined) return `${what}[${i}].content must be a string or an array of content parts`;
    out.push({ role: item['role'], content });
  }
  return out;
}

export function chatPrompt(body: Body): Prompt | string {
  const messages = turns(body['messages'], 'messages');
  if (typeof messages === 'string') return messages;
  const maxTokens = outputLimit(body, ['max_completion_tokens', 'max_tokens']);
  if (typeof maxTokens === 'string') return maxTokens;
  return { tokenIds: tokenize(renderChat(messages)), maxTokens };
}

export function completionPrompt(body: Body): Prompt | string {
  const maxTokens = outputLimit(body, ['max_tokens']);
  if (typeof maxTokens === 'string') return maxTokens;
  const prompt = body['prompt'];
  if (prompt === undefined || prompt === null) return { tokenIds: tokenize(BEGIN_OF_TEXT), maxTokens };
  if (typeof prompt === 'string') return { tokenIds: tokenize(renderCompletion(prompt)), maxTokens };
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string')
    return { tokenIds: tokenize(renderCompletion(prompt[0])), maxTokens };
  // Token ids are used as given, as vLLM does.
  if (
    Array.isArray(prompt) &&
    prompt.every((t) => Number.isSafeInteger(t) && (t as number) >= 0 && (t as number) < 2 ** 32)
  )
    return { tokenIds: prompt as number[], maxTokens };
  return 'prompt must be a string, an array of one string, or an array of token ids';
}

export function responsesPrompt(body: Body): Prompt | string {
  const maxTokens = outputLimit(body, ['max_output_tokens']);
  if (typeof maxTokens === 'string') return maxTokens;
  const instructions = body['instructions'];
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string')
    return 'instructions must be a string';
  const system: ChatTurn[] = typeof instructions === 'string' ? [{ role: 'system', content: instructions }] : [];
  const input = body['input'];
  if (typeof input === 'string')
    return { tokenIds: tokenize(renderChat([...system, { role: 'user', content: input }])), maxTokens };
  if (input !== undefined && input !== null && !Array.isArray(input))
    return 'input must be a string or an array of input items';
  // Items other than messages (function call outputs, references) carry no role: they are not rendered.
  const messages = turns(
    Array.isArray(input) ? input.filter((item) => !isObject(item) || item['role'] !== undefined) : [],
    'input',
  );
  if (typeof messages === 'string') return messages;
  return { tokenIds: tokenize(renderChat([...system, ...messages])), maxTokens };
}

/** The inputs an embeddings request holds (at most 256 answered) and their token count. */
export function embeddingInputs(body: Body): { count: number; promptTokens: number } {
  const input = body['input'];
  const tokens = (one: unknown): number =>
    typeof one === 'string' ? tokenize(renderCompletion(one)).length : Array.isArray(one) ? one.length : 0;
  if (Array.isArray(input) && input.length > 0 && typeof input[0] !== 'number') {
    const inputs = input.slice(0, 256);
    return { count: inputs.length, promptTokens: inputs.reduce((sum: number, one) => sum + tokens(one), 0) };
  }
  return { count: 1, promptTokens: tokens(input) };
}
