// One file a daemon keeps loaded while something else replaces it (the gateway's overlay and serving config, written
// by overlay-sync or swapped by the kubelet's `..data` symlink): a bounded read, a watch on the file's directory so
// renames and the symlink swap are seen, a debounce, a safety re-read for file systems whose events can be lost, and
// one load at a time (triggers during a load coalesce into one follow-up). What a load accepts is the caller's.
import { watch, type FSWatcher } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename, dirname } from 'node:path';

/** Reads at most `maxBytes + 1` bytes, so a validator can report the file oversized without buffering all of it. */
export async function readBounded(path: string, maxBytes: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(Math.min((await handle.stat()).size, maxBytes) + 1);
    let offset = 0;
    while (offset < buffer.length) {
      const { bytesRead } = await handle.read(buffer, offset, buffer.length - offset, offset);
      if (bytesRead === 0) break;
      offset += bytesRead;
    }
    return buffer.subarray(0, offset);
  } finally {
    await handle.close();
  }
}

export interface WatchedFileOptions<T> {
  readonly file: string;
  /** Delay between a directory event and the load it triggers. */
  readonly debounceMs: number;
  /** Safety re-read interval; 0 disables it. */
  readonly pollIntervalMs: number;
  /** One load of the file; `trigger` says why (startup, watch, or the caller's own word). */
  readonly load: (trigger: string) => Promise<T>;
}

export class WatchedFile<T> {
  readonly #o: WatchedFileOptions<T>;
  #watcher: FSWatcher | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #retryWatch: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #loading: Promise<T> | undefined;
  #again = false;
  #closed = false;

  constructor(options: WatchedFileOptions<T>) {
    this.#o = options;
  }

  /** Loads once; with `follow`, then follows the file until close(). */
  async start(follow = true): Promise<T> {
    const first = await this.reload('startup');
    if (!follow || this.#closed) return first;
    this.#startWatch();
    if (this.#o.pollIntervalMs > 0) {
      this.#poll = setInterval(() => this.#schedule(0), this.#o.pollIntervalMs);
      this.#poll.unref();
    }
    return first;
  }

  close(): void {
    this.#closed = true;
    this.#watcher?.close();
    clearTimeout(this.#debounce);
    clearTimeout(this.#retryWatch);
    clearInterval(this.#poll);
  }

  /** One load attempt; concurrent triggers coalesce into one follow-up load. */
  reload(trigger: string): Promise<T> {
    if (this.#loading !== undefined) {
      this.#again = true;
      return this.#loading;
    }
    this.#loading = this.#o.load(trigger).finally(() => {
      this.#loading = undefined;
      if (this.#again && !this.#closed) {
        this.#again = false;
        void this.reload(trigger);
      }
    });
    return this.#loading;
  }

  #startWatch(): void {
    if (this.#closed) return;
    const name = basename(this.#o.file);
    try {
      this.#watcher = watch(dirname(this.#o.file), { persistent: false }, (_event, filename) => {
        // Kubernetes swaps `..data`; editors and overlay-sync rename dot-named temp files: any may change our file.
        if (filename === null || filename === name || filename.startsWith('.')) this.#schedule(this.#o.debounceMs);
      });
      this.#watcher.on('error', () => {
        this.#watcher?.close();
        this.#watcher = undefined;
        this.#retryWatchLater();
      });
    } catch {
      // The directory may not exist yet (overlay-sync has not written): try again shortly.
      this.#retryWatchLater();
    }
  }

  #retryWatchLater(): void {
    if (this.#closed || this.#retryWatch !== undefined) return;
    this.#retryWatch = setTimeout(() => {
      this.#retryWatch = undefined;
      this.#startWatch();
      this.#schedule(0);
    }, 1_000);
    this.#retryWatch.unref();
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      void this.reload('watch');
    }, delayMs);
    this.#debounce.unref();
  }
}
