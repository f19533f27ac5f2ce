// The one entrance for every received frame, datagram or stream alike: size bound, decryption with the key
// ring for this member as recipient, decoding in the frame's wire version, the reflection check and the replay
// window, in that order (cheapest first). Each refusal is a counted drop. It is also the one exit: each frame is
// sealed in the wire version negotiated with its recipient (wire.ts).
import type { SwimPacket } from '../../../schemas/generated/gossip-swim-packet.ts';
import type { Clock } from './clock.ts';
import type { PacketHeader } from './codec.ts';
import { ANY_RECIPIENT, openFrame, ReplayGuard, sealFrame } from './crypto.ts';
import type { DropCounter } from './drop-counter.ts';
import type { KeyRing } from './keyring.ts';
import type { SwimDropReason } from './reasons.ts';
import {
  declaredWire,
  decodeWire,
  encodeWire,
  envelopeBytes,
  PeerWireVersions,
  WIRE_BASELINE,
  WIRE_VERSIONS,
  type WireMessage,
  type WireVersion,
} from './wire.ts';

/** Frames sealed and opened per wire version (plaintext frames count as the baseline). */
export type WireCounts = Record<WireVersion, number>;

function zeroCounts(): WireCounts {
  return Object.fromEntries(WIRE_VERSIONS.map((v) => [v, 0])) as WireCounts;
}

export interface OpenedPacket {
  readonly packet: SwimPacket;
  /** Sealed for ANY_RECIPIENT rather than this member's name (only accepted where the caller allows it). */
  readonly toAnyone: boolean;
}

export class PacketGate {
  readonly #self: string;
  readonly #keyring: KeyRing | undefined;
  readonly #clock: Clock;
  readonly #drops: DropCounter<SwimDropReason>;
  readonly #replay: ReplayGuard;
  readonly #peers: PeerWireVersions;
  readonly sent: WireCounts = zeroCounts();
  readonly received: WireCounts = zeroCounts();

  /** `latest`: the highest wire version to speak (pinned lower during a rolling upgrade, or to test one). */
  constructor(
    self: string,
    keyring: KeyRing | undefined,
    clock: Clock,
    drops: DropCounter<SwimDropReason>,
    replayWindowMs: number,
    replayCacheMaxEntries: number,
    latest: WireVersion,
    maxPeers: number,
  ) {
    this.#self = self;
    this.#keyring = keyring;
    this.#clock = clock;
    this.#drops = drops;
    this.#replay = new ReplayGuard(replayWindowMs, replayCacheMaxEntries);
    // Plaintext frames carry JSON only: without a key ring there is nothing to negotiate.
    this.#peers = new PeerWireVersions(keyring ? latest : WIRE_BASELINE, maxPeers);
  }

  /** The wire version a frame to `to` is sealed in. */
  versionFor(to: string): WireVersion {
    return this.#peers.versionFor(to);
  }

  /** Bytes of a frame of `version` before its messages (frame overhead not included). */
  envelopeBytes(version: WireVersion, header: PacketHeader): number {
    return envelopeBytes(version, header, this.#peers.latest);
  }

  /**
   * Frame for `messages` under `header`, sealed for the member named `to` in the version negotiated with it
   * (or `version`). `stream`: a push-pull message, compressed when large.
   */
  seal(
    header: PacketHeader,
    to: string,
    messages: readonly WireMessage[],
    stream = false,
    version = this.versionFor(to),
  ): Buffer {
    this.sent[version]++;
    return sealFrame(
      this.#keyring,
      encodeWire(version, header, this.#peers.latest, messages, stream),
      to,
      undefined,
      version,
    );
  }

  /** Records the wire version `peer` declared (`w` of its last authenticated packet; undefined: JSON only). */
  heard(peer: string, declared: number | undefined): void {
    if (this.#keyring) this.#peers.heard(peer, declared);
  }

  /** What another member's push-pull entry says `peer` speaks (wire.ts PeerWireVersions.heardOf). */
  heardOf(peer: string, declared: number): void {
    if (this.#keyring && peer !== this.#self) this.#peers.heardOf(peer, declared);
  }

  /** The `w` of a push-pull entry: our own latest for ourselves, what we know for a peer (absent: baseline only or unknown). */
  declaredFor(peer: string): number | undefined {
    if (!this.#keyring) return undefined;
    if (peer === this.#self) return declaredWire(this.#peers.latest);
    const known = this.#peers.known(peer);
    return known === undefined ? undefined : declaredWire(known);
  }

  /** A member forgotten: nothing more to remember about what it speaks. */
  forget(name: string): void {
    this.#peers.forget(name);
  }

  /**
   * Opens, decodes and replay-checks one frame addressed to this member (or, with `acceptAnyRecipient`, to
   * ANY_RECIPIENT); undefined when dropped (and counted).
   */
  open(frame: Buffer, from: string, maxBytes: number, acceptAnyRecipient = false): OpenedPacket | undefined {
    if (frame.length > maxBytes) {
      this.#drops.drop('oversized', `${frame.length}-byte frame from ${from} (max ${maxBytes})`);
      return undefined;
    }
    const opened = openFrame(
      this.#keyring,
      frame,
      acceptAnyRecipient ? [this.#self, ANY_RECIPIENT] : [this.#self],
      this.#peers.latest,
    );
    if (!opened.ok) {
      const detail =
        opened.reason === 'unsupported_version'
          ? `, wire version ${String(frame[4])} (this member speaks up to ${this.#peers.latest})`
          : '';
      this.#drops.drop(opened.reason, `${frame.length}-byte frame from ${from}${detail}`);
      return undefined;
    }
    const decoded = decodeWire(opened.version, opened.payload, maxBytes);
    if (!decoded.ok) {
      this.#drops.drop(decoded.reason, `from ${from}: ${decoded.detail}`);
      return undefined;
    }
    if (decoded.packet.from === this.#self) {
      this.#drops.drop('reflected', `frame from ${from} carries our own name as its sender`);
      return undefined;
    }
    const replay = this.#replay.check(opened.nonce, decoded.packet.ts, this.#clock.now());
    if (replay !== 'ok') {
      this.#drops.drop(replay, `packet from ${from} stamped ${decoded.packet.ts}`);
      return undefined;
    }
    // Only now, authenticated and fresh, may the packet tell us what its sender speaks.
    this.heard(decoded.packet.from, decoded.packet.w);
    this.received[opened.version === 0 ? WIRE_BASELINE : (opened.version as WireVersion)]++;
    return { packet: decoded.packet, toAnyone: opened.recipient === ANY_RECIPIENT };
  }
}
