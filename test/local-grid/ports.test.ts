// The local grid's ports come from below the kernel's ephemeral range, so the outgoing connections its daemons make
// while the others start (each given a local port from that range) cannot take a number handed out and not yet bound.
// Each port handed out binds, for TCP and (gossip) for UDP too, and a PortPool never hands out one twice.
import { createSocket } from 'node:dgram';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { PortPool, freeTcpPort } from '../../daemons/local-grid/ports.ts';

const RANGE = '/proc/sys/net/ipv4/ip_local_port_range';

const bindTcp = (port: number): Promise<void> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });

const bindUdp = (port: number): Promise<void> =>
  new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    socket.once('error', reject);
    socket.bind(port, '127.0.0.1', () => socket.close(() => resolve()));
  });

describe('local grid ports', () => {
  it.skipIf(!existsSync(RANGE))('are below the ephemeral range and bind', async () => {
    const [low] = readFileSync(RANGE, 'utf8').trim().split(/\s+/).map(Number);
    for (let i = 0; i < 20; i++) {
      const port = await freeTcpPort();
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(low!);
      await bindTcp(port);
    }
  });

  it('a pool hands out each port once, gossip ports free for TCP and UDP', async () => {
    const pool = new PortPool();
    const ports: number[] = [];
    for (let i = 0; i < 10; i++) ports.push(await pool.tcp());
    for (let i = 0; i < 10; i++) {
      const port = await pool.gossip();
      await bindTcp(port);
      await bindUdp(port);
      ports.push(port);
    }
    expect(new Set(ports).size).toBe(ports.length);
  });
});
