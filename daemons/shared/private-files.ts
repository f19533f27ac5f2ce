/**
 * Files that hold key or token bytes (private keys, credential tokens, the SWIM key) are readable by their owner
 * only: 0600, in directories of 0700. A mode passed to open() applies only when the file is created, so a file or
 * directory an earlier version (or a copy) left wider is tightened explicitly, before the new bytes go in.
 */
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** Creates `dir` (and missing parents) 0700 and tightens `dir` itself if it exists wider. */
export function ensurePrivateDirSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
}

/**
 * Replaces `path` with `data` at 0600: written to a 0600 temp file beside it and renamed over, so the bytes are never
 * in a file of a wider mode, even when `path` existed as 0644.
 */
export function writePrivateFileSync(path: string, data: string | Uint8Array): void {
  const temp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  let renamed = false;
  try {
    const fd = openSync(temp, 'wx', PRIVATE_FILE_MODE);
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
    renamed = true;
  } finally {
    if (!renamed) rmSync(temp, { force: true });
  }
}

/** Tightens an existing key file to 0600 (kept from an earlier start); a missing file is left for the writer. */
export function tightenPrivateFileSync(path: string): void {
  if (existsSync(path)) chmodSync(path, PRIVATE_FILE_MODE);
}
