/**
 * Polls `probe` until it returns something other than undefined or false, or the time is up. A probe that throws
 * counts as "not yet"; its last error is named in the timeout message, so a wait that fails says why. Used by the
 * local grid's readiness waits and by the test suites (which pass their own timeout and interval).
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : ` (last error: ${last instanceof Error ? last.message : String(last)})`}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
