/**
 * The dashboard token kept loaded from its file (a Secret projected as a directory, so the kubelet's `..data` swap
 * rotates it): re-read when the file changes, off the request path. A missing, unreadable or invalid file keeps the
 * token loaded before (last-known-good) and is logged with the file and what is wrong, never with the file's bytes;
 * before any good load nobody gets in.
 */
import type { Logger } from './log.ts';
import { dashboardToken, type DashboardToken, MAX_TOKEN_BYTES, tokenProblem } from './dashboard-access.ts';
import { readBounded, WatchedFile } from './watched-file.ts';

export interface DashboardTokenFileOptions {
  readonly file: string;
  readonly logger: Logger;
  /** @default 200 */
  readonly debounceMs?: number;
  /** Safety re-read for lost file events. @default 30000 */
  readonly pollIntervalMs?: number;
}

export class DashboardTokenFile {
  readonly #o: DashboardTokenFileOptions;
  readonly #watched: WatchedFile<void>;
  #token: DashboardToken | undefined;
  #lastProblem: string | undefined;

  constructor(options: DashboardTokenFileOptions) {
    this.#o = options;
    this.#watched = new WatchedFile({
      file: options.file,
      debounceMs: options.debounceMs ?? 200,
      pollIntervalMs: options.pollIntervalMs ?? 30_000,
      load: () => this.#load(),
    });
  }

  /** Loads once and follows the file; resolves whether or not the first load succeeded. */
  async start(): Promise<void> {
    await this.#watched.start();
  }

  /** The token loaded last (memory only), undefined before a good load. */
  current(): DashboardToken | undefined {
    return this.#token;
  }

  close(): void {
    this.#watched.close();
  }

  async #load(): Promise<void> {
    const { file, logger } = this.#o;
    let problem: string | undefined;
    let text = '';
    try {
      const bytes = await readBounded(file, MAX_TOKEN_BYTES + 2);
      text = bytes.toString('utf8').trim();
      problem = tokenProblem(text);
    } catch (error) {
      problem = `cannot read it (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
    }
    if (problem !== undefined) {
      // A poll re-reads the same bad file every interval: log a problem once until it changes.
      if (problem !== this.#lastProblem) {
        const kept =
          this.#token === undefined
            ? 'nobody can open the dashboard until it is fixed'
            : 'the token loaded before stays in use';
        logger.error({ file }, `dashboard token file ${file}: ${problem}; ${kept}`);
      }
      this.#lastProblem = problem;
      return;
    }
    const next = dashboardToken(text);
    if (this.#token !== undefined && next.digest.equals(this.#token.digest)) {
      this.#lastProblem = undefined;
      return;
    }
    const rotated = this.#token !== undefined;
    this.#token = next;
    this.#lastProblem = undefined;
    logger.info(
      { file },
      rotated ? 'dashboard token changed on disk; sessions opened with the previous one end' : 'dashboard token loaded',
    );
  }
}
