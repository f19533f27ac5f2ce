// Revisions of a site's records must stay monotonic across operator restarts, or peers would keep the old
// records forever (last writer wins). The publisher persists its high-water mark through this interface before
// using a revision; the operator backs it with the resource store, tests and the local runner with a file.
import { open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface RevisionStore {
  /** The highest revision ever saved; 0 when none. */
  load(): Promise<number>;
  save(revision: number): Promise<void>;
}

/** Revision to use next: above the high-water mark and, normally, the wall clock in ms (hybrid logical clock). */
export function nextRevision(highWater: number, nowMs: number): number {
  return Math.max(highWater + 1, Math.floor(nowMs));
}

export class RevisionStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RevisionStoreError';
  }
}

/** A decimal number in a file, replaced atomically (temp file, fsync, rename, fsync directory). */
export class FileRevisionStore implements RevisionStore {
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  async load(): Promise<number> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    const n = Number(text.trim());
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n)) {
      // Guessing a value could move revisions backwards; refuse and let the operator say where.
      throw new RevisionStoreError(
        `${this.path}: revision high-water mark must be a non-negative integer; fix or remove the file`,
      );
    }
    return n;
  }

  async save(revision: number): Promise<void> {
    if (!Number.isSafeInteger(revision) || revision < 0)
      throw new RevisionStoreError(`revision ${revision} is not a non-negative safe integer`);
    const tmp = `${this.path}.tmp-${process.pid}`;
    const f = await open(tmp, 'w');
    try {
      await f.writeFile(`${revision}\n`);
      await f.sync();
    } finally {
      await f.close();
    }
    await rename(tmp, this.path);
    const d = await open(dirname(this.path), 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }
}
