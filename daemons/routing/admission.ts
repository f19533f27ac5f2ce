/**
 * Admission state derivation (docs/contract.md §2.5, "Admission"). Pure: the stabilized
 * evaluator's hysteresis memory comes in per provider and goes out, and the clock is a parameter. No admission check
 * runs in the request path; the gateway only reads the published state.
 */
import type { AdmissionState, PressureAdmissionPolicy, ScoringStrategy } from './model.ts';
import type { NormalizedSignals } from './scoring.ts';

/** Legacy instantaneous thresholds (admissionPolicy omitted): strictly above them is pressure. */
export const LEGACY_QUEUE_THRESHOLD = 0.85;
export const LEGACY_KV_THRESHOLD = 0.9;

/** Hysteresis memory of one provider, keyed by provider identity in AdmissionMemoryMap. */
export interface AdmissionMemory {
  readonly state: AdmissionState;
  /** When the provider entered `state` (minimumStateDuration counts from here). */
  readonly enteredAtMs: number;
  /** Consecutive counted samples at or above enterThreshold while new_and_existing. */
  readonly pressureCount: number;
  /** Consecutive counted samples at or below exitThreshold while existing_only. */
  readonly recoveryCount: number;
  /** observedAtMs of the first sample of the current recovery run (recoveryHoldDown counts from here). */
  readonly firstRecoveryAtMs?: number;
  /** Generation of the last counted sample: the same scrape is never counted twice. */
  readonly lastGeneration?: number;
}

export type AdmissionMemoryMap = ReadonlyMap<string, AdmissionMemory>;

export interface AdmissionInput {
  /** Stabilized admission policy; absent selects the legacy instantaneous rule. */
  readonly policy: PressureAdmissionPolicy | undefined;
  readonly strategy: ScoringStrategy;
  readonly signals: NormalizedSignals;
  /** The provider configures the metric name of the strategy's signal (a NotConfigured observation otherwise). */
  readonly signalConfigured: boolean;
  /** Identity and time of the sample the signals came from; absent when there is none. */
  readonly sample: { readonly generation: number; readonly observedAtMs: number } | undefined;
}

export interface AdmissionDecision {
  readonly state: AdmissionState;
  /** Memory to keep for the next reconcile; undefined when this provider needs none. */
  readonly memory: AdmissionMemory | undefined;
}

/** The signal the strategy scores on, which is also the one stabilized admission watches. */
export function activeSignal(strategy: ScoringStrategy): 'queueDepth' | 'kvCacheUtilization' | undefined {
  if (strategy === 'queueDepth') return 'queueDepth';
  if (strategy === 'kvCachePressure') return 'kvCacheUtilization';
  return undefined;
}

/** Legacy instantaneous admission: unhealthy → none; queue > 0.85 or kv > 0.90 → existing_only. */
export function legacyAdmission(signals: NormalizedSignals): AdmissionState {
  if (!signals.healthy) return 'none';
  const queue = signals.queueDepth;
  const kv = signals.kvCacheUtilization;
  if ((queue !== undefined && queue > LEGACY_QUEUE_THRESHOLD) || (kv !== undefined && kv > LEGACY_KV_THRESHOLD)) {
    return 'existing_only';
  }
  return 'new_and_existing';
}

function settle(
  state: AdmissionState,
  previous: AdmissionMemory | undefined,
  nowMs: number,
  generation?: number,
): AdmissionMemory {
  const enteredAtMs = previous !== undefined && previous.state === state ? previous.enteredAtMs : nowMs;
  const memory: AdmissionMemory = { state, enteredAtMs, pressureCount: 0, recoveryCount: 0 };
  return generation === undefined ? memory : { ...memory, lastGeneration: generation };
}

export function decideAdmission(
  input: AdmissionInput,
  previous: AdmissionMemory | undefined,
  nowMs: number,
): AdmissionDecision {
  const { policy, signals } = input;
  if (policy === undefined) return { state: legacyAdmission(signals), memory: undefined };

  // Hard health failures move to none at once, whatever the mode and the counters.
  if (!signals.healthy) {
    return { state: 'none', memory: settle('none', previous, nowMs, input.sample?.generation) };
  }
  const signal = activeSignal(input.strategy);
  // NotConfigured: no active signal, so an otherwise healthy provider stays new_and_existing with no memory.
  if (signal === undefined || !input.signalConfigured) return { state: 'new_and_existing', memory: undefined };

  const value = signals[signal];
  if (value === undefined || input.sample === undefined) {
    // A configured signal that is missing or expired fails closed.
    const state: AdmissionState = policy.missingMetrics === 'excluded' ? 'none' : 'existing_only';
    return { state, memory: settle(state, previous, nowMs) };
  }
  return stabilized(policy, value, input.sample, previous, nowMs);
}

function stabilized(
  policy: PressureAdmissionPolicy,
  value: number,
  sample: { readonly generation: number; readonly observedAtMs: number },
  previous: AdmissionMemory | undefined,
  nowMs: number,
): AdmissionDecision {
  const minimumStateMs = policy.minimumStateDurationSeconds * 1000;
  const holdDownMs = policy.recoveryHoldDownSeconds * 1000;

  let memory: AdmissionMemory;
  if (previous === undefined) {
    // No history (new provider or operator restart): only a sample at or below exitThreshold starts out admitting
    // new sessions, so a restart never promotes a provider that may have been restrictive without fresh evidence.
    if (value <= policy.exitThreshold) {
      return { state: 'new_and_existing', memory: settle('new_and_existing', undefined, nowMs, sample.generation) };
    }
    memory = { state: 'existing_only', enteredAtMs: nowMs, pressureCount: 0, recoveryCount: 0 };
  } else if (previous.state === 'none') {
    // Leaving a hard failure or an excluded missing signal: restrictive first, then the normal recovery path.
    memory = { state: 'existing_only', enteredAtMs: nowMs, pressureCount: 0, recoveryCount: 0 };
  } else {
    memory = previous;
  }

  const counted = memory.lastGeneration !== sample.generation;
  if (memory.state === 'new_and_existing') {
    const pressureCount = counted
      ? value >= policy.enterThreshold
        ? memory.pressureCount + 1
        : 0
      : memory.pressureCount;
    if (pressureCount >= policy.failureThreshold && nowMs - memory.enteredAtMs >= minimumStateMs) {
      return { state: 'existing_only', memory: settle('existing_only', undefined, nowMs, sample.generation) };
    }
    return {
      state: 'new_and_existing',
      memory: {
        state: 'new_and_existing',
        enteredAtMs: memory.enteredAtMs,
        pressureCount,
        recoveryCount: 0,
        lastGeneration: sample.generation,
      },
    };
  }

  let recoveryCount = memory.recoveryCount;
  let firstRecoveryAtMs = memory.firstRecoveryAtMs;
  if (counted) {
    if (value <= policy.exitThreshold) {
      recoveryCount += 1;
      firstRecoveryAtMs ??= sample.observedAtMs;
    } else {
      recoveryCount = 0;
      firstRecoveryAtMs = undefined;
    }
  }
  if (
    recoveryCount >= policy.successThreshold &&
    firstRecoveryAtMs !== undefined &&
    nowMs - firstRecoveryAtMs >= holdDownMs &&
    nowMs - memory.enteredAtMs >= minimumStateMs
  ) {
    return { state: 'new_and_existing', memory: settle('new_and_existing', undefined, nowMs, sample.generation) };
  }
  const next: AdmissionMemory = {
    state: 'existing_only',
    enteredAtMs: memory.enteredAtMs,
    pressureCount: 0,
    recoveryCount,
    lastGeneration: sample.generation,
  };
  return { state: 'existing_only', memory: firstRecoveryAtMs === undefined ? next : { ...next, firstRecoveryAtMs } };
}
