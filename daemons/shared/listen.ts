import type { Server } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * Binds `server` and resolves with the bound address, or rejects with the bind error (EADDRINUSE, EACCES) instead of
 * letting it surface later as an unhandled 'error' event. The one-shot error listener is removed once bound, so a
 * later runtime error reaches the server's own handlers. HTTP, HTTPS and TLS servers are all net.Servers.
 * `reusePort` (SO_REUSEPORT, Linux) lets several gateway workers bind the same port; the kernel spreads connections.
 */
export async function listen(server: Server, port: number, host: string, reusePort = false): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, ...(reusePort ? { reusePort: true } : {}) }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}
