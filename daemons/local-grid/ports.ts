/**
 * Free loopback ports for the local grid. Each is chosen below the kernel's ephemeral range and checked by binding it;
 * the window before the daemon binds it again is then safe from the usual thief. The grid's daemons make outgoing
 * connections while the others start, and the kernel gives each of those a local port from the ephemeral range (as it
 * does a bind to port 0): a number picked from that range and released was taken that way once (CI: a provider
 * gateway's listen failed with EADDRINUSE). A daemon that still loses a race fails its start with a clear EADDRINUSE
 * that the supervisor reports. Each port is chosen once per start of the grid and written into the process's arguments
 * and config, so a process the supervisor restarts binds the same numbers again (Node listens with SO_REUSEADDR, so
 * connections left in TIME_WAIT do not block it); if something else took the number meanwhile, the restart fails with
 * EADDRINUSE and is retried with backoff.
 */
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The lowest port handed out below the ephemeral range: above the registered services most machines run. */
const LOWEST = 10_000;

/** The first port of Linux's ephemeral range, or undefined where it cannot be read (then the OS picks, as port 0). */
function ephemeralStart(): number | undefined {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : undefined;
  } catch {
    return undefined;
  }
}

const EPHEMERAL_START = ephemeralStart();

/** A candidate below the ephemeral range, or 0 (the OS picks) when there is no room of 1 000 ports there. */
function candidate(): number {
  if (EPHEMERAL_START === undefined || EPHEMERAL_START - LOWEST < 1_000) return 0;
  return LOWEST + Math.floor(Math.random() * (EPHEMERAL_START - LOWEST));
}

async function bindsTcp(port: number, host: string): Promise<number | undefined> {
  const server = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, host, () => resolve(true));
  });
  if (!bound) return undefined;
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return address === null || typeof address === 'string' ? undefined : address.port;
}

export async function freeTcpPort(host = '127.0.0.1'): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindsTcp(candidate(), host);
    if (port !== undefined) return port;
  }
  throw new Error(`no free TCP port on ${host} after 50 attempts`);
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
