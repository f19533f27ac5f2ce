import { closeSync, openSync, readSync } from 'node:fs';
import { CliError } from './cli-error.ts';

/**
 * Reads FILE (or stdin for "-") up to `limit` bytes plus one, so a caller can tell "too big" without loading a
 * huge file into memory.
 */
export function readInput(file: string, limit: number): Buffer {
  let fd: number;
  try {
    fd = file === '-' ? 0 : openSync(file, 'r');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${describeFsError(error)}`, 2);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    const chunk = Buffer.allocUnsafe(64 * 1024);
    while (total <= limit) {
      let read: number;
      try {
        read = readSync(fd, chunk, 0, chunk.length, null);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') continue;
        throw new CliError(`cannot read ${file}: ${describeFsError(error)}`, 2);
      }
      if (read === 0) break;
      chunks.push(Buffer.from(chunk.subarray(0, read)));
      total += read;
    }
  } finally {
    if (fd !== 0) closeSync(fd);
  }
  const data = Buffer.concat(chunks);
  return data.length > limit + 1 ? data.subarray(0, limit + 1) : data;
}

/** Parses JSON text from a file into a value, or a one-line error naming the file and the position. */
export function parseJsonInput(data: Buffer, file: string): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    throw new CliError(`${file}: not valid UTF-8`, 1);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const where = /position \d+(?: \(line \d+ column \d+\))?/.exec(String((error as Error).message))?.[0];
    throw new CliError(`${file}: not valid JSON${where ? ` (at ${where})` : ''}`, 1);
  }
}

function describeFsError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EACCES':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    default:
      return code ?? 'read failed';
  }
}
