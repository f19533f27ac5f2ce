// Material a daemon reads from mounted files and keeps in force while the kubelet (or anyone) replaces them: caller
// keys, a credential, a certificate with its key. The files are followed by WatchedFile; each load reads every file,
// skips when the bytes are what was last read, parses, and takes the result into use. A file that is unreadable or
// does not parse keeps the last good material in force, is logged once per bad version (naming the file and the
// problem, never its bytes) and counted; the next good write is taken. The request path only reads current().
import { createHash } from 'node:crypto';
import { redactText, type Logger } from './log.ts';
import { WatchedFile, readBounded } from './watched-file.ts';

export type MountedLoad =
  | { readonly outcome: 'accepted' }
  | { readonly outcome: 'unchanged' }
  | { readonly outcome: 'rejected'; readonly problem: string };

/** A problem a parse reports: its message names the file and what is wrong, and holds none of the file's bytes. */
export class MountedFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MountedFileError';
  }
}

export interface MountedFilesOptions<T> {
  /** What the files hold, for log lines and the metric label: caller_keys, credential, listener_tls, … */
  readonly kind: string;
  /** Which one of its kind (a listener, a cluster, a credential), for log lines. */
  readonly name: string;
  /** Absolute paths, read together on every load. */
  readonly files: readonly string[];
  /** How a read problem names each file (a flag or config field with the path); the path itself by default. */
  readonly labels?: readonly string[];
  /** Bound on each file's size: a larger file is refused, not read. */
  readonly maxBytes: number;
  /**
   * The material from the files' contents (in `files` order). Throws a MountedFileError naming the file and the
   * problem; any other error counts as a bad file too, reported by its message.
   */
  readonly parse: (contents: readonly Buffer[]) => T | Promise<T>;
  /** Takes accepted material into use (a server's secure context, new upstream pools); throwing refuses it. */
  readonly use?: (next: T, previous: T | undefined) => void;
  readonly logger: Logger;
  /** Fields of the accepted material for its log line (a count, a fingerprint): never secret bytes. */
  readonly fields?: (material: T) => Record<string, unknown>;
  /** Counts each load that accepted or refused material (unchanged re-reads are not counted). */
  readonly count?: (outcome: 'accepted' | 'rejected') => void;
  /** @default 250 */
  readonly debounceMs?: number;
  /** Safety re-read interval for file systems whose events can be lost; 0 disables it. @default 5000 */
  readonly pollIntervalMs?: number;
}

export class MountedFiles<T> {
  readonly #o: MountedFilesOptions<T>;
  readonly #file: WatchedFile<MountedLoad>;
  #current: T | undefined;
  /** Digest of the bytes last read, good or bad, and the problem when they were bad. */
  #lastDigest: string | undefined;
  /** Digest of the bytes of the material in force: a bad version undone by the old bytes changes nothing. */
  #acceptedDigest: string | undefined;
  #lastProblem: string | undefined;

  constructor(options: MountedFilesOptions<T>) {
    this.#o = options;
    this.#file = new WatchedFile({
      file: options.files,
      debounceMs: options.debounceMs ?? 250,
      pollIntervalMs: options.pollIntervalMs ?? 5_000,
      load: (trigger) => this.#load(trigger),
    });
  }

  /** The material in force; undefined until a load accepted one. */
  current(): T | undefined {
    return this.#current;
  }

  /** Loads once; with `follow`, then follows the files until close(). */
  start(follow = true): Promise<MountedLoad> {
    return this.#file.start(follow);
  }

  /** One load now (SIGHUP); concurrent triggers coalesce. Unchanged bad bytes report their problem again. */
  reload(trigger = 'signal'): Promise<MountedLoad> {
    return this.#file.reload(trigger);
  }

  close(): void {
    this.#file.close();
  }

  async #load(trigger: string): Promise<MountedLoad> {
    const { files, maxBytes } = this.#o;
    let contents: Buffer[] | undefined;
    let unreadable: string | undefined;
    try {
      contents = await Promise.all(files.map((file, i) => readOne(file, this.#o.labels?.[i] ?? file, maxBytes)));
    } catch (error) {
      unreadable = error instanceof Error ? error.message : String(error);
    }
    // An unreadable file is remembered by its problem, so a file that stays missing is reported once, not every poll.
    const digest = contents === undefined ? `unreadable\n${unreadable}` : digestOf(contents);
    if (digest === this.#lastDigest) {
      return this.#lastProblem === undefined
        ? { outcome: 'unchanged' }
        : { outcome: 'rejected', problem: this.#lastProblem };
    }
    this.#lastDigest = digest;
    if (digest === this.#acceptedDigest) {
      this.#lastProblem = undefined;
      this.#o.logger.info(
        { file_kind: this.#o.kind, name: this.#o.name, trigger },
        `${this.#o.kind} is back to the version in force`,
      );
      return { outcome: 'unchanged' };
    }
    let next: T;
    try {
      if (contents === undefined) throw new MountedFileError(unreadable ?? 'unreadable');
      next = await this.#o.parse(contents);
      this.#o.use?.(next, this.#current);
    } catch (error) {
      // A library's message (OpenSSL's, a parser's) is ours to vouch for only after masking what could be a secret.
      const problem =
        error instanceof MountedFileError
          ? error.message
          : redactText(error instanceof Error ? error.message : String(error));
      return this.#refuse(problem, trigger);
    }
    const first = this.#current === undefined;
    this.#current = next;
    this.#acceptedDigest = digest;
    this.#lastProblem = undefined;
    this.#o.count?.('accepted');
    this.#o.logger.info(
      { file_kind: this.#o.kind, name: this.#o.name, trigger, ...this.#o.fields?.(next) },
      first ? `${this.#o.kind} read` : `${this.#o.kind} reloaded`,
    );
    return { outcome: 'accepted' };
  }

  /** Keeps what is in force; logged and counted once per bad version of the files. */
  #refuse(problem: string, trigger: string): MountedLoad {
    this.#lastProblem = problem;
    this.#o.count?.('rejected');
    this.#o.logger.warn(
      { file_kind: this.#o.kind, name: this.#o.name, problem, trigger },
      this.#current === undefined
        ? `${this.#o.kind} unusable; none in force yet`
        : `${this.#o.kind} unusable; the previous one stays in force`,
    );
    return { outcome: 'rejected', problem };
  }
}

const READ_CODES: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'is a directory',
};

async function readOne(file: string, label: string, maxBytes: number): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readBounded(file, maxBytes);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new MountedFileError(
      `${label}: cannot be read (${(code === undefined ? undefined : READ_CODES[code]) ?? code ?? 'error'})`,
    );
  }
  if (bytes.length > maxBytes) throw new MountedFileError(`${label}: larger than ${maxBytes} bytes`);
  return bytes;
}

function digestOf(contents: readonly Buffer[]): string {
  const hash = createHash('sha256');
  for (const bytes of contents) hash.update(`${bytes.length}:`).update(bytes);
  return hash.digest('hex');
}
