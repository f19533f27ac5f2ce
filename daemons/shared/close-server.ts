// Graceful close of an HTTP(S) listener: no new connections, requests already running finish, then whatever is
// left is cut. http.Server.close() alone waits forever on a keep-alive client, and closeAllConnections() alone cuts a
// request the daemon had accepted (an enrollment redeem half done, an age report half applied).
import type { Server } from 'node:http';

/**
 * What a daemon's listeners give requests already running when they close (an enrollment redeem, an age or spend
 * report: each a few milliseconds of work), so the whole stop fits `podman stop`'s 3 s target.
 */
export const LISTENER_GRACE_MS = 1_000;

/** How often idle keep-alive connections are closed while requests drain (a connection goes idle after its answer). */
const IDLE_SWEEP_MS = 50;

/** Stops accepting at once; resolves when every connection has ended, or after `graceMs` by cutting the rest. */
export function closeServer(
  server: Pick<Server, 'close' | 'closeAllConnections' | 'closeIdleConnections'>,
  graceMs = LISTENER_GRACE_MS,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let sweep: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
    deadline.unref();
    server.close(() => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
    sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    sweep.unref();
  });
}
