// The node suite's short commands: run one (in the site's network namespace or not) and read its output, or fail
// with its stderr; and the suite's waits, which name what they saw when they time out. The long-running daemons are
// test/child-daemon.ts's.
import { execFile } from 'node:child_process';
import { waitFor as waitUntil } from '../../daemons/shared/wait-for.ts';
import { inNetns } from '../child-daemon.ts';

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a short command (in a network namespace when given); never throws on a non-zero exit. */
export function run(
  argv: readonly string[],
  options: { netns?: string; input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  const [command, ...args] = inNetns(options.netns, argv);
  return new Promise((resolve) => {
    const child = execFile(
      command ?? '',
      args,
      {
        encoding: 'utf8',
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        env: options.env ?? process.env,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr: error !== null && code === null ? `${stderr}${error.message}` : stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

/** Like run(), but throws with the command's stderr when it fails. */
export async function must(argv: readonly string[], options: Parameters<typeof run>[1] = {}): Promise<string> {
  const result = await run(argv, options);
  if (result.code !== 0) {
    throw new Error(
      `${argv.join(' ')}: exit ${String(result.code)}: ${(result.stderr || result.stdout).trim().slice(-2000)}`,
    );
  }
  return result.stdout;
}

/** waitFor, whose timeout also says what `describe()` finds (a resource's events, a daemon's log tail). */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  describe?: () => Promise<string> | string,
  periodMs = 500,
): Promise<T> {
  try {
    return await waitUntil(what, check, timeoutMs, periodMs);
  } catch (error) {
    if (describe === undefined) throw error;
    throw new Error(`${(error as Error).message}\n${await describe()}`);
  }
}
