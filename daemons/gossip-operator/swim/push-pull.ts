// Full-state anti-entropy (push-pull): both sides send their whole member list and delegate state over one TCP
// exchange. Piggybacked gossip can lose news (packet loss, partitions, a broadcast that reached its retransmit
// limit); this exchange is what makes every state eventually converge. Pure helpers; membership.ts does the I/O.
import type {
  AliveMessage,
  DeadMessage,
  PushPullState,
  SuspectMessage,
} from '../../../schemas/generated/gossip-swim-packet.ts';
import { checkMessage, type PacketHeader } from './codec.ts';
import type { SwimConfig } from './config.ts';
import type { StateDelegate } from './delegate.ts';
import { frameOverhead } from './crypto.ts';
import type { DropCounter } from './drop-counter.ts';
import type { KeyRing } from './keyring.ts';
import type { Member } from './member-table.ts';
import type { PacketGate } from './packet-gate.ts';
import type { SwimDropReason } from './reasons.ts';
import type { Transport } from './transport.ts';
import type { MembershipMessage } from './updates.ts';
import { WireMessage } from './wire.ts';

/** `wireOf`: the `w` to put in a member's entry (PacketGate.declaredFor), or undefined for none. */
export function buildPushPull(
  members: Iterable<Member>,
  join: boolean,
  user: unknown,
  wireOf: (name: string) => number | undefined = () => undefined,
): PushPullState {
  const list: PushPullState['members'] = [];
  for (const m of members) {
    const w = wireOf(m.name);
    list.push(
      w === undefined
        ? { name: m.name, addr: m.addr, inc: m.incarnation, state: m.state }
        : { name: m.name, addr: m.addr, inc: m.incarnation, state: m.state, w },
    );
  }
  return user === undefined
    ? { k: 'push-pull', join, members: list }
    : { k: 'push-pull', join, members: list, user: user as PushPullState['user'] };
}

/**
 * The remote member list as membership messages. A remote "dead" becomes a suspicion, not a death (memberlist's
 * rule): one peer's old verdict must not kill a member we can still reach, and it gives the member itself a
 * chance to refute. "left" is a member's own word and is taken as is.
 */
export function remoteMembersAsMessages(
  members: PushPullState['members'],
  from: string,
  maxMembers: number,
): (AliveMessage | SuspectMessage | DeadMessage)[] {
  const out: (AliveMessage | SuspectMessage | DeadMessage)[] = [];
  for (const m of members.slice(0, maxMembers)) {
    if (m.state === 'alive') out.push({ k: 'alive', name: m.name, addr: m.addr, inc: m.inc });
    else if (m.state === 'left') out.push({ k: 'dead', name: m.name, inc: m.inc, by: m.name });
    else out.push({ k: 'suspect', name: m.name, inc: m.inc, by: from });
  }
  return out;
}

export interface PushPullContext {
  readonly config: SwimConfig;
  readonly transport: Transport;
  readonly gate: PacketGate;
  readonly keyring: KeyRing | undefined;
  readonly delegate: StateDelegate | undefined;
  readonly drops: DropCounter<SwimDropReason>;
  readonly members: () => Iterable<Member>;
  readonly header: () => PacketHeader;
  readonly apply: (m: MembershipMessage) => void;
  readonly running: () => boolean;
}

export class PushPullExchange {
  readonly #c: PushPullContext;

  constructor(context: PushPullContext) {
    this.#c = context;
  }

  /**
   * Exchanges full state with the member `to` (ANY_RECIPIENT for a seed not known by name, joins only) at `addr`;
   * true when the peer answered with a valid state. Never throws.
   */
  async exchange(to: string, addr: string, join: boolean): Promise<boolean> {
    const { transport, config, drops } = this.#c;
    try {
      const request = this.#frame(join, to);
      const opening = this.#c.gate.seal(this.#c.header(), to, [
        new WireMessage({ k: 'stream-open', bytes: request.length, join }),
      ]);
      const reply = await transport.request(addr, opening, request, config.pushPullTimeoutMs, config.maxMessageBytes);
      if (!this.#c.running()) return false;
      return this.#merge(reply, addr, false) !== undefined;
    } catch (err) {
      drops.drop('push_pull_failed', `with ${addr}: ${err instanceof Error ? err.message : String(err)}`);
      return false;
    }
  }

  /**
   * Stream opening check (before the transport buffers the request): the opening frame must authenticate for us
   * (or for anyone, on a join) and declare a request within maxMessageBytes. Returns that length. Never throws.
   */
  open(frame: Buffer, from: string): number | undefined {
    const { gate, config, drops } = this.#c;
    try {
      const opened = gate.open(frame, from, config.maxOpeningBytes, true);
      if (!opened) return undefined;
      const first = opened.packet.msgs[0];
      const checked = first && first.k === 'stream-open' ? checkMessage(first) : undefined;
      if (!checked?.ok || checked.message.k !== 'stream-open') {
        drops.drop('bad_message', `stream from ${opened.packet.from} does not open with stream-open`);
        return undefined;
      }
      const m = checked.message;
      if (opened.toAnyone && !m.join) {
        drops.drop('bad_message', `stream from ${opened.packet.from} addressed to any member but not a join`);
        return undefined;
      }
      if (m.bytes > config.maxMessageBytes) {
        drops.drop(
          'oversized',
          `stream from ${opened.packet.from} declares ${m.bytes} bytes (max ${config.maxMessageBytes})`,
        );
        return undefined;
      }
      return m.bytes;
    } catch (err) {
      drops.drop(
        'push_pull_failed',
        `stream opening from ${from}: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    }
  }

  /** Stream handler: merge the peer's state and answer with ours, sealed for the requester. */
  async answer(frame: Buffer, from: string): Promise<Buffer | undefined> {
    try {
      const merged = this.#merge(frame, from, true);
      if (merged === undefined || !this.#c.running()) return undefined;
      return this.#frame(merged.join, merged.from);
    } catch (err) {
      this.#c.drops.drop(
        'push_pull_failed',
        `stream from ${from}: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    }
  }

  /** Our state sealed for `to` in the wire version it speaks (compressed in version 3 when large). */
  #frame(join: boolean, to: string): Buffer {
    const { config, keyring, delegate, drops, gate } = this.#c;
    const header = this.#c.header();
    const version = gate.versionFor(to);
    const user = delegate?.localState(join);
    let message = new WireMessage(buildPushPull(this.#c.members(), join, user, (name) => gate.declaredFor(name)));
    // The receiver refuses a stream above maxMessageBytes and inflates no further than that, so the uncompressed
    // size is what must fit. Without the delegate state the member list still converges membership.
    const plaintextBytes = gate.envelopeBytes(version, header) + message.cost(version);
    if (plaintextBytes + frameOverhead(keyring) + 4 > config.maxMessageBytes && user !== undefined) {
      drops.drop('oversized', `local state of ${plaintextBytes} bytes exceeds maxMessageBytes; sending members only`);
      message = new WireMessage(buildPushPull(this.#c.members(), join, undefined, (name) => gate.declaredFor(name)));
    }
    return gate.seal(header, to, [message], true, version);
  }

  /**
   * Merges a push-pull message; returns its join flag and sender, or undefined when it was dropped. A request
   * (`isRequest`) may be addressed to any member only when it is a join, the one case where the sender cannot
   * know our name; replies are always addressed by name.
   */
  #merge(frame: Buffer, from: string, isRequest: boolean): { join: boolean; from: string } | undefined {
    const { gate, config, drops, delegate } = this.#c;
    const opened = gate.open(frame, from, config.maxMessageBytes, isRequest);
    if (!opened) return undefined;
    const { packet } = opened;
    const first = packet.msgs[0];
    const checked = first && first.k === 'push-pull' ? checkMessage(first) : undefined;
    if (!checked?.ok || checked.message.k !== 'push-pull') {
      drops.drop('bad_message', `stream from ${packet.from} is not a push-pull message`);
      return undefined;
    }
    const pp = checked.message;
    if (opened.toAnyone && !pp.join) {
      drops.drop('bad_message', `push-pull from ${packet.from} addressed to any member but not a join`);
      return undefined;
    }
    for (const msg of remoteMembersAsMessages(pp.members, packet.from, config.maxMembers)) this.#c.apply(msg);
    // What the peer knows of who speaks which wire version, for members we have not heard from ourselves.
    for (const m of pp.members.slice(0, config.maxMembers)) if (m.w !== undefined) gate.heardOf(m.name, m.w);
    if (pp.user !== undefined && delegate) {
      try {
        delegate.mergeRemoteState(pp.user, pp.join, packet.from);
      } catch (err) {
        drops.drop(
          'delegate_error',
          `push-pull state from ${packet.from}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    return { join: pp.join, from: packet.from };
  }
}
