// The OTLP trace wire format, decoded on its own: an ExportTraceServiceRequest as protobuf (opentelemetry-proto
// collector/trace/v1/trace_service.proto, trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto)
// or as OTLP/JSON. Written here rather than borrowed from @opentelemetry/otlp-transformer, which ships the encoder
// the exporters use: a receiver that decoded with the same package the SDK encodes with could not catch that
// package's mistakes. Malformed input throws OtlpDecodeError; unknown fields are skipped, as proto3 requires.

export class OtlpDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OtlpDecodeError';
  }
}

/** An AnyValue, tagged with its wire kind so an int and a double of the same number stay apart. */
export type AnyValue =
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'int'; readonly value: bigint }
  | { readonly kind: 'double'; readonly value: number }
  | { readonly kind: 'bytes'; readonly value: Buffer }
  | { readonly kind: 'array'; readonly value: readonly AnyValue[] }
  | { readonly kind: 'kvlist'; readonly value: readonly KeyValue[] }
  | { readonly kind: 'empty' };

export interface KeyValue {
  readonly key: string;
  readonly value: AnyValue;
}

/** A plain attribute value: ints as numbers when they fit a double exactly, else bigint; kvlists as objects. */
export type PlainValue =
  | string
  | boolean
  | number
  | bigint
  | Buffer
  | null
  | readonly PlainValue[]
  | { readonly [key: string]: PlainValue };

export interface DecodedEvent {
  readonly timeUnixNano: bigint;
  readonly name: string;
  readonly attributes: readonly KeyValue[];
  readonly droppedAttributesCount: number;
}

export interface DecodedLink {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceState: string;
  readonly attributes: readonly KeyValue[];
  readonly droppedAttributesCount: number;
  readonly flags: number;
}

export interface DecodedSpan {
  /** 32 lowercase hex digits. */
  readonly traceId: string;
  /** 16 lowercase hex digits. */
  readonly spanId: string;
  readonly traceState: string;
  /** 16 lowercase hex digits, or '' for a root span. */
  readonly parentSpanId: string;
  readonly flags: number;
  readonly name: string;
  /** SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: readonly KeyValue[];
  readonly droppedAttributesCount: number;
  readonly events: readonly DecodedEvent[];
  readonly droppedEventsCount: number;
  readonly links: readonly DecodedLink[];
  readonly droppedLinksCount: number;
  /** Status code: 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message: string };
}

export interface DecodedScope {
  readonly name: string;
  readonly version: string;
  readonly attributes: readonly KeyValue[];
}

export interface DecodedScopeSpans {
  readonly scope: DecodedScope;
  readonly spans: readonly DecodedSpan[];
  readonly schemaUrl: string;
}

export interface DecodedResourceSpans {
  readonly resource: { readonly attributes: readonly KeyValue[]; readonly droppedAttributesCount: number };
  readonly scopeSpans: readonly DecodedScopeSpans[];
  readonly schemaUrl: string;
}

export interface DecodedTraceRequest {
  readonly resourceSpans: readonly DecodedResourceSpans[];
}

// ---------------------------------------------------------------------------------------------------------------
// Protobuf

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A cursor over one message's bytes; every read checks it stays inside them. */
class Reader {
  private pos = 0;
  private readonly bytes: Buffer;
  private readonly message: string;

  constructor(bytes: Buffer, message: string) {
    this.bytes = bytes;
    this.message = message;
  }

  get done(): boolean {
    return this.pos >= this.bytes.length;
  }

  private fail(problem: string): never {
    throw new OtlpDecodeError(`${this.message}: ${problem} at byte ${this.pos}`);
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.bytes.length) this.fail('truncated varint');
      const byte = this.bytes[this.pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return BigInt.asUintN(64, result);
    }
    return this.fail('varint longer than 10 bytes');
  }

  tag(): { field: number; wireType: number } {
    const tag = this.varint();
    const field = Number(tag >> 3n);
    const wireType = Number(tag & 7n);
    if (field === 0 || field > 0x1fffffff) this.fail(`field number ${field}`);
    return { field, wireType };
  }

  private take(length: number): Buffer {
    if (length > this.bytes.length - this.pos)
      this.fail(`truncated: ${length} bytes declared, ${this.bytes.length - this.pos} left`);
    const slice = this.bytes.subarray(this.pos, this.pos + length);
    this.pos += length;
    return slice;
  }

  fixed64(): bigint {
    return this.take(8).readBigUInt64LE(0);
  }

  fixed32(): number {
    return this.take(4).readUInt32LE(0);
  }

  double(): number {
    return this.take(8).readDoubleLE(0);
  }

  bytesField(): Buffer {
    const length = this.varint();
    if (length > BigInt(this.bytes.length)) this.fail(`truncated: ${length} bytes declared`);
    return this.take(Number(length));
  }

  string(): string {
    try {
      return UTF8.decode(this.bytesField());
    } catch (error) {
      if (error instanceof OtlpDecodeError) throw error;
      return this.fail('string is not UTF-8');
    }
  }

  /** Skips a field of an unknown number; groups (wire types 3 and 4) and types 6 and 7 do not exist in proto3. */
  skip(wireType: number): void {
    if (wireType === VARINT) this.varint();
    else if (wireType === FIXED64) this.take(8);
    else if (wireType === LENGTH_DELIMITED) this.bytesField();
    else if (wireType === FIXED32) this.take(4);
    else this.fail(`wire type ${wireType}`);
  }

  /** A known field must arrive with its declared wire type. */
  expect(field: number, wireType: number, wanted: number): void {
    if (wireType !== wanted) this.fail(`field ${field} has wire type ${wireType}, expected ${wanted}`);
  }
}

/** Reads every field of one message, handing known ones to `onField` (which returns false for unknown ones). */
function readMessage(
  bytes: Buffer,
  message: string,
  onField: (reader: Reader, field: number, wireType: number) => boolean,
): void {
  const reader = new Reader(bytes, message);
  while (!reader.done) {
    const { field, wireType } = reader.tag();
    if (!onField(reader, field, wireType)) reader.skip(wireType);
  }
}

function uint32(value: bigint): number {
  return Number(BigInt.asUintN(32, value));
}

function hexId(bytes: Buffer, length: number, what: string, optional: boolean): string {
  if (optional && bytes.length === 0) return '';
  if (bytes.length !== length) throw new OtlpDecodeError(`${what} has ${bytes.length} bytes, expected ${length}`);
  return bytes.toString('hex');
}

function decodeAnyValue(bytes: Buffer): AnyValue {
  let value: AnyValue = { kind: 'empty' };
  readMessage(bytes, 'AnyValue', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, LENGTH_DELIMITED);
        value = { kind: 'string', value: r.string() };
        return true;
      case 2:
        r.expect(field, wireType, VARINT);
        value = { kind: 'bool', value: r.varint() !== 0n };
        return true;
      case 3:
        r.expect(field, wireType, VARINT);
        value = { kind: 'int', value: BigInt.asIntN(64, r.varint()) };
        return true;
      case 4:
        r.expect(field, wireType, FIXED64);
        value = { kind: 'double', value: r.double() };
        return true;
      case 5: {
        r.expect(field, wireType, LENGTH_DELIMITED);
        const values: AnyValue[] = [];
        readMessage(r.bytesField(), 'ArrayValue', (a, f, w) => {
          if (f !== 1) return false;
          a.expect(f, w, LENGTH_DELIMITED);
          values.push(decodeAnyValue(a.bytesField()));
          return true;
        });
        value = { kind: 'array', value: values };
        return true;
      }
      case 6: {
        r.expect(field, wireType, LENGTH_DELIMITED);
        const values: KeyValue[] = [];
        readMessage(r.bytesField(), 'KeyValueList', (l, f, w) => {
          if (f !== 1) return false;
          l.expect(f, w, LENGTH_DELIMITED);
          values.push(decodeKeyValue(l.bytesField()));
          return true;
        });
        value = { kind: 'kvlist', value: values };
        return true;
      }
      case 7:
        r.expect(field, wireType, LENGTH_DELIMITED);
        value = { kind: 'bytes', value: Buffer.from(r.bytesField()) };
        return true;
      default:
        return false;
    }
  });
  return value;
}

function decodeKeyValue(bytes: Buffer): KeyValue {
  let key = '';
  let value: AnyValue = { kind: 'empty' };
  readMessage(bytes, 'KeyValue', (r, field, wireType) => {
    if (field === 1) {
      r.expect(field, wireType, LENGTH_DELIMITED);
      key = r.string();
      return true;
    }
    if (field === 2) {
      r.expect(field, wireType, LENGTH_DELIMITED);
      value = decodeAnyValue(r.bytesField());
      return true;
    }
    return false;
  });
  return { key, value };
}

/** Attributes are a repeated KeyValue at `field`; the caller has matched the field number. */
function pushKeyValue(r: Reader, field: number, wireType: number, into: KeyValue[]): true {
  r.expect(field, wireType, LENGTH_DELIMITED);
  into.push(decodeKeyValue(r.bytesField()));
  return true;
}

function decodeEvent(bytes: Buffer): DecodedEvent {
  let timeUnixNano = 0n;
  let name = '';
  const attributes: KeyValue[] = [];
  let droppedAttributesCount = 0;
  readMessage(bytes, 'Span.Event', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, FIXED64);
        timeUnixNano = r.fixed64();
        return true;
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        name = r.string();
        return true;
      case 3:
        return pushKeyValue(r, field, wireType, attributes);
      case 4:
        r.expect(field, wireType, VARINT);
        droppedAttributesCount = uint32(r.varint());
        return true;
      default:
        return false;
    }
  });
  return { timeUnixNano, name, attributes, droppedAttributesCount };
}

function decodeLink(bytes: Buffer): DecodedLink {
  let traceId: Buffer = Buffer.alloc(0);
  let spanId: Buffer = Buffer.alloc(0);
  let traceState = '';
  const attributes: KeyValue[] = [];
  let droppedAttributesCount = 0;
  let flags = 0;
  readMessage(bytes, 'Span.Link', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, LENGTH_DELIMITED);
        traceId = r.bytesField();
        return true;
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        spanId = r.bytesField();
        return true;
      case 3:
        r.expect(field, wireType, LENGTH_DELIMITED);
        traceState = r.string();
        return true;
      case 4:
        return pushKeyValue(r, field, wireType, attributes);
      case 5:
        r.expect(field, wireType, VARINT);
        droppedAttributesCount = uint32(r.varint());
        return true;
      case 6:
        r.expect(field, wireType, FIXED32);
        flags = r.fixed32();
        return true;
      default:
        return false;
    }
  });
  return {
    traceId: hexId(traceId, 16, 'link trace_id', false),
    spanId: hexId(spanId, 8, 'link span_id', false),
    traceState,
    attributes,
    droppedAttributesCount,
    flags,
  };
}

function decodeStatus(bytes: Buffer): { code: number; message: string } {
  let code = 0;
  let message = '';
  readMessage(bytes, 'Status', (r, field, wireType) => {
    if (field === 2) {
      r.expect(field, wireType, LENGTH_DELIMITED);
      message = r.string();
      return true;
    }
    if (field === 3) {
      r.expect(field, wireType, VARINT);
      code = Number(BigInt.asIntN(32, r.varint()));
      return true;
    }
    return false;
  });
  return { code, message };
}

function decodeSpan(bytes: Buffer): DecodedSpan {
  let traceId: Buffer = Buffer.alloc(0);
  let spanId: Buffer = Buffer.alloc(0);
  let parentSpanId: Buffer = Buffer.alloc(0);
  let traceState = '';
  let flags = 0;
  let name = '';
  let kind = 0;
  let startTimeUnixNano = 0n;
  let endTimeUnixNano = 0n;
  const attributes: KeyValue[] = [];
  let droppedAttributesCount = 0;
  const events: DecodedEvent[] = [];
  let droppedEventsCount = 0;
  const links: DecodedLink[] = [];
  let droppedLinksCount = 0;
  let status = { code: 0, message: '' };
  readMessage(bytes, 'Span', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, LENGTH_DELIMITED);
        traceId = r.bytesField();
        return true;
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        spanId = r.bytesField();
        return true;
      case 3:
        r.expect(field, wireType, LENGTH_DELIMITED);
        traceState = r.string();
        return true;
      case 4:
        r.expect(field, wireType, LENGTH_DELIMITED);
        parentSpanId = r.bytesField();
        return true;
      case 5:
        r.expect(field, wireType, LENGTH_DELIMITED);
        name = r.string();
        return true;
      case 6:
        r.expect(field, wireType, VARINT);
        kind = Number(BigInt.asIntN(32, r.varint()));
        return true;
      case 7:
        r.expect(field, wireType, FIXED64);
        startTimeUnixNano = r.fixed64();
        return true;
      case 8:
        r.expect(field, wireType, FIXED64);
        endTimeUnixNano = r.fixed64();
        return true;
      case 9:
        return pushKeyValue(r, field, wireType, attributes);
      case 10:
        r.expect(field, wireType, VARINT);
        droppedAttributesCount = uint32(r.varint());
        return true;
      case 11:
        r.expect(field, wireType, LENGTH_DELIMITED);
        events.push(decodeEvent(r.bytesField()));
        return true;
      case 12:
        r.expect(field, wireType, VARINT);
        droppedEventsCount = uint32(r.varint());
        return true;
      case 13:
        r.expect(field, wireType, LENGTH_DELIMITED);
        links.push(decodeLink(r.bytesField()));
        return true;
      case 14:
        r.expect(field, wireType, VARINT);
        droppedLinksCount = uint32(r.varint());
        return true;
      case 15:
        r.expect(field, wireType, LENGTH_DELIMITED);
        status = decodeStatus(r.bytesField());
        return true;
      case 16:
        r.expect(field, wireType, FIXED32);
        flags = r.fixed32();
        return true;
      default:
        return false;
    }
  });
  return {
    traceId: hexId(traceId, 16, 'span trace_id', false),
    spanId: hexId(spanId, 8, 'span span_id', false),
    traceState,
    parentSpanId: hexId(parentSpanId, 8, 'span parent_span_id', true),
    flags,
    name,
    kind,
    startTimeUnixNano,
    endTimeUnixNano,
    attributes,
    droppedAttributesCount,
    events,
    droppedEventsCount,
    links,
    droppedLinksCount,
    status,
  };
}

function decodeScope(bytes: Buffer): DecodedScope {
  let name = '';
  let version = '';
  const attributes: KeyValue[] = [];
  readMessage(bytes, 'InstrumentationScope', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, LENGTH_DELIMITED);
        name = r.string();
        return true;
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        version = r.string();
        return true;
      case 3:
        return pushKeyValue(r, field, wireType, attributes);
      default:
        return false;
    }
  });
  return { name, version, attributes };
}

function decodeScopeSpans(bytes: Buffer): DecodedScopeSpans {
  let scope: DecodedScope = { name: '', version: '', attributes: [] };
  const spans: DecodedSpan[] = [];
  let schemaUrl = '';
  readMessage(bytes, 'ScopeSpans', (r, field, wireType) => {
    switch (field) {
      case 1:
        r.expect(field, wireType, LENGTH_DELIMITED);
        scope = decodeScope(r.bytesField());
        return true;
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        spans.push(decodeSpan(r.bytesField()));
        return true;
      case 3:
        r.expect(field, wireType, LENGTH_DELIMITED);
        schemaUrl = r.string();
        return true;
      default:
        return false;
    }
  });
  return { scope, spans, schemaUrl };
}

function decodeResourceSpans(bytes: Buffer): DecodedResourceSpans {
  let resource = { attributes: [] as KeyValue[], droppedAttributesCount: 0 };
  const scopeSpans: DecodedScopeSpans[] = [];
  let schemaUrl = '';
  readMessage(bytes, 'ResourceSpans', (r, field, wireType) => {
    switch (field) {
      case 1: {
        r.expect(field, wireType, LENGTH_DELIMITED);
        const attributes: KeyValue[] = [];
        let droppedAttributesCount = 0;
        readMessage(r.bytesField(), 'Resource', (res, f, w) => {
          if (f === 1) return pushKeyValue(res, f, w, attributes);
          if (f === 2) {
            res.expect(f, w, VARINT);
            droppedAttributesCount = uint32(res.varint());
            return true;
          }
          return false;
        });
        resource = { attributes, droppedAttributesCount };
        return true;
      }
      case 2:
        r.expect(field, wireType, LENGTH_DELIMITED);
        scopeSpans.push(decodeScopeSpans(r.bytesField()));
        return true;
      case 3:
        r.expect(field, wireType, LENGTH_DELIMITED);
        schemaUrl = r.string();
        return true;
      default:
        return false;
    }
  });
  return { resource, scopeSpans, schemaUrl };
}

/** Decodes a protobuf ExportTraceServiceRequest. */
export function decodeTraceRequestProtobuf(bytes: Buffer): DecodedTraceRequest {
  const resourceSpans: DecodedResourceSpans[] = [];
  readMessage(bytes, 'ExportTraceServiceRequest', (r, field, wireType) => {
    if (field !== 1) return false;
    r.expect(field, wireType, LENGTH_DELIMITED);
    resourceSpans.push(decodeResourceSpans(r.bytesField()));
    return true;
  });
  return { resourceSpans };
}

/** google.rpc.Status { code = 1; message = 2 }: the body OTLP/HTTP answers a refused request with. */
export function encodeRpcStatusProtobuf(code: number, message: string): Buffer {
  const text = Buffer.from(message, 'utf8');
  return Buffer.concat([
    Buffer.from([0x08]),
    encodeVarint(BigInt(code)),
    Buffer.from([0x12]),
    encodeVarint(BigInt(text.length)),
    text,
  ]);
}

function encodeVarint(value: bigint): Buffer {
  const bytes: number[] = [];
  let rest = BigInt.asUintN(64, value);
  do {
    const low = Number(rest & 0x7fn);
    rest >>= 7n;
    bytes.push(rest === 0n ? low : low | 0x80);
  } while (rest !== 0n);
  return Buffer.from(bytes);
}

// ---------------------------------------------------------------------------------------------------------------
// OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): lowerCamelCase field names, trace and
// span ids as hex, 64-bit integers as decimal strings or numbers, enums as numbers, bytes as base64.

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonObject(value: unknown, where: string): Json {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new OtlpDecodeError(`${where} is not an object`);
  return value;
}

function jsonArray(value: unknown, where: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new OtlpDecodeError(`${where} is not an array`);
  return value;
}

function jsonString(value: unknown, where: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new OtlpDecodeError(`${where} is not a string`);
  return value;
}

function jsonInteger(value: unknown, where: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  if (typeof value === 'string' && /^-?\d{1,20}$/.test(value)) return BigInt(value);
  throw new OtlpDecodeError(`${where} is not an integer`);
}

function jsonHexId(value: unknown, length: number, where: string, optional: boolean): string {
  const text = jsonString(value, where);
  if (optional && text === '') return '';
  if (!new RegExp(`^[0-9a-fA-F]{${length * 2}}$`).test(text))
    throw new OtlpDecodeError(`${where} is not ${length * 2} hex digits`);
  return text.toLowerCase();
}

function jsonAnyValue(value: unknown, where: string): AnyValue {
  const v = jsonObject(value, where);
  if ('stringValue' in v) return { kind: 'string', value: jsonString(v['stringValue'], `${where}.stringValue`) };
  if ('boolValue' in v) {
    if (typeof v['boolValue'] !== 'boolean') throw new OtlpDecodeError(`${where}.boolValue is not a boolean`);
    return { kind: 'bool', value: v['boolValue'] };
  }
  if ('intValue' in v)
    return { kind: 'int', value: BigInt.asIntN(64, jsonInteger(v['intValue'], `${where}.intValue`)) };
  if ('doubleValue' in v) {
    const d = v['doubleValue'];
    if (typeof d === 'number') return { kind: 'double', value: d };
    if (d === 'NaN' || d === 'Infinity' || d === '-Infinity') return { kind: 'double', value: Number(d) };
    throw new OtlpDecodeError(`${where}.doubleValue is not a number`);
  }
  if ('arrayValue' in v) {
    return {
      kind: 'array',
      value: jsonArray(jsonObject(v['arrayValue'], `${where}.arrayValue`)['values'], `${where}.arrayValue.values`).map(
        (item, i) => jsonAnyValue(item, `${where}.arrayValue.values[${i}]`),
      ),
    };
  }
  if ('kvlistValue' in v)
    return {
      kind: 'kvlist',
      value: jsonKeyValues(
        jsonObject(v['kvlistValue'], `${where}.kvlistValue`)['values'],
        `${where}.kvlistValue.values`,
      ),
    };
  if ('bytesValue' in v) {
    const text = jsonString(v['bytesValue'], `${where}.bytesValue`);
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(text)) throw new OtlpDecodeError(`${where}.bytesValue is not base64`);
    return { kind: 'bytes', value: Buffer.from(text, 'base64') };
  }
  return { kind: 'empty' };
}

function jsonKeyValues(value: unknown, where: string): KeyValue[] {
  return jsonArray(value, where).map((item, i) => {
    const kv = jsonObject(item, `${where}[${i}]`);
    return {
      key: jsonString(kv['key'], `${where}[${i}].key`),
      value: jsonAnyValue(kv['value'], `${where}[${i}].value`),
    };
  });
}

function jsonCount(value: unknown, where: string): number {
  return Number(jsonInteger(value, where));
}

function jsonSpan(value: unknown, where: string): DecodedSpan {
  const s = jsonObject(value, where);
  const status = jsonObject(s['status'], `${where}.status`);
  return {
    traceId: jsonHexId(s['traceId'], 16, `${where}.traceId`, false),
    spanId: jsonHexId(s['spanId'], 8, `${where}.spanId`, false),
    traceState: jsonString(s['traceState'], `${where}.traceState`),
    parentSpanId: jsonHexId(s['parentSpanId'], 8, `${where}.parentSpanId`, true),
    flags: jsonCount(s['flags'], `${where}.flags`),
    name: jsonString(s['name'], `${where}.name`),
    kind: jsonCount(s['kind'], `${where}.kind`),
    startTimeUnixNano: jsonInteger(s['startTimeUnixNano'], `${where}.startTimeUnixNano`),
    endTimeUnixNano: jsonInteger(s['endTimeUnixNano'], `${where}.endTimeUnixNano`),
    attributes: jsonKeyValues(s['attributes'], `${where}.attributes`),
    droppedAttributesCount: jsonCount(s['droppedAttributesCount'], `${where}.droppedAttributesCount`),
    events: jsonArray(s['events'], `${where}.events`).map((item, i) => {
      const e = jsonObject(item, `${where}.events[${i}]`);
      return {
        timeUnixNano: jsonInteger(e['timeUnixNano'], `${where}.events[${i}].timeUnixNano`),
        name: jsonString(e['name'], `${where}.events[${i}].name`),
        attributes: jsonKeyValues(e['attributes'], `${where}.events[${i}].attributes`),
        droppedAttributesCount: jsonCount(e['droppedAttributesCount'], `${where}.events[${i}].droppedAttributesCount`),
      };
    }),
    droppedEventsCount: jsonCount(s['droppedEventsCount'], `${where}.droppedEventsCount`),
    links: jsonArray(s['links'], `${where}.links`).map((item, i) => {
      const l = jsonObject(item, `${where}.links[${i}]`);
      return {
        traceId: jsonHexId(l['traceId'], 16, `${where}.links[${i}].traceId`, false),
        spanId: jsonHexId(l['spanId'], 8, `${where}.links[${i}].spanId`, false),
        traceState: jsonString(l['traceState'], `${where}.links[${i}].traceState`),
        attributes: jsonKeyValues(l['attributes'], `${where}.links[${i}].attributes`),
        droppedAttributesCount: jsonCount(l['droppedAttributesCount'], `${where}.links[${i}].droppedAttributesCount`),
        flags: jsonCount(l['flags'], `${where}.links[${i}].flags`),
      };
    }),
    droppedLinksCount: jsonCount(s['droppedLinksCount'], `${where}.droppedLinksCount`),
    status: {
      code: jsonCount(status['code'], `${where}.status.code`),
      message: jsonString(status['message'], `${where}.status.message`),
    },
  };
}

/** Decodes an OTLP/JSON ExportTraceServiceRequest. */
export function decodeTraceRequestJson(bytes: Buffer): DecodedTraceRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(UTF8.decode(bytes));
  } catch (error) {
    throw new OtlpDecodeError(`not OTLP/JSON: ${(error as Error).message}`);
  }
  const request = jsonObject(parsed, 'request');
  return {
    resourceSpans: jsonArray(request['resourceSpans'], 'resourceSpans').map((item, i) => {
      const where = `resourceSpans[${i}]`;
      const rs = jsonObject(item, where);
      const resource = jsonObject(rs['resource'], `${where}.resource`);
      return {
        resource: {
          attributes: jsonKeyValues(resource['attributes'], `${where}.resource.attributes`),
          droppedAttributesCount: jsonCount(
            resource['droppedAttributesCount'],
            `${where}.resource.droppedAttributesCount`,
          ),
        },
        schemaUrl: jsonString(rs['schemaUrl'], `${where}.schemaUrl`),
        scopeSpans: jsonArray(rs['scopeSpans'], `${where}.scopeSpans`).map((scopeItem, j) => {
          const at = `${where}.scopeSpans[${j}]`;
          const ss = jsonObject(scopeItem, at);
          const scope = jsonObject(ss['scope'], `${at}.scope`);
          return {
            scope: {
              name: jsonString(scope['name'], `${at}.scope.name`),
              version: jsonString(scope['version'], `${at}.scope.version`),
              attributes: jsonKeyValues(scope['attributes'], `${at}.scope.attributes`),
            },
            schemaUrl: jsonString(ss['schemaUrl'], `${at}.schemaUrl`),
            spans: jsonArray(ss['spans'], `${at}.spans`).map((span, k) => jsonSpan(span, `${at}.spans[${k}]`)),
          };
        }),
      };
    }),
  };
}

// ---------------------------------------------------------------------------------------------------------------

/** An AnyValue as a plain value (what a test compares against what the SDK was given). */
export function plainValue(value: AnyValue): PlainValue {
  switch (value.kind) {
    case 'int':
      return value.value >= BigInt(Number.MIN_SAFE_INTEGER) && value.value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(value.value)
        : value.value;
    case 'array':
      return value.value.map(plainValue);
    case 'kvlist':
      return plainAttributes(value.value);
    case 'empty':
      return null;
    default:
      return value.value;
  }
}

/** Repeated KeyValues as an object (a repeated key keeps its last value, as the SDKs' maps do). */
export function plainAttributes(attributes: readonly KeyValue[]): Record<string, PlainValue> {
  return Object.fromEntries(attributes.map((kv) => [kv.key, plainValue(kv.value)]));
}
