/**
 * Starts and stops the local grid's processes: each a real child process with its own log file, a readiness check,
 * and a clean stop (SIGTERM, then SIGKILL after a grace period). A process that exits early is reported with its
 * name, exit status, log path and last log lines, so a failed start says which process failed, why, and where.
 * With a restart policy, a process that exits on its own after it was ready is started again with the same spec
 * (same ports, same pod directory) after a doubling delay; one stopped on purpose, or during stopAll, is not.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, closeSync, openSync, readFileSync } from 'node:fs';
import { crashesAfterExit, restartDelayMs, type RestartPolicy, seconds } from './restart-policy.ts';

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

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Set once the process passed its readiness check (ms since the epoch). */
  readyAt?: number;
  /** Set once the process has exited. */
  exit?: ExitStatus;
}

/**
 * starting: spawned, not ready yet. running: ready. backoff: exited on its own, restart pending. stopped: stopped on
 * purpose (or by stopAll). exited: exited on its own and not restarted (no restart policy).
 */
export type ProcessState = 'starting' | 'running' | 'backoff' | 'stopped' | 'exited';

export interface ProcessStatus {
  readonly state: ProcessState;
  /** Restarts the supervisor made (explicit starts by a caller do not count). */
  readonly restarts: number;
  readonly pid?: number;
  /** The last exit nobody asked for, with when it happened. */
  readonly lastExit?: ExitStatus & { readonly at: number };
  /** When the pending restart is due (state backoff). */
  readonly nextRestartAt?: number;
}

/** What the supervisor reports as it happens; describeSupervisorEvent turns one into a log line. */
export type SupervisorEvent =
  | {
      readonly type: 'exited';
      readonly name: string;
      readonly logFile: string;
      readonly exit: ExitStatus;
      readonly ranMs: number;
      readonly restart?: { readonly number: number; readonly delayMs: number };
    }
  | {
      readonly type: 'restarted';
      readonly name: string;
      readonly logFile: string;
      readonly pid: number;
      readonly restarts: number;
    }
  | {
      readonly type: 'restart-failed';
      readonly name: string;
      readonly logFile: string;
      readonly reason: string;
      readonly restart: { readonly number: number; readonly delayMs: number };
    };

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

interface Supervised {
  spec: ProcessSpec;
  readyTimeoutMs: number;
  current?: ManagedProcess;
  state: ProcessState;
  restarts: number;
  /** Consecutive crashes of the current crash run (see restart-policy.ts). */
  crashes: number;
  lastExit?: ExitStatus & { at: number };
  nextRestartAt?: number;
  timer?: NodeJS.Timeout;
}

export interface SupervisorOptions {
  /** Without one, a process that exits is reported (an "exited" event) and left down. */
  readonly restartPolicy?: RestartPolicy;
}

export class Supervisor {
  readonly #processes: ManagedProcess[] = [];
  readonly #supervised = new Map<string, Supervised>();
  /** Processes stopped or killed on purpose: their exit is no crash. */
  readonly #intentional = new WeakSet<ManagedProcess>();
  readonly #policy: RestartPolicy | undefined;
  #stopping = false;
  /** Exits nobody asked for, restarts and failed restarts, as they happen (not during stopAll). */
  onEvent: ((event: SupervisorEvent) => void) | undefined;

  constructor(options: SupervisorOptions = {}) {
    this.#policy = options.restartPolicy;
  }

  get restartPolicy(): RestartPolicy | undefined {
    return this.#policy;
  }

  /** Every process ever spawned (restarts included), oldest first. */
  get processes(): readonly ManagedProcess[] {
    return this.#processes;
  }

  /** The live instance of a long-running process, if one is up. */
  current(name: string): ManagedProcess | undefined {
    const current = this.#supervised.get(name)?.current;
    // pid -1: the spawn itself failed (no such command), so nothing runs.
    return current !== undefined && current.exit === undefined && current.pid > 0 ? current : undefined;
  }

  status(name: string): ProcessStatus | undefined {
    const record = this.#supervised.get(name);
    if (record === undefined) return undefined;
    const pid = this.current(name)?.pid;
    return {
      state: record.state,
      restarts: record.restarts,
      ...(pid !== undefined ? { pid } : {}),
      ...(record.lastExit !== undefined ? { lastExit: record.lastExit } : {}),
      ...(record.nextRestartAt !== undefined ? { nextRestartAt: record.nextRestartAt } : {}),
    };
  }

  /**
   * Starts a long-running process and resolves once it is ready. A restart the policy had scheduled for the same name
   * is cancelled: this start replaces it. A failure here is the caller's to report; it is not retried.
   */
  async start(spec: ProcessSpec, readyTimeoutMs = 30_000): Promise<ManagedProcess> {
    const record = this.#supervised.get(spec.name) ?? {
      spec,
      readyTimeoutMs,
      state: 'starting' as ProcessState,
      restarts: 0,
      crashes: 0,
    };
    const running = this.current(spec.name);
    if (running !== undefined)
      throw new ProcessStartError(spec.name, spec.logFile, `already running (pid ${running.pid})`);
    this.#supervised.set(spec.name, record);
    this.#cancelRestart(record);
    record.spec = spec;
    record.readyTimeoutMs = readyTimeoutMs;
    return this.#launch(record);
  }

  async #launch(record: Supervised): Promise<ManagedProcess> {
    const { spec, readyTimeoutMs } = record;
    if (this.#stopping) throw new ProcessStartError(spec.name, spec.logFile, 'the grid is stopping');
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
    record.current = managed;
    record.state = 'starting';
    let spawnFailure: Error | undefined;
    child.once('error', (error) => {
      spawnFailure = error;
    });
    child.once('exit', (code, signal) => {
      managed.exit = { code, signal };
      this.#exited(record, managed);
    });
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      await delay(spec.ready === undefined ? 0 : 100);
      if (spawnFailure !== undefined) throw new ProcessStartError(spec.name, spec.logFile, spawnFailure.message);
      if (managed.exit !== undefined) {
        throw new ProcessStartError(
          spec.name,
          spec.logFile,
          `exited with ${describeExit(managed.exit)} before it was ready`,
        );
      }
      if (spec.ready === undefined || (await spec.ready().catch(() => false))) {
        // An exit between the last check and now leaves the state to #exited.
        if (managed.exit !== undefined) continue;
        managed.readyAt = Date.now();
        record.state = 'running';
        return managed;
      }
      if (Date.now() > deadline)
        throw new ProcessStartError(spec.name, spec.logFile, `not ready within ${readyTimeoutMs} ms`);
    }
  }

  #exited(record: Supervised, managed: ManagedProcess): void {
    if (record.current !== managed) return;
    if (this.#stopping || this.#intentional.has(managed)) {
      record.state = 'stopped';
      return;
    }
    // An exit before readiness is the starter's failure to report (start() throws, a restart backs off).
    if (managed.readyAt === undefined) return;
    const now = Date.now();
    const exit = managed.exit ?? { code: null, signal: null };
    record.lastExit = { ...exit, at: now };
    const ranMs = now - managed.readyAt;
    if (this.#policy === undefined) {
      record.state = 'exited';
      this.#emit({ type: 'exited', name: record.spec.name, logFile: record.spec.logFile, exit, ranMs });
      return;
    }
    record.crashes = crashesAfterExit(this.#policy, record.crashes, ranMs);
    const delayMs = this.#scheduleRestart(record, this.#policy);
    this.#emit({
      type: 'exited',
      name: record.spec.name,
      logFile: record.spec.logFile,
      exit,
      ranMs,
      restart: { number: record.restarts + 1, delayMs },
    });
  }

  #scheduleRestart(record: Supervised, policy: RestartPolicy): number {
    const delayMs = restartDelayMs(policy, record.crashes);
    record.state = 'backoff';
    record.nextRestartAt = Date.now() + delayMs;
    record.timer = setTimeout(() => void this.#restart(record, policy), delayMs);
    return delayMs;
  }

  async #restart(record: Supervised, policy: RestartPolicy): Promise<void> {
    record.timer = undefined;
    record.nextRestartAt = undefined;
    if (this.#stopping) return;
    record.restarts += 1;
    const launching = this.#launch(record);
    // #launch sets record.current before its first await: this attempt's instance.
    const attempt = record.current;
    try {
      const managed = await launching;
      this.#emit({
        type: 'restarted',
        name: record.spec.name,
        logFile: record.spec.logFile,
        pid: managed.pid,
        restarts: record.restarts,
      });
    } catch (error) {
      const failed = record.current;
      // Stopped meanwhile (stopAll, or a caller's stop or start of the same name): nothing left to retry.
      if (this.#stopping || failed === undefined || failed !== attempt || this.#intentional.has(failed)) return;
      if (failed.exit === undefined) {
        // Up but never ready: stopped like a failed startup probe, so the next attempt can bind its ports.
        this.#intentional.add(failed);
        await this.stopProcess(failed, 1000);
        if (this.#stopping || record.current !== failed) return;
      }
      record.lastExit = { ...(failed.exit ?? { code: null, signal: null }), at: Date.now() };
      record.crashes += 1;
      const delayMs = this.#scheduleRestart(record, policy);
      const reason =
        (error as Error).message.split(' (log: ')[0]?.replace(`${record.spec.name} failed to start: `, '') ?? 'failed';
      this.#emit({
        type: 'restart-failed',
        name: record.spec.name,
        logFile: record.spec.logFile,
        reason,
        restart: { number: record.restarts + 1, delayMs },
      });
    }
  }

  #cancelRestart(record: Supervised): void {
    if (record.timer !== undefined) clearTimeout(record.timer);
    record.timer = undefined;
    record.nextRestartAt = undefined;
  }

  #emit(event: SupervisorEvent): void {
    // The process's own log shows where one run ended and the next began.
    try {
      appendFileSync(
        event.logFile,
        `--- ${new Date().toISOString()} supervisor: ${describeSupervisorEvent(event, false)}\n`,
      );
    } catch {
      // A log that cannot be written must not stop the restart.
    }
    this.onEvent?.(event);
  }

  /**
   * Runs a process to completion (an init container): resolves when it exits 0, else throws a ProcessStartError with
   * its exit status (or the timeout) and the last lines of its log.
   */
  async run(spec: ProcessSpec, timeoutMs = 60_000): Promise<ManagedProcess> {
    const log = openSync(spec.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(spec.command, [...spec.args], {
        cwd: spec.cwd,
        env: { ...process.env, ...spec.env },
        stdio: ['ignore', log, log],
        detached: true,
      });
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
    if (managed.exit?.code !== 0)
      throw new ProcessStartError(
        spec.name,
        spec.logFile,
        `exited with ${describeExit(managed.exit ?? { code: null, signal: null })}`,
      );
    return managed;
  }

  /**
   * Stops a long-running process on purpose (the demo stopping a provider, a test taking a site down): a pending
   * restart is cancelled and the exit is not a crash, so it stays down until start() is called again. With kill, the
   * process group gets SIGKILL at once (a crash or a lost machine, no chance to clean up). Resolves once it has exited.
   */
  async stop(name: string, options: { readonly kill?: boolean; readonly graceMs?: number } = {}): Promise<void> {
    const record = this.#supervised.get(name);
    if (record === undefined) return;
    this.#cancelRestart(record);
    const managed = record.current;
    if (managed === undefined || managed.exit !== undefined) {
      record.state = 'stopped';
      return;
    }
    this.#intentional.add(managed);
    if (options.kill === true) {
      const exited = new Promise<void>((resolve) => managed.child.once('exit', () => resolve()));
      signalGroup(managed.pid, 'SIGKILL');
      await exited;
    } else {
      await this.stopProcess(managed, options.graceMs);
    }
    record.state = 'stopped';
  }

  /** Stops one process instance: SIGTERM, SIGKILL after graceMs. Resolves once it has exited. */
  async stopProcess(managed: ManagedProcess, graceMs = 5000): Promise<void> {
    if (managed.exit !== undefined || managed.pid < 0) return;
    this.#intentional.add(managed);
    const exited = new Promise<void>((resolve) => managed.child.once('exit', () => resolve()));
    signalGroup(managed.pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(managed.pid, 'SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Stops every process, newest first (gateways before the operators they depend on); nothing is restarted after. */
  async stopAll(graceMs = 5000): Promise<void> {
    this.#stopping = true;
    for (const record of this.#supervised.values()) this.#cancelRestart(record);
    await Promise.all([...this.#processes].reverse().map((p) => this.stopProcess(p, graceMs)));
  }
}

/** One line for a supervisor event: what happened, what comes next, and (withLog) where the process's log is. */
export function describeSupervisorEvent(event: SupervisorEvent, withLog = true): string {
  const log = withLog ? ` (log: ${event.logFile})` : '';
  switch (event.type) {
    case 'exited': {
      const next =
        event.restart === undefined
          ? 'not restarted'
          : `restart ${event.restart.number} in ${seconds(event.restart.delayMs)}`;
      return `${event.name} exited (${describeExit(event.exit)}) after ${seconds(event.ranMs)} running; ${next}${log}`;
    }
    case 'restarted':
      return `${event.name} restarted and ready (restart ${event.restarts}, pid ${event.pid})`;
    case 'restart-failed':
      return `${event.name} restart failed: ${event.reason}; restart ${event.restart.number} in ${seconds(event.restart.delayMs)}${log}`;
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
    return `\n  last log lines:\n${text
      .split('\n')
      .slice(-lines)
      .map((l) => `    ${l.slice(0, 300)}`)
      .join('\n')}`;
  } catch {
    return '';
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
