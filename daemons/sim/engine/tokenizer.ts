// The sim's tokenizer: deterministic, and shaped so that shared text gives shared tokens (a prompt that starts with
// another prompt's text starts with its tokens, which is what prefix caching keys on). The rule, applied left to right:
//   - a special token written as <|name|> (the chat template's markers) is one token;
//   - else an optional single space followed by 1 to 4 letters or digits is one token (longer words go on in chunks of
//     4 without the space);
//   - else an optional single space followed by one other visible character (punctuation, a symbol) is one token;
//   - else one whitespace character (a newline, a second space) is one token.
// English text comes out near OpenAI's rule of thumb of 4 characters a token. A token's id is the 32-bit FNV-1a hash of
// its UTF-8 bytes, so the same text has the same id in every process.

const PIECE = /<\|[a-z_]+\|>| ?[\p{L}\p{N}]{1,4}| ?[^\s\p{L}\p{N}]|\s/gsu;
const encoder = new TextEncoder();

export function tokenId(piece: string): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(piece)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The pieces of `text` under the rule above; joined they give `text` back. */
export function tokenPieces(text: string): string[] {
  return text.match(PIECE) ?? [];
}

export function tokenize(text: string): number[] {
  return tokenPieces(text).map(tokenId);
}

/**
 * The text of the engine's i-th output token: "tok0", " tok1", ... " tok9", " tok0", ... Each is one piece under the
 * rule above, so an answer sent back in the next turn of a chat tokenizes to exactly the tokens the engine produced.
 */
export function outputTokenText(index: number): string {
  return index === 0 ? 'tok0' : ` tok${index % 10}`;
}
