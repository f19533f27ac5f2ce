import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freeGossipPort, freeTcpPort } from '../../daemons/local-grid/ports.ts';
import { ProcessStartError, Supervisor } from '../../daemons/local-grid/supervisor.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-supervisor-'));
const supervisors: Supervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll(1000)));
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function httpReady(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/`)).ok;
  } catch {
    return false;
  }
}

const server = (port: number) => `require('http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1', () => console.log('listening'))`;

describe('local grid supervisor', () => {
  it('starts a real process, waits for readiness, and leaves no process behind after stopAll', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const port = await freeTcpPort();
    const managed = await supervisor.start({ name: 'east/sim', command: process.execPath, args: ['-e', server(port)], logFile: join(dir, 'sim.log'), ready: () => httpReady(port) });
    expect(alive(managed.pid)).toBe(true);
    expect(await httpReady(port)).toBe(true);
    await supervisor.stopAll();
    expect(alive(managed.pid)).toBe(false);
    expect(managed.exit).toBeDefined();
  });

  it('says which process failed, why, and where its log is, with the last log lines', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const logFile = join(dir, 'broken.log');
    const start = supervisor.start({ name: 'west/gateway', command: process.execPath, args: ['-e', "console.error('config error: unknown key listeners[0].bogus'); process.exit(3)"], logFile, ready: async () => false });
    await expect(start).rejects.toThrow(ProcessStartError);
    await expect(start).rejects.toThrow(/west\/gateway failed to start: exited with status 3 before it was ready \(log: .*broken\.log\)/);
    await expect(start).rejects.toThrow(/unknown key listeners\[0\]\.bogus/);
  });

  it('gives up on a process that never becomes ready, and still stops it', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const start = supervisor.start({ name: 'east/operator', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'], logFile: join(dir, 'slow.log'), ready: async () => false }, 500);
    await expect(start).rejects.toThrow(/east\/operator failed to start: not ready within 500 ms/);
    const pid = supervisor.processes[0]!.pid;
    await supervisor.stopAll();
    expect(alive(pid)).toBe(false);
  });

  it('reports a process that dies after it started', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const exits: string[] = [];
    supervisor.onUnexpectedExit = (p) => exits.push(`${p.name}:${p.exit?.code}`);
    await supervisor.start({ name: 'east/provider', command: process.execPath, args: ['-e', 'setTimeout(() => process.exit(7), 200)'], logFile: join(dir, 'dies.log') });
    const deadline = Date.now() + 5000;
    while (exits.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(exits).toEqual(['east/provider:7']);
  });

  it('stops the whole process group, children of the daemon included', async () => {
    const supervisor = new Supervisor();
    supervisors.push(supervisor);
    const port = await freeTcpPort();
    const parent = `const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(server(port))}], { stdio: 'inherit' }); setInterval(() => {}, 1000)`;
    await supervisor.start({ name: 'tree', command: process.execPath, args: ['-e', parent], logFile: join(dir, 'tree.log'), ready: () => httpReady(port) });
    await supervisor.stopAll();
    const deadline = Date.now() + 3000;
    while ((await httpReady(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await httpReady(port)).toBe(false);
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
