// SWIM wire codec for wire version 2 and plaintext frames: the plaintext of a frame is self-describing JSON
// (schemas/gossip/gossip-swim-packet.schema.json). Unknown fields are ignored, unknown message kinds are skipped
// (a newer minor version), and a packet of a newer major version is dropped whole. Wire version 3
// (binary-codec.ts) decodes into the same objects, which pass the same checks. Decoding never throws: every
// failure becomes a drop reason.
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import schema from '../../../schemas/gossip/gossip-swim-packet.schema.json' with { type: 'json' };
import type {
  AckMessage,
  AliveMessage,
  DeadMessage,
  NackMessage,
  PingMessage,
  PingReqMessage,
  PushPullState,
  StreamOpenMessage,
  SuspectMessage,
  SwimPacket,
  UserMessage,
} from '../../../schemas/generated/gossip-swim-packet.ts';
import type { SwimDropReason } from './reasons.ts';

/** Wire major version spoken by this build. 1: initial format. */
export const WIRE_MAJOR = 1;

/**
 * Message kinds, append-only because they go on the wire. 'stream-open' opens a push-pull stream (udp-transport.ts).
 */
export const MESSAGE_KINDS = [
  'ping',
  'ack',
  'nack',
  'ping-req',
  'alive',
  'suspect',
  'dead',
  'user',
  'push-pull',
  'stream-open',
] as const;
export type MessageKind = (typeof MESSAGE_KINDS)[number];

export type SwimMessage =
  | PingMessage
  | AckMessage
  | NackMessage
  | PingReqMessage
  | AliveMessage
  | SuspectMessage
  | DeadMessage
  | UserMessage
  | PushPullState
  | StreamOpenMessage;

const DEFINITION_OF: Record<MessageKind, string> = {
  ping: 'PingMessage',
  ack: 'AckMessage',
  nack: 'NackMessage',
  'ping-req': 'PingReqMessage',
  alive: 'AliveMessage',
  suspect: 'SuspectMessage',
  dead: 'DeadMessage',
  user: 'UserMessage',
  'push-pull': 'PushPullState',
  'stream-open': 'StreamOpenMessage',
};

const ajv = new Ajv({ allErrors: false, strict: false });
ajv.addSchema(schema);
const validatePacket = ajv.getSchema(schema.$id) as ValidateFunction<SwimPacket>;
const messageValidators = new Map<string, ValidateFunction>(
  MESSAGE_KINDS.map((k) => [k, ajv.getSchema(`${schema.$id}#/definitions/${DEFINITION_OF[k]}`) as ValidateFunction]),
);

export interface PacketHeader {
  readonly from: string;
  readonly addr: string;
  readonly ts: number;
}

/** JSON text of a packet whose messages are already serialized (broadcasts are serialized once at enqueue). */
export function encodePacket(header: PacketHeader, messagesJson: readonly string[], wire?: number): Buffer {
  return Buffer.from(`${packetPrefix(header, wire)}${messagesJson.join(',')}]}`);
}

/** Bytes of the packet around its messages; a packet of n messages costs this + sum(bytes) + (n - 1) commas. */
export function packetEnvelopeBytes(header: PacketHeader, wire?: number): number {
  return Buffer.byteLength(packetPrefix(header, wire)) + 2;
}

// `w` (the highest wire version the sender speaks, wire.ts) is only written by members that speak more than the
// JSON encoding; a packet without it is from a member that speaks JSON alone.
function packetPrefix(h: PacketHeader, wire: number | undefined): string {
  const w = wire === undefined ? '' : `"w":${wire},`;
  return `{"v":${WIRE_MAJOR},"from":${JSON.stringify(h.from)},"addr":${JSON.stringify(h.addr)},"ts":${h.ts},${w}"msgs":[`;
}

export type DecodeResult =
  | { readonly ok: true; readonly packet: SwimPacket }
  | { readonly ok: false; readonly reason: SwimDropReason; readonly detail: string };

export function decodePacket(payload: Buffer): DecodeResult {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    return { ok: false, reason: 'bad_json', detail: `${payload.length}-byte payload is not JSON` };
  }
  return checkPacket(value);
}

/** Schema check of a decoded packet (JSON or binary). */
export function checkPacket(value: unknown): DecodeResult {
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { v?: unknown }).v === 'number' &&
    (value as { v: number }).v > WIRE_MAJOR
  ) {
    return {
      ok: false,
      reason: 'unsupported_version',
      detail: `wire major ${(value as { v: number }).v} > ${WIRE_MAJOR}`,
    };
  }
  if (!validatePacket(value)) {
    const e = validatePacket.errors?.[0];
    return { ok: false, reason: 'bad_packet', detail: `${e?.instancePath || '/'} ${e?.message ?? 'invalid'}` };
  }
  return { ok: true, packet: value };
}

export type MessageResult =
  | { readonly ok: true; readonly message: SwimMessage }
  | { readonly ok: false; readonly reason: 'unknown_kind' | 'bad_message'; readonly detail: string };

export function checkMessage(raw: { k: string }): MessageResult {
  const kind = raw.k;
  const validate = messageValidators.get(kind);
  if (!validate) return { ok: false, reason: 'unknown_kind', detail: `kind ${JSON.stringify(kind.slice(0, 32))}` };
  if (!validate(raw)) {
    const e = validate.errors?.[0];
    return { ok: false, reason: 'bad_message', detail: `${kind}${e?.instancePath ?? ''} ${e?.message ?? 'invalid'}` };
  }
  return { ok: true, message: raw as SwimMessage };
}
