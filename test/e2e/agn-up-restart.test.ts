// `agn up` as a user runs it (the real command, in its own process, on the compiled grid): a daemon killed from a
// shell with `kill -9` is restarted with the policy's first delay and said so on the output; stopping `agn up`
// (SIGTERM, as Ctrl-C does with SIGINT) stops everything and restarts nothing.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../daemons/local-grid/runner.ts';
import { processAlive } from '../process-alive.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-up-restart-'));
let up: ChildProcess | undefined;
afterAll(() => {
  if (up?.exitCode === null) up.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('agn up restarts a crashed daemon', () => {
  it('prints a curl carrying the demo caller key (answered; refused without it) and the dashboard links (east with its token), restarts a daemon killed with SIGKILL, and restarts nothing once it is stopping', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env['CI']; // the interactive mode, not --check
    up = spawn(
      process.execPath,
      [join(REPO_ROOT, 'daemons', 'cli', 'agn.ts'), 'up', '--state', join(dir, 'state'), '--profile', 'fast'],
      { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    up.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    up.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => up!.once('exit', (code) => resolve(code)));
    const until = async (what: string, test: () => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!test()) {
        if (Date.now() > deadline || up?.exitCode !== null)
          throw new Error(`agn up: no ${what} within ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await until('"Ctrl-C stops the grid."', () => stdout.includes('Ctrl-C stops the grid.'), 90_000);
    // The curl line carries a demo caller key (east's consumer requires one), the one kept in the state directory;
    // pasted, it is answered; without the key it is refused.
    const curl =
      /curl -sS -i (http:\/\/\S+) -H 'content-type: application\/json' -H 'authorization: Bearer (agn_[0-9a-f]{16}_[A-Za-z0-9_-]{43})' -d '(.*)'$/m.exec(
        stdout,
      );
    expect(curl, stdout).not.toBeNull();
    const [, url, key, body] = curl!;
    const stored = JSON.parse(readFileSync(join(dir, 'state', 'caller-keys', 'demo-keys.json'), 'utf8')) as {
      keys: { tenant: string; key: string }[];
    };
    expect(stored.keys.find((k) => k.tenant === 'team-a')?.key).toBe(key);
    const post = (headers: Record<string, string>) =>
      fetch(url!, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: body! });
    expect((await post({ authorization: `Bearer ${key!}` })).status).toBe(200);
    expect((await post({})).status).toBe(401);
    expect(stdout.split(key!).length - 1, 'the key is printed once').toBe(1);
    for (const file of readdirSync(join(dir, 'state', 'logs')))
      expect(readFileSync(join(dir, 'state', 'logs', file), 'utf8').includes(key!), file).toBe(false);
    // east's dashboard is compiled with token access: its line carries the token, which opens it once (a redirect
    // without the token and a session cookie); west's, declared without access, is open on loopback.
    const eastDashboard = /^ {2}east: (http:\/\/127\.0\.0\.1:\d+\/dashboard\/)\?token=(\S+) {2}\(token access/m.exec(
      stdout,
    );
    expect(eastDashboard, stdout).not.toBeNull();
    const dashboardToken = decodeURIComponent(eastDashboard![2]!);
    const login = await fetch(`${eastDashboard![1]!}?token=${eastDashboard![2]!}`, { redirect: 'manual' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/dashboard/');
    expect(login.headers.get('set-cookie')).toMatch(
      /^agn_dashboard_session=[A-Za-z0-9_-]+; Path=\/dashboard; HttpOnly; SameSite=Strict$/,
    );
    expect((await fetch(eastDashboard![1]!)).status).toBe(401);
    const westDashboard = /^ {2}west: (http:\/\/127\.0\.0\.1:\d+\/dashboard\/)$/m.exec(stdout);
    expect(westDashboard, stdout).not.toBeNull();
    expect((await fetch(westDashboard![1]!)).status).toBe(200);
    for (const file of readdirSync(join(dir, 'state', 'logs')))
      expect(readFileSync(join(dir, 'state', 'logs', file), 'utf8').includes(dashboardToken), file).toBe(false);
    // The PID column of the address table.
    const pidOf = (name: string) =>
      Number(new RegExp(`^  ${name.replace(/[/.-]/g, (c) => `\\${c}`)} +\\S+ +\\S+ +(\\d+) `, 'm').exec(stdout)?.[1]);
    const victim = 'east/sim-east-llm-b/sim';
    const pids = ['east/gossip-operator/gossip-operator', 'west/gossip-operator/gossip-operator', victim].map(pidOf);
    expect(pids.every((p) => Number.isInteger(p) && p > 0)).toBe(true);
    process.kill(-pids[2]!, 'SIGKILL');
    await until(
      'restart line',
      () => /east\/sim-east-llm-b\/sim restarted and ready \(restart 1, pid \d+\)/.test(stdout),
      30_000,
    );
    expect(stdout).toMatch(
      /east\/sim-east-llm-b\/sim exited \(signal SIGKILL\) after [\d.]+ s running; restart 1 in 1 s \(log: .*east\.sim-east-llm-b\.sim\.log\)/,
    );
    const restartedPid = Number(
      /east\/sim-east-llm-b\/sim restarted and ready \(restart 1, pid (\d+)\)/.exec(stdout)?.[1],
    );
    expect(processAlive(restartedPid)).toBe(true);
    up.kill('SIGTERM');
    expect(await exited).toBe(0);
    const stopping = stdout.indexOf('SIGTERM: stopping every process');
    expect(stopping).toBeGreaterThan(0);
    expect(stdout.slice(stopping)).toMatch(/\] stopped\n/);
    // Every daemon exited during the stop; none of those exits was taken for a crash.
    expect(stdout.slice(stopping)).not.toMatch(/exited \(|restart/);
    expect([...pids, restartedPid].filter(processAlive)).toEqual([]);
  }, 150_000);
});
