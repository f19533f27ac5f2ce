// The spend ledger's outcomes one by one (the property test beside this file drives them all at random): newest
// report per live epoch, final reports retired into the baseline, the stalest live epoch retired when room is
// needed and reinstated exactly when it reports again, remembered retirements recognising late and replayed
// reports, the watermark past them, older gateways' random-hex epochs, nano-dollar sums, and a previous version's
// usd floats read back.
import { describe, expect, it } from 'vitest';
import {
  applySpendReport,
  readSpendLedger,
  siteSpend,
  siteSpendNano,
  spendLedgerPatch,
  toNanoUsd,
  type SpendLedger,
  type SpendLedgerLimits,
  type SpendOutcome,
} from '../../../daemons/gossip-operator/tenant-spend/ledger.ts';
import { epochAbove, epochStartMs, formatEpoch } from '../../../schemas/signals/spend-epoch.ts';
import type { GatewaySpendReportRequest } from '../../../schemas/generated/gateway-spend-report.ts';

const T0 = 1_700_000_000_000;
const epoch = (n: number): string => formatEpoch(T0 + n * 1_000, n.toString(16).padStart(16, '0'));
const LEGACY = 'a'.repeat(32);
const report = (
  e: string,
  sequence: number,
  spend_usd: Record<string, number>,
  final = false,
): GatewaySpendReportRequest => ({ epoch: e, replica: 'gw-0', sequence, spend_usd, ...(final ? { final } : {}) });

/** Applies reports in order (at one second apart), returning the ledger and each outcome. */
function run(
  reports: readonly GatewaySpendReportRequest[],
  limits: SpendLedgerLimits = {},
  start: SpendLedger = readSpendLedger(undefined),
): { ledger: SpendLedger; outcomes: SpendOutcome[]; watermarks: (string | undefined)[] } {
  let ledger = start;
  const outcomes: SpendOutcome[] = [];
  const watermarks: (string | undefined)[] = [];
  reports.forEach((r, i) => {
    const applied = applySpendReport(ledger, r, T0 + 60_000 + i * 1_000, limits);
    ledger = applied.ledger;
    outcomes.push(applied.outcome);
    watermarks.push(applied.watermark);
  });
  return { ledger, outcomes, watermarks };
}

describe('spend ledger outcomes', () => {
  it('recorded / duplicate: keeps the newest report per epoch and sums epochs into the site spend', () => {
    const { ledger, outcomes } = run([
      report(epoch(1), 1, { 'tenant-a': 0.5 }),
      report(epoch(1), 3, { 'tenant-a': 1.25, 'tenant-b': 2 }),
      report(epoch(1), 2, { 'tenant-a': 0.75 }),
      report(epoch(1), 3, { 'tenant-a': 1.25, 'tenant-b': 2 }),
      report(epoch(2), 1, { 'tenant-a': 0.25 }),
    ]);
    expect(outcomes).toEqual(['recorded', 'recorded', 'duplicate', 'duplicate', 'recorded']);
    expect(siteSpend(spendLedgerPatch(ledger))).toEqual({ 'tenant-a': 1.5, 'tenant-b': 2 });
    expect(ledger.live.map((r) => r.epoch)).toEqual([epoch(1), epoch(2)]);
    expect(ledger.live[0]?.spend).toEqual([
      { tenantId: 'tenant-a', nanoUsd: 1_250_000_000 },
      { tenantId: 'tenant-b', nanoUsd: 2_000_000_000 },
    ]);
  });

  it('spend_decreased: a tenant lower or missing within an epoch, live or retired by age, is refused and changes nothing', () => {
    const { ledger } = run([report(epoch(1), 1, { 'tenant-a': 1 })]);
    for (const bad of [report(epoch(1), 2, { 'tenant-a': 0.5 }), report(epoch(1), 2, { 'tenant-b': 5 })]) {
      const applied = applySpendReport(ledger, bad, T0 + 120_000);
      expect(applied.outcome).toBe('spend_decreased');
      expect(applied.ledger).toBe(ledger);
    }
    const aged = run([report(epoch(1), 1, { t: 1 }), report(epoch(2), 1, { t: 1 })], { maxLive: 1 }).ledger;
    expect(applySpendReport(aged, report(epoch(1), 2, { t: 0.5 }), T0 + 120_000, { maxLive: 1 }).outcome).toBe(
      'spend_decreased',
    );
  });

  it('final_recorded: a final report retires the epoch into the baseline, also at the last sequence; replays are duplicates', () => {
    const { ledger, outcomes } = run([
      report(epoch(1), 4, { t: 0.04 }),
      report(epoch(1), 4, { t: 0.04 }, true),
      report(epoch(1), 4, { t: 0.04 }, true),
      report(epoch(1), 3, { t: 0.03 }),
      report(epoch(2), 2, { t: 0.02 }, true),
    ]);
    expect(outcomes).toEqual(['recorded', 'final_recorded', 'duplicate', 'duplicate', 'final_recorded']);
    expect(ledger.live).toEqual([]);
    expect(ledger.retired.baseline).toEqual([{ tenantId: 't', nanoUsd: 60_000_000 }]);
    // A final retirement is never reinstated, so it keeps no spend.
    expect(ledger.retired.epochs.map((e) => [e.epoch, e.sequence, e.reason, e.spend])).toEqual([
      [epoch(1), 4, 'final', undefined],
      [epoch(2), 2, 'final', undefined],
    ]);
    expect(siteSpendNano(spendLedgerPatch(ledger))).toEqual({ t: 60_000_000 });
  });

  it('epoch_retired: more after a final report is refused, so the process carries it in a new epoch', () => {
    const { outcomes } = run([report(epoch(1), 1, { t: 1 }, true), report(epoch(1), 2, { t: 2 })]);
    expect(outcomes).toEqual(['final_recorded', 'epoch_retired']);
  });

  it('retires the stalest live epoch when a new one needs room, never refusing it, and reinstates it exactly', () => {
    const limits = { maxLive: 2 };
    const { ledger, outcomes } = run(
      [
        report(epoch(1), 1, { t: 1 }),
        report(epoch(2), 1, { t: 2 }),
        report(epoch(2), 2, { t: 3 }),
        // Full: epoch 1 reported longest ago and is retired by age.
        report(epoch(3), 1, { t: 4 }),
      ],
      limits,
    );
    expect(outcomes).toEqual(['recorded', 'recorded', 'recorded', 'recorded']);
    expect(ledger.live.map((r) => r.epoch)).toEqual([epoch(2), epoch(3)]);
    expect(ledger.retired.epochs).toEqual([
      {
        epoch: epoch(1),
        sequence: 1,
        reason: 'age',
        spend: [{ tenantId: 't', nanoUsd: 1_000_000_000 }],
        retiredAt: new Date(T0 + 63_000).toISOString(),
      },
    ]);
    expect(siteSpendNano(spendLedgerPatch(ledger))).toEqual({ t: 8_000_000_000 });
    // A replay of epoch 1's report is a duplicate; its newer report means the process was alive: reinstated, its
    // retired dollar moved back out of the baseline and the new cumulative 1.5 counted instead (epoch 2 retires).
    const again = run([report(epoch(1), 1, { t: 1 }), report(epoch(1), 2, { t: 1.5 })], limits, ledger);
    expect(again.outcomes).toEqual(['duplicate', 'reinstated']);
    expect(again.ledger.live.map((r) => r.epoch)).toEqual([epoch(1), epoch(3)]);
    expect(siteSpendNano(spendLedgerPatch(again.ledger))).toEqual({ t: 8_500_000_000 });
    // The final report of an epoch retired by age at that very sequence makes it final, moving nothing.
    const final = run([report(epoch(2), 2, { t: 3 }, true)], limits, again.ledger);
    expect(final.outcomes).toEqual(['final_recorded']);
    expect(final.ledger.retired.epochs.find((e) => e.epoch === epoch(2))).toMatchObject({
      reason: 'final',
      sequence: 2,
    });
    expect(siteSpendNano(spendLedgerPatch(final.ledger))).toEqual({ t: 8_500_000_000 });
  });

  it('forgets the oldest remembered epoch past the bound and refuses unknown epochs at or below the watermark', () => {
    const limits = { maxRetired: 2 };
    const { ledger, outcomes } = run(
      [3, 1, 2].map((n) => report(epoch(n), 1, { t: n / 100 }, true)),
      limits,
    );
    expect(outcomes).toEqual(['final_recorded', 'final_recorded', 'final_recorded']);
    expect(ledger.retired.epochs.map((e) => e.epoch)).toEqual([epoch(2), epoch(3)]);
    expect(ledger.retired.watermark).toBe(epoch(1));
    expect(siteSpendNano(spendLedgerPatch(ledger))).toEqual({ t: 60_000_000 });
    // Epoch 1 (forgotten) and an unknown epoch that started even earlier: epoch_retired, with the watermark to pass.
    const late = run(
      [report(epoch(1), 1, { t: 0.01 }, true), report(epoch(0), 1, { t: 0.5 }), report(epoch(4), 1, { t: 0.5 })],
      limits,
      ledger,
    );
    expect(late.outcomes).toEqual(['epoch_retired', 'epoch_retired', 'recorded']);
    expect(late.watermarks.slice(0, 2)).toEqual([epoch(1), epoch(1)]);
    const next = epochAbove(T0 - 3_600_000, late.watermarks[0], 'f'.repeat(16));
    expect(next > epoch(1)).toBe(true);
    expect(applySpendReport(late.ledger, report(next, 1, { t: 0.5 }), T0, limits).outcome).toBe('recorded');
  });

  it("accepts an older gateway's random-hex epochs and never refuses them: no watermark covers them", () => {
    const limits = { maxRetired: 1 };
    const { ledger, outcomes } = run(
      [
        report(LEGACY, 1, { t: 1 }, true),
        report(epoch(1), 1, { t: 1 }, true),
        report('b'.repeat(32), 1, { t: 1 }, true),
      ],
      limits,
    );
    expect(outcomes).toEqual(['final_recorded', 'final_recorded', 'final_recorded']);
    // The time-prefixed epoch went first; then the longest-retired random-hex one, with no watermark for it.
    expect(ledger.retired.epochs.map((e) => e.epoch)).toEqual(['b'.repeat(32)]);
    expect(ledger.retired.watermark).toBe(epoch(1));
    expect(applySpendReport(ledger, report('c'.repeat(32), 1, { t: 1 }), T0, limits).outcome).toBe('recorded');
    expect(epochStartMs(LEGACY)).toBeUndefined();
    expect(epochStartMs(epoch(5))).toBe(T0 + 5_000);
  });

  it('sums in integer nano-dollars, where a sum of USD floats drifts', () => {
    expect(toNanoUsd(0.1 + 0.2)).toBe(300_000_000);
    let usd = 0;
    for (let i = 0; i < 1_000; i++) usd += 0.01;
    // The float sum drifts; the ledger's total of 1000 epochs of one cent each does not.
    expect(usd).not.toBe(10);
    const baseline = [{ tenantId: 't', nanoUsd: 9_999_990_000_000 }];
    const ledger = run(
      [report(epoch(1), 1, { t: 0.01 })],
      {},
      readSpendLedger({ gatewaySpendRetired: { baseline, epochs: [] } }),
    ).ledger;
    expect(siteSpend(spendLedgerPatch(ledger))).toEqual({ t: 10_000 });
  });

  it("reads a previous version's status (usd floats, no reportedAt) and survives a JSON round trip unchanged", () => {
    const old = { gatewaySpendReports: [{ epoch: LEGACY, sequence: 2, spend: [{ tenantId: 't', usd: 0.07 }] }] };
    const ledger = readSpendLedger(old);
    expect(ledger.live[0]?.spend).toEqual([{ tenantId: 't', nanoUsd: 70_000_000 }]);
    expect(siteSpendNano(old)).toEqual({ t: 70_000_000 });
    const { ledger: after } = run(
      [report(LEGACY, 3, { t: 0.08 }), report(epoch(1), 1, { t: 0.01 })],
      { maxLive: 1 },
      ledger,
    );
    expect(readSpendLedger(JSON.parse(JSON.stringify(spendLedgerPatch(after))))).toEqual(after);
    expect(siteSpendNano(spendLedgerPatch(after))).toEqual({ t: 90_000_000 });
  });

  it('ignores amounts that are not positive integers when summing', () => {
    expect(
      siteSpendNano({
        gatewaySpendReports: [
          {
            epoch: 'x',
            sequence: 1,
            spend: [
              { tenantId: 't', nanoUsd: -1 },
              { tenantId: 'u', usd: Number.NaN },
              { tenantId: 'v', nanoUsd: 2000 },
            ],
          },
        ],
      }),
    ).toEqual({ v: 2_000 });
    expect(siteSpend(undefined)).toEqual({});
  });
});
