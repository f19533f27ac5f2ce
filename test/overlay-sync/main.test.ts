// The overlay-sync program as a real child process: init-container mode exits 0 once a valid overlay is
// written (and not before), sidecar mode serves health until SIGTERM, and bad configuration exits 2 with
// a message naming the setting.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { CONFIGMAP, fixtureText, makeTempDir, NAMESPACE, poll, publish, REPO_ROOT } from './helpers.ts';

const MAIN = join(REPO_ROOT, 'daemons/overlay-sync/main.ts');

interface Child {
  readonly process: ChildProcessWithoutNullStreams;
  readonly lines: Record<string, unknown>[];
  stderr: string;
  readonly exit: Promise<number | null>;
}

function start(args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'debug', ...env },
  });
  const result: Child = {
    process: child,
    lines: [],
    stderr: '',
    exit: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  let rest = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const line of parts) if (line.trim() !== '') result.lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    result.stderr += chunk;
  });
  return result;
}

describe('overlay-sync program', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  let operator: LocalStore;
  const children: Child[] = [];

  beforeEach(async () => {
    dir = await makeTempDir('sync-main');
    operator = await openLocalStore({ stateDir: join(dir.path, 'state') });
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.process.exitCode === null && child.process.signalCode === null) {
        child.process.kill('SIGKILL');
        await child.exit;
      }
    }
    await operator.close();
    await dir.remove();
  });

  const common = (output: string): string[] => [
    '--store',
    'local',
    '--state',
    join(dir.path, 'state'),
    '--namespace',
    NAMESPACE,
    '--configmap',
    CONFIGMAP,
    '--output',
    output,
  ];

  it('init-container mode waits for the first valid overlay, writes it and exits 0', async () => {
    const output = join(dir.path, 'run', 'routing-overlay.json');
    const child = start([...common(output)], { OVERLAY_SYNC_ONCE: 'true' });
    children.push(child);
    await poll(() => child.lines.some((l) => l['msg'] === 'overlay-sync started'), Boolean, 'startup log', 20_000);
    // No ConfigMap, then an invalid one: it keeps waiting.
    await publish(operator, await fixtureText('invalid-digest.json'));
    await poll(
      () => child.lines.some((l) => l['msg'] === 'overlay rejected; keeping last-known-good file'),
      Boolean,
      'rejection log',
    );
    expect(child.process.exitCode).toBeNull();
    const valid = await fixtureText('valid-multi-candidate.json');
    await publish(operator, valid);
    expect(await child.exit).toBe(0);
    expect(await readFile(output, 'utf8')).toBe(valid);
  });

  it('sidecar mode serves /livez and /readyz and exits 0 on SIGTERM', async () => {
    const output = join(dir.path, 'run', 'routing-overlay.json');
    const child = start([...common(output), '--health-addr', '127.0.0.1:0']);
    children.push(child);
    const listening = await poll(
      () => child.lines.find((l) => l['msg'] === 'health server listening'),
      (l) => l !== undefined,
      'health server',
      20_000,
    );
    const base = `http://127.0.0.1:${String(listening!['health_port'])}`;
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    await publish(operator, await fixtureText('valid-minimal.json'));
    await poll(
      async () => (await fetch(`${base}/readyz`)).status,
      (s) => s === 200,
      'ready after a valid overlay',
    );
    const status = (await (await fetch(`${base}/status`)).json()) as Record<string, any>;
    expect(status['state']).toBe('ready');
    expect(await (await fetch(`${base}/metrics`)).text()).toContain('grid_overlay_sync_ready 1');
    child.process.kill('SIGTERM');
    expect(await child.exit).toBe(0);
  });

  it('exits 2 and names the setting on bad configuration', async () => {
    const child = start(['--namespace', 'grid-system'], { OVERLAY_SYNC_MAX_BYTES: 'lots' });
    children.push(child);
    expect(await child.exit).toBe(2);
    expect(child.stderr).toContain('OVERLAY_SYNC_CONFIGMAP (--configmap) is required');
  });
});
