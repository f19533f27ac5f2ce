// Gateway age evidence against the rules it implements (quoted in evidence.ts), sentence by sentence.
import { describe, expect, it } from 'vitest';
import {
  applyReport,
  type EvidenceState,
  FRESHNESS_MS,
  gatewayAgesCondition,
  MAX_AGE_RECORDS,
  type ReportOutcome,
} from '../../../daemons/gossip-operator/gateway-ages/evidence.ts';
import type { GatewayAgeReportRequest } from '../../../schemas/generated/gateway-age-report.ts';

const EMPTY: EvidenceState = { records: [], overflow: false };
const epoch = (n: number) => `epoch-${String(n).padStart(4, '0')}`;
const report = (
  n: number,
  sequence: number,
  rejected: boolean,
  skewCount = rejected ? sequence : 0,
): GatewayAgeReportRequest => ({ epoch: epoch(n), replica: `gw-${n}`, sequence, skewCount, rejected });

interface Step {
  report: GatewayAgeReportRequest;
  /** Monotonic ms of receipt; the wall clock is deliberately unrelated (a step must not matter). */
  at: number;
  outcome?: ReportOutcome;
}

function run(steps: Step[], start: EvidenceState = EMPTY): { state: EvidenceState; outcomes: ReportOutcome[] } {
  let state = start;
  const outcomes: ReportOutcome[] = [];
  for (const [i, step] of steps.entries()) {
    const result = applyReport(state, step.report, {
      monoMs: step.at,
      wallMs: i % 2 === 0 ? 1_800_000_000_000 : 1_000,
    });
    state = result.state;
    outcomes.push(result.outcome);
    if (step.outcome !== undefined) expect(result.outcome, `step ${i}`).toBe(step.outcome);
  }
  return { state, outcomes };
}

/** What status holds after a restart: every record without a monotonic receipt. */
function restarted(state: EvidenceState): EvidenceState {
  return { ...state, records: state.records.map(({ receivedMonoMs: _m, ...r }) => r) };
}

function full(rejected: boolean): EvidenceState {
  return run(Array.from({ length: MAX_AGE_RECORDS }, (_, i) => ({ report: report(i, 1, rejected), at: i }))).state;
}

describe('GatewayAgesRejected', () => {
  const cases: {
    seed: string;
    steps: Step[];
    status: 'True' | 'False' | 'Unknown';
    reason?: string;
    start?: EvidenceState;
  }[] = [
    {
      seed: 'True means a fresh gateway process has unresolved rejected ages',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(2, 1, false), at: 1_000 },
      ],
      status: 'True',
    },
    {
      seed: 'False requires genuine newer clean evidence from every recorded rejecting process',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(1, 2, false, 1), at: 1_000, outcome: 'recorded' },
      ],
      status: 'False',
    },
    {
      seed: 'a clean flag with a grown cumulative skew count is not clean evidence',
      steps: [
        { report: report(1, 1, true, 3), at: 0 },
        { report: report(1, 2, false, 4), at: 1_000 },
      ],
      status: 'True',
    },
    {
      seed: 'A clean report from another replica or replacement process never clears an older rejected epoch',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(2, 50, false), at: 1_000 },
      ],
      status: 'True',
    },
    {
      seed: 'Duplicate reports cannot establish recovery or renew freshness (same sequence, clean)',
      steps: [
        { report: report(1, 5, true), at: 0 },
        { report: report(1, 5, false), at: 1_000, outcome: 'duplicate' },
      ],
      status: 'True',
    },
    {
      seed: 'an older sequence cannot establish recovery',
      steps: [
        { report: report(1, 5, true), at: 0 },
        { report: report(1, 4, false), at: 1_000, outcome: 'duplicate' },
      ],
      status: 'True',
    },
    {
      seed: 'Live freshness uses a five-minute monotonic receipt window; expiration is evaluated when another report arrives',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(2, 1, false), at: FRESHNESS_MS + 1 },
      ],
      status: 'Unknown',
      reason: 'EvidenceStale',
    },
    {
      seed: 'a duplicate does not renew freshness',
      steps: [
        { report: report(1, 2, true), at: 0 },
        { report: report(1, 2, true), at: FRESHNESS_MS - 1, outcome: 'duplicate' },
        { report: report(2, 1, false), at: FRESHNESS_MS + 1 },
      ],
      status: 'Unknown',
      reason: 'EvidenceStale',
    },
    {
      seed: 'a strictly newer rejected report renews freshness',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(1, 2, true, 2), at: FRESHNESS_MS - 1 },
        { report: report(2, 1, false), at: FRESHNESS_MS + 1 },
      ],
      status: 'True',
    },
    {
      seed: 'stale evidence still clears with newer clean evidence from the same process',
      steps: [
        { report: report(1, 1, true), at: 0 },
        { report: report(1, 2, false, 1), at: 10 * FRESHNESS_MS },
      ],
      status: 'False',
    },
    {
      seed: 'a cumulative skew count that goes backwards is refused and changes nothing',
      steps: [
        { report: report(1, 1, true, 5), at: 0 },
        { report: report(1, 2, false, 4), at: 1_000, outcome: 'skew_count_decreased' },
      ],
      status: 'True',
    },
  ];

  it.each(cases)('$seed', ({ steps, status, reason, start }) => {
    const { state } = run(steps, start);
    const last = steps.at(-1)!.at;
    const condition = gatewayAgesCondition(state, last);
    expect(condition.status).toBe(status);
    if (reason !== undefined) expect(condition.reason).toBe(reason);
  });

  it('After an operator restart, persisted rejected epochs have unknown freshness until that same epoch submits a strictly newer observation', () => {
    const before = run([{ report: report(1, 7, true), at: 0 }]).state;
    const after = restarted(before);
    // Another process reporting, a duplicate of the old epoch: still Unknown.
    let s = applyReport(after, report(2, 1, false), { monoMs: 5, wallMs: 0 }).state;
    s = applyReport(s, report(1, 7, true), { monoMs: 6, wallMs: 0 }).state;
    expect(gatewayAgesCondition(s, 6)).toMatchObject({ status: 'Unknown', reason: 'EvidencePredatesRestart' });
    // A strictly newer rejected observation makes it fresh again; a newer clean one clears it.
    s = applyReport(s, report(1, 8, true, 8), { monoMs: 7, wallMs: 0 }).state;
    expect(gatewayAgesCondition(s, 7).status).toBe('True');
    s = applyReport(s, report(1, 9, false, 8), { monoMs: 8, wallMs: 0 }).state;
    expect(gatewayAgesCondition(s, 8).status).toBe('False');
  });

  it('keeps at most 128 records, evicting only clean bookkeeping (the least recently received) to admit a new process', () => {
    let s = full(false);
    s = applyReport(s, report(1, 2, false), { monoMs: 1_000, wallMs: 0 }).state;
    const result = applyReport(s, report(500, 1, true), { monoMs: 2_000, wallMs: 0 });
    expect(result.outcome).toBe('recorded');
    expect(result.state.records).toHaveLength(MAX_AGE_RECORDS);
    expect(result.state.records.some((r) => r.epoch === epoch(0))).toBe(false);
    expect(result.state.records.some((r) => r.epoch === epoch(1))).toBe(true);
    expect(result.state.overflow).toBe(false);
  });

  it('never evicts unresolved evidence: a lone clean record goes first', () => {
    let s = run(Array.from({ length: MAX_AGE_RECORDS }, (_, i) => ({ report: report(i, 1, i !== 64), at: i }))).state;
    s = applyReport(s, report(900, 1, false), { monoMs: 1_000, wallMs: 0 }).state;
    expect(s.records.some((r) => r.epoch === epoch(64))).toBe(false);
    expect(s.records.filter((r) => r.rejected)).toHaveLength(MAX_AGE_RECORDS - 1);
  });

  it('When all 128 entries hold unresolved evidence, the operator persists gatewayAgeReportOverflow: true and refuses new identities; existing processes can still report recovery', () => {
    let s = full(true);
    const refused = applyReport(s, report(999, 1, false), { monoMs: 200, wallMs: 0 });
    expect(refused.outcome).toBe('capacity');
    expect(refused.state.overflow).toBe(true);
    expect(refused.state.records.some((r) => r.epoch === epoch(999))).toBe(false);
    s = refused.state;
    for (let i = 0; i < MAX_AGE_RECORDS; i += 1)
      s = applyReport(s, report(i, 2, false, 1), { monoMs: 300 + i, wallMs: 0 }).state;
    expect(s.records.every((r) => !r.rejected)).toBe(true);
    // "This bounded uncertainty survives recovery and restart."
    expect(gatewayAgesCondition(s, 500)).toMatchObject({ status: 'Unknown', reason: 'ReporterCapacityExceeded' });
    expect(gatewayAgesCondition(restarted(s), 500)).toMatchObject({
      status: 'Unknown',
      reason: 'ReporterCapacityExceeded',
    });
    // Once clean bookkeeping exists, a new identity is admitted again; overflow is only cleared explicitly.
    const admitted = applyReport(s, report(999, 1, false), { monoMs: 600, wallMs: 0 });
    expect(admitted.outcome).toBe('recorded');
    expect(admitted.state.overflow).toBe(true);
  });

  it('Wall-clock changes cannot renew freshness: only the monotonic receipt counts', () => {
    const s = run([{ report: report(1, 1, true), at: 0 }]).state;
    // The record's wall receipt says 2027; the monotonic clock says 6 minutes passed.
    expect(gatewayAgesCondition(s, FRESHNESS_MS + 60_000).status).toBe('Unknown');
  });

  it('with no rejecting process the condition is False, and a new rejecting epoch makes it True', () => {
    let s = run([{ report: report(1, 1, false), at: 0 }]).state;
    expect(gatewayAgesCondition(s, 0).status).toBe('False');
    s = applyReport(s, report(2, 1, true), { monoMs: 1, wallMs: 0 }).state;
    expect(gatewayAgesCondition(s, 1).message).toContain('gw-2');
  });
});
