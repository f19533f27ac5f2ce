// Response bodies in the OpenAI shapes the sim serves: chat completions, completions, embeddings and the
// Responses API, plain and as SSE events. Content is synthetic ("tok0 tok1 ...") so sizes are predictable.

export function tokenText(i: number): string {
  return `tok${i} `;
}

export function chatCompletion(id: string, model: string, created: number, tokens: number, provider: string): unknown {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    system_fingerprint: provider,
    choices: [{ index: 0, message: { role: 'assistant', content: Array.from({ length: tokens }, (_, i) => tokenText(i)).join('') }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 8, completion_tokens: tokens, total_tokens: 8 + tokens },
  };
}

export function chatChunk(id: string, model: string, created: number, delta: Record<string, unknown>, finish: string | null): string {
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

/** The final chunk of a stream that asked for `stream_options.include_usage`: no choices, the whole usage. */
export function usageChunk(id: string, object: string, model: string, created: number, tokens: number): string {
  return `data: ${JSON.stringify({ id, object, created, model, choices: [], usage: { prompt_tokens: 8, completion_tokens: tokens, total_tokens: 8 + tokens } })}\n\n`;
}

export function completion(id: string, model: string, created: number, tokens: number): unknown {
  return {
    id,
    object: 'text_completion',
    created,
    model,
    choices: [{ index: 0, text: Array.from({ length: tokens }, (_, i) => tokenText(i)).join(''), finish_reason: 'stop', logprobs: null }],
    usage: { prompt_tokens: 8, completion_tokens: tokens, total_tokens: 8 + tokens },
  };
}

export function completionChunk(id: string, model: string, created: number, text: string, finish: string | null): string {
  return `data: ${JSON.stringify({ id, object: 'text_completion', created, model, choices: [{ index: 0, text, finish_reason: finish }] })}\n\n`;
}

export function embeddings(model: string, inputs: number): unknown {
  return {
    object: 'list',
    model,
    data: Array.from({ length: inputs }, (_, index) => ({ object: 'embedding', index, embedding: Array.from({ length: 8 }, (_, d) => ((index + 1) * (d + 1)) / 64) })),
    usage: { prompt_tokens: 8 * inputs, total_tokens: 8 * inputs },
  };
}

export function responseObject(id: string, model: string, created: number, tokens: number, status: 'completed' | 'in_progress'): Record<string, unknown> {
  const text = status === 'completed' ? Array.from({ length: tokens }, (_, i) => tokenText(i)).join('') : '';
  return {
    id,
    object: 'response',
    created_at: created,
    status,
    model,
    output:
      status === 'completed'
        ? [{ type: 'message', id: `msg_${id.slice(5)}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }]
        : [],
    usage: status === 'completed' ? { input_tokens: 8, output_tokens: tokens, total_tokens: 8 + tokens } : null,
  };
}

export function sseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
