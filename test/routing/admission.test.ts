import { describe, expect, it } from 'vitest';
import { decideAdmission, legacyAdmission, type AdmissionMemory } from '../../daemons/routing/admission.ts';
import type { AdmissionState, PressureAdmissionPolicy, ScoringStrategy } from '../../daemons/routing/model.ts';
import { normalizeSample } from '../../daemons/routing/scoring.ts';
import { sample, STABILIZED, T0 } from './fixtures.ts';

describe('legacy instantaneous admission', () => {
  // docs/contract.md §2.5: "legacy instantaneous — unhealthy → none; queue > 0.85 or kv > 0.90 → existing_only; else
  // new_and_existing" ("When spec.admissionPolicy is omitted, admission preserves the legacy instantaneous behavior").
  it.each([
    [{ healthy: true }, 'new_and_existing'],
    [{ healthy: false, queueDepth: 0 }, 'none'],
    [{ healthy: true, queueDepth: 0.85 }, 'new_and_existing'],
    [{ healthy: true, queueDepth: 0.86 }, 'existing_only'],
    [{ healthy: true, kvCacheUtilization: 0.9 }, 'new_and_existing'],
    [{ healthy: true, kvCacheUtilization: 0.91 }, 'existing_only'],
    [{ healthy: true, queueDepth: Number.NaN, kvCacheUtilization: 0.5 }, 'new_and_existing'],
  ] as const)('%o → %s', (values, expected) => {
    expect(legacyAdmission(normalizeSample(sample(values)))).toBe(expected);
    const decision = decideAdmission(
      {
        policy: undefined,
        strategy: 'queueDepth',
        signals: normalizeSample(sample(values)),
        signalConfigured: true,
        sample: sample(),
      },
      undefined,
      T0,
    );
    expect(decision).toEqual({ state: expected, memory: undefined });
  });
});

interface Step {
  /** Seconds after T0 at which the reconcile runs. */
  readonly at: number;
  /** Signal value; undefined = configured signal missing; 'unhealthy' = hard failure. */
  readonly value: number | undefined | 'unhealthy';
  /** Scrape generation of the sample (defaults to a new one each step). */
  readonly generation?: number;
  readonly expect: AdmissionState;
}

/** Runs reconciles in order, threading the hysteresis memory, and returns the states published. */
function run(
  steps: readonly Step[],
  policy: PressureAdmissionPolicy = STABILIZED,
  strategy: ScoringStrategy = 'queueDepth',
  start?: AdmissionMemory,
): AdmissionState[] {
  let memory = start;
  const states: AdmissionState[] = [];
  steps.forEach((step, index) => {
    const now = T0 + step.at * 1000;
    const generation = step.generation ?? index + 1;
    const values =
      step.value === 'unhealthy'
        ? { healthy: false }
        : { healthy: true, queueDepth: step.value, kvCacheUtilization: step.value };
    const decision = decideAdmission(
      {
        policy,
        strategy,
        signals: normalizeSample(sample(values)),
        signalConfigured: true,
        sample: step.value === undefined ? undefined : { generation, observedAtMs: now },
      },
      memory,
      now,
    );
    memory = decision.memory;
    states.push(decision.state);
  });
  return states;
}

describe('stabilized admission', () => {
  // docs/contract.md §2.5: "Stabilized — enter after failureThreshold consecutive samples ≥ enter and
  // minimumStateDuration in state; recover after successThreshold consecutive samples ≤ exit, recoveryHoldDown since
  // the first of them and minimumStateDuration; a sample already counted (same scrape generation) is not counted twice;
  // hard failure → none at once; missing signal → existing_only (or none with missingMetrics: excluded); no signal
  // configured → new_and_existing."
  const cases: [string, Step[], PressureAdmissionPolicy?][] = [
    [
      'enters existing_only only after failureThreshold (2) consecutive pressure samples',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 20, value: 0.9, expect: 'new_and_existing' },
        { at: 30, value: 0.9, expect: 'existing_only' },
      ],
    ],
    [
      'a low sample between pressure samples resets the count',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 20, value: 0.9, expect: 'new_and_existing' },
        { at: 30, value: 0.5, expect: 'new_and_existing' },
        { at: 40, value: 0.85, expect: 'new_and_existing' },
        { at: 50, value: 0.85, expect: 'existing_only' },
      ],
    ],
    [
      'the same scrape generation is counted once however often the operator reconciles',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 20, value: 0.9, generation: 7, expect: 'new_and_existing' },
        { at: 25, value: 0.9, generation: 7, expect: 'new_and_existing' },
        { at: 30, value: 0.9, generation: 7, expect: 'new_and_existing' },
        { at: 35, value: 0.9, generation: 8, expect: 'existing_only' },
      ],
    ],
    [
      'pressure is held back until minimumStateDuration (10 s) in new_and_existing has passed',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 2, value: 0.9, expect: 'new_and_existing' },
        { at: 4, value: 0.9, expect: 'new_and_existing' },
        { at: 9, value: 0.9, expect: 'new_and_existing' },
        { at: 10, value: 0.9, expect: 'existing_only' },
      ],
    ],
    [
      'recovers after successThreshold (3) low samples, hold-down 30 s from the first and minimum duration',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 10, value: 0.9, expect: 'new_and_existing' },
        { at: 20, value: 0.9, expect: 'existing_only' },
        { at: 30, value: 0.6, expect: 'existing_only' },
        { at: 40, value: 0.6, expect: 'existing_only' },
        { at: 50, value: 0.6, expect: 'existing_only' },
        { at: 59, value: 0.6, expect: 'existing_only' },
        { at: 60, value: 0.6, expect: 'new_and_existing' },
      ],
    ],
    [
      'the hold-down is re-armed by a sample above exitThreshold',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 10, value: 0.9, expect: 'new_and_existing' },
        { at: 20, value: 0.9, expect: 'existing_only' },
        { at: 30, value: 0.6, expect: 'existing_only' },
        { at: 40, value: 0.75, expect: 'existing_only' },
        { at: 50, value: 0.6, expect: 'existing_only' },
        { at: 60, value: 0.6, expect: 'existing_only' },
        { at: 70, value: 0.6, expect: 'existing_only' },
        { at: 80, value: 0.6, expect: 'new_and_existing' },
      ],
    ],
    [
      'time-based recovery completes on a later reconcile without a new sample',
      [
        { at: 0, value: 0.9, expect: 'existing_only' },
        { at: 10, value: 0.1, generation: 11, expect: 'existing_only' },
        { at: 11, value: 0.1, generation: 12, expect: 'existing_only' },
        { at: 12, value: 0.1, generation: 13, expect: 'existing_only' },
        { at: 41, value: 0.1, generation: 13, expect: 'new_and_existing' },
      ],
    ],
    [
      'a hard health failure moves to none at once, and recovery goes through existing_only',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 1, value: 'unhealthy', expect: 'none' },
        { at: 2, value: 0.1, expect: 'existing_only' },
        { at: 3, value: 0.1, expect: 'existing_only' },
        { at: 4, value: 0.1, expect: 'existing_only' },
        { at: 32, value: 0.1, expect: 'new_and_existing' },
      ],
    ],
    [
      'a missing configured signal fails closed to existing_only',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 10, value: undefined, expect: 'existing_only' },
      ],
    ],
    [
      'missingMetrics: excluded turns a missing signal into none',
      [
        { at: 0, value: 0.1, expect: 'new_and_existing' },
        { at: 10, value: undefined, expect: 'none' },
      ],
      { ...STABILIZED, missingMetrics: 'excluded' },
    ],
    [
      'without history a sample above exitThreshold starts restrictive: a restart never promotes without evidence',
      [
        { at: 0, value: 0.8, expect: 'existing_only' },
        { at: 10, value: 0.8, expect: 'existing_only' },
      ],
    ],
  ];
  it.each(cases)('%s', (_label, steps, policy) => {
    expect(run(steps, policy)).toEqual(steps.map((s) => s.expect));
  });

  it('keeps no memory and admits when no signal is configured ("treats the observation as NotConfigured")', () => {
    const signals = normalizeSample(sample({ queueDepth: 0.99 }));
    for (const [strategy, configured] of [
      ['noMetrics', true],
      ['queueDepth', false],
    ] as const) {
      expect(
        decideAdmission(
          { policy: STABILIZED, strategy, signals, signalConfigured: configured, sample: sample() },
          undefined,
          T0,
        ),
      ).toEqual({ state: 'new_and_existing', memory: undefined });
    }
  });

  it('watches kv_cache_utilization under kvCachePressure', () => {
    const steps: Step[] = [
      { at: 0, value: 0.2, expect: 'new_and_existing' },
      { at: 10, value: 0.95, expect: 'new_and_existing' },
      { at: 20, value: 0.95, expect: 'existing_only' },
    ];
    expect(run(steps, STABILIZED, 'kvCachePressure')).toEqual(steps.map((s) => s.expect));
  });

  it('hands back memory that is plain data keyed state, so the operator can keep it across reconciles', () => {
    const decision = decideAdmission(
      {
        policy: STABILIZED,
        strategy: 'queueDepth',
        signals: normalizeSample(sample({ queueDepth: 0.9 })),
        signalConfigured: true,
        sample: sample({ generation: 4 }),
      },
      { state: 'new_and_existing', enteredAtMs: T0, pressureCount: 0, recoveryCount: 0, lastGeneration: 3 },
      T0 + 60_000,
    );
    expect(decision).toEqual({
      state: 'new_and_existing',
      memory: { state: 'new_and_existing', enteredAtMs: T0, pressureCount: 1, recoveryCount: 0, lastGeneration: 4 },
    });
  });
});
