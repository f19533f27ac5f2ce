// On-disk layout of the local store's state directory, shared by every process that opens it:
//
//   <state>/resource-version                     last issued resourceVersion (decimal)
//   <state>/resource-version.lock                held while one write is in flight (any process)
//   <state>/objects/<group|core>/<Kind>/<namespace|_cluster>/<name>.json   one object per file
//   <state>/journal/<group|core>.<Kind>           last resourceVersion written for that kind
//
// Every write takes the lock, issues the next resourceVersion and replaces the object file atomically, so
// resourceVersions are monotonic across processes and a watcher never sees an older one appear after a newer.
// Watchers follow the flat journal directory rather than the object tree: Node's recursive fs.watch on Linux
// misses an unlink after a rename-over in a subdirectory, while a plain directory watch sees every rename.

import { chmod, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-files.ts';
import { writeFileAtomic } from './atomic-write.ts';
import { ResourceStoreError } from './errors.ts';
import type { KubeObject } from './types.ts';

const CLUSTER_SCOPE_DIR = '_cluster';
// A lock older than this belongs to a writer that died holding it (a write takes milliseconds).
const STALE_LOCK_MS = 10_000;
// Kinds whose objects carry key or token bytes: their files are 0600 and their directories 0700, like a kubelet's
// Secret volume, so another local user cannot read a credential out of the state directory.
const PRIVATE_KINDS = new Set(['core/Secret']);

export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? 'core' : apiVersion.slice(0, slash);
}

export class StateDir {
  readonly root: string;
  readonly #objects: string;
  readonly #journal: string;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(root: string) {
    this.root = root;
    this.#objects = join(root, 'objects');
    this.#journal = join(root, 'journal');
  }

  async init(): Promise<void> {
    await mkdir(this.#objects, { recursive: true });
    await mkdir(this.#journal, { recursive: true });
    await this.#tightenPrivateKinds();
  }

  /** Objects of a private kind written by an earlier version (0644 files, 0755 directories) are tightened on open. */
  async #tightenPrivateKinds(): Promise<void> {
    for (const id of PRIVATE_KINDS) {
      const [group, kind] = id.split('/') as [string, string];
      const kindDir = join(this.#objects, group, kind);
      try {
        await chmod(kindDir, PRIVATE_DIR_MODE);
        for (const scope of await listDir(kindDir)) {
          await chmod(join(kindDir, scope), PRIVATE_DIR_MODE);
          for (const file of await listDir(join(kindDir, scope)))
            await chmod(join(kindDir, scope, file), PRIVATE_FILE_MODE);
        }
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // ENOENT: no such object yet (or removed meanwhile). EPERM: another user's files; their owner tightens them.
        if (code !== 'ENOENT' && code !== 'EPERM') throw error;
      }
    }
  }

  get journalDir(): string {
    return this.#journal;
  }

  /** Journal entry name for a kind; a watcher maps fs events on the journal back to subscriptions with it. */
  journalName(apiVersion: string, kind: string): string {
    return `${groupOf(apiVersion)}.${kind}`;
  }

  get objectsDir(): string {
    return this.#objects;
  }

  kindDir(apiVersion: string, kind: string): string {
    return join(this.#objects, groupOf(apiVersion), kind);
  }

  objectPath(apiVersion: string, kind: string, namespace: string | undefined, name: string): string {
    return join(this.kindDir(apiVersion, kind), namespace ?? CLUSTER_SCOPE_DIR, `${name}.json`);
  }

  async readObject(path: string): Promise<KubeObject | undefined> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    try {
      return JSON.parse(text) as KubeObject;
    } catch (error) {
      // Files are replaced atomically, so this is a hand edit gone wrong: say which file.
      throw new ResourceStoreError('manifest', `state file ${path} is not valid JSON (${(error as Error).message})`);
    }
  }

  /** Every object of one kind, optionally restricted to one namespace and/or one name (reads only that file). */
  async readKind(apiVersion: string, kind: string, namespace?: string, name?: string): Promise<KubeObject[]> {
    const base = this.kindDir(apiVersion, kind);
    if (name !== undefined) {
      if (namespace !== undefined) {
        const one = await this.readObject(join(base, namespace, `${name}.json`));
        return one === undefined ? [] : [one];
      }
    }
    const scopes = namespace !== undefined ? [namespace] : await listDir(base);
    const out: KubeObject[] = [];
    for (const scope of scopes) {
      const files =
        name !== undefined ? [`${name}.json`] : (await listDir(join(base, scope))).filter((f) => f.endsWith('.json'));
      for (const file of files) {
        const object = await this.readObject(join(base, scope, file));
        if (object !== undefined) out.push(object);
      }
    }
    return out;
  }

  async currentResourceVersion(): Promise<string> {
    try {
      return (await readFile(join(this.root, 'resource-version'), 'utf8')).trim() || '0';
    } catch {
      return '0';
    }
  }

  /**
   * Runs `change` under the cross-process lock with the next resourceVersion. `change` returns the object to
   * write (with that resourceVersion set), `null` to delete the file, or `undefined` for "no change" (the
   * resourceVersion is then not consumed).
   */
  async mutate<T>(
    path: string,
    change: (current: KubeObject | undefined, nextRv: string) => { write: KubeObject | null | undefined; result: T },
  ): Promise<T> {
    const run = this.#queue.then(() => this.#mutateLocked(path, change));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #mutateLocked<T>(
    path: string,
    change: (current: KubeObject | undefined, nextRv: string) => { write: KubeObject | null | undefined; result: T },
  ): Promise<T> {
    const release = await this.#lock();
    try {
      const current = await this.readObject(path);
      const last = BigInt(await this.currentResourceVersion());
      const nextRv = (last + 1n).toString();
      const { write, result } = change(current, nextRv);
      if (write === undefined) return result;
      await writeFileAtomic(join(this.root, 'resource-version'), `${nextRv}\n`);
      const object = write ?? current;
      if (write === null) {
        await rm(path, { force: true });
      } else if (PRIVATE_KINDS.has(`${groupOf(write.apiVersion)}/${write.kind}`)) {
        const kindDir = this.kindDir(write.apiVersion, write.kind);
        await mkdir(join(kindDir, '..'), { recursive: true });
        await mkdir(join(path, '..'), { recursive: true, mode: PRIVATE_DIR_MODE });
        // Directories an earlier version created 0755 are tightened too (mkdir's mode applies only when it creates).
        await chmod(kindDir, PRIVATE_DIR_MODE);
        await chmod(join(path, '..'), PRIVATE_DIR_MODE);
        await writeFileAtomic(path, `${JSON.stringify(write, null, 2)}\n`, PRIVATE_FILE_MODE);
      } else {
        await mkdir(join(path, '..'), { recursive: true });
        await writeFileAtomic(path, `${JSON.stringify(write, null, 2)}\n`);
      }
      if (object !== undefined) await this.#touchJournal(object, nextRv);
      return result;
    } finally {
      await release();
    }
  }

  /** A change signal only (the object file is the truth), so no fsync: a lost entry costs one rescan period. */
  async #touchJournal(object: KubeObject, rv: string): Promise<void> {
    const name = this.journalName(object.apiVersion, object.kind);
    const entry = join(this.#journal, name);
    // Writes are serialized by the lock, so one temp name per process cannot collide.
    const temp = join(this.#journal, `.${name}.${process.pid}.tmp`);
    await writeFile(temp, `${rv}\n`);
    await rename(temp, entry);
  }

  async #lock(): Promise<() => Promise<void>> {
    const lockPath = join(this.root, 'resource-version.lock');
    const deadline = Date.now() + 2 * STALE_LOCK_MS;
    for (let attempt = 0; ; attempt += 1) {
      try {
        const handle = await open(lockPath, 'wx');
        await handle.writeFile(`${process.pid}\n`);
        await handle.close();
        return () => rm(lockPath, { force: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const info = await stat(lockPath).catch(() => undefined);
      if (info !== undefined && Date.now() - info.mtimeMs > STALE_LOCK_MS) {
        await rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new ResourceStoreError(
          'unavailable',
          `state directory ${this.root} stays locked by ${lockPath}; remove it if no daemon is running`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(2 + attempt, 20)));
    }
  }
}

async function listDir(path: string): Promise<string[]> {
  try {
    return (await readdir(path)).filter((entry) => !entry.startsWith('.'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** Every object in the state directory, whatever its kind (used to prune objects the manifests dropped). */
export async function readAllObjects(state: StateDir): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  for (const group of await listDir(state.objectsDir)) {
    for (const kind of await listDir(join(state.objectsDir, group))) {
      for (const scope of await listDir(join(state.objectsDir, group, kind))) {
        for (const file of await listDir(join(state.objectsDir, group, kind, scope))) {
          if (!file.endsWith('.json')) continue;
          const object = await state.readObject(join(state.objectsDir, group, kind, scope, file));
          if (object !== undefined) out.push(object);
        }
      }
    }
  }
  return out;
}
