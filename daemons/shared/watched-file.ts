// One file, or a few read together (a certificate and its key), that a daemon keeps loaded while something else
// replaces it (the gateway's overlay and serving config written by overlay-sync, a Secret or ConfigMap volume swapped
// by the kubelet): a bounded read, a watch on each file's directory so renames and in-place writes are seen, a
// debounce, a safety re-read for file systems whose events can be lost, and one load at a time (triggers during a
// load coalesce into one follow-up). What a load accepts is the caller's.
//
// The kubelet's update is a symlink swap: it writes a new `..<timestamp>` directory, points `..data_tmp` at it and
// renames that over `..data`, and the names in the volume (`keys.json -> ..data/keys.json`, or a projected
// `tls -> ..data/tls`) resolve through it. A file whose own directory is such a symlink (`/etc/praxis/tls/tls.crt`)
// would be watched in the old timestamped directory, which is deleted after the first swap and never changes again;
// so each symlink on the way to a file's directory has its parent watched too (where `..data` is renamed), and the
// watches are set again whenever a directory resolves elsewhere than it did.
import { lstatSync, realpathSync, watch, type FSWatcher } from 'node:fs';
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
  /** The file, or the files one load reads: a change to any of them triggers the load. */
  readonly file: string | readonly string[];
  /** Delay between a directory event and the load it triggers. */
  readonly debounceMs: number;
  /** Safety re-read interval; 0 disables it. */
  readonly pollIntervalMs: number;
  /** One load of the file; `trigger` says why (startup, watch, or the caller's own word). */
  readonly load: (trigger: string) => Promise<T>;
}

/** One directory to watch and the entry names in it that may change a watched file. */
interface WatchTarget {
  readonly dir: string;
  readonly names: ReadonlySet<string>;
  /** Where the directory resolves now: a change means the watch is on a directory the kubelet has replaced. */
  readonly real: string;
}

/**
 * The directories to watch for `files`: each file's directory, and the parent of every symlink on the way to it
 * (the directory where the kubelet renames `..data`). Throws when a directory does not exist (yet).
 */
export function watchTargets(files: readonly string[]): WatchTarget[] {
  const byDir = new Map<string, Set<string>>();
  const add = (dir: string, name: string): void => {
    const names = byDir.get(dir) ?? new Set<string>();
    names.add(name);
    byDir.set(dir, names);
  };
  for (const file of files) {
    add(dirname(file), basename(file));
    for (let path = dirname(file); dirname(path) !== path; path = dirname(path)) {
      if (lstatSync(path).isSymbolicLink()) add(dirname(path), basename(path));
    }
  }
  return [...byDir].map(([dir, names]) => ({ dir, names, real: realpathSync(dir) }));
}

export class WatchedFile<T> {
  readonly #o: WatchedFileOptions<T>;
  readonly #files: readonly string[];
  #watchers: FSWatcher[] = [];
  /** The targets the watchers were set on, as `dir=real` pairs, to see when one resolves elsewhere. */
  #watching = '';
  #debounce: NodeJS.Timeout | undefined;
  #retryWatch: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #loading: Promise<T> | undefined;
  #again = false;
  #closed = false;

  constructor(options: WatchedFileOptions<T>) {
    this.#o = options;
    this.#files = typeof options.file === 'string' ? [options.file] : options.file;
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
    this.#unwatch();
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
    let targets: WatchTarget[];
    try {
      targets = watchTargets(this.#files);
    } catch {
      // A directory may not exist yet (overlay-sync has not written): try again shortly.
      this.#unwatch();
      this.#retryWatchLater();
      return;
    }
    const key = targets.map((t) => `${t.dir}=${t.real}`).join('\n');
    if (key === this.#watching && this.#watchers.length === targets.length) return;
    this.#unwatch();
    try {
      for (const target of targets) {
        const watcher = watch(target.dir, { persistent: false }, (_event, filename) => {
          // Kubernetes swaps `..data`; editors and overlay-sync rename dot-named temp files: any may change a file.
          if (filename === null || target.names.has(filename) || filename.startsWith('.'))
            this.#schedule(this.#o.debounceMs);
        });
        watcher.on('error', () => {
          this.#unwatch();
          this.#retryWatchLater();
        });
        this.#watchers.push(watcher);
      }
      this.#watching = key;
    } catch {
      this.#unwatch();
      this.#retryWatchLater();
    }
  }

  #unwatch(): void {
    for (const watcher of this.#watchers) watcher.close();
    this.#watchers = [];
    this.#watching = '';
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
      // After a `..data` swap a watch may sit on the deleted directory: set the watches again where they moved.
      this.#startWatch();
      void this.reload('watch');
    }, delayMs);
    this.#debounce.unref();
  }
}
