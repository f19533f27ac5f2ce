// The one entrance for every received frame, datagram or stream alike: size bound, decryption with the key
// ring for this member as recipient, decoding, the reflection check and the replay window, in that order
// (cheapest first). Each refusal is a counted drop.
import type { SwimPacket } from '../../../schemas/generated/gossip-swim-packet.ts';
import type { Clock } from './clock.ts';
import { decodePacket, encodePacket, type PacketHeader } from './codec.ts';
import { ANY_RECIPIENT, openFrame, ReplayGuard, sealFrame } from './crypto.ts';
import type { DropCounter } from './drop-counter.ts';
import type { KeyRing } from './keyring.ts';
import type { SwimDropReason } from './reasons.ts';

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

  constructor(self: string, keyring: KeyRing | undefined, clock: Clock, drops: DropCounter<SwimDropReason>, replayWindowMs: number, replayCacheMaxEntries: number) {
    this.#self = self;
    this.#keyring = keyring;
    this.#clock = clock;
    this.#drops = drops;
    this.#replay = new ReplayGuard(replayWindowMs, replayCacheMaxEntries);
  }

  /** Frame for `messages` (already JSON) under `header`, sealed for the member named `to`. */
  seal(header: PacketHeader, to: string, messages: readonly string[]): Buffer {
    return sealFrame(this.#keyring, encodePacket(header, messages), to);
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
    const opened = openFrame(this.#keyring, frame, acceptAnyRecipient ? [this.#self, ANY_RECIPIENT] : [this.#self]);
    if (!opened.ok) {
      this.#drops.drop(opened.reason, `${frame.length}-byte frame from ${from}`);
      return undefined;
    }
    const decoded = decodePacket(opened.payload);
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
    return { packet: decoded.packet, toAnyone: opened.recipient === ANY_RECIPIENT };
  }
}
