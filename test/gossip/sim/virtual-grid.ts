// A grid in simulated time: the real Membership code, unchanged, on an in-memory network whose clock is
// virtual, with seeded packet loss and delay. Nothing sleeps: events run in time order as fast as the CPU allows,
// so 1,000 members and minutes of protocol time fit in seconds, and a seed replays a run exactly.
//
// Promise continuations (push-pull answers, joins) run between virtual milliseconds: after each millisecond's
// events the microtask and immediate queues are drained, and what they schedule runs from the clock's "now".
import { randomBytes } from 'node:crypto';
import {
  seededRandom,
  type Clock,
  type RandomSource,
  type TimerHandle,
} from '../../../daemons/gossip-operator/swim/clock.ts';
import type { SwimConfig, SwimTiming } from '../../../daemons/gossip-operator/swim/config.ts';
import { KeyRing } from '../../../daemons/gossip-operator/swim/keyring.ts';
import { Membership, type MembershipOptions } from '../../../daemons/gossip-operator/swim/membership.ts';
import {
  emptyStats,
  type PacketHandler,
  type StreamHandler,
  type StreamOpenHandler,
  type Transport,
  type TransportStats,
} from '../../../daemons/gossip-operator/swim/transport.ts';
import { WIRE_LATEST, type WireVersion } from '../../../daemons/gossip-operator/swim/wire.ts';

interface Event {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/** A Clock whose time moves only when `advance` runs the events due. Starts at a fixed epoch. */
export class VirtualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #heap: Event[] = [];

  constructor(startMs = 1_764_547_200_000) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  schedule(delayMs: number, fn: () => void): TimerHandle {
    const e: Event = { at: this.#now + Math.max(0, delayMs), seq: this.#seq++, fn, cancelled: false };
    this.#push(e);
    return { cancel: () => (e.cancelled = true) };
  }

  /** Runs every event due up to now + `ms`, a virtual millisecond at a time, and leaves the clock there. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    while (this.#heap.length > 0 && (this.#heap[0] as Event).at <= end) {
      const tickEnd = Math.floor((this.#heap[0] as Event).at) + 1;
      while (this.#heap.length > 0 && (this.#heap[0] as Event).at < tickEnd && (this.#heap[0] as Event).at <= end) {
        const e = this.#pop();
        if (e.cancelled) continue;
        this.#now = Math.max(this.#now, e.at);
        e.fn();
      }
      this.#now = Math.max(this.#now, Math.min(tickEnd, end));
      await new Promise<void>((r) => setImmediate(r));
    }
    this.#now = end;
  }

  /** Advances until `check` holds (tested every `stepMs`) or `limitMs` have passed; the virtual time taken, or undefined. */
  async until(check: () => boolean, limitMs: number, stepMs = 10): Promise<number | undefined> {
    const t0 = this.#now;
    while (!check()) {
      if (this.#now - t0 >= limitMs) return undefined;
      await this.advance(stepMs);
    }
    return this.#now - t0;
  }

  #push(e: Event): void {
    const h = this.#heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p] as Event)) break;
      h[i] = h[p] as Event;
      i = p;
    }
    h[i] = e;
  }

  #pop(): Event {
    const h = this.#heap;
    const top = h[0] as Event;
    const last = h.pop() as Event;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && before(h[r] as Event, h[l] as Event) ? r : l;
        if (!before(h[c] as Event, last)) break;
        h[i] = h[c] as Event;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

function before(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

export interface NetworkModel {
  /** Fraction of datagrams lost, independently per datagram. Streams (TCP) are not lossy. */
  readonly lossRate: number;
  /** One-way delay of a datagram in ms, drawn per datagram. */
  readonly delayMs: (random: RandomSource) => number;
}

/** A WAN-like delay: 10 ms floor plus an exponential tail of mean 15 ms, capped at 250 ms. */
export function wanDelay(random: RandomSource): number {
  return Math.min(250, 10 - 15 * Math.log(1 - random()));
}

export class SimNetwork {
  readonly clock: VirtualClock;
  readonly random: RandomSource;
  model: NetworkModel;
  readonly #nodes = new Map<string, SimTransport>();
  /** Framed sizes of every push-pull request and response, in order. */
  readonly pushPullBytes: number[] = [];
  /** Datagrams and their bytes sent by all members (before loss). */
  datagrams = 0;
  datagramBytes = 0;
  #next = 1;

  constructor(clock: VirtualClock, random: RandomSource, model: NetworkModel) {
    this.clock = clock;
    this.random = random;
    this.model = model;
  }

  createTransport(): SimTransport {
    const n = this.#next++;
    const address = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}:7946`;
    const t = new SimTransport(this, address);
    this.#nodes.set(address, t);
    return t;
  }

  /** @internal */
  lookup(address: string): SimTransport | undefined {
    return this.#nodes.get(address);
  }

  /** @internal */
  remove(address: string): void {
    this.#nodes.delete(address);
  }
}

export class SimTransport implements Transport {
  readonly stats: TransportStats = emptyStats();
  readonly #net: SimNetwork;
  readonly #address: string;
  #onPacket: PacketHandler = () => {};
  #onOpen: StreamOpenHandler = () => undefined;
  #onStream: StreamHandler = async () => undefined;
  #closed = false;

  constructor(net: SimNetwork, address: string) {
    this.#net = net;
    this.#address = address;
  }

  get localAddress(): string {
    return this.#address;
  }

  setPacketHandler(h: PacketHandler): void {
    this.#onPacket = h;
  }

  setStreamHandler(open: StreamOpenHandler, answer: StreamHandler): void {
    this.#onOpen = open;
    this.#onStream = answer;
  }

  setStreamDropHandler(): void {}

  sendPacket(to: string, frame: Buffer): void {
    if (this.#closed) return;
    this.stats.packetsSent++;
    this.stats.bytesSent += frame.length;
    this.#net.datagrams++;
    this.#net.datagramBytes += frame.length;
    const { model, random, clock } = this.#net;
    if (model.lossRate > 0 && random() < model.lossRate) return;
    clock.schedule(model.delayMs(random), () => this.#net.lookup(to)?.deliver(frame, this.#address));
  }

  /** @internal */
  deliver(frame: Buffer, from: string): void {
    if (this.#closed) return;
    this.stats.packetsReceived++;
    this.stats.bytesReceived += frame.length;
    this.#onPacket(frame, from, this.#net.clock.now());
  }

  request(to: string, opening: Buffer, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    const { clock, model, random } = this.#net;
    return new Promise<Buffer>((resolve, reject) => {
      if (this.#closed) return reject(new Error('transport closed'));
      if (frame.length > maxBytes) return reject(new Error(`request above ${maxBytes} bytes`));
      this.stats.streamsOpened++;
      this.stats.bytesSent += opening.length + frame.length;
      this.#net.pushPullBytes.push(frame.length);
      let done = false;
      const timer = clock.schedule(timeoutMs, () => {
        done = true;
        reject(new Error(`timed out after ${timeoutMs} ms`));
      });
      const fail = (msg: string) => {
        if (done) return;
        done = true;
        timer.cancel();
        reject(new Error(msg));
      };
      // A TCP exchange: connect and send (one delay), the answer back (another); no loss, only delay.
      clock.schedule(2 * model.delayMs(random), () => {
        const peer = this.#net.lookup(to);
        if (!peer) return fail(`no member listening at ${to}`);
        peer.answer(opening, frame, this.#address).then(
          (reply) => {
            if (!reply) return fail(`${to} closed without a response`);
            if (reply.length > maxBytes) return fail(`response above ${maxBytes} bytes`);
            this.#net.pushPullBytes.push(reply.length);
            clock.schedule(model.delayMs(random), () => {
              if (done) return;
              done = true;
              timer.cancel();
              this.stats.bytesReceived += reply.length;
              resolve(reply);
            });
          },
          (err: unknown) => fail(err instanceof Error ? err.message : String(err)),
        );
      });
    });
  }

  /** @internal */
  answer(opening: Buffer, frame: Buffer, from: string): Promise<Buffer | undefined> {
    if (this.#closed || this.#onOpen(opening, from) !== frame.length) return Promise.resolve(undefined);
    this.stats.bytesReceived += opening.length + frame.length;
    return this.#onStream(frame, from).then((reply) => {
      if (reply) this.stats.bytesSent += reply.length;
      return reply;
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#net.remove(this.#address);
  }
}

type SwimMembers = NonNullable<MembershipOptions['knownMembers']>;

export interface SimGridOptions {
  readonly size: number;
  readonly timing: SwimTiming;
  readonly model: NetworkModel;
  readonly seed: number;
  readonly wireVersion?: WireVersion;
  /** Start every member with the full member list (Membership's knownMembers), as after a settled join storm,
   * instead of N members that have yet to join (joinAll). */
  readonly converged?: boolean;
}

/** Who knows what, kept up to date from membership events, so checks cost O(1) instead of O(N^2). */
export class SimGrid {
  readonly clock = new VirtualClock();
  readonly net: SimNetwork;
  readonly members: Membership[] = [];
  /** name -> how many other members list it alive / dead (dead or left). */
  readonly knownAlive = new Map<string, number>();
  readonly knownDead = new Map<string, number>();
  /** Deaths and suspicions declared of members that were running at the time (false positives). */
  falseDeaths = 0;
  falseSuspicions = 0;
  readonly #stopped = new Set<string>();
  readonly #views = new Map<string, Map<string, string>>();
  readonly #options: SimGridOptions;
  readonly #random: RandomSource;
  readonly #keyring = new KeyRing([randomBytes(32)]);

  constructor(options: SimGridOptions) {
    this.#options = options;
    this.#random = seededRandom(options.seed);
    this.net = new SimNetwork(this.clock, this.#random, options.model);
    const names = Array.from({ length: options.size }, (_, i) => `site-${String(i).padStart(4, '0')}`);
    if (!options.converged) {
      for (const name of names) this.add(name);
      return;
    }
    const transports = names.map(() => this.net.createTransport());
    // Every pair has spoken once (as in a join storm), so each knows what wire version the other speaks.
    const wire = options.wireVersion ?? WIRE_LATEST;
    const all = names.map((name, i) => ({
      name,
      addr: (transports[i] as SimTransport).localAddress,
      incarnation: 0,
      wire,
    }));
    for (const [i, name] of names.entries()) {
      const m = this.add(
        name,
        transports[i],
        all.filter((x) => x.name !== name),
      );
      const view = this.#views.get(m.name) as Map<string, string>;
      for (const x of all) if (x.name !== name) view.set(x.name, 'alive');
    }
    for (const name of names) this.knownAlive.set(name, options.size - 1);
  }

  /** A seeded pick in [0, n). */
  pick(n: number): number {
    return Math.floor(this.#random() * n);
  }

  /** Starts a member (not yet joined) holding the grid's key. */
  add(name: string, transport: SimTransport = this.net.createTransport(), knownMembers: SwimMembers = []): Membership {
    const keyring = this.#keyring;
    const config: SwimConfig = {
      ...this.#options.timing,
      name,
      maxMembers: Math.max(this.#options.timing.maxMembers, 2 * this.#options.size),
    };
    const m = Membership.start({
      config,
      transport,
      keyring,
      knownMembers,
      clock: this.clock,
      random: seededRandom(Math.floor(this.#random() * 2 ** 32)),
      ...(this.#options.wireVersion === undefined ? {} : { wireVersion: this.#options.wireVersion }),
    });
    const view = new Map<string, string>();
    this.#views.set(name, view);
    const seen = (who: string, state: string) => {
      const before = view.get(who);
      if (before === state) return;
      if (before === 'alive') this.knownAlive.set(who, (this.knownAlive.get(who) ?? 0) - 1);
      if (before === 'dead') this.knownDead.set(who, (this.knownDead.get(who) ?? 0) - 1);
      if (state === 'alive') this.knownAlive.set(who, (this.knownAlive.get(who) ?? 0) + 1);
      if (state === 'dead') {
        this.knownDead.set(who, (this.knownDead.get(who) ?? 0) + 1);
        if (!this.#stopped.has(who)) this.falseDeaths++;
      }
      if (state === 'suspect' && !this.#stopped.has(who)) this.falseSuspicions++;
      view.set(who, state);
    };
    const onChange = (v: { name: string; state: string }) => seen(v.name, v.state === 'left' ? 'dead' : v.state);
    m.on('join', onChange);
    m.on('update', onChange);
    m.on('leave', onChange);
    this.members.push(m);
    return m;
  }

  /** Every member joins through the first, `spacingMs` apart; resolves when all list all alive (virtual ms), or undefined. */
  async joinAll(spacingMs: number, limitMs: number): Promise<number | undefined> {
    const seed = this.members[0] as Membership;
    const t0 = this.clock.now();
    for (const [i, m] of this.members.entries())
      if (i > 0) this.clock.schedule(i * spacingMs, () => void m.join([seed.address]));
    const n = this.members.length;
    const took = await this.clock.until(
      () => this.members.every((m) => this.knownAlive.get(m.name) === n - 1),
      limitMs,
      50,
    );
    return took === undefined ? undefined : this.clock.now() - t0;
  }

  /** A crash: the member stops without a leave message. */
  async crash(m: Membership): Promise<void> {
    this.#stopped.add(m.name);
    await m.shutdown();
  }

  bytesSent(): number {
    return this.members.reduce((s, m) => s + m.stats().transport.bytesSent, 0);
  }

  packetsSent(): number {
    return this.members.reduce((s, m) => s + m.stats().transport.packetsSent, 0);
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.members.map((m) => m.shutdown()));
  }
}
