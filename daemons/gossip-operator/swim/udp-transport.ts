// Real network transport: UDP datagrams on node:dgram and push-pull over TCP on the same port number, so one
// "host:port" names a member for both (as in memberlist). TCP messages are length-prefixed (4 bytes, big endian).
// An inbound stream is bounded before and after authentication, so unauthenticated or trickling connections cannot make
// a member buffer the frames they declare (test/gossip/push-pull-exhaustion.test.ts): its opening frame may be at most
// maxOpeningBytes and is checked (decrypted, replay-checked) before the request frame is buffered, and only then up to
// the length the opening frame declared (at most maxMessageBytes); the whole exchange has one deadline; at most
// maxPendingStreams unauthenticated streams are held (a new one evicts the oldest, so a flood of idle connections
// cannot lock a real peer out) and at most maxInboundStreams authenticated ones.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, connect, isIP, type Server, type Socket } from 'node:net';
import { formatAddress, parseAddress } from './address.ts';
import type { SwimConfig } from './config.ts';
import {
  emptyStats,
  type PacketHandler,
  type StreamDropHandler,
  type StreamHandler,
  type StreamOpenHandler,
  type Transport,
  type TransportStats,
} from './transport.ts';

export interface UdpTransportOptions {
  /** Bind address; an IP literal. "127.0.0.1" in tests. */
  readonly bindHost: string;
  /** 0 picks a free port (the same number for UDP and TCP). */
  readonly bindPort: number;
  /** Address advertised to peers when it differs from the bind address (NAT, 0.0.0.0 binds). */
  readonly advertiseAddress?: string;
  /** Bound on an inbound stream request (framed), accepted only after the opening frame authenticated. */
  readonly maxMessageBytes: number;
  /** Bound on an inbound stream's opening frame: the most an unauthenticated peer makes us buffer per stream. */
  readonly maxOpeningBytes: number;
  /** Deadline of a whole inbound exchange, from accept to the answer written (not an idle timer). */
  readonly streamDeadlineMs: number;
  /** Unauthenticated inbound streams held at once; a new connection beyond it evicts the oldest one. */
  readonly maxPendingStreams: number;
  /** Authenticated inbound streams served at once; beyond it a stream is closed after its opening frame. */
  readonly maxInboundStreams: number;
}

/** The stream bounds of a SWIM configuration; the whole exchange shares the push-pull deadline. */
export function transportBounds(
  c: SwimConfig,
): Pick<
  UdpTransportOptions,
  'maxMessageBytes' | 'maxOpeningBytes' | 'streamDeadlineMs' | 'maxPendingStreams' | 'maxInboundStreams'
> {
  return {
    maxMessageBytes: c.maxMessageBytes,
    maxOpeningBytes: c.maxOpeningBytes,
    streamDeadlineMs: c.pushPullTimeoutMs,
    maxPendingStreams: c.maxPendingStreams,
    maxInboundStreams: c.maxInboundStreams,
  };
}

const LENGTH_BYTES = 4;

export class UdpTransport implements Transport {
  readonly #stats: TransportStats = emptyStats();
  readonly #udp: UdpSocket;
  readonly #tcp: Server;
  readonly #options: UdpTransportOptions;
  readonly #localAddress: string;
  readonly #open = new Set<Socket>();
  /** Unauthenticated inbound streams in arrival order (Set iteration order), for eviction of the oldest. */
  readonly #pending = new Set<Socket>();
  readonly #inbound = new Set<Socket>();
  readonly #buffered = new Map<Socket, FrameReader>();
  #packetHandler: PacketHandler = () => {};
  #streamOpen: StreamOpenHandler = () => undefined;
  #streamHandler: StreamHandler = async () => undefined;
  #streamDrop: StreamDropHandler = () => {};
  #closed = false;

  private constructor(udp: UdpSocket, tcp: Server, options: UdpTransportOptions, localAddress: string) {
    this.#udp = udp;
    this.#tcp = tcp;
    this.#options = options;
    this.#localAddress = localAddress;
    udp.on('message', (msg, rinfo) => {
      this.#stats.packetsReceived++;
      this.#stats.bytesReceived += msg.length;
      this.#packetHandler(msg, formatAddress(rinfo.address, rinfo.port), Date.now());
    });
    // ICMP unreachable and friends surface here; UDP is unreliable by contract, so they are not fatal.
    udp.on('error', () => {});
    tcp.on('connection', (socket) => this.#serve(socket));
    tcp.on('error', () => {});
  }

  /** Binds UDP and TCP on one port number (retrying when port 0 gives a TCP port whose UDP twin is taken). */
  static async bind(options: UdpTransportOptions): Promise<UdpTransport> {
    const family = isIP(options.bindHost);
    if (family === 0) throw new Error(`bindHost "${options.bindHost}" must be an IP address literal`);
    let lastError: unknown;
    for (let attempt = 0; attempt < 20; attempt++) {
      const tcp = createServer();
      try {
        await new Promise<void>((resolve, reject) => {
          tcp.once('error', reject);
          tcp.listen({ host: options.bindHost, port: options.bindPort, exclusive: true }, () => resolve());
        });
      } catch (err) {
        tcp.close();
        throw err;
      }
      const port = (tcp.address() as { port: number }).port;
      const udp = createSocket({ type: family === 6 ? 'udp6' : 'udp4' });
      try {
        await new Promise<void>((resolve, reject) => {
          udp.once('error', reject);
          udp.bind({ address: options.bindHost, port, exclusive: true }, () => resolve());
        });
      } catch (err) {
        lastError = err;
        udp.close();
        await new Promise<void>((r) => tcp.close(() => r()));
        if (options.bindPort !== 0) throw err;
        continue;
      }
      udp.removeAllListeners('error');
      const advertised = options.advertiseAddress ?? formatAddress(options.bindHost, port);
      return new UdpTransport(udp, tcp, options, advertised);
    }
    throw lastError instanceof Error ? lastError : new Error('could not bind UDP and TCP on one port');
  }

  get localAddress(): string {
    return this.#localAddress;
  }

  setPacketHandler(handler: PacketHandler): void {
    this.#packetHandler = handler;
  }

  setStreamHandler(open: StreamOpenHandler, answer: StreamHandler): void {
    this.#streamOpen = open;
    this.#streamHandler = answer;
  }

  get stats(): TransportStats {
    let buffered = 0;
    for (const r of this.#buffered.values()) buffered += r.buffered;
    return { ...this.#stats, inboundStreams: this.#pending.size + this.#inbound.size, inboundBufferedBytes: buffered };
  }

  setStreamDropHandler(handler: StreamDropHandler): void {
    this.#streamDrop = handler;
  }

  sendPacket(to: string, frame: Buffer): void {
    if (this.#closed) return;
    const addr = parseAddress(to);
    if (!addr || isIP(addr.host) === 0) return; // members carry resolved IP addresses; names were resolved at join
    this.#stats.packetsSent++;
    this.#stats.bytesSent += frame.length;
    this.#udp.send(frame, addr.port, addr.host, () => {});
  }

  request(to: string, opening: Buffer, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    const addr = parseAddress(to);
    if (!addr) return Promise.reject(new Error(`bad address ${JSON.stringify(to)}`));
    if (this.#closed) return Promise.reject(new Error('transport closed'));
    this.#stats.streamsOpened++;
    return new Promise<Buffer>((resolve, reject) => {
      const socket = connect({ host: addr.host, port: addr.port });
      this.#open.add(socket);
      const timer = setTimeout(
        () => socket.destroy(new Error(`push-pull with ${to} timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
      timer.unref();
      const reader = new FrameReader(maxBytes, true);
      socket.setNoDelay(true);
      socket.on('connect', () => {
        this.#stats.bytesSent += 2 * LENGTH_BYTES + opening.length + frame.length;
        socket.write(Buffer.concat([lengthPrefix(opening.length), opening, lengthPrefix(frame.length), frame]));
      });
      socket.on('data', (chunk) => {
        this.#stats.bytesReceived += chunk.length;
        const r = reader.push(chunk);
        if (r === 'oversized') socket.destroy(new Error(`push-pull response from ${to} exceeds ${maxBytes} bytes`));
        else if (r) {
          clearTimeout(timer);
          socket.end();
          resolve(r);
        }
      });
      socket.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      socket.on('close', () => {
        clearTimeout(timer);
        this.#open.delete(socket);
        reject(new Error(`push-pull with ${to} closed without a response`));
      });
    });
  }

  #serve(socket: Socket): void {
    if (this.#closed) {
      socket.destroy();
      return;
    }
    const o = this.#options;
    const from = formatAddress(socket.remoteAddress ?? '?', socket.remotePort ?? 0);
    if (this.#pending.size >= o.maxPendingStreams) {
      const oldest = this.#pending.values().next().value as Socket;
      this.#streamDrop(
        'stream_limit',
        `${o.maxPendingStreams} unauthenticated streams open; closed the oldest for one from ${from}`,
      );
      // Out of the set now, not at its 'close' event: the next arrival must evict the next oldest.
      this.#pending.delete(oldest);
      oldest.destroy();
    }
    this.#open.add(socket);
    this.#pending.add(socket);
    socket.setNoDelay(true);
    let reader = new FrameReader(o.maxOpeningBytes);
    this.#buffered.set(socket, reader);
    let authenticated = false;
    const deadline = setTimeout(() => {
      this.#streamDrop('stream_deadline', `stream from ${from} not finished within ${o.streamDeadlineMs} ms`);
      socket.destroy();
    }, o.streamDeadlineMs);
    deadline.unref();
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(deadline);
      this.#open.delete(socket);
      this.#pending.delete(socket);
      this.#inbound.delete(socket);
      this.#buffered.delete(socket);
    });
    const onData = (chunk: Buffer): void => {
      this.#stats.bytesReceived += chunk.length;
      let r = reader.push(chunk);
      if (r === 'oversized') {
        this.#streamDrop(
          'oversized',
          `stream ${authenticated ? 'request' : 'opening frame'} from ${from} above ${reader.max} bytes`,
        );
        socket.destroy();
        return;
      }
      if (!r) return;
      if (!authenticated) {
        const allowed = this.#streamOpen(r, from);
        if (allowed === undefined || allowed > o.maxMessageBytes) {
          socket.destroy();
          return;
        }
        this.#pending.delete(socket);
        if (this.#inbound.size >= o.maxInboundStreams) {
          this.#streamDrop(
            'stream_limit',
            `${o.maxInboundStreams} push-pull streams in progress; closed one from ${from}`,
          );
          socket.destroy();
          return;
        }
        this.#inbound.add(socket);
        authenticated = true;
        const rest = reader.rest();
        reader = new FrameReader(allowed, true);
        this.#buffered.set(socket, reader);
        r = reader.push(rest);
        if (r === 'oversized') {
          this.#streamDrop(
            'oversized',
            `stream request from ${from} above the ${allowed} bytes its opening frame declared`,
          );
          socket.destroy();
          return;
        }
        if (!r) return;
      }
      socket.off('data', onData);
      socket.pause();
      this.#buffered.delete(socket);
      this.#streamHandler(r, from).then(
        (reply) => {
          if (!reply || socket.destroyed) {
            socket.destroy();
            return;
          }
          this.#stats.bytesSent += LENGTH_BYTES + reply.length;
          socket.end(Buffer.concat([lengthPrefix(reply.length), reply]));
        },
        (err: unknown) => {
          this.#streamDrop(
            'push_pull_failed',
            `stream from ${from}: ${err instanceof Error ? err.message : String(err)}`,
          );
          socket.destroy();
        },
      );
    };
    socket.on('data', onData);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#open) s.destroy();
    await Promise.all([
      new Promise<void>((r) => this.#udp.close(() => r())),
      new Promise<void>((r) => this.#tcp.close(() => r())),
    ]);
  }
}

function lengthPrefix(n: number): Buffer {
  const b = Buffer.alloc(LENGTH_BYTES);
  b.writeUInt32BE(n);
  return b;
}

/**
 * Accumulates one length-prefixed frame; refuses lengths above the bound before buffering them. Bytes after the
 * frame are kept for `rest()` (an opening frame is followed by the request), except in `exact` mode, where the
 * frame must be the last thing the peer sends.
 */
class FrameReader {
  readonly max: number;
  readonly #exact: boolean;
  #chunks: Buffer[] = [];
  #have = 0;
  #want = -1;

  constructor(max: number, exact = false) {
    this.max = max;
    this.#exact = exact;
  }

  get buffered(): number {
    return this.#have;
  }

  push(chunk: Buffer): Buffer | 'oversized' | undefined {
    // A small chunk is a view into a 64 KiB socket read buffer: keeping the view would keep all of it alive (a peer
    // trickling one byte at a time made each byte cost 64 KiB), so small chunks are copied out.
    this.#chunks.push(chunk.length < 4_096 ? Buffer.from(chunk) : chunk);
    this.#have += chunk.length;
    if (this.#want < 0 && this.#have >= LENGTH_BYTES) {
      const all = Buffer.concat(this.#chunks);
      this.#want = all.readUInt32BE(0);
      this.#chunks = [all];
      if (this.#want > this.max) return 'oversized';
    }
    if (this.#want < 0) return undefined;
    const total = LENGTH_BYTES + this.#want;
    if (this.#exact && this.#have > total) return 'oversized';
    // Unauthenticated bytes beyond the opening frame are held only until it is checked, in this same call.
    if (this.#have >= total) return Buffer.concat(this.#chunks).subarray(LENGTH_BYTES, total);
    return undefined;
  }

  /** Bytes received after the complete frame. */
  rest(): Buffer {
    const all = Buffer.concat(this.#chunks);
    return all.subarray(LENGTH_BYTES + this.#want);
  }
}
