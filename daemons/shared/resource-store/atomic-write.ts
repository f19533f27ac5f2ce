// Crash-safe file replacement: a reader sees either the old bytes or the new bytes, never a mix, and after
// the directory fsync the new name survives a power cut. Used by overlay-sync for the serving overlay file
// and by the local store for its per-object state files.

import { randomBytes } from 'node:crypto';
import { open, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Temp files are hidden (leading dot) so a directory watcher filtering on the target name ignores them. */
export function tempNameFor(target: string): string {
  return join(dirname(target), `.${basename(target)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
}

export function isTempNameFor(target: string, candidate: string): boolean {
  return candidate.startsWith(`.${basename(target)}.tmp-`);
}

/**
 * Temp file in the same directory (rename is only atomic within one file system), write, fsync, rename over
 * the target, fsync the directory. On any failure the temp file is removed and the target is untouched.
 */
export async function writeFileAtomic(target: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
  const temp = tempNameFor(target);
  let renamed = false;
  try {
    const handle = await open(temp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
    renamed = true;
    await fsyncDirectory(dirname(target));
  } finally {
    if (!renamed) await rm(temp, { force: true });
  }
}

export async function fsyncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Removes temp files a crashed writer left behind for `target` (a kill between write and rename leaves one).
 * Files of a live process other than this one are kept: that writer may be mid-write. Returns how many
 * were removed.
 */
export async function removeStaleTempFiles(target: string): Promise<number> {
  let removed = 0;
  let entries: string[];
  try {
    entries = await readdir(dirname(target));
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (isTempNameFor(target, entry) && !ownedByOtherLiveProcess(entry)) {
      await rm(join(dirname(target), entry), { force: true });
      removed += 1;
    }
  }
  return removed;
}

function ownedByOtherLiveProcess(tempName: string): boolean {
  const match = /\.tmp-(\d+)-[0-9a-f]+$/.exec(tempName);
  const pid = match?.[1] === undefined ? NaN : Number(match[1]);
  if (!Number.isInteger(pid) || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
