/**
 * Gateway age evidence, pure: the records of at most 128 gateway processes keyed
 * by their random epoch, the overflow flag, and the GatewayAgesRejected condition derived from them. Time comes
 * in as two clocks: monotonic (freshness: "Live freshness uses a five-minute monotonic receipt window") and wall
 * (only for the receipt timestamp shown in status, so "Wall-clock changes ... cannot establish recovery").
 */
import type { GatewayAgeReportRequest } from '../../../schemas/generated/gateway-age-report.ts';

export const GATEWAY_AGES_REJECTED = 'GatewayAgesRejected';
export const MAX_AGE_RECORDS = 128;
export const FRESHNESS_MS = 5 * 60_000;

export interface AgeRecord {
  readonly epoch: string;
  readonly replica: string;
  readonly sequence: number;
  readonly skewCount: number;
  /** The flag as the process reported it. */
  readonly reportedRejected: boolean;
  /** Effective state: unresolved rejected evidence. */
  readonly rejected: boolean;
  /** Wall-clock receipt time (RFC 3339), for people reading status only. */
  readonly receivedAt: string;
  /**
   * Receipt on this process's monotonic clock; absent for a record that predates the operator restart ("persisted
   * rejected epochs have unknown freshness until that same epoch submits a strictly newer observation").
   */
  readonly receivedMonoMs?: number;
}

export interface EvidenceState {
  readonly records: readonly AgeRecord[];
  readonly overflow: boolean;
}

export type ReportOutcome = 'recorded' | 'duplicate' | 'skew_count_decreased' | 'capacity';

export interface Receipt {
  readonly monoMs: number;
  readonly wallMs: number;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Which clean record to evict for a newcomer: the least recently received one (pre-restart records first). */
function evictionCandidate(records: readonly AgeRecord[]): AgeRecord | undefined {
  const clean = records.filter((r) => !r.rejected);
  clean.sort((a, b) => {
    if ((a.receivedMonoMs === undefined) !== (b.receivedMonoMs === undefined))
      return a.receivedMonoMs === undefined ? -1 : 1;
    if (a.receivedMonoMs !== undefined && b.receivedMonoMs !== undefined && a.receivedMonoMs !== b.receivedMonoMs)
      return a.receivedMonoMs - b.receivedMonoMs;
    return a.receivedAt < b.receivedAt ? -1 : a.receivedAt > b.receivedAt ? 1 : a.epoch < b.epoch ? -1 : 1;
  });
  return clean[0];
}

/** Applies one report. A refused or duplicate report returns the state unchanged (apart from overflow). */
export function applyReport(
  state: EvidenceState,
  report: GatewayAgeReportRequest,
  at: Receipt,
): { state: EvidenceState; outcome: ReportOutcome } {
  const existing = state.records.find((r) => r.epoch === report.epoch);
  if (existing !== undefined) {
    // "Duplicate reports cannot establish recovery or renew freshness": only a strictly newer sequence counts.
    if (report.sequence <= existing.sequence) return { state, outcome: 'duplicate' };
    if (report.skewCount < existing.skewCount) return { state, outcome: 'skew_count_decreased' };
    // A newer report is clean only if it says so and its cumulative count did not grow since the last one.
    const rejected = report.rejected || report.skewCount > existing.skewCount;
    const updated: AgeRecord = { ...record(report, at), rejected };
    return {
      state: { ...state, records: state.records.map((r) => (r.epoch === report.epoch ? updated : r)) },
      outcome: 'recorded',
    };
  }
  let records = state.records;
  if (records.length >= MAX_AGE_RECORDS) {
    // "Only clean bookkeeping may be evicted to admit a new process."
    const victim = evictionCandidate(records);
    if (victim === undefined) return { state: { ...state, overflow: true }, outcome: 'capacity' };
    records = records.filter((r) => r !== victim);
  }
  return {
    state: { ...state, records: [...records, { ...record(report, at), rejected: report.rejected }] },
    outcome: 'recorded',
  };
}

function record(report: GatewayAgeReportRequest, at: Receipt): Omit<AgeRecord, 'rejected'> {
  return {
    epoch: report.epoch,
    replica: report.replica,
    sequence: report.sequence,
    skewCount: report.skewCount,
    reportedRejected: report.rejected,
    receivedAt: rfc3339(at.wallMs),
    receivedMonoMs: at.monoMs,
  };
}

export interface AgesCondition {
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: string;
  readonly message: string;
}

function processes(records: readonly AgeRecord[]): string {
  const names = records.map((r) => `${r.replica || '(no replica)'} epoch ${r.epoch.slice(0, 12)}`).sort();
  return names.length > 4 ? `${names.slice(0, 4).join(', ')} and ${names.length - 4} more` : names.join(', ');
}

/**
 * The condition, evaluated when a report arrives: True when a fresh process has unresolved rejected ages;
 * Unknown when the remaining rejected evidence is stale or predates the restart, or capacity was exceeded;
 * False only when every recorded rejecting process sent newer clean evidence.
 */
export function gatewayAgesCondition(state: EvidenceState, monoNowMs: number): AgesCondition {
  const unresolved = state.records.filter((r) => r.rejected);
  const fresh = unresolved.filter(
    (r) => r.receivedMonoMs !== undefined && monoNowMs - r.receivedMonoMs <= FRESHNESS_MS,
  );
  if (fresh.length > 0) {
    return {
      status: 'True',
      reason: 'GatewayAgesRejected',
      message: `gateway process ${processes(fresh)} reported rejected ages within the last 5 minutes and has not reported clean since`,
    };
  }
  const restored = unresolved.filter((r) => r.receivedMonoMs === undefined);
  if (restored.length > 0) {
    return {
      status: 'Unknown',
      reason: 'EvidencePredatesRestart',
      message: `rejected ages of gateway process ${processes(restored)} were recorded before this operator started; waiting for a newer report from the same process`,
    };
  }
  if (unresolved.length > 0) {
    return {
      status: 'Unknown',
      reason: 'EvidenceStale',
      message: `rejected ages of gateway process ${processes(unresolved)} are older than 5 minutes with no newer clean report`,
    };
  }
  if (state.overflow) {
    return {
      status: 'Unknown',
      reason: 'ReporterCapacityExceeded',
      message: `all ${MAX_AGE_RECORDS} gateway age records held unresolved evidence and a new process was refused; clear gatewayAgeReportOverflow after verifying reporter coverage`,
    };
  }
  return {
    status: 'False',
    reason: 'NoUnresolvedRejections',
    message: 'every recorded gateway process that rejected ages has since reported clean',
  };
}
