// Every mounted file one gateway keeps in force (caller keys, credential files, listener and upstream TLS), each set
// followed on disk by MountedFiles: read FILE_DEBOUNCE_MS after a change settles (the kubelet's `..data` swap, a
// rename, an in-place write), about 0.3 s in all, a bad version kept out, logged and counted in
// grid_gateway_file_reloads_total. This registry starts them before the gateway listens, re-reads them all on SIGHUP,
// and stops them on close. Each worker thread of `--workers N` has its own registry and follows the files itself, as it
// has its own overlay store (workers.ts says why).
import { MountedFiles, type MountedLoad } from '../shared/mounted-files.ts';
import type { Logger } from '../shared/log.ts';
import type { GatewayMetrics } from './metrics.ts';

export type GatewayFileKind = 'caller_keys' | 'credential' | 'listener_tls' | 'upstream_tls';

/** How long after a directory event a file set is read: the writes of one update (a cert, then its key) settle. */
export const FILE_DEBOUNCE_MS = 250;
/** The safety re-read when a file system loses events. */
export const FILE_POLL_INTERVAL_MS = 5_000;

export interface GatewayFilesOptions {
  readonly configDir: string;
  readonly logger: Logger;
  readonly metrics: Pick<GatewayMetrics, 'fileReloads'>;
  /** @default FILE_POLL_INTERVAL_MS; 0 disables the safety re-read (tests). */
  readonly pollIntervalMs?: number;
}

export interface FileSetSpec<T> {
  readonly kind: GatewayFileKind;
  readonly name: string;
  /** Paths as the config writes them: relative ones are under the config's directory. */
  readonly files: readonly string[];
  /** How read problems name each file; the resolved path by default. */
  readonly labels?: readonly string[];
  readonly maxBytes: number;
  readonly parse: (contents: readonly Buffer[]) => T;
  readonly use?: (next: T, previous: T | undefined) => void;
  readonly fields?: (material: T) => Record<string, unknown>;
}

export class GatewayFiles {
  readonly #o: GatewayFilesOptions;
  readonly #sets: MountedFiles<unknown>[] = [];
  readonly #started = new WeakSet<MountedFiles<unknown>>();

  constructor(options: GatewayFilesOptions) {
    this.#o = options;
  }

  resolve(path: string): string {
    return path.startsWith('/') ? path : `${this.#o.configDir}/${path}`;
  }

  /** Registers a file set; start() reads it. */
  add<T>(spec: FileSetSpec<T>): MountedFiles<T> {
    const set = new MountedFiles<T>({
      kind: spec.kind,
      name: spec.name,
      files: spec.files.map((file) => this.resolve(file)),
      ...(spec.labels === undefined ? {} : { labels: spec.labels }),
      maxBytes: spec.maxBytes,
      parse: spec.parse,
      ...(spec.use === undefined ? {} : { use: spec.use }),
      ...(spec.fields === undefined ? {} : { fields: spec.fields }),
      logger: this.#o.logger,
      count: (outcome) => this.#o.metrics.fileReloads.inc({ file_kind: spec.kind, outcome }),
      debounceMs: FILE_DEBOUNCE_MS,
      pollIntervalMs: this.#o.pollIntervalMs ?? FILE_POLL_INTERVAL_MS,
    });
    this.#sets.push(set as MountedFiles<unknown>);
    return set;
  }

  /**
   * Registers and reads a file set the gateway cannot start without (TLS material): returns the material, or throws
   * the problem (naming the file) when the first read is refused.
   */
  async require<T>(spec: FileSetSpec<T>): Promise<T> {
    const set = this.add(spec);
    const first = await this.#start(set as MountedFiles<unknown>);
    const current = set.current();
    if (first.outcome === 'rejected' || current === undefined)
      throw new Error(first.outcome === 'rejected' ? first.problem : `${spec.kind} ${spec.name}: not read`);
    return current;
  }

  /** Reads every registered set not read yet, and follows it from then on. */
  async start(): Promise<void> {
    await Promise.all(this.#sets.map((set) => this.#start(set)));
  }

  /** Re-reads every set now (SIGHUP): what changed is taken, what is bad is refused as on a watch. */
  async reload(): Promise<void> {
    await Promise.all(this.#sets.map((set) => set.reload('signal')));
  }

  close(): void {
    for (const set of this.#sets) set.close();
  }

  #start(set: MountedFiles<unknown>): Promise<MountedLoad> {
    if (this.#started.has(set)) return Promise.resolve({ outcome: 'unchanged' });
    this.#started.add(set);
    return set.start();
  }
}
