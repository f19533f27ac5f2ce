// The datagram receive path. Runs synchronously in the socket callback and never throws: each frame passes the
// packet gate, each message its schema, and then it is handled inline (acks are matched with the receive
// timestamp, so round trips stay honest). Nothing here awaits.
import { checkMessage } from './codec.ts';
import type { Clock, TimerHandle } from './clock.ts';
import type { SwimConfig } from './config.ts';
import type { StateDelegate } from './delegate.ts';
import type { DropCounter } from './drop-counter.ts';
import type { PacketGate } from './packet-gate.ts';
import { nackTimeoutMs, type AckTable } from './probe.ts';
import type { SwimDropReason } from './reasons.ts';
import type { MembershipUpdates } from './updates.ts';
import { WireMessage } from './wire.ts';

export interface ReceiveContext {
  readonly config: SwimConfig;
  readonly clock: Clock;
  readonly gate: PacketGate;
  readonly acks: AckTable;
  readonly updates: MembershipUpdates;
  readonly delegate: StateDelegate | undefined;
  readonly drops: DropCounter<SwimDropReason>;
  readonly timers: Set<TimerHandle>;
  readonly nextSeq: () => number;
  /** Sends to the member named `to` at `addr` (the frame is sealed for that name). */
  readonly send: (to: string, addr: string, messages: readonly WireMessage[]) => void;
  readonly running: () => boolean;
}

export class PacketReceiver {
  readonly #c: ReceiveContext;

  constructor(context: ReceiveContext) {
    this.#c = context;
  }

  onPacket(frame: Buffer, from: string, receivedAtMs: number): void {
    const { gate, config, drops, acks, updates } = this.#c;
    try {
      const opened = gate.open(frame, from, config.maxPacketBytes);
      if (!opened) return;
      const { packet } = opened;
      for (const raw of packet.msgs) {
        const checked = checkMessage(raw);
        if (!checked.ok) {
          drops.drop(checked.reason, `from ${packet.from}: ${checked.detail}`);
          continue;
        }
        const m = checked.message;
        switch (m.k) {
          case 'ping':
            // Replies go to the datagram's source address, which is what the prober can reach us from.
            if (m.target === config.name) this.#c.send(packet.from, from, [new WireMessage({ k: 'ack', seq: m.seq })]);
            break;
          case 'ack':
            if (acks.ack(m.seq, packet.from, receivedAtMs) === 'unexpected')
              drops.drop('unexpected_ack', `ack ${m.seq} from ${packet.from}, which was not asked`);
            break;
          case 'nack':
            if (acks.nack(m.seq, packet.from) === 'unexpected')
              drops.drop('unexpected_ack', `nack ${m.seq} from ${packet.from}, which was not asked`);
            break;
          case 'ping-req':
            this.#relayPing(m.seq, m.target, m.targetAddr, packet.from, from);
            break;
          case 'alive':
          case 'suspect':
          case 'dead':
            updates.apply(m);
            break;
          case 'user':
            this.#notifyDelegate(m.data, packet.from);
            break;
          case 'push-pull':
          case 'stream-open':
            drops.drop('bad_message', `${m.k} over UDP from ${packet.from}`);
            break;
        }
      }
    } catch (err) {
      // Defence in depth: nothing may escape the socket handler.
      drops.drop(
        'bad_packet',
        `unexpected error handling packet from ${from}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /** Indirect probe on behalf of `requester`: forward the ack, or send a nack when our own ping goes unanswered. */
  #relayPing(origSeq: number, target: string, targetAddr: string, requester: string, requesterAddr: string): void {
    const { config, clock, acks, timers, send } = this.#c;
    const seq = this.#c.nextSeq();
    let acked = false;
    acks.expect(seq, new Set([target]), config.probeIntervalMs, () => {
      acked = true;
      send(requester, requesterAddr, [new WireMessage({ k: 'ack', seq: origSeq })]);
    });
    // Lifeguard nack: tells the requester we are alive and its target is not answering us either, so a missing
    // nack points at the requester's own connectivity.
    const t = clock.schedule(nackTimeoutMs(config.probeTimeoutMs, config.probeIntervalMs), () => {
      timers.delete(t);
      if (!acked && this.#c.running()) send(requester, requesterAddr, [new WireMessage({ k: 'nack', seq: origSeq })]);
    });
    timers.add(t);
    send(target, targetAddr, [new WireMessage({ k: 'ping', seq, target })]);
  }

  #notifyDelegate(data: unknown, from: string): void {
    const { delegate, drops } = this.#c;
    if (!delegate) return;
    try {
      delegate.notifyMessage(data, from);
    } catch (err) {
      drops.drop('delegate_error', `user message from ${from}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
