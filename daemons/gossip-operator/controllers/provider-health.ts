/**
 * InferenceProvider health across probes, pure: consecutive failures of healthCheck probes and the phase they give.
 * A provider the operator cannot reach stays Unavailable and the overlay excludes it; healthCheck.failureThreshold
 * (default 1) says how many probes in a row must fail first, so one lost probe need not withdraw a pool. One passing
 * probe restores it.
 */
import type { HealthOutcome } from '../probes/health-probe.ts';

export interface HealthRecord {
  readonly failures: number;
  /** Clock reading of the last probe: the next one is due healthCheck.interval later. */
  readonly probedAtMs: number;
  /** metadata.generation probed: a changed spec is probed again at once. */
  readonly generation: number;
  readonly last: Pick<HealthOutcome, 'healthy' | 'result' | 'detail'>;
}

export function recordProbe(
  previous: HealthRecord | undefined,
  outcome: HealthOutcome,
  nowMs: number,
  generation: number,
): HealthRecord {
  return {
    failures: outcome.healthy ? 0 : (previous?.failures ?? 0) + 1,
    probedAtMs: nowMs,
    generation,
    last: { healthy: outcome.healthy, result: outcome.result, detail: outcome.detail },
  };
}

export interface HealthVerdict {
  readonly phase: 'Available' | 'Unavailable';
  readonly reason: string;
  readonly message: string;
}

export function healthVerdict(record: HealthRecord, failureThreshold: number): HealthVerdict {
  const { failures, last } = record;
  if (failures === 0) return { phase: 'Available', reason: '', message: '' };
  const probe = `health check ${last.result}: ${last.detail}`;
  if (failures >= failureThreshold) {
    return {
      phase: 'Unavailable',
      reason: 'HealthCheckFailed',
      message: `${probe} (${failures} consecutive failed probes, failureThreshold ${failureThreshold}); excluded from routing until a probe passes`,
    };
  }
  // Below the threshold the provider keeps serving; the reason shows the count climbing.
  return {
    phase: 'Available',
    reason: 'HealthCheckFailing',
    message: `${probe} (${failures} of ${failureThreshold} consecutive failed probes before it leaves routing)`,
  };
}
