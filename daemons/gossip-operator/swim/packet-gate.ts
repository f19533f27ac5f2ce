// The one entrance for every received frame, datagram or stream alike: size bound, decryption with the key
// ring, decoding, and the replay window, in that order (cheapest first). Each refusal is a counted drop.
import type { SwimPacket } from '../../../schemas/generated/gossip-swim-packet.ts';
import type { Clock } from './clock.ts';
import { decodePacket, encodePacket, type PacketHeader } from './codec.ts';
import { openFrame, ReplayGuard, sealFrame } from './crypto.ts';
import type { DropCounter } from './drop-counter.ts';
import type { KeyRing } from './keyring.ts';
import type { SwimDropReason } from './reasons.ts';

export class PacketGate {
  readonly #keyring: KeyRing | undefined;
  readonly #clock: Clock;
  readonly #drops: DropCounter<SwimDropReason>;
  readonly #replay: ReplayGuard;

  constructor(keyring: KeyRing | undefined, clock: Clock, drops: DropCounter<SwimDropReason>, replayWindowMs: number, replayCacheMaxEntries: number) {
    this.#keyring = keyring;
    this.#clock = clock;
    this.#drops = drops;
    this.#replay = new ReplayGuard(replayWindowMs, replayCacheMaxEntries);
  }

  /** Frame for `messages` (already JSON) under `header`. */
  seal(header: PacketHeader, messages: readonly string[]): Buffer {
    return sealFrame(this.#keyring, encodePacket(header, messages));
  }

  /** Opens, decodes and replay-checks one frame; undefined when dropped (and counted). */
  open(frame: Buffer, from: string, maxBytes: number): SwimPacket | undefined {
    if (frame.length > maxBytes) {
      this.#drops.drop('oversized', `${frame.length}-byte frame from ${from} (max ${maxBytes})`);
      return undefined;
    }
    const opened = openFrame(this.#keyring, frame);
    if (!opened.ok) {
      this.#drops.drop(opened.reason, `${frame.length}-byte frame from ${from}`);
      return undefined;
    }
    const decoded = decodePacket(opened.payload);
    if (!decoded.ok) {
      this.#drops.drop(decoded.reason, `from ${from}: ${decoded.detail}`);
      return undefined;
    }
    const replay = this.#replay.check(opened.nonce, decoded.packet.ts, this.#clock.now());
    if (replay !== 'ok') {
      this.#drops.drop(replay, `packet from ${from} stamped ${decoded.packet.ts}`);
      return undefined;
    }
    return decoded.packet;
  }
}
