/**
 * Free loopback ports for the local grid. The OS picks each (bind to port 0) and we release it straight away; the
 * window before the daemon binds it again is small, and a daemon that loses the race fails its start with a clear
 * EADDRINUSE that the supervisor reports. Each port is chosen once per start of the grid and written into the
 * process's arguments and config, so a process the supervisor restarts binds the same numbers again (Node listens
 * with SO_REUSEADDR, so connections left in TIME_WAIT do not block it); if something else took the number meanwhile,
 * the restart fails with EADDRINUSE and is retried with backoff.
 */
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

export async function freeTcpPort(host = '127.0.0.1'): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('could not read the bound port');
  return address.port;
}

/** A port free for both TCP and UDP (gossip uses UDP packets and TCP push-pull on the same number). */
export async function freeGossipPort(host = '127.0.0.1'): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freeTcpPort(host);
    const udp = createSocket('udp4');
    const free = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, host, () => resolve(true));
    });
    await new Promise<void>((resolve) => (free ? udp.close(() => resolve()) : resolve()));
    if (free) return port;
  }
  throw new Error('no port free for both TCP and UDP after 20 attempts');
}

/**
 * Hands out each port at most once per grid: the OS may offer a port it just released again, and two daemons of
 * one grid told the same number would fail at bind time.
 */
export class PortPool {
  readonly #given = new Set<number>();
  readonly #host: string;

  constructor(host = '127.0.0.1') {
    this.#host = host;
  }

  tcp(): Promise<number> {
    return this.#unique(() => freeTcpPort(this.#host));
  }

  gossip(): Promise<number> {
    return this.#unique(() => freeGossipPort(this.#host));
  }

  async #unique(next: () => Promise<number>): Promise<number> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await next();
      if (this.#given.has(port)) continue;
      this.#given.add(port);
      return port;
    }
    throw new Error('no unused free port after 50 attempts');
  }
}
