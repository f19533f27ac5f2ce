// MountedFiles on real files: the material in force, a bad replacement kept out (logged once naming the file and the
// problem, never the bytes; counted), the next good one taken, an unreadable file reported once however often it is
// re-read, a bad version undone by the bytes in force, an oversized file refused unread, and a use() that refuses.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../daemons/shared/log.ts';
import { MountedFileError, MountedFiles } from '../../daemons/shared/mounted-files.ts';
import { tempDir } from '../gateway/helpers.ts';

interface Line {
  msg: string;
  problem?: string;
  [key: string]: unknown;
}

describe('MountedFiles', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(options: { use?: (next: number) => void; maxBytes?: number } = {}) {
    const { dir, cleanup } = await tempDir('mounted');
    cleanups.push(cleanup);
    const file = join(dir, 'count');
    await writeFile(file, '1');
    const lines: Line[] = [];
    const counts: string[] = [];
    const logger = createLogger({
      name: 'test',
      level: 'debug',
      destination: { write: (l: string) => void lines.push(JSON.parse(l) as Line) },
    });
    const files = new MountedFiles<number>({
      kind: 'count',
      name: 'the count',
      files: [file],
      maxBytes: options.maxBytes ?? 64,
      parse: ([bytes]) => {
        const text = bytes!.toString('utf8');
        if (!/^\d+$/.test(text)) throw new MountedFileError(`${file}: not a number`);
        return Number(text);
      },
      ...(options.use === undefined ? {} : { use: options.use }),
      logger,
      count: (outcome) => counts.push(outcome),
      pollIntervalMs: 0,
    });
    cleanups.push(() => files.close());
    return { file, files, lines, counts };
  }

  it('keeps the last good material through a bad replacement and takes the next good one', async () => {
    const { file, files, lines, counts } = await setup();
    expect(await files.start(false)).toEqual({ outcome: 'accepted' });
    expect(files.current()).toBe(1);
    await writeFile(file, 'secret-bytes-x');
    expect(await files.reload()).toEqual({ outcome: 'rejected', problem: `${file}: not a number` });
    expect(files.current()).toBe(1);
    // The same bad bytes again: reported to the caller, not logged or counted again.
    expect(await files.reload()).toEqual({ outcome: 'rejected', problem: `${file}: not a number` });
    await writeFile(file, '2');
    expect(await files.reload()).toEqual({ outcome: 'accepted' });
    expect(files.current()).toBe(2);
    expect(await files.reload()).toEqual({ outcome: 'unchanged' });
    expect(counts).toEqual(['accepted', 'rejected', 'accepted']);
    const warnings = lines.filter((l) => l.msg === 'count unusable; the previous one stays in force');
    expect(warnings.map((l) => [l.problem, l['file_kind'], l['name']])).toEqual([
      [`${file}: not a number`, 'count', 'the count'],
    ]);
    expect(JSON.stringify(lines)).not.toContain('secret-bytes-x');
    expect(lines.map((l) => l.msg)).toEqual([
      'count read',
      'count unusable; the previous one stays in force',
      'count reloaded',
    ]);
  });

  it('reports an unreadable file once, however often it is re-read, and says when nothing is in force yet', async () => {
    const { file, files, lines, counts } = await setup();
    await rm(file);
    const missing = { outcome: 'rejected', problem: `${file}: cannot be read (no such file)` };
    expect(await files.start(false)).toEqual(missing);
    expect(await files.reload()).toEqual(missing);
    expect(files.current()).toBeUndefined();
    expect(counts).toEqual(['rejected']);
    expect(lines.map((l) => l.msg)).toEqual(['count unusable; none in force yet']);
    await writeFile(file, '7');
    expect(await files.reload()).toEqual({ outcome: 'accepted' });
    expect(files.current()).toBe(7);
  });

  it('changes nothing when a bad version is undone by the bytes in force', async () => {
    const used: number[] = [];
    const { file, files, counts } = await setup({ use: (n) => used.push(n) });
    await files.start(false);
    await writeFile(file, 'x');
    await files.reload();
    await writeFile(file, '1');
    expect(await files.reload()).toEqual({ outcome: 'unchanged' });
    expect(used).toEqual([1]);
    expect(counts).toEqual(['accepted', 'rejected']);
  });

  it('refuses a file over maxBytes and material use() refuses', async () => {
    const { file, files } = await setup({
      maxBytes: 4,
      use: (n) => {
        if (n === 666) throw new Error('refused by use');
      },
    });
    await files.start(false);
    await writeFile(file, '123456');
    expect(await files.reload()).toEqual({ outcome: 'rejected', problem: `${file}: larger than 4 bytes` });
    await writeFile(file, '666');
    expect(await files.reload()).toEqual({ outcome: 'rejected', problem: 'refused by use' });
    expect(files.current()).toBe(1);
  });
});
