// podman as the container suite calls it: always with the project's containers.conf (runc, cgroupfs, fixed
// ulimits: what this machine kind allows), always asynchronously, because the suite's Service proxies and API relays
// run in this same process and a blocking call would stall the very traffic a container is waiting for.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CONTAINERS_CONF = fileURLToPath(new URL('../../image/containers.conf', import.meta.url));

export interface PodmanResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function podman(args: readonly string[], timeoutMs = 120_000): Promise<PodmanResult> {
  return new Promise((resolve) => {
    execFile(
      'podman',
      args,
      { env: { ...process.env, CONTAINERS_CONF }, timeout: timeoutMs, maxBuffer: 32 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs podman and returns stdout; a non-zero exit throws with the command and podman's own words. */
export async function podmanOk(args: readonly string[], timeoutMs?: number): Promise<string> {
  const result = await podman(args, timeoutMs);
  if (result.code !== 0)
    throw new Error(
      `podman ${args.slice(0, 3).join(' ')} … exited ${result.code}: ${result.stderr.trim().split('\n').slice(-3).join(' | ')}`,
    );
  return result.stdout;
}
