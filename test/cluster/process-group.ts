// Shared by the real-daemon helpers (operator-process.ts, overlay-sync-process.ts): each daemon runs under
// `npm exec` in its own process group, which is stopped as a whole and awaited until no member is left.
import { request } from 'node:http';

export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM, SIGKILL after `graceMs`; then waits until npm and the node it started are both gone. */
export async function stopProcessGroup(
  pgid: number,
  exit: Promise<unknown>,
  running: boolean,
  name: string,
  graceMs: number,
): Promise<void> {
  if (running) {
    signalGroup(pgid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(pgid, 'SIGKILL'), graceMs);
    await exit;
    clearTimeout(timer);
  }
  // npm may exit before the node it started: wait until no process of the group is left.
  const deadline = Date.now() + graceMs;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) {
      signalGroup(pgid, 'SIGKILL');
      throw new Error(`${name} process group ${pgid} still running ${graceMs / 1000} s after SIGTERM`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** GET on a daemon's admin port on loopback. */
export function adminGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
