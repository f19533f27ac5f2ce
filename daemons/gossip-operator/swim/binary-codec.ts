// Wire version 3: the plaintext of a frame as field-tagged binary instead of JSON (a JSON header around every
// datagram doubles our bytes against memberlist's msgpack). The layout is protobuf's: every field is
// varint(tag << 3 | type) followed by a varint (type 0) or a varint length and that many bytes (type 2), so a
// reader skips any tag it does not know (types 1 and 5 are skipped too, for fields a later version may add).
// The decoded packet is the same object the JSON codec yields and passes the same schema
// (schemas/gossip/gossip-swim-packet.schema.json), so every check after decoding is shared by both encodings.
//
// Payload = flags byte | body. Flags 0: body is the tagged packet; 1: body is that, deflate-raw compressed
// (push-pull above COMPRESS_ABOVE_BYTES). Inflation is bounded by the caller's byte limit.
//
// Tags are append-only (they go on the wire):
//   packet:  1 from, 2 addr (not written: nothing reads it), 3 ts, 4 message (repeated, nested), 5 w (highest
//            wire version the sender speaks)
//   message: 1 kind (index in MESSAGE_KINDS), 2 seq, 3 target, 4 targetAddr, 5 name, 6 addr, 7 inc, 8 by,
//            9 data (JSON text), 10 join (0/1), 11 member (repeated, nested), 12 user (JSON text), 13 bytes
//   member:  1 name, 2 addr, 3 inc, 4 state (index in MEMBER_STATES), 5 w (wire version it speaks, if known)
// Delegate payloads (data, user) stay JSON text: SWIM does not know their shape, and signed state records must
// reach the verifier as the very object that was signed.
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { SwimPacket } from '../../../schemas/generated/gossip-swim-packet.ts';
import { MESSAGE_KINDS, type PacketHeader, type SwimMessage } from './codec.ts';

export const MEMBER_STATES = ['alive', 'suspect', 'dead', 'left'] as const;
/** Push-pull payloads above this are compressed; a datagram never is (it is small and deflate's header costs). */
export const COMPRESS_ABOVE_BYTES = 512;
const FLAG_PLAIN = 0;
const FLAG_DEFLATE = 1;

const T_VARINT = 0;
const T_I64 = 1;
const T_LEN = 2;
const T_I32 = 5;

/** Thrown inside decoding only; decodeBinaryPacket turns it into a drop reason. */
class WireError extends Error {}

// ---- writing --------------------------------------------------------------------------------------------

class Writer {
  #buf = Buffer.allocUnsafe(256);
  #len = 0;

  #ensure(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }

  varint(value: number): void {
    // Numbers up to 2^53: shift with division, since JS bit operators truncate to 32 bits.
    let v = value;
    this.#ensure(8);
    while (v >= 0x80) {
      this.#buf[this.#len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.#buf[this.#len++] = v;
  }

  bytes(b: Uint8Array): void {
    this.#ensure(b.length);
    this.#buf.set(b, this.#len);
    this.#len += b.length;
  }

  uintField(tag: number, value: number): void {
    this.varint((tag << 3) | T_VARINT);
    this.varint(value);
  }

  lenField(tag: number, b: Uint8Array): void {
    this.varint((tag << 3) | T_LEN);
    this.varint(b.length);
    this.bytes(b);
  }

  stringField(tag: number, s: string): void {
    this.lenField(tag, Buffer.from(s, 'utf8'));
  }

  done(): Buffer {
    return this.#buf.subarray(0, this.#len);
  }
}

export function varintBytes(value: number): number {
  let n = 1;
  for (let v = value; v >= 0x80; v = Math.floor(v / 0x80)) n++;
  return n;
}

function wireUint(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new TypeError(`${what} must be a non-negative safe integer, got ${String(value)}`);
  return value;
}

/** One message as its tagged bytes (without the packet's field header around it). */
export function encodeBinaryMessage(m: SwimMessage): Buffer {
  const w = new Writer();
  const raw = m as unknown as Record<string, unknown>;
  const kind = MESSAGE_KINDS.indexOf(m.k);
  if (kind < 0) throw new TypeError(`message kind ${m.k} has no wire tag`);
  w.uintField(1, kind);
  if (raw.seq !== undefined) w.uintField(2, wireUint(raw.seq, 'seq'));
  if (typeof raw.target === 'string') w.stringField(3, raw.target);
  if (typeof raw.targetAddr === 'string') w.stringField(4, raw.targetAddr);
  if (typeof raw.name === 'string') w.stringField(5, raw.name);
  if (typeof raw.addr === 'string') w.stringField(6, raw.addr);
  if (raw.inc !== undefined) w.uintField(7, wireUint(raw.inc, 'inc'));
  if (typeof raw.by === 'string') w.stringField(8, raw.by);
  if (m.k === 'user') w.stringField(9, JSON.stringify(raw.data));
  if (typeof raw.join === 'boolean') w.uintField(10, raw.join ? 1 : 0);
  if (Array.isArray(raw.members)) {
    for (const mem of raw.members as {
      name: string;
      addr: string;
      inc: number;
      state: (typeof MEMBER_STATES)[number];
      w?: number;
    }[]) {
      const mw = new Writer();
      mw.stringField(1, mem.name);
      mw.stringField(2, mem.addr);
      mw.uintField(3, wireUint(mem.inc, 'member inc'));
      mw.uintField(4, MEMBER_STATES.indexOf(mem.state));
      if (mem.w !== undefined) mw.uintField(5, wireUint(mem.w, 'member w'));
      w.lenField(11, mw.done());
    }
  }
  if (m.k === 'push-pull' && raw.user !== undefined) w.stringField(12, JSON.stringify(raw.user));
  if (raw.bytes !== undefined) w.uintField(13, wireUint(raw.bytes, 'bytes'));
  return Buffer.from(w.done());
}

function headerBytes(header: PacketHeader, wire: number | undefined): Buffer {
  const w = new Writer();
  w.stringField(1, header.from);
  w.uintField(3, Math.max(0, Math.round(header.ts)));
  if (wire !== undefined) w.uintField(5, wire);
  return w.done();
}

/** Bytes of a version-3 payload around its messages (flags byte and header fields). */
export function binaryEnvelopeBytes(header: PacketHeader, wire: number | undefined): number {
  return 1 + headerBytes(header, wire).length;
}

/** Bytes one encoded message adds to a packet (its field header and length). */
export function binaryMessageCost(encoded: Buffer): number {
  return 1 + varintBytes(encoded.length) + encoded.length;
}

/** Payload of a version-3 frame; `compress` deflates the body when it is above COMPRESS_ABOVE_BYTES. */
export function encodeBinaryPacket(
  header: PacketHeader,
  wire: number | undefined,
  messages: readonly Buffer[],
  compress: boolean,
): Buffer {
  const w = new Writer();
  w.bytes(headerBytes(header, wire));
  for (const m of messages) w.lenField(4, m);
  const body = w.done();
  if (compress && body.length > COMPRESS_ABOVE_BYTES) {
    const deflated = deflateRawSync(body);
    if (deflated.length < body.length) return Buffer.concat([Buffer.of(FLAG_DEFLATE), deflated]);
  }
  return Buffer.concat([Buffer.of(FLAG_PLAIN), body]);
}

// ---- reading --------------------------------------------------------------------------------------------

class Reader {
  readonly #buf: Buffer;
  #pos = 0;

  constructor(buf: Buffer) {
    this.#buf = buf;
  }

  get done(): boolean {
    return this.#pos >= this.#buf.length;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (this.#pos >= this.#buf.length) throw new WireError('truncated varint');
      const b = this.#buf[this.#pos++] as number;
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (!Number.isSafeInteger(value)) throw new WireError('varint above 2^53');
        return value;
      }
      scale *= 0x80;
    }
    throw new WireError('varint longer than 8 bytes');
  }

  take(n: number): Buffer {
    if (n > this.#buf.length - this.#pos) throw new WireError(`field of ${n} bytes past the end`);
    const out = this.#buf.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }

  /** Each field as [tag, value]: a number (varint) or the bytes (length-delimited); skips fixed-width fields. */
  *fields(): Generator<[number, number | Buffer]> {
    while (!this.done) {
      const key = this.varint();
      const tag = Math.floor(key / 8);
      const type = key % 8;
      if (type === T_VARINT) yield [tag, this.varint()];
      else if (type === T_LEN) yield [tag, this.take(this.varint())];
      else if (type === T_I64) this.take(8);
      else if (type === T_I32) this.take(4);
      else throw new WireError(`field ${tag} has unknown type ${type}`);
    }
  }
}

function str(v: number | Buffer, what: string): string {
  if (typeof v === 'number') throw new WireError(`${what} must be bytes`);
  return v.toString('utf8');
}

function num(v: number | Buffer, what: string): number {
  if (typeof v !== 'number') throw new WireError(`${what} must be a varint`);
  return v;
}

function nested(v: number | Buffer, what: string): Buffer {
  if (typeof v === 'number') throw new WireError(`${what} must be bytes`);
  return v;
}

function json(v: number | Buffer, what: string): unknown {
  try {
    return JSON.parse(str(v, what));
  } catch (err) {
    if (err instanceof WireError) throw err;
    throw new WireError(`${what} is not JSON`);
  }
}

function decodeMember(buf: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [tag, v] of new Reader(buf).fields()) {
    if (tag === 1) out.name = str(v, 'member name');
    else if (tag === 2) out.addr = str(v, 'member addr');
    else if (tag === 3) out.inc = num(v, 'member inc');
    else if (tag === 4) out.state = MEMBER_STATES[num(v, 'member state')] ?? `state#${String(v)}`;
    else if (tag === 5) out.w = num(v, 'member w');
  }
  return out;
}

function decodeMessage(buf: Buffer): SwimMessage {
  const out: Record<string, unknown> = {};
  const members: unknown[] = [];
  for (const [tag, v] of new Reader(buf).fields()) {
    switch (tag) {
      case 1: {
        const i = num(v, 'kind');
        // An index beyond ours is a kind from a newer version: kept as a name no schema knows (unknown_kind).
        out.k = MESSAGE_KINDS[i] ?? `kind#${i}`;
        break;
      }
      case 2:
        out.seq = num(v, 'seq');
        break;
      case 3:
        out.target = str(v, 'target');
        break;
      case 4:
        out.targetAddr = str(v, 'targetAddr');
        break;
      case 5:
        out.name = str(v, 'name');
        break;
      case 6:
        out.addr = str(v, 'addr');
        break;
      case 7:
        out.inc = num(v, 'inc');
        break;
      case 8:
        out.by = str(v, 'by');
        break;
      case 9:
        out.data = json(v, 'data');
        break;
      case 10:
        out.join = num(v, 'join') === 1;
        break;
      case 11:
        members.push(decodeMember(nested(v, 'member')));
        break;
      case 12:
        out.user = json(v, 'user');
        break;
      case 13:
        out.bytes = num(v, 'bytes');
        break;
      default:
        break; // a field from a newer version
    }
  }
  if (out.k === 'push-pull') out.members = members;
  if (out.k === undefined) throw new WireError('message without a kind');
  return out as unknown as SwimMessage;
}

export type BinaryDecodeResult =
  | { readonly ok: true; readonly packet: SwimPacket & { w?: number } }
  | { readonly ok: false; readonly reason: 'bad_packet' | 'oversized'; readonly detail: string };

/**
 * Decodes a version-3 payload into the packet object the JSON codec would give (v = the JSON major, so the same
 * schema applies). `maxBytes` bounds a compressed body once inflated. Never throws.
 */
export function decodeBinaryPacket(payload: Buffer, jsonMajor: number, maxBytes: number): BinaryDecodeResult {
  if (payload.length < 1) return { ok: false, reason: 'bad_packet', detail: 'empty payload' };
  const flags = payload[0];
  let body = payload.subarray(1);
  if (flags === FLAG_DEFLATE) {
    try {
      body = inflateRawSync(body, { maxOutputLength: maxBytes });
    } catch (err) {
      const tooLarge = (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      return tooLarge
        ? { ok: false, reason: 'oversized', detail: `compressed body inflates above ${maxBytes} bytes` }
        : { ok: false, reason: 'bad_packet', detail: 'compressed body does not inflate' };
    }
  } else if (flags !== FLAG_PLAIN) {
    return { ok: false, reason: 'bad_packet', detail: `unknown payload flags ${String(flags)}` };
  }
  try {
    const packet: Record<string, unknown> = { v: jsonMajor };
    const msgs: SwimMessage[] = [];
    for (const [tag, v] of new Reader(body).fields()) {
      if (tag === 1) packet.from = str(v, 'from');
      else if (tag === 2) packet.addr = str(v, 'addr');
      else if (tag === 3) packet.ts = num(v, 'ts');
      else if (tag === 4) msgs.push(decodeMessage(nested(v, 'message')));
      else if (tag === 5) packet.w = num(v, 'w');
      if (msgs.length > 512) throw new WireError('more than 512 messages');
    }
    packet.msgs = msgs;
    return { ok: true, packet: packet as unknown as SwimPacket & { w?: number } };
  } catch (err) {
    if (err instanceof WireError) return { ok: false, reason: 'bad_packet', detail: err.message };
    // A nested field of the wrong type (a varint where bytes belong) surfaces as a TypeError from Buffer.
    return {
      ok: false,
      reason: 'bad_packet',
      detail: `malformed field: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}
