// The transport contract: unreliable datagrams for the protocol, plus one request/response stream exchange for
// push-pull. Frames are opaque here (already sealed); implementations: udp-transport.ts (dgram + TCP on the same
// port number) and memory-transport.ts (in-process, for tests and the local grid runner).
import type { RandomSource } from './clock.ts';

/** Called synchronously for each datagram; `receivedAtMs` is taken at receipt so RTTs stay honest. Must not throw. */
export type PacketHandler = (frame: Buffer, from: string, receivedAtMs: number) => void;
/** Answers one push-pull request; undefined closes the stream without an answer. */
export type StreamHandler = (frame: Buffer, from: string) => Promise<Buffer | undefined>;
/** Told when the transport itself cuts off an inbound stream (too large, handler failure). Must not throw. */
export type StreamDropHandler = (reason: 'oversized' | 'push_pull_failed' | 'stream_limit' | 'stream_deadline', detail: string) => void;

export interface TransportStats {
  packetsSent: number;
  bytesSent: number;
  packetsReceived: number;
  bytesReceived: number;
  streamsOpened: number;
}

export interface Transport {
  /** The address peers reach us on, "host:port". */
  readonly localAddress: string;
  readonly stats: TransportStats;
  sendPacket(to: string, frame: Buffer): void;
  setPacketHandler(handler: PacketHandler): void;
  setStreamHandler(handler: StreamHandler): void;
  setStreamDropHandler(handler: StreamDropHandler): void;
  /** One framed request and its framed response; rejects on timeout, refusal or a response above maxBytes. */
  request(to: string, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer>;
  close(): Promise<void>;
}

export function emptyStats(): TransportStats {
  return { packetsSent: 0, bytesSent: 0, packetsReceived: 0, bytesReceived: 0, streamsOpened: 0 };
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

  setStreamHandler(handler: StreamHandler): void {
    this.#inner.setStreamHandler(handler);
  }

  setStreamDropHandler(handler: StreamDropHandler): void {
    this.#inner.setStreamDropHandler(handler);
  }

  request(to: string, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    if (this.blocked.has(to)) return Promise.reject(new Error(`partitioned from ${to} (test fault)`));
    return this.#inner.request(to, frame, timeoutMs, maxBytes);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
