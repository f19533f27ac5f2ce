// The prompt text the engine tokenizes, rendered the way a Llama 3 chat template renders it (the template vLLM applies
// for Llama-3.1-8B-Instruct): each message is a header naming its role, a blank line, the content trimmed and an
// end-of-turn marker, and the prompt ends with the assistant's header for the answer to follow. A later turn of the
// same chat therefore starts with the earlier turn's prompt and answer, token for token.

export const BEGIN_OF_TEXT = '<|begin_of_text|>';
const HEADER = (role: string): string => `<|start_header_id|>${role}<|end_header_id|>\n\n`;
const END_OF_TURN = '<|eot_id|>';

export interface ChatTurn {
  readonly role: string;
  readonly content: string;
}

export function renderChat(messages: readonly ChatTurn[]): string {
  return (
    BEGIN_OF_TEXT +
    messages.map((m) => `${HEADER(m.role)}${m.content.trim()}${END_OF_TURN}`).join('') +
    HEADER('assistant')
  );
}

/** A plain completion prompt: the text after the beginning-of-text token, as the Llama 3 tokenizer adds it. */
export function renderCompletion(prompt: string): string {
  return BEGIN_OF_TEXT + prompt;
}
