/**
 * GridNetwork.spec → the routing core's resolved policy: CRD defaults applied, durations parsed, and anything that
 * bypassed API-server validation refused with one error naming the field (docs/contract.md §1 rules, restated only as
 * checks).
 */
import type { GridNetworkSpec, PressurePolicy } from '../../schemas/generated/gridnetworks.ts';
import type { NetworkRoutingPolicy, PressureAdmissionPolicy } from './model.ts';
import { err, ok, type RenderError, type Result } from './result.ts';
import { checkDuration, type DurationRule } from '../../schemas/durations.ts';

/** Defaults of admissionPolicy.pressure (docs/contract.md §1). */
export const PRESSURE_DEFAULTS = {
  enterThreshold: 0.85,
  exitThreshold: 0.7,
  failureThreshold: 2,
  successThreshold: 3,
  minimumStateDuration: '10s',
  recoveryHoldDown: '30s',
} as const;

const ROUTING_POLICIES = ['geographyFirst', 'scoreFirst'];
const STRATEGIES = ['noMetrics', 'queueDepth', 'kvCachePressure'];
const SELECTION_MODES = ['deterministic', 'roundRobin', 'random', 'weightedRandom'];
const ADMISSION_MODES = ['instantaneous', 'stabilized'];
const MISSING_METRICS = ['existingOnly', 'excluded'];
const TRANSPORTS = ['gossip', 'poll'];
/** minimumStateDuration and recoveryHoldDown: the CRD pattern `^[1-9][0-9]*s$`, whole seconds. */
export const PRESSURE_DURATION_RULE: DurationRule = { units: ['s'], minMs: 1_000, example: '10s' };

class PolicyError {
  readonly field: string;
  readonly problem: string;
  constructor(field: string, problem: string) {
    this.field = field;
    this.problem = problem;
  }
}

function oneOf<T extends string>(field: string, value: unknown, allowed: readonly string[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new PolicyError(field, `${JSON.stringify(value)} is not one of ${allowed.join(', ')}`);
  }
  return value as T;
}

function unit(field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
    throw new PolicyError(field, `${JSON.stringify(value)} is not a number in [0, 1]`);
  }
  return value;
}

function count(field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 100) {
    throw new PolicyError(field, `${JSON.stringify(value)} is not an integer in 1..100`);
  }
  return value;
}

function seconds(field: string, value: unknown, fallback: string): number {
  const checked = checkDuration(field, value === undefined ? fallback : value, PRESSURE_DURATION_RULE);
  if (!checked.ok) throw new PolicyError(field, checked.problem);
  return checked.ms / 1000;
}

function stabilized(
  pressure: PressurePolicy | undefined,
  missingMetrics: PressureAdmissionPolicy['missingMetrics'],
): PressureAdmissionPolicy {
  const base = 'spec.admissionPolicy.pressure';
  const p = pressure ?? {};
  const enterThreshold = unit(`${base}.enterThreshold`, p.enterThreshold, PRESSURE_DEFAULTS.enterThreshold);
  const exitThreshold = unit(`${base}.exitThreshold`, p.exitThreshold, PRESSURE_DEFAULTS.exitThreshold);
  if (!(exitThreshold < enterThreshold)) {
    throw new PolicyError(`${base}.exitThreshold`, `${exitThreshold} must be below enterThreshold ${enterThreshold}`);
  }
  return {
    enterThreshold,
    exitThreshold,
    failureThreshold: count(`${base}.failureThreshold`, p.failureThreshold, PRESSURE_DEFAULTS.failureThreshold),
    successThreshold: count(`${base}.successThreshold`, p.successThreshold, PRESSURE_DEFAULTS.successThreshold),
    minimumStateDurationSeconds: seconds(
      `${base}.minimumStateDuration`,
      p.minimumStateDuration,
      PRESSURE_DEFAULTS.minimumStateDuration,
    ),
    recoveryHoldDownSeconds: seconds(
      `${base}.recoveryHoldDown`,
      p.recoveryHoldDown,
      PRESSURE_DEFAULTS.recoveryHoldDown,
    ),
    missingMetrics,
  };
}

/**
 * Resolves the routing fields of one GridNetwork spec. A staleCandidateTtlSeconds that is not a positive integer is
 * treated as absent (as an internally observed 0 is), so bad data never evicts.
 */
export function resolveRoutingPolicy(
  network: string,
  spec: GridNetworkSpec,
): Result<NetworkRoutingPolicy, RenderError> {
  try {
    const admissionSpec = spec.admissionPolicy;
    const admissionMode = oneOf<'instantaneous' | 'stabilized'>(
      'spec.admissionPolicy.mode',
      admissionSpec?.mode,
      ADMISSION_MODES,
      'instantaneous',
    );
    const missingMetrics = oneOf<PressureAdmissionPolicy['missingMetrics']>(
      'spec.admissionPolicy.missingMetrics',
      admissionSpec?.missingMetrics,
      MISSING_METRICS,
      'existingOnly',
    );
    const ttl = spec.staleCandidateTtlSeconds;
    const policy: NetworkRoutingPolicy = {
      routingPolicy: oneOf('spec.routingPolicy', spec.routingPolicy, ROUTING_POLICIES, 'geographyFirst'),
      scoringStrategy: oneOf('spec.scoringPolicy.strategy', spec.scoringPolicy?.strategy, STRATEGIES, 'noMetrics'),
      signalTransport: oneOf('spec.signalTransport.mode', spec.signalTransport?.mode, TRANSPORTS, 'gossip'),
      ...(admissionSpec !== undefined && admissionMode === 'stabilized'
        ? { admission: stabilized(admissionSpec.pressure, missingMetrics) }
        : {}),
      ...(spec.selectionPolicy === undefined
        ? {}
        : {
            selectionMode: oneOf(
              'spec.selectionPolicy.mode',
              spec.selectionPolicy.mode,
              SELECTION_MODES,
              'deterministic',
            ),
          }),
      ...(spec.placementPolicy === undefined ? {} : { placementStrategy: String(spec.placementPolicy.strategy) }),
      ...(ttl !== undefined && Number.isSafeInteger(ttl) && ttl > 0 ? { staleCandidateTtlSeconds: ttl } : {}),
    };
    return ok(policy);
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    return err({ code: 'invalid_policy', message: `GridNetwork ${network}: ${error.field}: ${error.problem}` });
  }
}
