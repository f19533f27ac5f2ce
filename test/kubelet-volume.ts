// A directory laid out and updated the way the kubelet's AtomicWriter lays out a Secret, ConfigMap or projected
// volume: the payload in a timestamped `..<n>` directory, `..data -> ..<n>`, and one symlink per top-level entry
// (`keys.json -> ..data/keys.json`, `tls -> ..data/tls` for a projected item path `tls/tls.crt`). An update writes the
// whole new payload into a new timestamped directory, points `..data_tmp` at it, renames that over `..data` (the one
// atomic step), adds symlinks for new top-level entries, and removes the old directory: what a pod sees when the
// Secret changes. Real files and real renames; only the kubelet itself is absent.
import { mkdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export type VolumePayload = Readonly<Record<string, string | Buffer>>;

export class KubeletVolume {
  readonly dir: string;
  #generation = 0;
  #entries = new Set<string>();

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** Lays out `payload` (paths relative to the volume, `/`-separated) in `dir`, which is created. */
  static async create(dir: string, payload: VolumePayload): Promise<KubeletVolume> {
    await mkdir(dir, { recursive: true });
    const volume = new KubeletVolume(dir);
    const generation = await volume.#write(payload);
    await symlink(generation, join(dir, '..data'));
    await volume.#link(payload);
    return volume;
  }

  /** The path a container reads for `item`. */
  path(item: string): string {
    return join(this.dir, item);
  }

  /** Replaces the whole payload as the kubelet does on a Secret update. */
  async update(payload: VolumePayload): Promise<void> {
    const old = await readlink(join(this.dir, '..data'));
    const generation = await this.#write(payload);
    const tmp = join(this.dir, '..data_tmp');
    await symlink(generation, tmp);
    await rename(tmp, join(this.dir, '..data'));
    await this.#link(payload);
    await rm(join(this.dir, old), { recursive: true, force: true });
  }

  async #write(payload: VolumePayload): Promise<string> {
    const name = `..2026_01_01_00_00_00.${String(++this.#generation).padStart(9, '0')}`;
    for (const [item, content] of Object.entries(payload)) {
      const file = join(this.dir, name, item);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, content, { mode: 0o600 });
    }
    return name;
  }

  async #link(payload: VolumePayload): Promise<void> {
    for (const item of Object.keys(payload)) {
      const top = item.split('/')[0]!;
      if (this.#entries.has(top)) continue;
      this.#entries.add(top);
      await symlink(join('..data', top), join(this.dir, top));
    }
  }
}
