// The public lifecycle of one SWIM member (one per site): create, join, leave, shutdown, members. It wires the
// pieces (packet-gate.ts, receive.ts, probe.ts, updates.ts with suspicion.ts, awareness.ts, broadcast-queue.ts,
// push-pull.ts, member-table.ts) to a transport and runs the protocol loops.
import { randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Awareness } from './awareness.ts';
import { BroadcastQueue } from './broadcast-queue.ts';
import { systemClock, type Clock, type RandomSource, type TimerHandle } from './clock.ts';
import { pushPullIntervalFor, retransmitLimit, validateSwimConfig, type SwimConfig } from './config.ts';
import { ANY_RECIPIENT, frameOverhead } from './crypto.ts';
import type { StateDelegate } from './delegate.ts';
import { DropCounter, type GossipLogger } from './drop-counter.ts';
import type { KeyRing } from './keyring.ts';
import { MemberTable, type Member, type MemberState } from './member-table.ts';
import { AckTable, probeMember, ProbeTargets, type ProbeHost } from './probe.ts';
import { PacketGate, type WireCounts } from './packet-gate.ts';
import { PushPullExchange } from './push-pull.ts';
import { PacketReceiver } from './receive.ts';
import { SWIM_DROP_REASONS, type SwimDropReason } from './reasons.ts';
import { resolveSeeds, type LookupFn, type SeedProblem } from './seeds.ts';
import type { Transport, TransportStats } from './transport.ts';
import { MembershipUpdates } from './updates.ts';
import type { UserMessage } from '../../../schemas/generated/gossip-swim-packet.ts';
import { WIRE_LATEST, WIRE_VERSIONS, WireMessage, type WireVersion } from './wire.ts';

export interface MembershipOptions {
  readonly config: SwimConfig;
  readonly transport: Transport;
  /** Absent: plaintext frames (local development only); present: AES-256-GCM, plaintext refused. */
  readonly keyring?: KeyRing;
  readonly clock?: Clock;
  readonly random?: RandomSource;
  readonly delegate?: StateDelegate;
  readonly logger?: GossipLogger;
  /** Other "ip:port" forms of this member (e.g. behind NAT), filtered out of the seeds. */
  readonly selfAddresses?: readonly string[];
  readonly lookup?: LookupFn;
  /** Highest wire version to speak (wire.ts; default the latest). Pin it to 2 to hold a member on the JSON wire
   * during a rolling upgrade, or to stand in for a member of the previous release in tests. */
  readonly wireVersion?: WireVersion;
  /** Members known alive from the start, with nothing to gossip about them: the state a member holds after a
   * join storm has settled. The simulation starts 1,000-member grids from it, where replaying the
   * join storm itself would cost O(N^2) packets before anything is measured. */
  readonly knownMembers?: readonly KnownMember[];
}

export interface KnownMember {
  readonly name: string;
  readonly addr: string;
  readonly incarnation: number;
  /** The wire version it was last heard declaring (absent: not heard from, spoken to in the baseline). */
  readonly wire?: WireVersion;
}

export interface MemberView {
  readonly name: string;
  readonly addr: string;
  readonly incarnation: number;
  readonly state: MemberState;
  /** Seconds since the member's last state transition (e.g. since it became suspect or dead). */
  readonly ageSeconds: number;
}

export interface MembershipStats {
  readonly members: Record<MemberState, number>;
  readonly awarenessScore: number;
  readonly queuedBroadcasts: number;
  readonly drops: Record<SwimDropReason, number>;
  readonly transport: TransportStats;
  /** Frames sealed and opened per wire version: how far a rolling upgrade has got. */
  readonly wire: { readonly sent: WireCounts; readonly received: WireCounts };
}

type Events = { join: [MemberView]; update: [MemberView]; leave: [MemberView]; forget: [string] };

export class Membership extends EventEmitter<Events> {
  readonly config: SwimConfig;
  readonly drops: DropCounter<SwimDropReason>;
  readonly #transport: Transport;
  readonly #keyring: KeyRing | undefined;
  readonly #clock: Clock;
  readonly #random: RandomSource;
  readonly #delegate: StateDelegate | undefined;
  readonly #lookup: LookupFn | undefined;
  readonly #selfAddresses: string[];
  readonly #table: MemberTable;
  readonly #awareness: Awareness;
  readonly #broadcasts: BroadcastQueue;
  readonly #acks: AckTable;
  readonly #targets: ProbeTargets;
  readonly #gate: PacketGate;
  readonly #pushPull: PushPullExchange;
  readonly #receiver: PacketReceiver;
  readonly #probeHost: ProbeHost;
  readonly #updates: MembershipUpdates;
  readonly #timers = new Set<TimerHandle>();
  // A random start, so sequence numbers differ between members and restarts (a reflected or stale ack must not
  // match an outstanding probe by luck of every node counting from 0). From the injected random source when there
  // is one, so a seeded simulation replays exactly.
  #seq: number;
  #seeds: readonly string[] = [];
  #joined = false;
  #running = false;
  #syncing: Promise<number> | undefined;
  #syncAgain = false;

  private constructor(options: MembershipOptions) {
    super();
    validateSwimConfig(options.config);
    this.config = options.config;
    this.#transport = options.transport;
    this.#keyring = options.keyring;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#seq = options.random ? Math.floor(options.random() * 2 ** 47) : randomInt(0, 2 ** 47);
    this.#delegate = options.delegate;
    this.#lookup = options.lookup;
    this.#selfAddresses = [options.transport.localAddress, ...(options.selfAddresses ?? [])];
    this.drops = new DropCounter('swim', SWIM_DROP_REASONS, options.logger);
    this.#table = new MemberTable(
      options.config.name,
      options.transport.localAddress,
      0,
      this.#clock.now(),
      options.config.maxMembers,
    );
    this.#awareness = new Awareness(options.config.awarenessMaxMultiplier);
    this.#gate = new PacketGate(
      options.config.name,
      options.keyring,
      this.#clock,
      this.drops,
      options.config.replayWindowMs,
      options.config.replayCacheMaxEntries,
      options.wireVersion ?? WIRE_LATEST,
      options.config.maxMembers,
    );
    for (const m of options.knownMembers ?? []) {
      this.#table.applyAlive({ k: 'alive', name: m.name, addr: m.addr, inc: m.incarnation }, this.#clock.now());
      if (m.wire !== undefined) this.#gate.heard(m.name, m.wire);
    }
    this.#broadcasts = new BroadcastQueue(options.config.maxQueuedBroadcasts, this.#maxBroadcastBytes());
    this.#acks = new AckTable(this.#clock);
    this.#targets = new ProbeTargets(this.#random);
    this.#probeHost = this.#makeProbeHost();
    this.#updates = new MembershipUpdates({
      config: this.config,
      clock: this.#clock,
      table: this.#table,
      broadcasts: this.#broadcasts,
      awareness: this.#awareness,
      drops: this.drops,
      notify: (event, name) => this.emit(event, this.member(name) as MemberView),
      running: () => this.#running,
    });
    this.#pushPull = new PushPullExchange({
      config: this.config,
      transport: this.#transport,
      gate: this.#gate,
      keyring: this.#keyring,
      delegate: this.#delegate,
      drops: this.drops,
      members: () => this.#table.all(),
      header: () => this.#header(),
      apply: (m) => this.#updates.apply(m),
      running: () => this.#running,
    });
    this.#receiver = new PacketReceiver({
      config: this.config,
      clock: this.#clock,
      gate: this.#gate,
      acks: this.#acks,
      updates: this.#updates,
      delegate: this.#delegate,
      drops: this.drops,
      timers: this.#timers,
      nextSeq: () => this.#nextSeq(),
      send: (to, addr, messages) => this.#send(to, addr, messages),
      running: () => this.#running,
    });
  }

  /** Creates the member and starts its protocol loops. A lone member is a healthy single-member mesh. */
  static start(options: MembershipOptions): Membership {
    const m = new Membership(options);
    m.#start();
    return m;
  }

  get name(): string {
    return this.config.name;
  }

  get address(): string {
    return this.#transport.localAddress;
  }

  get incarnation(): number {
    return this.#table.self.incarnation;
  }

  /** True once any seed answered a join (or when there were no seeds to join). */
  get joined(): boolean {
    return this.#joined;
  }

  members(): MemberView[] {
    const now = this.#clock.now();
    return [...this.#table.all()].map((m) => viewOf(m, now)).sort((a, b) => a.name.localeCompare(b.name));
  }

  member(name: string): MemberView | undefined {
    const m = this.#table.get(name);
    return m ? viewOf(m, this.#clock.now()) : undefined;
  }

  stats(): MembershipStats {
    const members: Record<MemberState, number> = { alive: 0, suspect: 0, dead: 0, left: 0 };
    for (const m of this.#table.all()) members[m.state]++;
    return {
      members,
      awarenessScore: this.#awareness.score,
      queuedBroadcasts: this.#broadcasts.size,
      drops: this.drops.snapshot(),
      transport: { ...this.#transport.stats },
      wire: { sent: { ...this.#gate.sent }, received: { ...this.#gate.received } },
    };
  }

  /**
   * Joins through `seeds` (host:port entries). Resolves after one round with the number of seeds that answered;
   * while none has, the seeds are retried every joinRetryIntervalMs, then re-announced every announceIntervalMs.
   */
  async join(seeds: readonly string[]): Promise<{ contacted: number; problems: readonly SeedProblem[] }> {
    this.#seeds = [...seeds];
    if (seeds.length === 0) this.#joined = true;
    return this.#announce();
  }

  /** Largest delegate broadcast that fits one packet in every wire version: JSON bytes of {"k":"user","data":...}. */
  get maxBroadcastBytes(): number {
    return this.#maxBroadcastBytes();
  }

  /**
   * Queues a delegate broadcast under `key` (a newer one with the same key replaces it). Returns false when the
   * message can never fit one packet: the delegate must rely on push-pull for it.
   */
  broadcast(key: string, data: unknown): boolean {
    const message = new WireMessage({ k: 'user', data: data as UserMessage['data'] });
    const r = this.#broadcasts.enqueue(`u:${key}`, message);
    if (r === 'too_large') {
      // Not a loss: the caller sends it by push-pull instead (GossipState.broadcast), so this is only counted.
      this.drops.drop(
        'broadcast_too_large',
        `broadcast ${key} is ${message.maxBytes} bytes, more than one packet; push-pull carries it instead`,
        'debug',
      );
      return false;
    }
    if (r === 'evicted_other') this.drops.drop('queue_full', 'broadcast queue full; evicted the most-sent broadcast');
    return true;
  }

  /**
   * Push-pull now with up to gossipFanout random live members, for news that cannot be broadcast (too large for
   * a packet). Calls made while one is running coalesce into one more round. Resolves with the exchanges that
   * succeeded in this call's round.
   */
  syncNow(): Promise<number> {
    if (this.#syncing) {
      this.#syncAgain = true;
      return this.#syncing;
    }
    const round = async (): Promise<number> => {
      let ok = 0;
      do {
        this.#syncAgain = false;
        const peers = this.#table.sample(
          this.config.gossipFanout,
          this.#random,
          (m) => m !== this.#table.self && m.state === 'alive',
        );
        const results = await Promise.all(peers.map((m) => this.#pushPull.exchange(m.name, m.addr, false)));
        ok = results.filter(Boolean).length;
      } while (this.#syncAgain && this.#running);
      return ok;
    };
    this.#syncing = round().finally(() => {
      this.#syncing = undefined;
    });
    return this.#syncing;
  }

  /** Voluntary leave: tell every live member directly, then keep gossiping for one gossip interval. */
  async leave(): Promise<void> {
    if (!this.#running) return;
    this.#table.leaving = true;
    const self = this.#table.self;
    const msg = new WireMessage({ k: 'dead', name: self.name, inc: self.incarnation, by: self.name });
    this.#broadcasts.enqueue(`m:${self.name}`, msg);
    for (const m of this.#table.all()) {
      if (m !== self && (m.state === 'alive' || m.state === 'suspect')) this.#send(m.name, m.addr, [msg]);
    }
    await new Promise<void>((r) => this.#clock.schedule(this.config.gossipIntervalMs, r));
  }

  /** Stops every loop and closes the transport. Idempotent. */
  async shutdown(): Promise<void> {
    this.#running = false;
    for (const t of this.#timers) t.cancel();
    this.#timers.clear();
    this.#updates.clear();
    this.#acks.clear();
    await this.#transport.close();
  }

  // ---- lifecycle loops -------------------------------------------------------------------------------

  #start(): void {
    this.#running = true;
    // Announce ourselves (memberlist's setAlive): whoever we reach first starts spreading the news.
    // A member started with the converged member list (knownMembers) stands for one whose announcement has spread.
    const self = this.#table.self;
    if (this.#table.size === 1)
      this.#broadcasts.enqueue(
        `m:${self.name}`,
        new WireMessage({ k: 'alive', name: self.name, addr: self.addr, inc: self.incarnation }),
      );
    this.#transport.setPacketHandler((frame, from, at) => this.#receiver.onPacket(frame, from, at));
    this.#transport.setStreamHandler(
      (frame, from) => this.#pushPull.open(frame, from),
      (frame, from) => this.#pushPull.answer(frame, from),
    );
    this.#transport.setStreamDropHandler((reason, detail) => this.drops.drop(reason, detail));
    this.#every(
      () => this.#awareness.scale(this.config.probeIntervalMs),
      () => this.#probeTick(),
    );
    this.#every(
      () => this.config.gossipIntervalMs,
      () => this.#gossipTick(),
    );
    // Forgetting runs at 1/30 of the TTL (within ~3 % of it) over the dead and left members only: at 1,000
    // members a scan of the whole table here is the largest CPU cost of an idle member in the simulation's profile.
    this.#every(
      () => Math.max(this.config.gossipIntervalMs, this.config.deadMemberTtlMs / 30),
      () => this.#forgetExpired(),
    );
    this.#every(
      () => pushPullIntervalFor(this.config.pushPullIntervalMs, this.#table.liveCount()),
      () => void this.#pushPullTick(),
    );
    this.#every(
      () => (this.#joined ? this.config.announceIntervalMs : this.config.joinRetryIntervalMs),
      () => void this.#announce(),
    );
  }

  /** A self-rescheduling loop; the first run is offset by a random fraction so members do not beat in step. */
  #every(intervalMs: () => number, fn: () => void): void {
    let handle: TimerHandle;
    const run = (): void => {
      this.#timers.delete(handle);
      if (!this.#running) return;
      try {
        fn();
      } catch (err) {
        // A bug in one round must not kill the daemon or stop the loop; it is counted and logged once.
        this.drops.drop('internal_error', err instanceof Error ? err.message : String(err));
      } finally {
        if (this.#running) {
          handle = this.#clock.schedule(intervalMs(), run);
          this.#timers.add(handle);
        }
      }
    };
    handle = this.#clock.schedule(intervalMs() * (0.5 + this.#random() / 2), run);
    this.#timers.add(handle);
  }

  #probeTick(): void {
    const target = this.#targets.next(this.#table, this.name);
    if (target) void probeMember(this.#probeHost, target);
  }

  #gossipTick(): void {
    if (this.#broadcasts.size === 0) return;
    const now = this.#clock.now();
    const targets = this.#table.sample(
      this.config.gossipFanout,
      this.#random,
      (m) =>
        m !== this.#table.self &&
        (m.state === 'alive' ||
          m.state === 'suspect' ||
          (m.state === 'dead' && now - m.stateChangedAtMs < this.config.gossipToTheDeadMs)),
    );
    for (const m of targets) {
      if (this.#broadcasts.size === 0) break;
      this.#send(m.name, m.addr, []);
    }
  }

  #forgetExpired(): void {
    const now = this.#clock.now();
    for (const m of [...this.#table.gone()]) {
      if (now - m.stateChangedAtMs >= this.config.deadMemberTtlMs && this.#table.forget(m.name)) {
        this.#broadcasts.remove(`m:${m.name}`);
        this.#gate.forget(m.name);
        this.emit('forget', m.name);
      }
    }
  }

  async #pushPullTick(): Promise<void> {
    const [peer] = this.#table.sample(1, this.#random, (m) => m !== this.#table.self && m.state === 'alive');
    if (peer) await this.#pushPull.exchange(peer.name, peer.addr, false);
  }

  async #announce(): Promise<{ contacted: number; problems: readonly SeedProblem[] }> {
    if (this.#seeds.length === 0 || !this.#running) return { contacted: 0, problems: [] };
    const resolved = await resolveSeeds(this.#seeds, this.#selfAddresses, this.config.dnsTimeoutMs, this.#lookup);
    const live = new Set(
      [...this.#table.all()].filter((m) => m.state === 'alive' || m.state === 'suspect').map((m) => m.addr),
    );
    // A seed we knew as a member is addressed by its name; an unknown one can only be addressed to anyone.
    const nameAt = new Map([...this.#table.all()].filter((m) => m !== this.#table.self).map((m) => [m.addr, m.name]));
    const results = await Promise.all(
      resolved.addresses
        .filter((a) => !live.has(a))
        .map((a) => this.#pushPull.exchange(nameAt.get(a) ?? ANY_RECIPIENT, a, true)),
    );
    const contacted = results.filter(Boolean).length;
    if (contacted > 0 || resolved.addresses.length === 0) this.#joined = true;
    return { contacted, problems: resolved.problems };
  }

  // ---- sending ---------------------------------------------------------------------------------------

  #header(): { from: string; addr: string; ts: number } {
    return { from: this.name, addr: this.address, ts: this.#clock.now() };
  }

  #maxBroadcastBytes(): number {
    const header = this.#header();
    const envelope = Math.max(...WIRE_VERSIONS.map((v) => this.#gate.envelopeBytes(v, header)));
    return this.config.maxPacketBytes - frameOverhead(this.#keyring) - envelope - 16;
  }

  /**
   * Sends `messages` to the member `to` at `addr` in the wire version it speaks, filling the rest of the packet
   * with piggybacked broadcasts.
   */
  #send(to: string, addr: string, messages: readonly WireMessage[]): void {
    if (!this.#running && !this.#table.leaving) return;
    const header = this.#header();
    const version = this.#gate.versionFor(to);
    let used = frameOverhead(this.#keyring) + this.#gate.envelopeBytes(version, header);
    for (const m of messages) used += m.cost(version);
    const limit = retransmitLimit(this.config.retransmitMult, this.#table.liveCount());
    const piggyback = this.#broadcasts.take(this.config.maxPacketBytes - used, version, limit);
    if (messages.length === 0 && piggyback.length === 0) return;
    this.#transport.sendPacket(addr, this.#gate.seal(header, to, [...messages, ...piggyback], false, version));
  }

  #makeProbeHost(): ProbeHost {
    return {
      clock: this.#clock,
      random: this.#random,
      selfName: this.name,
      acks: this.#acks,
      nextSeq: () => this.#nextSeq(),
      probeTimeoutMs: () => this.#awareness.scale(this.config.probeTimeoutMs),
      probeIntervalMs: () => this.#awareness.scale(this.config.probeIntervalMs),
      indirectChecks: () => this.config.indirectChecks,
      sampleMembers: (count, eligible) => this.#table.sample(count, this.#random, eligible),
      pingTo: (target, seq) => {
        const msgs = [new WireMessage({ k: 'ping', seq, target: target.name })];
        // Lifeguard buddy system: tell a suspect directly, so it can refute before the timeout.
        if (target.state === 'suspect')
          msgs.push(new WireMessage({ k: 'suspect', name: target.name, inc: target.incarnation, by: this.name }));
        this.#send(target.name, target.addr, msgs);
      },
      pingReqTo: (via, target, seq) =>
        this.#send(via.name, via.addr, [
          new WireMessage({ k: 'ping-req', seq, target: target.name, targetAddr: target.addr }),
        ]),
      awarenessDelta: (d) => this.#awareness.applyDelta(d),
      suspect: (target) => {
        const current = this.#table.get(target.name);
        // Accusing a member that is already suspect counts as our independent confirmation (Lifeguard).
        if (current && (current.state === 'alive' || current.state === 'suspect')) {
          this.#updates.apply({ k: 'suspect', name: target.name, inc: current.incarnation, by: this.name });
        }
      },
    };
  }

  #nextSeq(): number {
    this.#seq = (this.#seq + 1) % Number.MAX_SAFE_INTEGER;
    return this.#seq;
  }
}

function viewOf(m: Member, nowMs: number): MemberView {
  return {
    name: m.name,
    addr: m.addr,
    incarnation: m.incarnation,
    state: m.state,
    ageSeconds: Math.max(0, (nowMs - m.stateChangedAtMs) / 1000),
  };
}
