// Wire versions and their negotiation (docs/contract.md §5: the wire is versioned so mixed versions interoperate).
// The version of a frame is its header byte (crypto.ts), authenticated with the rest of the frame:
//   2: JSON plaintext (codec.ts), the baseline every member speaks;
//   3: tagged binary plaintext, push-pull compressed (binary-codec.ts).
// Every packet declares the highest version its sender speaks (`w`; absent in version 2 from a JSON-only
// member). A member sends each peer the highest version both speak, as last declared by that peer, or as another
// member's push-pull entry for it says (only for a peer not heard from itself), and the baseline to a peer it
// knows nothing about (a join to an unnamed seed, a member learned by gossip alone). So in a rolling upgrade
// upgraded members speak 3 among themselves and 2 with the rest, and a member rolled back is spoken to in 2 again
// from its next packet on. Plaintext frames (no key ring, local development) are always JSON and not negotiated.
import {
  binaryEnvelopeBytes,
  binaryMessageCost,
  decodeBinaryPacket,
  encodeBinaryMessage,
  encodeBinaryPacket,
} from './binary-codec.ts';
import {
  checkPacket,
  decodePacket,
  encodePacket,
  packetEnvelopeBytes,
  WIRE_MAJOR,
  type DecodeResult,
  type PacketHeader,
  type SwimMessage,
} from './codec.ts';
import { FRAME_VERSION_AES256GCM, FRAME_VERSION_BINARY } from './crypto.ts';

export const WIRE_JSON = FRAME_VERSION_AES256GCM;
export const WIRE_BINARY = FRAME_VERSION_BINARY;
/** Versions this build speaks; the lowest is the baseline spoken to a peer not heard from yet. */
export const WIRE_VERSIONS = [WIRE_JSON, WIRE_BINARY] as const;
export type WireVersion = (typeof WIRE_VERSIONS)[number];
export const WIRE_BASELINE: WireVersion = WIRE_JSON;
export const WIRE_LATEST: WireVersion = WIRE_BINARY;

export function isWireVersion(v: number): v is WireVersion {
  return (WIRE_VERSIONS as readonly number[]).includes(v);
}

/**
 * One outgoing message with its encodings made once, on first use: a broadcast is encoded once however many
 * packets (and of whichever versions) carry it.
 */
export class WireMessage {
  readonly message: SwimMessage;
  #json: string | undefined;
  #jsonBytes = -1;
  #binary: Buffer | undefined;

  constructor(message: SwimMessage) {
    this.message = message;
  }

  get json(): string {
    this.#json ??= JSON.stringify(this.message);
    return this.#json;
  }

  get binary(): Buffer {
    this.#binary ??= encodeBinaryMessage(this.message);
    return this.#binary;
  }

  /** Bytes this message adds to a packet of `version` (separator or field header included). */
  cost(version: WireVersion): number {
    if (version === WIRE_BINARY) return binaryMessageCost(this.binary);
    if (this.#jsonBytes < 0) this.#jsonBytes = Buffer.byteLength(this.json);
    return this.#jsonBytes + 1;
  }

  /** Its largest encoding in any version spoken (JSON, in practice): what must fit one packet for every peer. */
  get maxBytes(): number {
    return Math.max(this.cost(WIRE_JSON) - 1, this.binary.length);
  }
}

/** The `w` a member speaking up to `latest` declares: none when it speaks the baseline only (the old format). */
export function declaredWire(latest: WireVersion): number | undefined {
  return latest > WIRE_BASELINE ? latest : undefined;
}

/** Bytes of a packet of `version` around its messages. */
export function envelopeBytes(version: WireVersion, header: PacketHeader, latest: WireVersion): number {
  const w = declaredWire(latest);
  return version === WIRE_BINARY ? binaryEnvelopeBytes(header, w) : packetEnvelopeBytes(header, w);
}

/** Plaintext of a packet of `version`; `stream` payloads (push-pull) are compressed when large. */
export function encodeWire(
  version: WireVersion,
  header: PacketHeader,
  latest: WireVersion,
  messages: readonly WireMessage[],
  stream: boolean,
): Buffer {
  const w = declaredWire(latest);
  if (version === WIRE_BINARY)
    return encodeBinaryPacket(
      header,
      w,
      messages.map((m) => m.binary),
      stream,
    );
  return encodePacket(
    header,
    messages.map((m) => m.json),
    w,
  );
}

/** Decodes the plaintext of a frame of `version` (already authenticated); `maxBytes` bounds inflation. */
export function decodeWire(version: number, payload: Buffer, maxBytes: number): DecodeResult {
  if (version !== WIRE_BINARY) return decodePacket(payload);
  const decoded = decodeBinaryPacket(payload, WIRE_MAJOR, maxBytes);
  if (!decoded.ok) return decoded;
  return checkPacket(decoded.packet);
}

/**
 * What each peer speaks, from the `w` of its last authenticated packet. Bounded: only key holders can add entries,
 * and beyond `maxEntries` the least recently heard peer goes (it is then spoken to in the baseline until it
 * speaks again).
 */
export class PeerWireVersions {
  readonly #latest: WireVersion;
  readonly #maxEntries: number;
  readonly #peers = new Map<string, WireVersion>();

  constructor(latest: WireVersion, maxEntries: number) {
    this.#latest = latest;
    this.#maxEntries = maxEntries;
  }

  get latest(): WireVersion {
    return this.#latest;
  }

  /** Records what `peer` declared in a packet (`w`, undefined from a JSON-only member). */
  heard(peer: string, declared: number | undefined): void {
    const spoken = declared === undefined ? WIRE_BASELINE : declared;
    // The highest version both speak: ours if the peer is newer, the peer's if it is one we know.
    let version: WireVersion = WIRE_BASELINE;
    for (const v of WIRE_VERSIONS) if (v <= spoken && v <= this.#latest && v > version) version = v;
    // Most packets come from a peer already heard at the same version: re-inserting it (least recently heard
    // order) only matters once the table is full. This runs for every packet received.
    if (this.#peers.get(peer) === version && this.#peers.size < this.#maxEntries) return;
    this.#peers.delete(peer);
    this.#peers.set(peer, version);
    if (this.#peers.size > this.#maxEntries) {
      const oldest = this.#peers.keys().next().value;
      if (oldest !== undefined) this.#peers.delete(oldest);
    }
  }

  /**
   * What another member says `peer` speaks (its push-pull entry): taken only when we know nothing of `peer`, so
   * what a peer declares itself always wins. A claim beyond what we speak is capped like a declaration.
   */
  heardOf(peer: string, declared: number): void {
    if (!this.#peers.has(peer)) this.heard(peer, declared);
  }

  /** The version we know `peer` speaks, if we know it (first or second hand). */
  known(peer: string): WireVersion | undefined {
    return this.#peers.get(peer);
  }

  /** The version to send `peer` (a member name, or ANY_RECIPIENT: the baseline). */
  versionFor(peer: string): WireVersion {
    return this.#peers.get(peer) ?? WIRE_BASELINE;
  }

  forget(peer: string): void {
    this.#peers.delete(peer);
  }
}
