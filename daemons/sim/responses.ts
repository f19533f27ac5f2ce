// Response bodies in the OpenAI shapes the sim serves: chat completions, completions, embeddings and the Responses
// API, plain and as SSE events. The text is what the engine produced ("tok0 tok1 ..."); usage is the engine's count,
// cached prompt tokens included (as vLLM reports them with --enable-prompt-tokens-details).
import type { FinishReason } from './engine/engine.ts';

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

function chatUsage(u: Usage): Record<string, unknown> {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: { cached_tokens: u.cachedTokens },
  };
}

export function chatCompletion(
  id: string,
  model: string,
  created: number,
  text: string,
  finish: FinishReason,
  usage: Usage,
  provider: string,
): unknown {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    system_fingerprint: provider,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: finish }],
    usage: chatUsage(usage),
  };
}

export function chatChunk(
  id: string,
  model: string,
  created: number,
  delta: Record<string, unknown>,
  finish: FinishReason | null,
): string {
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

/** The final chunk of a stream that asked for `stream_options.include_usage`: no choices, the whole usage. */
export function usageChunk(id: string, object: string, model: string, created: number, usage: Usage): string {
  return `data: ${JSON.stringify({ id, object, created, model, choices: [], usage: chatUsage(usage) })}\n\n`;
}

export function completion(
  id: string,
  model: string,
  created: number,
  text: string,
  finish: FinishReason,
  usage: Usage,
): unknown {
  return {
    id,
    object: 'text_completion',
    created,
    model,
    choices: [{ index: 0, text, finish_reason: finish, logprobs: null }],
    usage: chatUsage(usage),
  };
}

export function completionChunk(
  id: string,
  model: string,
  created: number,
  text: string,
  finish: FinishReason | null,
): string {
  return `data: ${JSON.stringify({ id, object: 'text_completion', created, model, choices: [{ index: 0, text, finish_reason: finish }] })}\n\n`;
}

export function embeddings(model: string, inputs: number, promptTokens: number): unknown {
  return {
    object: 'list',
    model,
    data: Array.from({ length: inputs }, (_, index) => ({
      object: 'embedding',
      index,
      embedding: Array.from({ length: 8 }, (_, d) => ((index + 1) * (d + 1)) / 64),
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/** A Responses API object: in progress (no output yet), or done ("incomplete" when max_output_tokens cut it). */
export function responseObject(
  id: string,
  model: string,
  created: number,
  done: { text: string; finish: FinishReason; usage: Usage } | undefined,
): Record<string, unknown> {
  const status = done === undefined ? 'in_progress' : done.finish === 'length' ? 'incomplete' : 'completed';
  return {
    id,
    object: 'response',
    created_at: created,
    status,
    model,
    incomplete_details: done?.finish === 'length' ? { reason: 'max_output_tokens' } : null,
    output:
      done === undefined
        ? []
        : [
            {
              type: 'message',
              id: `msg_${id.slice(5)}`,
              status,
              role: 'assistant',
              content: [{ type: 'output_text', text: done.text, annotations: [] }],
            },
          ],
    usage:
      done === undefined
        ? null
        : {
            input_tokens: done.usage.promptTokens,
            input_tokens_details: { cached_tokens: done.usage.cachedTokens },
            output_tokens: done.usage.completionTokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: done.usage.promptTokens + done.usage.completionTokens,
          },
  };
}

export function sseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
