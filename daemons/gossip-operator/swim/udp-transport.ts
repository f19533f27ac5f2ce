// Real network transport: UDP datagrams on node:dgram and push-pull over TCP on the same port number, so one
// "host:port" names a member for both (as in memberlist). TCP messages are length-prefixed (4 bytes, big endian)
// and bounded; a peer that sends more, or too slowly, is cut off.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, connect, isIP, type Server, type Socket } from 'node:net';
import { formatAddress, parseAddress } from './address.ts';
import { emptyStats, type PacketHandler, type StreamDropHandler, type StreamHandler, type Transport, type TransportStats } from './transport.ts';

export interface UdpTransportOptions {
  /** Bind address; an IP literal. "127.0.0.1" in tests. */
  readonly bindHost: string;
  /** 0 picks a free port (the same number for UDP and TCP). */
  readonly bindPort: number;
  /** Address advertised to peers when it differs from the bind address (NAT, 0.0.0.0 binds). */
  readonly advertiseAddress?: string;
  /** Bound on an inbound stream request (framed). */
  readonly maxMessageBytes: number;
  /** Inbound streams idle longer than this are closed. */
  readonly streamTimeoutMs: number;
}

const LENGTH_BYTES = 4;

export class UdpTransport implements Transport {
  readonly stats: TransportStats = emptyStats();
  readonly #udp: UdpSocket;
  readonly #tcp: Server;
  readonly #options: UdpTransportOptions;
  readonly #localAddress: string;
  readonly #open = new Set<Socket>();
  #packetHandler: PacketHandler = () => {};
  #streamHandler: StreamHandler = async () => undefined;
  #streamDrop: StreamDropHandler = () => {};
  #closed = false;

  private constructor(udp: UdpSocket, tcp: Server, options: UdpTransportOptions, localAddress: string) {
    this.#udp = udp;
    this.#tcp = tcp;
    this.#options = options;
    this.#localAddress = localAddress;
    udp.on('message', (msg, rinfo) => {
      this.stats.packetsReceived++;
      this.stats.bytesReceived += msg.length;
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

  setStreamHandler(handler: StreamHandler): void {
    this.#streamHandler = handler;
  }

  setStreamDropHandler(handler: StreamDropHandler): void {
    this.#streamDrop = handler;
  }

  sendPacket(to: string, frame: Buffer): void {
    if (this.#closed) return;
    const addr = parseAddress(to);
    if (!addr || isIP(addr.host) === 0) return; // members carry resolved IP addresses; names were resolved at join
    this.stats.packetsSent++;
    this.stats.bytesSent += frame.length;
    this.#udp.send(frame, addr.port, addr.host, () => {});
  }

  request(to: string, frame: Buffer, timeoutMs: number, maxBytes: number): Promise<Buffer> {
    const addr = parseAddress(to);
    if (!addr) return Promise.reject(new Error(`bad address ${JSON.stringify(to)}`));
    if (this.#closed) return Promise.reject(new Error('transport closed'));
    this.stats.streamsOpened++;
    return new Promise<Buffer>((resolve, reject) => {
      const socket = connect({ host: addr.host, port: addr.port });
      this.#open.add(socket);
      const timer = setTimeout(() => socket.destroy(new Error(`push-pull with ${to} timed out after ${timeoutMs} ms`)), timeoutMs);
      timer.unref();
      const reader = new FrameReader(maxBytes);
      socket.setNoDelay(true);
      socket.on('connect', () => {
        this.stats.bytesSent += LENGTH_BYTES + frame.length;
        socket.write(Buffer.concat([lengthPrefix(frame.length), frame]));
      });
      socket.on('data', (chunk) => {
        this.stats.bytesReceived += chunk.length;
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
    this.#open.add(socket);
    socket.setNoDelay(true);
    const from = formatAddress(socket.remoteAddress ?? '?', socket.remotePort ?? 0);
    const reader = new FrameReader(this.#options.maxMessageBytes);
    socket.setTimeout(this.#options.streamTimeoutMs, () => socket.destroy());
    socket.on('error', () => {});
    socket.on('close', () => this.#open.delete(socket));
    socket.on('data', (chunk) => {
      this.stats.bytesReceived += chunk.length;
      const r = reader.push(chunk);
      if (r === 'oversized') {
        this.#streamDrop('oversized', `stream from ${from} above ${this.#options.maxMessageBytes} bytes`);
        socket.destroy();
        return;
      }
      if (!r) return;
      socket.pause();
      this.#streamHandler(r, from).then(
        (reply) => {
          if (!reply || socket.destroyed) {
            socket.destroy();
            return;
          }
          this.stats.bytesSent += LENGTH_BYTES + reply.length;
          socket.end(Buffer.concat([lengthPrefix(reply.length), reply]));
        },
        (err: unknown) => {
          this.#streamDrop('push_pull_failed', `stream from ${from}: ${err instanceof Error ? err.message : String(err)}`);
          socket.destroy();
        },
      );
    });
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

/** Accumulates one length-prefixed frame; refuses lengths above the bound before buffering them. */
class FrameReader {
  readonly #max: number;
  #chunks: Buffer[] = [];
  #have = 0;
  #want = -1;

  constructor(max: number) {
    this.#max = max;
  }

  push(chunk: Buffer): Buffer | 'oversized' | undefined {
    this.#chunks.push(chunk);
    this.#have += chunk.length;
    if (this.#want < 0 && this.#have >= LENGTH_BYTES) {
      const all = Buffer.concat(this.#chunks);
      this.#want = all.readUInt32BE(0);
      if (this.#want > this.#max) return 'oversized';
      this.#chunks = [all];
    }
    if (this.#want >= 0 && this.#have > LENGTH_BYTES + this.#want) return 'oversized';
    if (this.#want >= 0 && this.#have === LENGTH_BYTES + this.#want) {
      return Buffer.concat(this.#chunks).subarray(LENGTH_BYTES);
    }
    return undefined;
  }
}
