// Each daemon's command line, as the compiled pods and users run it: --help prints the usage on stdout and exits 0;
// an unknown flag is one line on stderr naming the flag, exit 2 (the node suite checks the same from the image on a real node).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DAEMONS = ['gossip-operator', 'overlay-sync', 'gateway', 'sim'] as const;

function run(daemon: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [`daemons/${daemon}/main.ts`, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '' },
    timeout: 20_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('daemon command lines', () => {
  it.each(DAEMONS)('%s --help prints the usage on stdout and exits 0', (daemon) => {
    const result = run(daemon, ['--help']);
    expect(result.status).toBe(0);
    expect(result.stdout.toLowerCase()).toMatch(/^usage: /u);
    expect(result.stderr).toBe('');
  });

  it.each(DAEMONS)(
    '%s with an unknown flag writes one stderr line naming it, nothing on stdout, and exits 2',
    (daemon) => {
      const result = run(daemon, ['--no-such-flag']);
      expect(result.status).toBe(2);
      expect(result.stdout).toBe('');
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^${daemon}: Unknown option '--no-such-flag'`, 'u'));
    },
  );
});
