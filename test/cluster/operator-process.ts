// The real gossip-operator program as a child process (`npm exec -- node daemons/gossip-operator/main.ts …`),
// started in its own process group so npm and the node it runs are stopped together, by that group's id only.
// Its JSON log lines are kept for assertions; its admin port is read from the "gossip-operator running" line.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { adminGet, stopProcessGroup } from './process-group.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface OperatorProcess {
  readonly pid: number;
  readonly lines: Record<string, unknown>[];
  /** Everything the process wrote, stdout and stderr, as received (for leak checks). */
  output(): string;
  exited(): boolean;
  exitCode(): number | null | undefined;
  /** The admin port, once the daemon has logged "gossip-operator running". */
  port(): number | undefined;
  get(path: string): Promise<{ status: number; body: string }>;
  status(): Promise<Record<string, any>>;
  /** Lines whose msg equals `msg`. */
  logged(msg: string): Record<string, unknown>[];
  /** SIGTERM to the group, SIGKILL after 15 s; resolves once no process of the group is left. */
  stop(): Promise<number | null>;
}

export function startOperatorProcess(args: readonly string[], env: Record<string, string>): OperatorProcess {
  const child: ChildProcess = spawn('npm', ['exec', '--', 'node', 'daemons/gossip-operator/main.ts', ...args], {
    cwd: REPO_ROOT,
    // Only what npm needs plus the daemon's settings: the kubeconfig comes from `env`, never from the runner.
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  if (child.pid === undefined) throw new Error('npm exec did not start');
  const pid = child.pid;
  const lines: Record<string, unknown>[] = [];
  let raw = '';
  let rest = '';
  let code: number | null | undefined;
  const exit = new Promise<number | null>((resolve) =>
    child.once('exit', (c, signal) => {
      code = c ?? (signal === null ? null : 128);
      resolve(code);
    }),
  );
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    raw += chunk;
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const line of parts) {
      if (line.trim() === '') continue;
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ msg: line, unparsed: true });
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    raw += chunk;
  });
  const port = (): number | undefined => {
    const line = lines.find((l) => l['msg'] === 'gossip-operator running' && typeof l['admin'] === 'string');
    const match = line === undefined ? null : /:(\d+)$/.exec(line['admin'] as string);
    return match === null ? undefined : Number(match[1]);
  };
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const p = port();
    if (p === undefined) throw new Error('gossip-operator has not logged its admin port yet');
    return adminGet(p, path);
  };
  return {
    pid,
    lines,
    output: () => raw,
    exited: () => code !== undefined,
    exitCode: () => code,
    port,
    get,
    status: async () => JSON.parse((await get('/status')).body) as Record<string, any>,
    logged: (msg) => lines.filter((l) => l['msg'] === msg),
    async stop() {
      await stopProcessGroup(pid, exit, code === undefined, 'gossip-operator', 15000);
      return code ?? null;
    },
  };
}

/**
 * A loopback port free for both TCP and UDP a moment ago: SWIM uses one port for both, and the operator's other
 * listeners (admin, signals) take any such port too. Takes one the kernel hands out for TCP and checks UDP binds it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const p = (server.address() as { port: number }).port;
        server.close(() => resolve(p));
      });
    });
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createSocket('udp4');
      socket.once('error', () => resolve(false));
      socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}
