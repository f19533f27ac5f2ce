// The operator as PID 1 (issue 16): a real process on the local store, stopped with SIGTERM or SIGINT, answers
// /readyz 503 while its admin port still answers (the drain delay), then releases its Lease and exits 0 within a
// bound; a second signal during that shutdown exits at once with 128 + the signal.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';
import { readStateObject, renderFixture, startBackend, tempDir, waitFor, type Backend } from './helpers.ts';

/** `podman stop` must return in < 3 s (issue 16); the operator's own share of that. */
const EXIT_BOUND_MS = 3_000;

interface Running {
  readonly child: ChildProcess;
  readonly adminPort: number;
  readonly stateDir: string;
  output(): string;
  exit: Promise<number | null>;
}

let backend: Backend;
let dirs: { path: string; remove: () => Promise<void> };
const started: Running[] = [];

async function startOperator(name: string): Promise<Running> {
  const base = join(dirs.path, name);
  await renderFixture('single-site/grid.yaml', { BACKEND_URL: backend.url, API_TOKEN: 'tok-shutdown' }, join(base, 'manifests'));
  const stateDir = join(base, 'state');
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'daemons/gossip-operator/main.ts'),
      '--store', 'local', '--manifests', join(base, 'manifests'), '--state', stateDir,
      '--site', 'site-a', '--gossip-bind', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--swim-profile', 'loopback',
      '--lease-duration', '3s', '--provider-poll-interval', '1s', '--site-poll-interval', '1s',
    ],
    { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const running = await waitFor('the operator to log its admin address', () => /"admin":"127\.0\.0\.1:(\d+)"/.exec(output) ?? undefined);
  const operator = { child, adminPort: Number(running[1]), stateDir, output: () => output, exit };
  started.push(operator);
  // Ready means leader with synced watches; the GridNetwork status means a reconcile has run (and SWIM started).
  await waitFor('readiness', async () => ((await readyz(operator.adminPort)) === 200 ? true : undefined));
  await waitFor('the Lease held', async () => ((await lease(stateDir))?.spec?.holderIdentity ? true : undefined));
  return operator;
}

/** The status of GET /readyz, or 'closed' once nothing listens on the admin port. */
async function readyz(port: number): Promise<number | 'closed'> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(1_000) });
    await response.text();
    return response.status;
  } catch {
    return 'closed';
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function lease(stateDir: string): Promise<any> {
  const dir = join(stateDir, 'objects', 'coordination.k8s.io', 'Lease');
  for (const namespace of await readdir(dir).catch(() => [] as string[])) {
    for (const file of await readdir(join(dir, namespace))) {
      return readStateObject(stateDir, 'coordination.k8s.io', 'Lease', namespace, file.replace(/\.json$/, ''));
    }
  }
  return undefined;
}

/** Sends `signal`, polls /readyz until the process exits; returns what was seen, in order, and how it ended. */
async function stopWatching(operator: Running, signal: NodeJS.Signals): Promise<{ seen: Array<number | 'closed'>; code: number | null; elapsedMs: number }> {
  const seen: Array<number | 'closed'> = [];
  let exited = false;
  const t0 = Date.now();
  operator.child.kill(signal);
  const exit = operator.exit.then((code) => {
    exited = true;
    return code;
  });
  while (!exited) {
    const status = await readyz(operator.adminPort);
    if (seen.at(-1) !== status) seen.push(status);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const code = await exit;
  return { seen, code, elapsedMs: Date.now() - t0 };
}

beforeAll(async () => {
  backend = await startBackend();
  dirs = await tempDir('operator-shutdown');
});

afterAll(async () => {
  for (const { child, exit } of started) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exit;
    }
  }
  await backend?.close();
  await dirs?.remove();
});

describe.each(['SIGTERM', 'SIGINT'] as const)('gossip-operator process on %s', (signal) => {
  it('answers /readyz 503 while the admin port still answers, releases its Lease, exits 0 within the bound', async () => {
    const operator = await startOperator(signal.toLowerCase());
    const { seen, code, elapsedMs } = await stopWatching(operator, signal);
    // Ready never comes back once stopping began; the admin port answers "not ready" before it closes.
    expect(seen[0]).toBe(503);
    expect(seen).toEqual([503, 'closed']);
    expect(code).toBe(0);
    expect(elapsedMs).toBeLessThan(EXIT_BOUND_MS);
    // The leader released its Lease on the way out (a standby takes over without waiting for expiry).
    expect((await lease(operator.stateDir)).spec.holderIdentity).toBe('');
    expect(operator.output()).toContain(`"signal":"${signal}"`);
    expect(operator.output()).not.toContain('shutdown deadline passed');
  }, 30_000);
});

describe('gossip-operator process, second signal', () => {
  it('exits at once with 128 + the signal when a second SIGTERM arrives during the drain', async () => {
    const operator = await startOperator('second-signal');
    operator.child.kill('SIGTERM');
    await waitFor('not ready', async () => ((await readyz(operator.adminPort)) === 503 ? true : undefined), 2_000);
    const t0 = Date.now();
    operator.child.kill('SIGTERM');
    const code = await operator.exit;
    // Inside the drain delay: the first shutdown alone would still be waiting with its admin port open.
    expect(Date.now() - t0).toBeLessThan(400);
    expect(code).toBe(143);
    expect(operator.output()).toContain('second signal during shutdown; exiting now');
  }, 30_000);
});
