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
/** Ids of pieces seen before: text repeats its pieces, and a long prompt is tokenized on the request path. */
const ids = new Map<string, number>();
const MAX_CACHED_IDS = 1 << 16;

function fnv1a(hash: number, byte: number): number {
  return Math.imul(hash ^ byte, 0x01000193) >>> 0;
}

export function tokenId(piece: string): number {
  const known = ids.get(piece);
  if (known !== undefined) return known;
  let hash = 0x811c9dc5;
  // FNV-1a over the UTF-8 encoding, written out rather than through a TextEncoder (an allocation per piece).
  for (const char of piece) {
    const c = char.codePointAt(0)!;
    if (c < 0x80) hash = fnv1a(hash, c);
    else if (c < 0x800) hash = fnv1a(fnv1a(hash, 0xc0 | (c >> 6)), 0x80 | (c & 0x3f));
    else if (c < 0x10000)
      hash = fnv1a(fnv1a(fnv1a(hash, 0xe0 | (c >> 12)), 0x80 | ((c >> 6) & 0x3f)), 0x80 | (c & 0x3f));
    else
      hash = fnv1a(
        fnv1a(fnv1a(fnv1a(hash, 0xf0 | (c >> 18)), 0x80 | ((c >> 12) & 0x3f)), 0x80 | ((c >> 6) & 0x3f)),
        0x80 | (c & 0x3f),
      );
  }
  if (ids.size >= MAX_CACHED_IDS) ids.clear();
  ids.set(piece, hash);
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
