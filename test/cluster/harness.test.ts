// The starter's failure paths: a missing binary or a kube-apiserver that dies at start gives one clear error
// (naming the binary, with the daemon's own last words), and nothing it started is left running.
import { chmod, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveBinDir, startControlPlane } from './control-plane.ts';

// Pids of processes whose executable path starts with `prefix` (argv[0] is the path the starter spawned).
async function processesUnder(prefix: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.startsWith(prefix)) found.push(Number(entry));
  }
  return found;
}

describe('control-plane starter', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  it('names the missing binary and the build script when the binaries are absent', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'agn-no-bins-'));
    dirs.push(empty);
    await expect(startControlPlane({ binDir: empty })).rejects.toThrow(
      `etcd binary not found at ${join(empty, 'etcd')}; run test/cluster/build-control-plane.sh`,
    );
  });

  it('reports a kube-apiserver that exits at start with its log, and stops the etcd it had started', async () => {
    const real = resolveBinDir();
    const bins = await mkdtemp(join(tmpdir(), 'agn-broken-apiserver-'));
    dirs.push(bins);
    await symlink(join(real, 'etcd'), join(bins, 'etcd'));
    const broken = join(bins, 'kube-apiserver');
    await writeFile(broken, '#!/bin/sh\necho "E0000 run.go: invalid flag combination (test)" >&2\nexit 1\n');
    await chmod(broken, 0o755);

    await expect(startControlPlane({ binDir: bins, readyTimeoutMs: 60_000 })).rejects.toThrow(
      /kube-apiserver exited before it was ready; log tail[\s\S]*invalid flag combination \(test\)/,
    );
    // The real etcd ran from the symlink's path; none may outlive the failed start.
    expect(await processesUnder(bins)).toEqual([]);
  });
});
