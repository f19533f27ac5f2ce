// The site's ingest token for tests: a token file as the kubelet projects a Secret (a timestamped directory, the
// `..data` symlink to it, and `token` -> `..data/token`), rotated the way the kubelet does it (a new directory, a
// new symlink renamed over `..data` in one step), and the header that carries it.
import { mkdirSync, mkdtempSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TEST_INGEST_TOKEN = 'test-ingest-token-3c9f2a7d1e5b';

export const ingestAuth = (token = TEST_INGEST_TOKEN): { authorization: string } => ({
  authorization: `Bearer ${token}`,
});

export interface ProjectedToken {
  /** The path a daemon is given: `<dir>/token`. */
  readonly file: string;
  /** Swaps a new token in as the kubelet does; the old directory is removed. */
  rotate(token: string): void;
}

let generation = 0;

/** A projected-volume directory at `dir` holding `token` under key `token`. */
export function projectedToken(dir: string, token = TEST_INGEST_TOKEN): ProjectedToken {
  mkdirSync(dir, { recursive: true });
  const version = (value: string): string => {
    const name = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${generation++}`;
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'token'), `${value}\n`, { mode: 0o440 });
    return name;
  };
  symlinkSync(version(token), join(dir, '..data'));
  symlinkSync(join('..data', 'token'), join(dir, 'token'));
  return {
    file: join(dir, 'token'),
    rotate(next: string) {
      const previous = readlinkSync(join(dir, '..data'));
      symlinkSync(version(next), join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, previous), { recursive: true, force: true });
    },
  };
}

let shared: string | undefined;

/** One projected TEST_INGEST_TOKEN per test process, for tests about something else than the token; removed at exit. */
export function testTokenFile(): string {
  if (shared === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'ingest-token-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    shared = projectedToken(join(dir, 'ingest-token')).file;
  }
  return shared;
}
