// The long-running children of the suites that start a real control plane or node (etcd, kube-apiserver,
// containerd, kubelet, ...): each started with its output in a log file (in a network namespace through
// `nsenter --net`, which execs the binary, so the pid is the daemon's own), tracked by pid, stopped with SIGTERM then
// SIGKILL, and awaited until the kernel reaped it; and the HTTP(S) poll that says when one is ready.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive } from './process-alive.ts';

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

/** The last `bytes` of a log file, for error messages. */
export function tail(path: string, bytes = 3000): string {
  try {
    const size = statSync(path).size;
    return readFileSync(path)
      .subarray(Math.max(0, size - bytes))
      .toString('utf8');
  } catch {
    return '(no log)';
  }
}

/** argv wrapped to run in a network namespace (by name under /run/netns), or as is. */
export function inNetns(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['nsenter', `--net=/run/netns/${netns}`, '--', ...argv];
}

export interface LaunchOptions {
  readonly netns?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** What to do when the binary is missing, for the error (e.g. the build script to run). */
  readonly missingHint?: string;
}

export function launch(name: string, argv: readonly string[], logPath: string, options: LaunchOptions = {}): Daemon {
  const bin = argv[0] ?? '';
  if (bin.startsWith('/') && !existsSync(bin)) {
    throw new Error(
      `${name} binary not found at ${bin}${options.missingHint === undefined ? '' : `; ${options.missingHint}`}`,
    );
  }
  const [command, ...args] = inNetns(options.netns, argv);
  const fd = openSync(logPath, 'a');
  const child = spawn(command ?? '', args, { stdio: ['ignore', fd, fd], env: options.env ?? process.env });
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
    // The grace timer is cleared on exit: a pending timer would hold the test runner open for graceMs.
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
  // 'exit' fires once the kernel reaped it; a pid still answering signal 0 would be an orphan.
  const deadline = Date.now() + 5_000;
  while (processAlive(d.pid) && Date.now() < deadline) await sleep(50);
  if (processAlive(d.pid)) throw new Error(`${d.name} (pid ${d.pid}) is still running after stop`);
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
    // agent: false, so no keep-alive socket outlives the probe and holds the process open.
    const req = (p.url.startsWith('https:') ? httpsRequest : httpRequest)(
      p.url,
      { timeout: timeoutMs, agent: false, ...tls },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Polls until the endpoint answers 200 (and `accept` likes the body), the daemon dies, or the deadline passes; the
 * errors carry the daemon's log tail.
 */
export async function waitHttp(
  d: Daemon,
  p: Probe,
  timeoutMs: number,
  accept: (body: string) => boolean = () => true,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (d.exited) throw new Error(`${d.name} exited before it was ready; log tail (${d.logPath}):\n${tail(d.logPath)}`);
    try {
      const res = await probe(p);
      if (res.status === 200 && accept(res.body)) return;
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
