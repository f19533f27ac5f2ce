// The node suite's long-running children (etcd, kube-apiserver, containerd, kubelet, ...): each started through
// `nsenter --net=<site netns>` (which execs the binary, so the pid is the daemon's own) with its output in a log
// file, tracked by pid, stopped with SIGTERM then SIGKILL, and awaited until the kernel reaped it. Also the helpers
// to run a short command (in the site's network namespace or not) and to poll an HTTP(S) endpoint.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface Daemon {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  readonly child: ChildProcess;
  exited: boolean;
  readonly exit: Promise<number | null>;
}

/** Every daemon not yet stopped: the last line of defence if the test process exits without a teardown. */
const live = new Set<Daemon>();
process.on('exit', () => {
  for (const d of live) if (!d.exited) d.child.kill('SIGKILL');
});

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The last `bytes` of a log file, for error messages. */
export function tail(path: string, bytes = 3000): string {
  try {
    const size = statSync(path).size;
    const text = readFileSync(path)
      .subarray(Math.max(0, size - bytes))
      .toString('utf8');
    return text;
  } catch {
    return '(no log)';
  }
}

/** argv wrapped to run in a network namespace (by name under /run/netns), or as is. */
export function inNetns(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['nsenter', `--net=/run/netns/${netns}`, '--', ...argv];
}

export function launch(
  name: string,
  argv: readonly string[],
  logPath: string,
  netns?: string,
  env?: NodeJS.ProcessEnv,
): Daemon {
  const bin = argv[0] ?? '';
  if (bin.startsWith('/') && !existsSync(bin))
    throw new Error(`${name}: ${bin} not found (run test/node/build-node.sh)`);
  const [command, ...args] = inNetns(netns, argv);
  const fd = openSync(logPath, 'a');
  const child = spawn(command ?? '', args, { stdio: ['ignore', fd, fd], env: env ?? process.env });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`${name} did not start (${argv.join(' ')})`);
  let resolveExit: (code: number | null) => void = () => {};
  const exit = new Promise<number | null>((resolve) => {
    resolveExit = resolve;
  });
  const daemon: Daemon = { name, pid: child.pid, logPath, child, exited: false, exit };
  child.on('exit', (code, signal) => {
    daemon.exited = true;
    resolveExit(code ?? (signal === null ? null : 128));
  });
  child.on('error', () => {
    daemon.exited = true;
    resolveExit(null);
  });
  live.add(daemon);
  return daemon;
}

/** SIGTERM, SIGKILL after graceMs; resolves once the pid is gone. */
export async function terminate(d: Daemon, graceMs = 10_000): Promise<void> {
  if (!d.exited) {
    d.child.kill('SIGTERM');
    const timedOut = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(true), graceMs);
      void d.exit.then(() => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (timedOut && !d.exited) {
      d.child.kill('SIGKILL');
      await d.exit;
    }
  }
  live.delete(d);
  const deadline = Date.now() + 5_000;
  while (isAlive(d.pid) && Date.now() < deadline) await sleep(50);
  if (isAlive(d.pid)) throw new Error(`${d.name} (pid ${d.pid}) is still running after stop`);
}

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a short command (in a network namespace when given); never throws on a non-zero exit. */
export function run(
  argv: readonly string[],
  options: { netns?: string; input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  const [command, ...args] = inNetns(options.netns, argv);
  return new Promise((resolve) => {
    const child = execFile(
      command ?? '',
      args,
      {
        encoding: 'utf8',
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        env: options.env ?? process.env,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr: error !== null && code === null ? `${stderr}${error.message}` : stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

/** Like run(), but throws with the command's stderr when it fails. */
export async function must(argv: readonly string[], options: Parameters<typeof run>[1] = {}): Promise<string> {
  const result = await run(argv, options);
  if (result.code !== 0) {
    throw new Error(
      `${argv.join(' ')}: exit ${String(result.code)}: ${(result.stderr || result.stdout).trim().slice(-2000)}`,
    );
  }
  return result.stdout;
}

export interface Probe {
  readonly url: string;
  /** PEM CA and client pair for https; `insecure` accepts any serving certificate (a component's self-signed one). */
  readonly tls?: { ca?: string; cert?: string; key?: string; insecure?: boolean };
}

export function probe(p: Probe, timeoutMs = 3_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const tls =
      p.tls === undefined
        ? {}
        : { ca: p.tls.ca, cert: p.tls.cert, key: p.tls.key, rejectUnauthorized: p.tls.insecure !== true };
    const req = (p.url.startsWith('https:') ? httpsRequest : httpRequest)(
      p.url,
      { timeout: timeoutMs, agent: false, ...tls },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** Polls until the endpoint answers 200, the daemon dies, or the deadline passes (then throws with the log tail). */
export async function waitHttp(d: Daemon, p: Probe, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (d.exited) throw new Error(`${d.name} exited before it was ready; log tail (${d.logPath}):\n${tail(d.logPath)}`);
    try {
      const res = await probe(p);
      if (res.status === 200) return;
      last = `HTTP ${res.status}: ${res.body.slice(0, 300)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(250);
  }
  throw new Error(
    `${d.name} not ready at ${p.url} within ${timeoutMs} ms (last: ${last}); log tail:\n${tail(d.logPath)}`,
  );
}

/** Polls `check` until it returns a value other than undefined; throws with `describe()` at the deadline. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  describe?: () => Promise<string> | string,
  periodMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = (err as Error).message;
    }
    if (Date.now() > deadline) {
      const detail = describe === undefined ? '' : `\n${await describe()}`;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError === '' ? '' : ` (last error: ${lastError})`}${detail}`,
      );
    }
    await sleep(periodMs);
  }
}
