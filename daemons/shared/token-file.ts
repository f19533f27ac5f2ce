// A bearer token kept loaded from a file a Secret is projected into (the site's gateway ingest token): the operator
// compares against it, the reporting gateways send it. Re-read when the file changes (the kubelet's `..data` symlink
// swap on rotation) and every few seconds as a safety net, off the request path; a replacement that is unreadable
// or malformed keeps the last good token. Log lines name the file and what was wrong, never the token's bytes.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from './log.ts';
import { errorFields } from './log.ts';
import { WatchedFile, readBounded } from './watched-file.ts';

/** Bytes a token file may hold; a larger one is refused (a mount of the wrong key). */
export const MAX_TOKEN_FILE_BYTES = 4096;
/** Characters a token must have at least: shorter ones are guessable. */
export const MIN_TOKEN_LENGTH = 16;
/** Printable ASCII without spaces: what an Authorization header carries unchanged. */
const TOKEN_TEXT = /^[\x21-\x7e]+$/u;

export interface TokenFileOptions {
  readonly file: string;
  /** What the token is for, in log lines: "ingest token". */
  readonly what: string;
  readonly logger: Logger;
  /** @default 100 */
  readonly debounceMs?: number;
  /** @default 5000 */
  readonly pollIntervalMs?: number;
}

type Loaded = { readonly ok: true; readonly changed: boolean } | { readonly ok: false; readonly problem: string };

/** The token text a file holds (one trailing newline or whitespace allowed), or what is wrong with it. */
export function parseTokenFile(bytes: Buffer): { ok: true; token: string } | { ok: false; problem: string } {
  if (bytes.length > MAX_TOKEN_FILE_BYTES) return { ok: false, problem: `larger than ${MAX_TOKEN_FILE_BYTES} bytes` };
  const token = bytes.toString('utf8').trim();
  if (token === '') return { ok: false, problem: 'empty' };
  if (!TOKEN_TEXT.test(token))
    return { ok: false, problem: 'holds characters other than printable ASCII without spaces' };
  if (token.length < MIN_TOKEN_LENGTH) return { ok: false, problem: `shorter than ${MIN_TOKEN_LENGTH} characters` };
  return { ok: true, token };
}

export class TokenFile {
  readonly #o: TokenFileOptions;
  readonly #file: WatchedFile<Loaded>;
  #token: string | undefined;
  #digest: Buffer | undefined;
  #lastProblem: string | undefined;

  constructor(options: TokenFileOptions) {
    this.#o = options;
    this.#file = new WatchedFile({
      file: options.file,
      debounceMs: options.debounceMs ?? 100,
      pollIntervalMs: options.pollIntervalMs ?? 5_000,
      load: () => this.#load(),
    });
  }

  get file(): string {
    return this.#o.file;
  }

  /** Loads once and follows the file. A first load that fails is logged and retried; it does not throw. */
  async start(): Promise<boolean> {
    const first = await this.#file.start(true);
    return first.ok;
  }

  close(): void {
    this.#file.close();
  }

  /** The newest good token; undefined until one was read. */
  current(): string | undefined {
    return this.#token;
  }

  /** Whether `presented` is the token, in time that does not depend on where they differ (digests compared). */
  matches(presented: string): boolean {
    const digest = this.#digest;
    if (digest === undefined) return false;
    return timingSafeEqual(createHash('sha256').update(presented, 'utf8').digest(), digest);
  }

  /** One read now (tests, SIGHUP). */
  async reload(): Promise<boolean> {
    return (await this.#file.reload('reload')).ok;
  }

  async #load(): Promise<Loaded> {
    let problem: string;
    try {
      const parsed = parseTokenFile(await readBounded(this.#o.file, MAX_TOKEN_FILE_BYTES));
      if (parsed.ok) {
        const changed = parsed.token !== this.#token;
        if (changed) {
          const first = this.#token === undefined;
          this.#token = parsed.token;
          this.#digest = createHash('sha256').update(parsed.token, 'utf8').digest();
          this.#o.logger.info(
            { file: this.#o.file },
            first ? `${this.#o.what} loaded` : `${this.#o.what} replaced (the file changed)`,
          );
        }
        this.#lastProblem = undefined;
        return { ok: true, changed };
      }
      problem = `${this.#o.what} file ${this.#o.file} is ${parsed.problem}`;
    } catch (error) {
      const { code, message } = errorFields(error);
      problem = `${this.#o.what} file ${this.#o.file} cannot be read (${code ?? message})`;
    }
    // One line per distinct problem, so a missing mount does not flood the log on every safety re-read.
    if (problem !== this.#lastProblem) {
      const kept =
        this.#token === undefined
          ? 'no token yet: requests that need it fail until the file is fixed'
          : 'the previous token stays in use';
      this.#o.logger.error({ file: this.#o.file }, `${problem}; ${kept}`);
      this.#lastProblem = problem;
    }
    return { ok: false, problem };
  }
}
