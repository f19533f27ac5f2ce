// In-process transport: any number of members in one process, no sockets. Datagrams are delivered on a later
// turn of the event loop (never re-entrantly), like a network. Used by protocol tests that need no kernel and
// by the local grid runner's single-process mode.
import {
  emptyStats,
  type PacketHandler,
  type StreamHandler,
  type StreamOpenHandler,
  type Transport,
  type TransportStats,
} from './transport.ts';

export class MemoryNetwork {
  readonly #nodes = new Map<string, MemoryTransport>();
  #nextPort = 1;

  /**
   * A transport with a loopback-range address ("127.77.x.y:7946"): an IP literal, so seeds need no DNS, and
   * harmless should it ever reach a real socket.
   */
  createTransport(): MemoryTransport {
    const n = this.#nextPort++;
    const address = `127.77.${(n >> 8) & 255}.${n & 255}:7946`;
    const t = new MemoryTransport(this, address);
    this.#nodes.set(address, t);
    return t;
  }

  /** @internal */
  lookup(address: string): MemoryTransport | undefined {
    return this.#nodes.get(address);
  }

  /** @internal */
  remove(address: string): void {
    this.#nodes.delete(address);
  }
}

export class MemoryTransport implements Transport {
  readonly stats: TransportStats = emptyStats();
  readonly #network: MemoryNetwork;
  readonly #address: string;
  #packetHandler: PacketHandler = () => {};
  #streamOpen: StreamOpenHandler = () => undefined;
  #streamHandler: StreamHandler = async () => undefined;
  #closed = false;

  constructor(network: MemoryNetwork, address: string) {
    this.#network = network;
    this.#address = address;
  }

  get localAddress(): string {
    return this.#address;
  }

  setPacketHandler(handler: PacketHandler): void {
    this.#packetHandler = handler;
  }

  setStreamHandler(open: StreamOpenHandler, answer: StreamHandler): void {
    this.#streamOpen = open;
    this.#streamHandler = answer;
  }

  /** In-process streams are never cut off by the transport. */
  setStreamDropHandler(): void {}

  sendPacket(to: string, frame: Buffer): void {
    if (this.#closed) return;
    this.stats.packetsSent++;
    this.stats.bytesSent += frame.length;
    const copy = Buffer.from(frame);
    setImmediate(() => this.#network.lookup(to)?.deliver(copy, this.#address));
  }

  /** @internal */
  deliver(frame: Buffer, from: string): void {
    if (this.#closed) return;
    this.stats.packetsReceived++;
    this.stats.bytesReceived += frame.length;
    this.#packetHandler(frame, from, Date.now());
  }

  async request(to: string, opening: Buffer, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    const peer = this.#network.lookup(to);
    if (this.#closed || !peer) throw new Error(`no member listening at ${to}`);
    if (frame.length > maxBytes) throw new Error(`request above ${maxBytes} bytes`);
    this.stats.streamsOpened++;
    this.stats.bytesSent += frame.length;
    const reply = await withTimeout(peer.answer(Buffer.from(opening), Buffer.from(frame), this.#address), timeoutMs);
    if (!reply) throw new Error(`${to} closed without a response`);
    if (reply.length > maxBytes) throw new Error(`response above ${maxBytes} bytes`);
    this.stats.bytesReceived += reply.length;
    return reply;
  }

  /** @internal */
  answer(opening: Buffer, frame: Buffer, from: string): Promise<Buffer | undefined> {
    if (this.#closed || this.#streamOpen(opening, from) !== frame.length) return Promise.resolve(undefined);
    return this.#streamHandler(frame, from);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#network.remove(this.#address);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    t.unref();
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
