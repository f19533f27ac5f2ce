import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freeGossipPort, freeTcpPort } from '../../daemons/local-grid/ports.ts';
import {
  crashesAfterExit,
  DEFAULT_RESTART_POLICY,
  restartDelayMs,
  type RestartPolicy,
} from '../../daemons/local-grid/restart-policy.ts';
import {
  describeSupervisorEvent,
  ProcessStartError,
  Supervisor,
  type SupervisorEvent,
} from '../../daemons/local-grid/supervisor.ts';
import { processAlive } from '../process-alive.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-supervisor-'));
const supervisors: Supervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll(1000)));
});

async function httpReady(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/`)).ok;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(20);
  }
}

const server = (port: number) =>
  `require('http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1', () => console.log('listening'))`;

describe('local grid supervisor', () => {
  it('starts a real process, waits for readiness, and leaves no process behind after stopAll', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const port = await freeTcpPort();
    const managed = await supervisor.start({
      name: 'east/sim',
      command: process.execPath,
      args: ['-e', server(port)],
      logFile: join(dir, 'sim.log'),
      ready: () => httpReady(port),
    });
    expect(processAlive(managed.pid)).toBe(true);
    expect(await httpReady(port)).toBe(true);
    await supervisor.stopAll();
    expect(processAlive(managed.pid)).toBe(false);
    expect(managed.exit).toBeDefined();
  });

  it('says which process failed, why, and where its log is, with the last log lines', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const logFile = join(dir, 'broken.log');
    const start = supervisor.start({
      name: 'west/gateway',
      command: process.execPath,
      args: ['-e', "console.error('config error: unknown key listeners[0].bogus'); process.exit(3)"],
      logFile,
      ready: async () => false,
    });
    await expect(start).rejects.toThrow(ProcessStartError);
    await expect(start).rejects.toThrow(
      /west\/gateway failed to start: exited with status 3 before it was ready \(log: .*broken\.log\)/,
    );
    await expect(start).rejects.toThrow(/unknown key listeners\[0\]\.bogus/);
  });

  it('gives up on a process that never becomes ready, and still stops it', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const start = supervisor.start(
      {
        name: 'east/operator',
        command: process.execPath,
        args: ['-e', 'setInterval(() => {}, 1000)'],
        logFile: join(dir, 'slow.log'),
        ready: async () => false,
      },
      500,
    );
    await expect(start).rejects.toThrow(/east\/operator failed to start: not ready within 500 ms/);
    const pid = supervisor.processes[0]!.pid;
    await supervisor.stopAll();
    expect(processAlive(pid)).toBe(false);
  });

  it('reports a process that dies after it started, and leaves it down without a restart policy', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    await supervisor.start({
      name: 'east/provider',
      command: process.execPath,
      args: ['-e', 'setTimeout(() => process.exit(7), 200)'],
      logFile: join(dir, 'dies.log'),
    });
    await until(() => events.length > 0, 5000);
    await sleep(300);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'exited', name: 'east/provider', exit: { code: 7, signal: null } });
    expect(events[0]).not.toHaveProperty('restart');
    expect(describeSupervisorEvent(events[0]!)).toMatch(
      /^east\/provider exited \(status 7\) after .* running; not restarted \(log: .*dies\.log\)$/,
    );
    expect(supervisor.status('east/provider')).toMatchObject({ state: 'exited', restarts: 0 });
    expect(supervisor.processes).toHaveLength(1);
  });

  it('stops the whole process group, children of the daemon included', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const port = await freeTcpPort();
    const parent = `const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(server(port))}], { stdio: 'inherit' }); setInterval(() => {}, 1000)`;
    await supervisor.start({
      name: 'tree',
      command: process.execPath,
      args: ['-e', parent],
      logFile: join(dir, 'tree.log'),
      ready: () => httpReady(port),
    });
    await supervisor.stopAll();
    const deadline = Date.now() + 3000;
    while ((await httpReady(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await httpReady(port)).toBe(false);
  });
});

describe('restart policy', () => {
  it('doubles from 1 s to a 30 s cap and starts over after 60 s of healthy running', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => restartDelayMs(DEFAULT_RESTART_POLICY, n))).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000,
    ]);
    expect(crashesAfterExit(DEFAULT_RESTART_POLICY, 0, 5)).toBe(1);
    expect(crashesAfterExit(DEFAULT_RESTART_POLICY, 4, 59_999)).toBe(5);
    expect(crashesAfterExit(DEFAULT_RESTART_POLICY, 4, 60_000)).toBe(1);
    // Exited before it was ever ready: the crash run goes on.
    expect(crashesAfterExit(DEFAULT_RESTART_POLICY, 4, undefined)).toBe(5);
  });
});

describe('supervisor restarts', () => {
  const fast: RestartPolicy = { initialDelayMs: 100, maxDelayMs: 400, resetAfterMs: 10_000 };

  it('restarts a process killed from outside (SIGKILL) on the same port, and says so in its log', async () => {
    const supervisor = new Supervisor({ restartPolicy: fast });
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    const port = await freeTcpPort();
    const logFile = join(dir, 'restarted.log');
    const first = await supervisor.start({
      name: 'east/sim',
      command: process.execPath,
      args: ['-e', server(port)],
      logFile,
      ready: () => httpReady(port),
    });
    process.kill(-first.pid, 'SIGKILL');
    await until(() => events.some((e) => e.type === 'restarted'), 10_000);
    expect(events.map((e) => e.type)).toEqual(['exited', 'restarted']);
    expect(events[0]).toMatchObject({ exit: { code: null, signal: 'SIGKILL' }, restart: { number: 1, delayMs: 100 } });
    const second = supervisor.current('east/sim')!;
    expect(second.pid).not.toBe(first.pid);
    expect(processAlive(second.pid)).toBe(true);
    expect(await httpReady(port)).toBe(true);
    expect(supervisor.status('east/sim')).toMatchObject({
      state: 'running',
      restarts: 1,
      lastExit: { signal: 'SIGKILL' },
    });
    const log = readFileSync(logFile, 'utf8');
    expect(log).toMatch(/supervisor: east\/sim exited \(signal SIGKILL\) after .* running; restart 1 in 0\.1 s/);
    expect(log).toMatch(/supervisor: east\/sim restarted and ready \(restart 1, pid \d+\)/);
  });

  it('backs off a process that crashes right after it started, doubling to the cap', async () => {
    const supervisor = new Supervisor({ restartPolicy: fast });
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    const started = Date.now();
    await supervisor.start({
      name: 'east/flaky',
      command: process.execPath,
      args: ['-e', 'setTimeout(() => process.exit(1), 30)'],
      logFile: join(dir, 'flaky.log'),
    });
    await until(() => events.filter((e) => e.type === 'exited').length >= 5, 10_000);
    const delays = events.flatMap((e) => (e.type === 'exited' && e.restart !== undefined ? [e.restart.delayMs] : []));
    expect(delays.slice(0, 5)).toEqual([100, 200, 400, 400, 400]);
    // Five runs take at least the 1.1 s of delays between them: no spinning.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1100);
    expect(supervisor.processes.length).toBeLessThanOrEqual(6);
  });

  it('backs off a restart that fails before it is ready, and recovers once the cause is gone', async () => {
    const supervisor = new Supervisor({ restartPolicy: fast });
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    const port = await freeTcpPort();
    const broken = join(dir, 'broken-config');
    const script = `if (require('fs').existsSync(${JSON.stringify(broken)})) { console.error('config error'); process.exit(3) } ${server(port)}`;
    const first = await supervisor.start({
      name: 'west/gateway',
      command: process.execPath,
      args: ['-e', script],
      logFile: join(dir, 'fails-at-start.log'),
      ready: () => httpReady(port),
    });
    writeFileSync(broken, '');
    process.kill(-first.pid, 'SIGKILL');
    await until(() => events.filter((e) => e.type === 'restart-failed').length >= 3, 10_000);
    const failed = events.filter((e) => e.type === 'restart-failed');
    expect(failed.map((e) => e.restart.delayMs).slice(0, 3)).toEqual([200, 400, 400]);
    expect(failed[0]!.reason).toBe('exited with status 3 before it was ready');
    expect(supervisor.status('west/gateway')?.state).toBe('backoff');
    rmSync(broken);
    await until(() => events.some((e) => e.type === 'restarted'), 10_000);
    expect(await httpReady(port)).toBe(true);
    expect(supervisor.status('west/gateway')).toMatchObject({ state: 'running' });
    expect(supervisor.status('west/gateway')!.restarts).toBeGreaterThanOrEqual(4);
  });

  it('starts a long-running process over from the first delay after a healthy run', async () => {
    const supervisor = new Supervisor({ restartPolicy: { initialDelayMs: 100, maxDelayMs: 1000, resetAfterMs: 300 } });
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    await supervisor.start({
      name: 'east/steady',
      command: process.execPath,
      args: ['-e', 'setTimeout(() => process.exit(0), 400)'],
      logFile: join(dir, 'steady.log'),
    });
    await until(() => events.filter((e) => e.type === 'exited').length >= 3, 10_000);
    const delays = events.flatMap((e) => (e.type === 'exited' && e.restart !== undefined ? [e.restart.delayMs] : []));
    expect(delays.slice(0, 3)).toEqual([100, 100, 100]);
  });

  it('restarts nothing a caller stopped or killed on purpose, nor anything during or after stopAll', async () => {
    const supervisor = new Supervisor({ restartPolicy: fast });
    supervisors.push(supervisor);
    const events: SupervisorEvent[] = [];
    supervisor.onEvent = (e) => events.push(e);
    const spec = (name: string, port: number) => ({
      name,
      command: process.execPath,
      args: ['-e', server(port)],
      logFile: join(dir, `${name.replace('/', '.')}.log`),
      ready: () => httpReady(port),
    });
    const [a, b, c] = [await freeTcpPort(), await freeTcpPort(), await freeTcpPort()];
    await supervisor.start(spec('east/a', a));
    await supervisor.start(spec('east/b', b));
    const crashed = await supervisor.start(spec('east/c', c));
    await supervisor.stop('east/a', { kill: true });
    await supervisor.stop('east/b');
    // c crashes; the restart is pending (backoff) when the grid is stopped.
    process.kill(-crashed.pid, 'SIGKILL');
    await until(() => events.length === 1, 5000);
    expect(supervisor.status('east/c')?.state).toBe('backoff');
    const spawned = supervisor.processes.length;
    await supervisor.stopAll();
    await sleep(fast.maxDelayMs + 200);
    expect(events.map((e) => e.type)).toEqual(['exited']);
    expect(supervisor.processes.length).toBe(spawned);
    expect(supervisor.processes.filter((p) => processAlive(p.pid))).toEqual([]);
    expect(supervisor.status('east/a')?.state).toBe('stopped');
    expect(supervisor.status('east/b')?.state).toBe('stopped');
    expect(await httpReady(c)).toBe(false);
    // After stopAll nothing starts again.
    await expect(supervisor.start(spec('east/a', a))).rejects.toThrow(/east\/a failed to start: the grid is stopping/);
  });

  it('starts again on request what it stopped on purpose, and refuses a second copy of a running process', async () => {
    const supervisor = new Supervisor({ restartPolicy: fast });
    supervisors.push(supervisor);
    const port = await freeTcpPort();
    const spec = {
      name: 'east/sim',
      command: process.execPath,
      args: ['-e', server(port)],
      logFile: join(dir, 'again.log'),
      ready: () => httpReady(port),
    };
    await supervisor.start(spec);
    await expect(supervisor.start(spec)).rejects.toThrow(/east\/sim failed to start: already running \(pid \d+\)/);
    await supervisor.stop('east/sim', { kill: true });
    await sleep(fast.initialDelayMs + 200);
    expect(supervisor.current('east/sim')).toBeUndefined();
    await supervisor.start(spec);
    expect(await httpReady(port)).toBe(true);
    expect(supervisor.status('east/sim')).toMatchObject({ state: 'running', restarts: 0 });
    expect(existsSync(spec.logFile)).toBe(true);
  });
});

describe('free ports', () => {
  it('finds a port free for both UDP and TCP', async () => {
    const port = await freeGossipPort();
    expect(port).toBeGreaterThan(0);
    const { createSocket } = await import('node:dgram');
    const udp = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port, '127.0.0.1', resolve);
    });
    await new Promise<void>((resolve) => udp.close(() => resolve()));
  });
});

process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
