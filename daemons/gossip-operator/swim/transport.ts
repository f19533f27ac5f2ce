// The transport contract: unreliable datagrams for the protocol, plus one request/response stream exchange for
// push-pull. A stream opens with a small frame that is authenticated before the transport buffers anything larger,
// so the unauthenticated bytes held per stream are bounded by the opening frame's bound, not maxMessageBytes. Frames
// are opaque here (already sealed). Implementations: udp-transport.ts (dgram + TCP on the same port number), which
// every operator runs, the local grid's included, and memory-transport.ts (in-process, for tests and simulations).
import type { RandomSource } from './clock.ts';

/** Called synchronously for each datagram; `receivedAtMs` is taken at receipt so RTTs stay honest. Must not throw. */
export type PacketHandler = (frame: Buffer, from: string, receivedAtMs: number) => void;
/**
 * Checks the opening frame of an inbound stream: the exact byte length of the request frame the peer may send next,
 * or undefined to close the stream. Runs before anything larger than the opening bound is buffered. Must not throw.
 */
export type StreamOpenHandler = (frame: Buffer, from: string) => number | undefined;
/** Answers one push-pull request; undefined closes the stream without an answer. */
export type StreamHandler = (frame: Buffer, from: string) => Promise<Buffer | undefined>;
/** Told when the transport itself cuts off an inbound stream (too large, handler failure). Must not throw. */
export type StreamDropHandler = (
  reason: 'oversized' | 'push_pull_failed' | 'stream_limit' | 'stream_deadline' | 'bad_frame',
  detail: string,
) => void;

export interface TransportStats {
  packetsSent: number;
  bytesSent: number;
  packetsReceived: number;
  bytesReceived: number;
  streamsOpened: number;
  /** Inbound streams open now (authenticated or not) and the bytes they buffer now: what the stream bounds cap. */
  inboundStreams: number;
  inboundBufferedBytes: number;
}

export interface Transport {
  /** The address peers reach us on, "host:port". */
  readonly localAddress: string;
  readonly stats: TransportStats;
  sendPacket(to: string, frame: Buffer): void;
  setPacketHandler(handler: PacketHandler): void;
  setStreamHandler(open: StreamOpenHandler, answer: StreamHandler): void;
  setStreamDropHandler(handler: StreamDropHandler): void;
  /** Opening frame, then one framed request, and its framed response; rejects on timeout, refusal or a response above maxBytes. */
  request(to: string, opening: Buffer, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer>;
  close(): Promise<void>;
}

export function emptyStats(): TransportStats {
  return {
    packetsSent: 0,
    bytesSent: 0,
    packetsReceived: 0,
    bytesReceived: 0,
    streamsOpened: 0,
    inboundStreams: 0,
    inboundBufferedBytes: 0,
  };
}

/**
 * Test hook: a transport wrapper that drops outbound traffic to blocked addresses (partitions: block each half
 * from the other on both sides) and a random fraction of outbound datagrams (packet loss). Streams to a blocked
 * address fail like an unreachable host.
 */
export class FaultyTransport implements Transport {
  readonly #inner: Transport;
  readonly #random: RandomSource;
  readonly blocked = new Set<string>();
  lossRate = 0;
  droppedPackets = 0;

  constructor(inner: Transport, random: RandomSource = Math.random) {
    this.#inner = inner;
    this.#random = random;
  }

  get localAddress(): string {
    return this.#inner.localAddress;
  }

  get stats(): TransportStats {
    return this.#inner.stats;
  }

  sendPacket(to: string, frame: Buffer): void {
    if (this.blocked.has(to) || (this.lossRate > 0 && this.#random() < this.lossRate)) {
      this.droppedPackets++;
      return;
    }
    this.#inner.sendPacket(to, frame);
  }

  setPacketHandler(handler: PacketHandler): void {
    this.#inner.setPacketHandler(handler);
  }

  setStreamHandler(open: StreamOpenHandler, answer: StreamHandler): void {
    this.#inner.setStreamHandler(open, answer);
  }

  setStreamDropHandler(handler: StreamDropHandler): void {
    this.#inner.setStreamDropHandler(handler);
  }

  request(to: string, opening: Buffer, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    if (this.blocked.has(to)) return Promise.reject(new Error(`partitioned from ${to} (test fault)`));
    return this.#inner.request(to, opening, frame, timeoutMs, maxBytes);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
