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

function isWhitespace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

function isDigit(b: number): boolean {
  return b >= 0x30 && b <= 0x39;
}

function isHex(b: number): boolean {
  return isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
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
  const fieldBytes = Buffer.from(field, 'utf8');
  const stack = new Uint8Array(MAX_JSON_DEPTH);
  let depth = 0;
  let i = 0;
  let result: ScannedField = { kind: 'absent' };
  // Set while reading the value of the top-level key that names `field`.
  let atField = false;

  const fail = (message: string): never => {
    throw new JsonScanError('syntax', Math.min(i, n), `${message} at byte ${Math.min(i, n)}`);
  };
  const skipWhitespace = (): void => {
    while (i < n && isWhitespace(body[i]!)) i++;
  };
  /** Reads a string starting at the opening quote; returns [start, end, hasEscape] of its raw content. */
  const readString = (): [number, number, boolean] => {
    const start = ++i;
    let escaped = false;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const b = body[i]!;
      if (b === QUOTE) break;
      if (b < 0x20) fail('control character in string');
      if (b === BACKSLASH) {
        escaped = true;
        const e = body[i + 1];
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) if (!isHex(body[i + k] ?? 0)) fail('bad \\u escape');
          i += 6;
          continue;
        }
        if (e !== QUOTE && e !== BACKSLASH && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) fail('bad escape');
        i += 2;
        continue;
      }
      i++;
    }
    const end = i++;
    return [start, end, escaped];
  };
  const decode = (start: number, end: number, escaped: boolean): string =>
    escaped ? (JSON.parse(Buffer.from(body.buffer, body.byteOffset + start - 1, end - start + 2).toString('utf8')) as string) : Buffer.from(body.buffer, body.byteOffset + start, end - start).toString('utf8');
  const readNumber = (): void => {
    if (body[i] === 0x2d) i++;
    if (body[i] === 0x30) i++;
    else if (isDigit(body[i] ?? 0)) while (isDigit(body[i] ?? 0)) i++;
    else fail('bad number');
    if (body[i] === 0x2e) {
      i++;
      if (!isDigit(body[i] ?? 0)) fail('bad number');
      while (isDigit(body[i] ?? 0)) i++;
    }
    if (body[i] === 0x65 || body[i] === 0x45) {
      i++;
      if (body[i] === 0x2b || body[i] === 0x2d) i++;
      if (!isDigit(body[i] ?? 0)) fail('bad number');
      while (isDigit(body[i] ?? 0)) i++;
    }
  };
  const readLiteral = (word: string): void => {
    for (let k = 0; k < word.length; k++) if (body[i + k] !== word.charCodeAt(k)) fail('unexpected character');
    i += word.length;
  };
  const open = (kind: number): void => {
    if (depth === MAX_JSON_DEPTH) throw new JsonScanError('too_deep', i, `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    stack[depth++] = kind;
    i++;
  };

  // States: expecting a value; or an object key (or '}' right after '{').
  skipWhitespace();
  // Anything but an object is refused before scanning: `[[[[…` costs nothing.
  if (body[i] !== 0x7b) throw new JsonScanError('not_object', i, 'request body must be a JSON object');
  let expectKey = false;
  let allowClose = false;
  for (;;) {
    skipWhitespace();
    if (i >= n) fail('unexpected end of body');
    const b = body[i]!;
    if (expectKey) {
      if (b === 0x7d && allowClose) {
        depth--;
        i++;
      } else {
        if (b !== QUOTE) fail('expected a string key');
        const [start, end, escaped] = readString();
        if (depth === 1) {
          const len = end - start;
          const matches = escaped
            ? len <= fieldBytes.length * 6 && decode(start, end, true) === field
            : len === fieldBytes.length && fieldBytes.equals(body.subarray(start, end));
          if (matches) {
            if (result.kind !== 'absent') throw new JsonScanError('duplicate_field', start, `request body names "${field}" more than once`);
            atField = true;
          }
        }
        skipWhitespace();
        if (body[i] !== 0x3a) fail('expected ":"');
        i++;
        expectKey = false;
        continue;
      }
    } else {
      // A value.
      const fieldValue = atField;
      atField = false;
      if (b === 0x7b) {
        if (fieldValue) result = { kind: 'other' };
        open(OBJECT);
        expectKey = true;
        allowClose = true;
        continue;
      }
      if (b === 0x5b) {
        if (fieldValue) result = { kind: 'other' };
        open(ARRAY);
        skipWhitespace();
        if (body[i] === 0x5d) {
          depth--;
          i++;
        } else {
          continue;
        }
      } else if (b === QUOTE) {
        const [start, end, escaped] = readString();
        if (fieldValue) result = { kind: 'string', value: end - start > maxRawBytes ? undefined : decode(start, end, escaped) };
      } else {
        if (b === 0x2d || isDigit(b)) readNumber();
        else if (b === 0x74) readLiteral('true');
        else if (b === 0x66) readLiteral('false');
        else if (b === 0x6e) readLiteral('null');
        else fail('unexpected character');
        if (fieldValue) result = { kind: 'other' };
      }
    }
    // After a complete value: close containers or move to the next element.
    for (;;) {
      skipWhitespace();
      if (depth === 0) {
        if (i !== n) fail('unexpected data after the JSON value');
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
      fail(i >= n ? 'unexpected end of body' : top === OBJECT ? 'expected "," or "}"' : 'expected "," or "]"');
    }
  }
}
