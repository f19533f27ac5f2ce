// A single-pass JSON scanner that checks a request body against RFC 8259 and returns one top-level string field
// (the model) without building the document: its cost is one pass over the bytes and a fixed-size stack, whatever
// the nesting. JSON.parse would materialise every nested value (5 million levels of `[` took a gateway's event
// loop for ~11 s and 650 MB), only to read one field; the backend parses the body again anyway.
//
// Where parsers disagree the scanner refuses, so the gateway and the backend cannot read different models from
// one body: a leading byte-order mark (JSON.parse refuses it, TextDecoder strips it), the field named twice at the
// top level (parsers differ on first or last), nesting deeper than MAX_JSON_DEPTH.

/** Deepest nesting of objects and arrays a request body may have (OpenAI tool schemas need far less). */
export const MAX_JSON_DEPTH = 128;

export type JsonScanProblem = 'bom' | 'syntax' | 'too_deep' | 'not_object' | 'duplicate_field';

export class JsonScanError extends Error {
  readonly problem: JsonScanProblem;
  /** Byte offset where the scan stopped. */
  readonly offset: number;
  constructor(problem: JsonScanProblem, offset: number, message: string) {
    super(message);
    this.name = 'JsonScanError';
    this.problem = problem;
    this.offset = offset;
  }
}

/** The top-level field: absent, a string (decoded; `undefined` when its raw form is over `maxRawBytes`), or another type. */
export type ScannedField = { kind: 'absent' } | { kind: 'string'; value: string | undefined } | { kind: 'other' };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OBJECT = 1;
const ARRAY = 2;

// Every scan runs to completion synchronously, so one stack serves them all (no allocation per request).
const stack = new Uint8Array(MAX_JSON_DEPTH);
const fieldBytesCache = new Map<string, Buffer>();
// Set by skipString: whether the string just skipped had an escape.
let lastStringEscaped = false;

function isHex(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
}

function syntaxError(message: string, offset: number): JsonScanError {
  return new JsonScanError('syntax', offset, `${message} at byte ${offset}`);
}

function skipWhitespace(body: Uint8Array, i: number): number {
  const n = body.length;
  while (i < n) {
    const b = body[i]!;
    if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) break;
    i++;
  }
  return i;
}

/** `i` is at the opening quote; returns the index of the closing quote. */
function skipString(body: Uint8Array, i: number): number {
  const n = body.length;
  let escaped = false;
  i++;
  for (;;) {
    if (i >= n) throw syntaxError('unterminated string', n);
    const b = body[i]!;
    if (b === QUOTE) break;
    if (b === BACKSLASH) {
      escaped = true;
      const e = body[i + 1];
      if (e === 0x75) {
        if (
          !isHex(body[i + 2] ?? 0) ||
          !isHex(body[i + 3] ?? 0) ||
          !isHex(body[i + 4] ?? 0) ||
          !isHex(body[i + 5] ?? 0)
        )
          throw syntaxError('bad \\u escape', i);
        i += 6;
        continue;
      }
      if (
        e !== QUOTE &&
        e !== BACKSLASH &&
        e !== 0x2f &&
        e !== 0x62 &&
        e !== 0x66 &&
        e !== 0x6e &&
        e !== 0x72 &&
        e !== 0x74
      )
        throw syntaxError('bad escape', i);
      i += 2;
      continue;
    }
    if (b < 0x20) throw syntaxError('control character in string', i);
    i++;
  }
  lastStringEscaped = escaped;
  return i;
}

function skipDigits(body: Uint8Array, i: number): number {
  const start = i;
  while (i < body.length && body[i]! >= 0x30 && body[i]! <= 0x39) i++;
  if (i === start) throw syntaxError('bad number', i);
  return i;
}

function skipNumber(body: Uint8Array, i: number): number {
  if (body[i] === 0x2d) i++;
  if (body[i] === 0x30) i++;
  else i = skipDigits(body, i);
  if (body[i] === 0x2e) i = skipDigits(body, i + 1);
  if (body[i] === 0x65 || body[i] === 0x45) {
    i++;
    if (body[i] === 0x2b || body[i] === 0x2d) i++;
    i = skipDigits(body, i);
  }
  return i;
}

function skipLiteral(body: Uint8Array, i: number, word: string): number {
  for (let k = 0; k < word.length; k++)
    if (body[i + k] !== word.charCodeAt(k)) throw syntaxError('unexpected character', i);
  return i + word.length;
}

/** The string between quotes at [start, end), decoded (escapes through JSON.parse, which it is a JSON string for). */
function decodeString(body: Uint8Array, start: number, end: number, escaped: boolean): string {
  const view = Buffer.from(body.buffer, body.byteOffset, body.length);
  return escaped
    ? (JSON.parse(view.toString('utf8', start - 1, end + 1)) as string)
    : view.toString('utf8', start, end);
}

/**
 * Scans `body` (already checked to be UTF-8) as one JSON object and returns its top-level `field`. Throws
 * JsonScanError naming the problem and the byte offset. `maxRawBytes` bounds how much of the field's string value
 * is decoded (a longer value is reported with `value: undefined`).
 */
export function scanTopLevelField(body: Uint8Array, field: string, maxRawBytes: number): ScannedField {
  const n = body.length;
  if (n >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    throw new JsonScanError('bom', 0, 'request body starts with a byte-order mark');
  }
  let fieldBytes = fieldBytesCache.get(field);
  if (fieldBytes === undefined) {
    fieldBytes = Buffer.from(field, 'utf8');
    fieldBytesCache.set(field, fieldBytes);
  }
  let i = skipWhitespace(body, 0);
  // Anything but an object is refused before scanning: `[[[[…` costs nothing.
  if (body[i] !== 0x7b) throw new JsonScanError('not_object', i, 'request body must be a JSON object');
  let depth = 0;
  let result: ScannedField = { kind: 'absent' };
  // Set while reading the value of the top-level key that names `field`.
  let atField = false;
  // Expecting an object key (after '{' or ','); `allowClose` when '}' may come instead (right after '{').
  let expectKey = false;
  let allowClose = false;
  for (;;) {
    i = skipWhitespace(body, i);
    if (i >= n) throw syntaxError('unexpected end of body', n);
    const b = body[i]!;
    if (expectKey) {
      if (b === 0x7d && allowClose) {
        depth--;
        i++;
      } else {
        if (b !== QUOTE) throw syntaxError('expected a string key', i);
        const start = i + 1;
        const end = skipString(body, i);
        i = end + 1;
        if (depth === 1) {
          const len = end - start;
          const matches = lastStringEscaped
            ? len <= fieldBytes.length * 6 && decodeString(body, start, end, true) === field
            : len === fieldBytes.length && fieldBytes.equals(body.subarray(start, end));
          if (matches) {
            if (result.kind !== 'absent')
              throw new JsonScanError('duplicate_field', start, `request body names "${field}" more than once`);
            atField = true;
          }
        }
        i = skipWhitespace(body, i);
        if (body[i] !== 0x3a) throw syntaxError('expected ":"', i);
        i++;
        expectKey = false;
        continue;
      }
    } else {
      // A value.
      const fieldValue = atField;
      atField = false;
      if (b === 0x7b || b === 0x5b) {
        if (fieldValue) result = { kind: 'other' };
        if (depth === MAX_JSON_DEPTH)
          throw new JsonScanError('too_deep', i, `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
        stack[depth++] = b === 0x7b ? OBJECT : ARRAY;
        i++;
        if (b === 0x7b) {
          expectKey = true;
          allowClose = true;
          continue;
        }
        i = skipWhitespace(body, i);
        if (body[i] !== 0x5d) continue;
        depth--;
        i++;
      } else if (b === QUOTE) {
        const start = i + 1;
        const end = skipString(body, i);
        i = end + 1;
        if (fieldValue)
          result = {
            kind: 'string',
            value: end - start > maxRawBytes ? undefined : decodeString(body, start, end, lastStringEscaped),
          };
      } else {
        if (b === 0x2d || (b >= 0x30 && b <= 0x39)) i = skipNumber(body, i);
        else if (b === 0x74) i = skipLiteral(body, i, 'true');
        else if (b === 0x66) i = skipLiteral(body, i, 'false');
        else if (b === 0x6e) i = skipLiteral(body, i, 'null');
        else throw syntaxError('unexpected character', i);
        if (fieldValue) result = { kind: 'other' };
      }
    }
    // After a complete value: close containers or move to the next element.
    for (;;) {
      i = skipWhitespace(body, i);
      if (depth === 0) {
        if (i !== n) throw syntaxError('unexpected data after the JSON value', i);
        return result;
      }
      const c = body[i];
      const top = stack[depth - 1];
      if (c === 0x2c) {
        i++;
        expectKey = top === OBJECT;
        allowClose = false;
        break;
      }
      if ((top === OBJECT && c === 0x7d) || (top === ARRAY && c === 0x5d)) {
        depth--;
        i++;
        continue;
      }
      throw syntaxError(
        i >= n ? 'unexpected end of body' : top === OBJECT ? 'expected "," or "}"' : 'expected "," or "]"',
        Math.min(i, n),
      );
    }
  }
}
