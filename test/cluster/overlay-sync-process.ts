// The real overlay-sync program as a child process (`npm exec -- node daemons/overlay-sync/main.ts …`), started
// in its own process group so npm and the node it runs are stopped together, by that group's id only.
// Its JSON log lines are kept for assertions; its admin port is read from the "health server listening" line.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { adminGet, stopProcessGroup } from './process-group.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface OverlaySyncProcess {
  readonly pid: number;
  readonly lines: Record<string, unknown>[];
  stderr(): string;
  exited(): boolean;
  /** The admin port (health_addr 127.0.0.1:0), once the daemon has logged it. */
  port(): number | undefined;
  get(path: string): Promise<{ status: number; body: string }>;
  status(): Promise<Record<string, any>>;
  stop(): Promise<number | null>;
}

export function startOverlaySyncProcess(args: readonly string[], env: Record<string, string>): OverlaySyncProcess {
  const child: ChildProcess = spawn('npm', ['exec', '--', 'node', 'daemons/overlay-sync/main.ts', ...args], {
    cwd: REPO_ROOT,
    // Only what npm needs to find node_modules/.bin, plus the daemon's settings: no KUBECONFIG from the runner.
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  if (child.pid === undefined) throw new Error('npm exec did not start');
  const pid = child.pid;
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  let rest = '';
  let exitCode: number | null | undefined;
  const exit = new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => {
      exitCode = code ?? (signal === null ? null : 128);
      resolve(exitCode);
    }),
  );
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
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
    stderr += chunk;
  });
  const port = (): number | undefined => {
    const line = lines.find((l) => typeof l['health_port'] === 'number');
    return line === undefined ? undefined : (line['health_port'] as number);
  };
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const p = port();
    if (p === undefined) throw new Error('overlay-sync has not logged its admin port yet');
    return adminGet(p, path);
  };
  return {
    pid,
    lines,
    stderr: () => stderr,
    exited: () => exitCode !== undefined,
    port,
    get,
    status: async () => JSON.parse((await get('/status')).body) as Record<string, any>,
    async stop() {
      await stopProcessGroup(pid, exit, exitCode === undefined, 'overlay-sync', 10000);
      return exitCode ?? null;
    },
  };
}
