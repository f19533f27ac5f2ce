/**
 * Starts and stops the local grid's processes: each a real child process with its own log file, a readiness check,
 * and a clean stop (SIGTERM, then SIGKILL after a grace period). A process that exits early is reported with its
 * name, exit status, log path and last log lines, so a failed start says which process failed, why, and where.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export interface ProcessSpec {
  /** Unique, human name: "east/gateway-consumer". */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly logFile: string;
  /** Resolves when the process is ready; polled until it returns true or the deadline passes. */
  readonly ready?: () => Promise<boolean>;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Set once the process has exited. */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
}

export class ProcessStartError extends Error {
  readonly processName: string;
  readonly logFile: string;
  constructor(processName: string, logFile: string, reason: string) {
    super(`${processName} failed to start: ${reason} (log: ${logFile})${tailOf(logFile)}`);
    this.name = 'ProcessStartError';
    this.processName = processName;
    this.logFile = logFile;
  }
}

export class Supervisor {
  readonly #processes: ManagedProcess[] = [];
  #stopping = false;
  /** Called when a process that had started exits while the grid is running (not during stop). */
  onUnexpectedExit: ((process: ManagedProcess) => void) | undefined;

  get processes(): readonly ManagedProcess[] {
    return this.#processes;
  }

  async start(spec: ProcessSpec, readyTimeoutMs = 30_000): Promise<ManagedProcess> {
    const log = openSync(spec.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(spec.command, [...spec.args], {
        cwd: spec.cwd,
        env: { ...process.env, ...spec.env },
        stdio: ['ignore', log, log],
        // Own process group, so stop() can signal everything the daemon started.
        detached: true,
      });
    } finally {
      closeSync(log);
    }
    const managed: ManagedProcess = { name: spec.name, pid: child.pid ?? -1, logFile: spec.logFile, child };
    this.#processes.push(managed);
    let spawnFailure: Error | undefined;
    child.once('error', (error) => {
      spawnFailure = error;
    });
    child.once('exit', (code, signal) => {
      managed.exit = { code, signal };
      if (!this.#stopping) this.onUnexpectedExit?.(managed);
    });
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      await delay(spec.ready === undefined ? 0 : 100);
      if (spawnFailure !== undefined) throw new ProcessStartError(spec.name, spec.logFile, spawnFailure.message);
      if (managed.exit !== undefined) {
        throw new ProcessStartError(spec.name, spec.logFile, `exited with ${describeExit(managed.exit)} before it was ready`);
      }
      if (spec.ready === undefined || (await spec.ready().catch(() => false))) return managed;
      if (Date.now() > deadline) throw new ProcessStartError(spec.name, spec.logFile, `not ready within ${readyTimeoutMs} ms`);
    }
  }

  /**
   * Runs a process to completion (an init container): resolves when it exits 0, else throws a ProcessStartError with
   * its exit status (or the timeout) and the last lines of its log.
   */
  async run(spec: ProcessSpec, timeoutMs = 60_000): Promise<ManagedProcess> {
    const log = openSync(spec.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(spec.command, [...spec.args], { cwd: spec.cwd, env: { ...process.env, ...spec.env }, stdio: ['ignore', log, log], detached: true });
    } finally {
      closeSync(log);
    }
    const managed: ManagedProcess = { name: spec.name, pid: child.pid ?? -1, logFile: spec.logFile, child };
    this.#processes.push(managed);
    const outcome = await new Promise<{ error?: Error; timedOut?: boolean }>((resolve) => {
      const timer = setTimeout(() => resolve({ timedOut: true }), timeoutMs);
      child.once('error', (error) => {
        clearTimeout(timer);
        resolve({ error });
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        managed.exit = { code, signal };
        resolve({});
      });
    });
    if (outcome.error !== undefined) throw new ProcessStartError(spec.name, spec.logFile, outcome.error.message);
    if (outcome.timedOut === true) {
      await this.stopProcess(managed, 1000);
      throw new ProcessStartError(spec.name, spec.logFile, `did not finish within ${timeoutMs} ms`);
    }
    if (managed.exit?.code !== 0) throw new ProcessStartError(spec.name, spec.logFile, `exited with ${describeExit(managed.exit ?? { code: null, signal: null })}`);
    return managed;
  }

  /** Stops one process (e.g. the demo killing a provider). Resolves once it has exited. */
  async stopProcess(managed: ManagedProcess, graceMs = 5000): Promise<void> {
    if (managed.exit !== undefined || managed.pid < 0) return;
    const exited = new Promise<void>((resolve) => managed.child.once('exit', () => resolve()));
    signalGroup(managed.pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(managed.pid, 'SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Kills one process group at once, without a chance to clean up (a crash, a lost machine). Resolves once it has exited. */
  async kill(managed: ManagedProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (managed.exit !== undefined || managed.pid < 0) return;
    const exited = new Promise<void>((resolve) => managed.child.once('exit', () => resolve()));
    signalGroup(managed.pid, signal);
    await exited;
  }

  /** Stops every process, newest first (gateways before the operators they depend on). */
  async stopAll(graceMs = 5000): Promise<void> {
    this.#stopping = true;
    await Promise.all([...this.#processes].reverse().map((p) => this.stopProcess(p, graceMs)));
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

function describeExit(exit: { code: number | null; signal: NodeJS.Signals | null }): string {
  return exit.signal !== null ? `signal ${exit.signal}` : `status ${exit.code}`;
}

/** The last lines of a log, appended to a start failure so the reason is on screen. */
function tailOf(logFile: string, lines = 8): string {
  try {
    const text = readFileSync(logFile, 'utf8').trimEnd();
    if (text === '') return '';
    return `\n  last log lines:\n${text.split('\n').slice(-lines).map((l) => `    ${l.slice(0, 300)}`).join('\n')}`;
  } catch {
    return '';
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
