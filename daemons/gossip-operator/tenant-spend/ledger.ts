/**
 * The site's tenant spend, from its consumer gateways' reports (schemas/signals/gateway-spend-report.schema.json).
 * Each gateway process (epoch) reports its cumulative spend per tenant with a sequence; the ledger keeps the newest
 * report per live epoch, so a repeated, reordered or replayed report changes nothing, and the site's spend is the
 * sum over live epochs plus the retired baseline. Spend is cumulative since the grid began: no window, no reset, no
 * expiry (a tenant's budget is a lifetime cap; raising capUsd is how a budget is renewed).
 *
 * Every gateway process is a new epoch, so epochs are compacted without losing or doubling spend:
 * - an epoch is retired into a per-tenant baseline when its process sends its final report at shutdown, or, when a
 *   new epoch needs room among the live ones, the stalest live epoch (the process is probably gone);
 * - the recently retired epochs are remembered with their retired sequence (and, for an age retirement, the spend
 *   moved into the baseline), so a late or replayed report is a duplicate, and a newer report from an epoch retired
 *   by age reinstates it exactly (its amount moves back out of the baseline);
 * - past that list, the oldest remembered epoch is forgotten and the watermark rises to it: a report from an unknown
 *   epoch that sorts at or below the watermark is answered epoch_retired, and the gateway starts a new epoch that
 *   carries only its spend after its last acknowledged report.
 * Amounts are integer nano-dollars (round(usd × 10^9)), so a sum over any number of epochs is exact, in any order.
 * The records live in GridNetwork status (gatewaySpendReports, gatewaySpendRetired), so an operator restart reads
 * them back and counts nothing twice. Pure: the clock is an argument.
 */
import type {
  GatewaySpendReport,
  GatewaySpendRetired,
  RetiredSpendEpoch,
  TenantSpend,
} from '../../../schemas/generated/gridnetworks.ts';
import type { GatewaySpendReportRequest } from '../../../schemas/generated/gateway-spend-report.ts';
import { epochStartMs } from '../../../schemas/signals/spend-epoch.ts';

/** Live epochs kept in status.gatewaySpendReports; a new epoch past it retires the stalest. */
export const MAX_LIVE_SPEND_EPOCHS = 64;
/** Retired epochs remembered in status.gatewaySpendRetired.epochs; past it the oldest is forgotten (watermark). */
export const MAX_RETIRED_SPEND_EPOCHS = 256;
export const NANO_PER_USD = 1_000_000_000;

export type SpendOutcome =
  /** A newer report of a live or new epoch. */
  | 'recorded'
  /** A final report: the epoch is retired into the baseline. */
  | 'final_recorded'
  /** A newer report from an epoch retired by age: live again, its retired amount moved back out of the baseline. */
  | 'reinstated'
  /** Not newer than what is recorded (or retired): nothing changes. */
  | 'duplicate'
  /** A tenant's cumulative spend went down or vanished within an epoch: a confused reporter, never a refund. */
  | 'spend_decreased'
  /** The epoch was forgotten (or sent more after its final report): start a new epoch. */
  | 'epoch_retired';

export interface SpendLedger {
  /** status.gatewaySpendReports, amounts in nanoUsd, sorted by epoch. */
  readonly live: readonly GatewaySpendReport[];
  readonly retired: Required<Pick<GatewaySpendRetired, 'baseline' | 'epochs'>> & Pick<GatewaySpendRetired, 'watermark'>;
}

export interface SpendLedgerLimits {
  readonly maxLive?: number;
  readonly maxRetired?: number;
}

export interface AppliedSpendReport {
  /** The same object as the input when nothing changed. */
  readonly ledger: SpendLedger;
  readonly outcome: SpendOutcome;
  /** epoch_retired only: the gateway's new epoch must sort above this one (absent: any new epoch will do). */
  readonly watermark?: string;
}

/** What GridNetwork status holds of the ledger (read from it, written back as a merge patch). */
export interface SpendLedgerStatus {
  readonly gatewaySpendReports?: readonly GatewaySpendReport[];
  readonly gatewaySpendRetired?: GatewaySpendRetired;
}

const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** USD as reported, in nano-dollars. */
export function toNanoUsd(usd: number): number {
  return Number.isFinite(usd) && usd > 0 ? Math.round(usd * NANO_PER_USD) : 0;
}

function amountOf(entry: TenantSpend): number {
  if (entry.nanoUsd !== undefined) return Number.isSafeInteger(entry.nanoUsd) && entry.nanoUsd > 0 ? entry.nanoUsd : 0;
  return toNanoUsd(entry.usd ?? 0);
}

function spendMap(entries: readonly TenantSpend[] | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const entry of entries ?? []) out.set(entry.tenantId, (out.get(entry.tenantId) ?? 0) + amountOf(entry));
  return out;
}

function spendList(map: ReadonlyMap<string, number>): { tenantId: string; nanoUsd: number }[] {
  return [...map].sort(([a], [b]) => byString(a, b)).map(([tenantId, nanoUsd]) => ({ tenantId, nanoUsd }));
}

/** The ledger status holds, normalised: amounts in nanoUsd (a previous version's usd floats converted), sorted. */
export function readSpendLedger(status: SpendLedgerStatus | undefined): SpendLedger {
  const live = (status?.gatewaySpendReports ?? [])
    .map((r) => ({ ...r, spend: spendList(spendMap(r.spend)) }))
    .sort((a, b) => byString(a.epoch, b.epoch));
  const retired = status?.gatewaySpendRetired;
  const epochs = (retired?.epochs ?? [])
    .map((e) => (e.spend === undefined ? { ...e } : { ...e, spend: spendList(spendMap(e.spend)) }))
    .sort((a, b) => byString(a.epoch, b.epoch));
  const baseline = (retired?.baseline ?? [])
    .filter((b) => Number.isSafeInteger(b.nanoUsd) && b.nanoUsd > 0)
    .map((b) => ({ tenantId: b.tenantId, nanoUsd: b.nanoUsd }))
    .sort((a, b) => byString(a.tenantId, b.tenantId));
  return {
    live,
    retired: { baseline, epochs, ...(retired?.watermark === undefined ? {} : { watermark: retired.watermark }) },
  };
}

/** The status merge patch that writes `ledger` (whole lists: a merge patch replaces them). */
export function spendLedgerPatch(
  ledger: SpendLedger,
): Required<Pick<SpendLedgerStatus, 'gatewaySpendReports' | 'gatewaySpendRetired'>> {
  return { gatewaySpendReports: ledger.live, gatewaySpendRetired: ledger.retired };
}

/** A mutable working copy of a ledger; applySpendReport builds one per report that changes anything. */
class Draft {
  readonly live: Map<string, GatewaySpendReport>;
  readonly retired: Map<string, RetiredSpendEpoch>;
  readonly baseline: Map<string, number>;
  watermark: string | undefined;
  readonly nowIso: string;
  readonly limits: Required<SpendLedgerLimits>;

  constructor(ledger: SpendLedger, nowIso: string, limits: Required<SpendLedgerLimits>) {
    this.nowIso = nowIso;
    this.limits = limits;
    this.live = new Map(ledger.live.map((r) => [r.epoch, r]));
    this.retired = new Map(ledger.retired.epochs.map((e) => [e.epoch, e]));
    this.baseline = spendMap(ledger.retired.baseline);
    this.watermark = ledger.retired.watermark;
  }

  addToBaseline(spend: ReadonlyMap<string, number>, sign: 1 | -1): void {
    for (const [tenant, nano] of spend) {
      const next = (this.baseline.get(tenant) ?? 0) + sign * nano;
      if (next > 0) this.baseline.set(tenant, next);
      else this.baseline.delete(tenant);
    }
  }

  /** Puts a report in the live list, first retiring the stalest live epochs while there is no room. */
  putLive(report: GatewaySpendReportRequest, spend: ReadonlyMap<string, number>): void {
    this.live.delete(report.epoch);
    while (this.live.size >= this.limits.maxLive) this.retire(this.stalest(), 'age');
    this.live.set(report.epoch, {
      epoch: report.epoch,
      ...(report.replica === undefined ? {} : { replica: report.replica }),
      sequence: report.sequence,
      spend: spendList(spend),
      reportedAt: this.nowIso,
    });
  }

  /**
   * The live epoch reported longest ago (one without reportedAt first), ties by epoch order. reportedAt is always
   * this module's toISOString, whose fixed width makes string order time order.
   */
  stalest(): GatewaySpendReport {
    let pick: GatewaySpendReport | undefined;
    for (const record of this.live.values()) {
      if (pick === undefined) {
        pick = record;
        continue;
      }
      const order = byString(record.reportedAt ?? '', pick.reportedAt ?? '');
      if (order < 0 || (order === 0 && record.epoch < pick.epoch)) pick = record;
    }
    if (pick === undefined) throw new Error('stalest of no live epochs');
    return pick;
  }

  /** Moves a live epoch's spend into the baseline and remembers it; forgets the oldest past the bound. */
  retire(record: GatewaySpendReport, reason: RetiredSpendEpoch['reason']): void {
    const spend = spendMap(record.spend);
    this.live.delete(record.epoch);
    this.addToBaseline(spend, 1);
    this.retired.set(record.epoch, {
      epoch: record.epoch,
      sequence: record.sequence,
      reason,
      // A final retirement is never reinstated, so its spend need not be kept; an age retirement's is moved back.
      ...(reason === 'age' ? { spend: spendList(spend) } : {}),
      retiredAt: this.nowIso,
    });
    while (this.retired.size > this.limits.maxRetired) this.forget();
  }

  /**
   * Forgets one remembered epoch: the oldest time-prefixed one (the watermark rises to it, so it stays as low as it
   * can), else the longest-retired random-hex one, which no watermark covers (an older gateway cannot start a new
   * epoch, so its epochs are never refused).
   */
  forget(): void {
    let timed: RetiredSpendEpoch | undefined;
    let legacy: RetiredSpendEpoch | undefined;
    for (const entry of this.retired.values()) {
      if (epochStartMs(entry.epoch) !== undefined) {
        if (timed === undefined || entry.epoch < timed.epoch) timed = entry;
      } else if (
        legacy === undefined ||
        byString(entry.retiredAt ?? '', legacy.retiredAt ?? '') < 0 ||
        (entry.retiredAt === legacy.retiredAt && entry.epoch < legacy.epoch)
      ) {
        legacy = entry;
      }
    }
    if (timed !== undefined) {
      this.retired.delete(timed.epoch);
      if (this.watermark === undefined || timed.epoch > this.watermark) this.watermark = timed.epoch;
    } else if (legacy !== undefined) {
      this.retired.delete(legacy.epoch);
    }
  }

  ledger(): SpendLedger {
    return {
      live: [...this.live.values()].sort((a, b) => byString(a.epoch, b.epoch)),
      retired: {
        baseline: spendList(this.baseline),
        epochs: [...this.retired.values()].sort((a, b) => byString(a.epoch, b.epoch)),
        ...(this.watermark === undefined ? {} : { watermark: this.watermark }),
      },
    };
  }
}

/** True when some tenant of `before` is missing from `after` or lower there. */
function decreased(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): boolean {
  for (const [tenant, nano] of before) {
    const now = after.get(tenant);
    if (now === undefined || now < nano) return true;
  }
  return false;
}

/** Applies one validated report at wall time `nowMs`. */
export function applySpendReport(
  ledger: SpendLedger,
  report: GatewaySpendReportRequest,
  nowMs: number,
  limits: SpendLedgerLimits = {},
): AppliedSpendReport {
  const spend = new Map<string, number>();
  for (const [tenant, usd] of Object.entries(report.spend_usd))
    if (usd !== undefined) spend.set(tenant, toNanoUsd(usd));
  const final = report.final === true;
  const draft = (): Draft =>
    new Draft(ledger, new Date(nowMs).toISOString(), {
      maxLive: Math.max(1, limits.maxLive ?? MAX_LIVE_SPEND_EPOCHS),
      maxRetired: Math.max(1, limits.maxRetired ?? MAX_RETIRED_SPEND_EPOCHS),
    });
  const unchanged = (outcome: SpendOutcome): AppliedSpendReport => ({ ledger, outcome });

  const live = ledger.live.find((r) => r.epoch === report.epoch);
  if (live !== undefined) {
    // A final report may repeat the last sequence (the process had nothing new at shutdown): it still retires.
    if (report.sequence < live.sequence || (report.sequence === live.sequence && !final)) return unchanged('duplicate');
    const before = spendMap(live.spend);
    if (decreased(before, spend)) return unchanged('spend_decreased');
    const d = draft();
    if (report.sequence > live.sequence) d.putLive(report, spend);
    if (final) d.retire(d.live.get(report.epoch) as GatewaySpendReport, 'final');
    return { ledger: d.ledger(), outcome: final ? 'final_recorded' : 'recorded' };
  }

  const retired = ledger.retired.epochs.find((e) => e.epoch === report.epoch);
  if (retired !== undefined) {
    if (report.sequence <= retired.sequence) {
      // The final report of an epoch already retired by age at that very sequence: it is final now (no amount moves).
      if (final && retired.reason === 'age' && report.sequence === retired.sequence) {
        const d = draft();
        const { spend: _spend, ...entry } = retired;
        d.retired.set(retired.epoch, { ...entry, reason: 'final' });
        return { ledger: d.ledger(), outcome: 'final_recorded' };
      }
      return unchanged('duplicate');
    }
    // More after a final report: the process is not what it said; a new epoch carries the rest exactly.
    if (retired.reason === 'final')
      return {
        ledger,
        outcome: 'epoch_retired',
        ...(ledger.retired.watermark === undefined ? {} : { watermark: ledger.retired.watermark }),
      };
    const before = spendMap(retired.spend);
    if (decreased(before, spend)) return unchanged('spend_decreased');
    // Retired by age, yet alive: reinstated exactly, its retired amount moved back out of the baseline.
    const d = draft();
    d.retired.delete(retired.epoch);
    d.addToBaseline(before, -1);
    d.putLive(report, spend);
    if (final) d.retire(d.live.get(report.epoch) as GatewaySpendReport, 'final');
    return { ledger: d.ledger(), outcome: final ? 'final_recorded' : 'reinstated' };
  }

  const watermark = ledger.retired.watermark;
  if (watermark !== undefined && epochStartMs(report.epoch) !== undefined && report.epoch <= watermark) {
    return { ledger, outcome: 'epoch_retired', watermark };
  }
  const d = draft();
  d.putLive(report, spend);
  if (final) d.retire(d.live.get(report.epoch) as GatewaySpendReport, 'final');
  return { ledger: d.ledger(), outcome: final ? 'final_recorded' : 'recorded' };
}

/** This site's spend per tenant in nano-dollars: the retired baseline plus every live epoch. Exact integers. */
export function siteSpendNano(status: SpendLedgerStatus | undefined): Record<string, number> {
  const ledger = readSpendLedger(status);
  const out = spendMap(ledger.retired.baseline);
  for (const record of ledger.live)
    for (const entry of record.spend) out.set(entry.tenantId, (out.get(entry.tenantId) ?? 0) + amountOf(entry));
  return Object.fromEntries([...out].filter(([, nano]) => nano > 0).sort(([a], [b]) => byString(a, b)));
}

/** This site's spend per tenant in USD (its G-Counter slot value): siteSpendNano divided once. */
export function siteSpend(status: SpendLedgerStatus | undefined): Record<string, number> {
  return Object.fromEntries(
    Object.entries(siteSpendNano(status)).map(([tenant, nano]) => [tenant, nano / NANO_PER_USD]),
  );
}
