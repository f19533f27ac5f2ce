// WatchedFile on real directories, with the safety re-read off so only the watch can see a change: the kubelet's
// `..data` swap of a file at the volume's top and of one under a projected subdirectory (`tls -> ..data/tls`, whose
// timestamped directory is deleted by the first swap), several swaps in a row, a set of files read as one, an
// in-place write, a rename over the file, and a directory that appears only after start.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WatchedFile } from '../../daemons/shared/watched-file.ts';
import { KubeletVolume } from '../kubelet-volume.ts';
import { tempDir, waitFor } from '../gateway/helpers.ts';

const BOUND_MS = 3_000;

describe('WatchedFile', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** Follows `files`, recording what every load read (the files' contents joined with '+'). */
  async function follow(files: string | string[]): Promise<string[]> {
    const seen: string[] = [];
    const watched = new WatchedFile({
      file: files,
      debounceMs: 20,
      pollIntervalMs: 0,
      load: async () => {
        const text = (
          await Promise.all(
            (typeof files === 'string' ? [files] : files).map((f) => readFile(f, 'utf8').catch(() => '-')),
          )
        ).join('+');
        seen.push(text);
        return text;
      },
    });
    cleanups.push(() => watched.close());
    await watched.start();
    return seen;
  }

  const until = (seen: string[], text: string): Promise<boolean> =>
    waitFor(
      `a load reading "${text}" (seen: ${seen.join(', ')})`,
      () => (seen.at(-1) === text ? true : undefined),
      BOUND_MS,
    );

  it('follows a file of a projected subdirectory across several `..data` swaps', async () => {
    const { dir, cleanup } = await tempDir('wf-projected');
    cleanups.push(cleanup);
    const volume = await KubeletVolume.create(join(dir, 'praxis'), { 'tls/tls.crt': 'v1', 'praxis.yaml': 'c' });
    const seen = await follow(volume.path('tls/tls.crt'));
    expect(seen).toEqual(['v1']);
    for (const version of ['v2', 'v3', 'v4']) {
      await volume.update({ 'tls/tls.crt': version, 'praxis.yaml': 'c' });
      await until(seen, version);
    }
  });

  it('follows a file two directories under a projected entry (credentials/<secret>/<key>)', async () => {
    const { dir, cleanup } = await tempDir('wf-nested');
    cleanups.push(cleanup);
    const volume = await KubeletVolume.create(join(dir, 'praxis'), { 'credentials/s/token': 't1' });
    const seen = await follow(volume.path('credentials/s/token'));
    await volume.update({ 'credentials/s/token': 't2' });
    await until(seen, 't2');
    await volume.update({ 'credentials/s/token': 't3' });
    await until(seen, 't3');
  });

  it('follows a file at the top of a Secret volume', async () => {
    const { dir, cleanup } = await tempDir('wf-secret');
    cleanups.push(cleanup);
    const volume = await KubeletVolume.create(join(dir, 'secret'), { token: 'a' });
    const seen = await follow(volume.path('token'));
    await volume.update({ token: 'b' });
    await until(seen, 'b');
    await volume.update({ token: 'c' });
    await until(seen, 'c');
  });

  it('reads several files as one set, in two volumes, loading when either changes', async () => {
    const { dir, cleanup } = await tempDir('wf-set');
    cleanups.push(cleanup);
    const site = await KubeletVolume.create(join(dir, 'site'), { 'tls.crt': 's1' });
    const ca = await KubeletVolume.create(join(dir, 'ca'), { 'tls.crt': 'c1' });
    const seen = await follow([site.path('tls.crt'), ca.path('tls.crt')]);
    expect(seen).toEqual(['s1+c1']);
    await ca.update({ 'tls.crt': 'c2' });
    await until(seen, 's1+c2');
    await site.update({ 'tls.crt': 's2' });
    await until(seen, 's2+c2');
  });

  it('sees a plain in-place write and a rename over the file', async () => {
    const { dir, cleanup } = await tempDir('wf-plain');
    cleanups.push(cleanup);
    const file = join(dir, 'keys.json');
    await writeFile(file, 'one');
    const seen = await follow(file);
    await writeFile(file, 'two');
    await until(seen, 'two');
    await writeFile(join(dir, 'keys.json.tmp'), 'three');
    await rename(join(dir, 'keys.json.tmp'), file);
    await until(seen, 'three');
  });

  it('starts watching a directory that appears after start', async () => {
    const { dir, cleanup } = await tempDir('wf-late');
    cleanups.push(cleanup);
    const file = join(dir, 'later', 'overlay.json');
    const seen = await follow(file);
    expect(seen).toEqual(['-']);
    await mkdir(join(dir, 'later'));
    await writeFile(file, 'here');
    await until(seen, 'here');
  });
});
