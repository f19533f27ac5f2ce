/**
 * When the local grid restarts a process that exited on its own: the kubelet's CrashLoopBackOff (10 s doubling to a
 * 5 min cap, reset once a container has run 10 min without trouble) scaled down for one machine, where a daemon
 * starts in about a second: 1 s doubling to 30 s, reset after 60 s of running since it was last ready. Every exit
 * nobody asked for counts, whatever its status (restartPolicy Always); a restart that exits or is not ready within
 * the start timeout counts as one more crash, so a daemon that cannot start backs off instead of spinning.
 */
import { backoffDelayMs } from '../shared/resource-store/backoff.ts';

export interface RestartPolicy {
  /** Delay before the first restart of a crash run. */
  readonly initialDelayMs: number;
  /** Ceiling of the doubling delay. */
  readonly maxDelayMs: number;
  /** A process that stays up this long after it was ready starts its next crash run from initialDelayMs again. */
  readonly resetAfterMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  resetAfterMs: 60_000,
};

/** Delay before restarting after the `crashes`-th consecutive crash (1-based): initial · 2^(crashes-1), capped. */
export function restartDelayMs(policy: RestartPolicy, crashes: number): number {
  return backoffDelayMs(
    { initialMs: policy.initialDelayMs, maxMs: policy.maxDelayMs, jitter: 0 },
    Math.max(1, crashes) - 1,
    () => 0,
  );
}

/**
 * The consecutive-crash count after an exit: one more than before, or 1 when the process had been ready for at least
 * resetAfterMs (a long healthy run ends the crash run).
 */
export function crashesAfterExit(
  policy: RestartPolicy,
  previousCrashes: number,
  healthyForMs: number | undefined,
): number {
  return healthyForMs !== undefined && healthyForMs >= policy.resetAfterMs ? 1 : previousCrashes + 1;
}

/** "1 s doubling to 30 s, reset after 60 s running": how status output names the policy. */
export function describeRestartPolicy(policy: RestartPolicy): string {
  return `restart after ${seconds(policy.initialDelayMs)} doubling to ${seconds(policy.maxDelayMs)}, reset after ${seconds(policy.resetAfterMs)} running`;
}

export function seconds(ms: number): string {
  return ms < 10_000 && ms % 1000 !== 0 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}
