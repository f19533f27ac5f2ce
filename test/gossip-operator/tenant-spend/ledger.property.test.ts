// Property test (fast-check) of the spend ledger across thousands of gateway processes: rollouts of a 2-replica
// consumer whose processes report through a network that loses, delays, duplicates and replays reports and loses
// acknowledgements, send or lose their final report, crash, or stay alive silently (stragglers) long after their
// rollout; the operator restarts now and then and reads the ledger back from its status JSON. The gateway side is
// the real SpendEpochs (the reporter's pure core), so an epoch_retired answer is followed by a new epoch as in
// production. Checked: the site total per tenant equals the sum over epochs of the highest cumulative spend the
// operator accepted from each, to the nano-dollar; every process's spend is counted once its reports get through
// (the only excess is what a report recorded but never acknowledged carried into a new epoch, and none without
// lost acknowledgements); no report is refused as spend_decreased; and the records stay within their bounds.
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { SpendEpochs, type PendingSpendReport } from '../../../daemons/gateway/usage/spend-epochs.ts';
import {
  MAX_LIVE_SPEND_EPOCHS,
  MAX_RETIRED_SPEND_EPOCHS,
  applySpendReport,
  readSpendLedger,
  siteSpendNano,
  spendLedgerPatch,
  type SpendLedger,
  type SpendOutcome,
} from '../../../daemons/gossip-operator/tenant-spend/ledger.ts';
import { checkGatewaySpendReport } from '../../../schemas/signals/validate.ts';
import { seededRandom as prng } from '../../../daemons/shared/seeded-random.ts';

const TENANTS = ['tenant-a', 'tenant-b', 'tenant-c'];

interface Knobs {
  readonly seed: number;
  readonly rollouts: number;
  readonly maxLive: number;
  readonly maxRetired: number;
  /** Of a shutdown: the final report is lost / the process crashes / it lingers alive and silent. */
  readonly pFinalLost: number;
  readonly pCrash: number;
  readonly pStraggle: number;
  /** Of a report sent: delivered but the answer lost / lost / delayed (the gateway gave up waiting; its answer goes nowhere). */
  readonly pLostAck: number;
  readonly pLost: number;
  readonly pDelay: number;
  readonly pReplay: number;
  readonly pRestart: number;
}

type Micro = Map<string, number>;

interface Proc {
  readonly id: number;
  alive: boolean;
  /** Rollouts left before a straggler reports again. */
  silentFor: number;
  cum: Micro;
  sequence: number;
  readonly epochs: SpendEpochs;
  ackedCum: Micro;
  sawLostAck: boolean;
}

interface Sent {
  readonly proc: Proc;
  readonly pending: PendingSpendReport;
  /** The reported (epoch-relative) amounts in nano-dollars, as the operator rounds them. */
  readonly reported: Micro;
  readonly cum: Micro;
}

const add = (into: Micro, from: ReadonlyMap<string, number>, sign = 1): void => {
  for (const [t, v] of from) into.set(t, (into.get(t) ?? 0) + sign * v);
};
const asUsd = (m: ReadonlyMap<string, number>): Record<string, number> =>
  Object.fromEntries([...m].map(([t, v]) => [t, v / 1e9]));
const nonZero = (m: ReadonlyMap<string, number>): Record<string, number> =>
  Object.fromEntries([...m].filter(([, v]) => v !== 0).sort(([a], [b]) => (a < b ? -1 : 1)));

function simulate(k: Knobs): { outcomes: Map<SpendOutcome, number>; edges: number; procs: number } {
  const rnd = prng(k.seed);
  const chance = (p: number): boolean => rnd() < p;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const hex = (): string => Array.from({ length: 16 }, () => Math.floor(rnd() * 16).toString(16)).join('');
  let now = 1_700_000_000_000;
  let ledger: SpendLedger = readSpendLedger(undefined);
  const limits = { maxLive: k.maxLive, maxRetired: k.maxRetired };
  const outcomes = new Map<SpendOutcome, number>();
  /** Per epoch: the reported amounts of the highest sequence the operator accepted. */
  const accepted = new Map<string, { sequence: number; reported: Micro }>();
  /** Per process: the excess a lost acknowledgement carried into a new epoch (the documented edge). */
  const edge = new Map<number, Micro>();
  const epochOwner = new Map<string, Proc>();
  const epochBase = new Map<string, Micro>();
  const procs: Proc[] = [];
  /** The processes still alive (procs keeps every one, for the final accounting). */
  let living: Proc[] = [];
  const delayed: Sent[] = [];
  const archive: Sent[] = [];
  let nextId = 0;

  const start = (): Proc => {
    const skew = Math.round((rnd() - 0.5) * 240_000);
    const epochs = new SpendEpochs({ now: () => now + skew, randomHex: hex, replica: `gw-${nextId}` });
    const proc: Proc = {
      id: nextId++,
      alive: true,
      silentFor: 0,
      cum: new Map(),
      sequence: 0,
      epochs,
      ackedCum: new Map(),
      sawLostAck: false,
    };
    epochOwner.set(epochs.epoch, proc);
    epochBase.set(epochs.epoch, new Map());
    procs.push(proc);
    living.push(proc);
    return proc;
  };

  const spend = (proc: Proc): void => {
    const tenant = pick(TENANTS);
    proc.cum.set(tenant, (proc.cum.get(tenant) ?? 0) + 1 + Math.floor(rnd() * 5_000_000));
    proc.sequence++;
  };

  /** The operator applies one report (validated as the ingest does); returns its answer. */
  const deliver = (sent: Sent): { status: number; body: Record<string, unknown> } => {
    // Some delivered reports arrive again later (a retried connection, a proxy's replay): true duplicates.
    if (chance(k.pReplay)) archive.push(sent);
    if (archive.length > 400) archive.splice(Math.floor(rnd() * archive.length), 1);
    const checked = checkGatewaySpendReport(JSON.parse(JSON.stringify(sent.pending.body)));
    if (!checked.ok) throw new Error(`the gateway sent an invalid report: ${checked.error}`);
    const applied = applySpendReport(ledger, checked.value, now, limits);
    ledger = applied.ledger;
    outcomes.set(applied.outcome, (outcomes.get(applied.outcome) ?? 0) + 1);
    expect(applied.outcome).not.toBe('spend_decreased');
    expect(ledger.live.length).toBeLessThanOrEqual(k.maxLive);
    expect(ledger.retired.epochs.length).toBeLessThanOrEqual(k.maxRetired);
    if (applied.outcome === 'recorded' || applied.outcome === 'final_recorded' || applied.outcome === 'reinstated') {
      const best = accepted.get(sent.pending.body.epoch);
      if (best === undefined || sent.pending.body.sequence > best.sequence)
        accepted.set(sent.pending.body.epoch, { sequence: sent.pending.body.sequence, reported: sent.reported });
    }
    const status = {
      recorded: 202,
      final_recorded: 202,
      reinstated: 202,
      duplicate: 200,
      spend_decreased: 409,
      epoch_retired: 410,
    }[applied.outcome];
    return {
      status,
      body: { outcome: applied.outcome, ...(applied.watermark === undefined ? {} : { watermark: applied.watermark }) },
    };
  };

  const answer = (
    proc: Proc,
    sent: Sent,
    status: number,
    body: Record<string, unknown>,
  ): 'acked' | 'new_epoch' | 'refused' => {
    const before = proc.epochs.epoch;
    const result = proc.epochs.answered(sent.pending, status, body);
    if (result === 'acked' && sent.pending.body.sequence >= proc.epochs.ackedSequence)
      proc.ackedCum = new Map(sent.cum);
    if (result === 'new_epoch') {
      // What the operator had of the forgotten epoch beyond the last acknowledgement is counted again by the new one.
      const held = new Map(epochBase.get(before));
      add(held, accepted.get(before)?.reported ?? new Map());
      const excess = edge.get(proc.id) ?? new Map();
      for (const [t, v] of held) excess.set(t, (excess.get(t) ?? 0) + v - (proc.ackedCum.get(t) ?? 0));
      edge.set(proc.id, excess);
      epochOwner.set(proc.epochs.epoch, proc);
      epochBase.set(proc.epochs.epoch, new Map(proc.ackedCum));
    }
    return result;
  };

  /** One report from `proc` through the network; `reliable` for the final drain. */
  const tick = (proc: Proc, final = false, reliable = false): void => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const pending = proc.epochs.report(proc.sequence, asUsd(proc.cum), final);
      if (pending === undefined) return;
      const reported = new Map(Object.entries(pending.body.spend_usd).map(([t, usd]) => [t, Math.round(usd * 1e9)]));
      const sent: Sent = { proc, pending, reported, cum: new Map(proc.cum) };
      const fate = reliable ? 1 : rnd();
      if (fate < k.pLost) return;
      if (fate < k.pLost + k.pDelay) {
        // The gateway gave up waiting; the operator may still record it later: an acknowledgement lost, too.
        delayed.push(sent);
        proc.sawLostAck = true;
        return;
      }
      const reply = deliver(sent);
      if (fate < k.pLost + k.pDelay + k.pLostAck) {
        proc.sawLostAck = true;
        return;
      }
      if (answer(proc, sent, reply.status, reply.body) !== 'new_epoch') return;
    }
  };

  const background = (): void => {
    if (delayed.length > 0 && chance(0.3)) deliver(delayed.splice(Math.floor(rnd() * delayed.length), 1)[0] as Sent);
    if (archive.length > 0 && chance(0.2)) deliver(pick(archive));
    if (chance(k.pRestart)) ledger = readSpendLedger(JSON.parse(JSON.stringify(spendLedgerPatch(ledger))));
  };

  const expectedTotal = (): Record<string, number> => {
    const total: Micro = new Map();
    for (const { reported } of accepted.values()) add(total, reported);
    return nonZero(total);
  };

  let current = [start(), start()];
  for (let r = 0; r < k.rollouts; r++) {
    const active = (): Proc[] => living.filter((p) => p.silentFor === 0);
    for (let step = 0, steps = 4 + Math.floor(rnd() * 8); step < steps; step++) {
      now += 1_000 + Math.floor(rnd() * 60_000);
      const proc = pick(active());
      if (chance(0.6)) spend(proc);
      else tick(proc);
      background();
    }
    for (const p of living) if (p.silentFor > 0) p.silentFor--;
    // The rollout: a new pair starts, the old pair drains and exits (or not).
    const next = [start(), start()];
    for (const old of current) {
      const fate = rnd();
      if (fate < k.pStraggle) {
        old.silentFor = 1 + Math.floor(rnd() * 3 * k.maxRetired);
        continue;
      }
      if (fate >= k.pStraggle + k.pCrash) {
        if (!chance(k.pFinalLost)) tick(old, true);
      }
      old.alive = false;
    }
    current = next;
    // Stragglers whose silence ended report again and then exit for good, some with a final report.
    for (const p of living.filter((q) => q.silentFor === 0 && !current.includes(q))) {
      if (chance(0.5)) spend(p);
      tick(p);
      if (chance(0.3)) {
        tick(p, true);
        p.alive = false;
      }
    }
    living = living.filter((p) => p.alive);
    if (r % 25 === 0)
      expect(nonZero(new Map(Object.entries(siteSpendNano(spendLedgerPatch(ledger)))))).toEqual(expectedTotal());
  }

  // Drain: every living process reports over a reliable network until the operator has all of its spend.
  for (const p of living) {
    p.silentFor = 0;
    tick(p, false, true);
    tick(p, false, true);
    expect(p.epochs.ackedSequence).toBe(p.sequence);
  }
  ledger = readSpendLedger(JSON.parse(JSON.stringify(spendLedgerPatch(ledger))));
  expect(nonZero(new Map(Object.entries(siteSpendNano(spendLedgerPatch(ledger)))))).toEqual(expectedTotal());

  // Per living process: the operator counted exactly its whole spend plus its lost-acknowledgement excess.
  let edges = 0;
  for (const p of procs) {
    const counted: Micro = new Map();
    for (const [epoch, owner] of epochOwner) if (owner === p) add(counted, accepted.get(epoch)?.reported ?? new Map());
    const excess = edge.get(p.id) ?? new Map();
    const excessTotal = [...excess.values()].reduce((a, b) => a + b, 0);
    expect(excessTotal).toBeGreaterThanOrEqual(0);
    if (!p.sawLostAck) expect(excessTotal).toBe(0);
    edges += excessTotal;
    if (p.alive) {
      const whole = new Map(p.cum);
      add(whole, excess);
      expect(nonZero(counted)).toEqual(nonZero(whole));
    }
  }
  return { outcomes, edges, procs: procs.length };
}

const probability = (max: number) => fc.double({ min: 0, max, noNaN: true });

describe('spend ledger across thousands of gateway processes (property)', () => {
  test('5000 rollouts of a 2-replica consumer at the default bounds: exact totals, nothing refused, bounded', () => {
    const seen = new Set<SpendOutcome>();
    fc.assert(
      fc.property(
        fc.integer(),
        probability(0.3),
        probability(0.2),
        probability(0.05),
        probability(0.1),
        (seed, pFinalLost, pCrash, pStraggle, pLostAck) => {
          const run = simulate({
            seed,
            rollouts: 5_000,
            maxLive: MAX_LIVE_SPEND_EPOCHS,
            maxRetired: MAX_RETIRED_SPEND_EPOCHS,
            pFinalLost,
            pCrash,
            pStraggle,
            pLostAck,
            pLost: 0.05,
            pDelay: 0.05,
            pReplay: 0.1,
            pRestart: 0.02,
          });
          expect(run.procs).toBeGreaterThanOrEqual(10_000);
          for (const o of run.outcomes.keys()) seen.add(o);
        },
      ),
      // One long run per test run (each a different random one); the variety is in the shorter runs below.
      { numRuns: 1 },
    );
    expect([...seen].sort()).toEqual(expect.arrayContaining(['duplicate', 'final_recorded', 'recorded']));
  }, 240_000);

  test('small bounds, so epochs are forgotten and new epochs started all the time: still exact', () => {
    const seen = new Set<SpendOutcome>();
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer(),
          rollouts: fc.integer({ min: 50, max: 400 }),
          maxLive: fc.integer({ min: 1, max: 8 }),
          maxRetired: fc.integer({ min: 1, max: 12 }),
          pFinalLost: probability(0.6),
          pCrash: probability(0.3),
          pStraggle: probability(0.4),
          pLostAck: probability(0.2),
          pLost: probability(0.2),
          pDelay: probability(0.2),
          pReplay: probability(0.4),
          pRestart: probability(0.2),
        }),
        (knobs) => {
          for (const o of simulate(knobs).outcomes.keys()) seen.add(o);
        },
      ),
      { numRuns: 100 },
    );
    // The runs went through every path of the ledger.
    expect([...seen].sort()).toEqual(['duplicate', 'epoch_retired', 'final_recorded', 'recorded', 'reinstated']);
  });

  test('without lost or abandoned acknowledgements nothing is ever counted twice, even when epochs are forgotten', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        (seed, maxLive, maxRetired) => {
          const run = simulate({
            seed,
            rollouts: 300,
            maxLive,
            maxRetired,
            pFinalLost: 0.4,
            pCrash: 0.2,
            pStraggle: 0.3,
            pLostAck: 0,
            pLost: 0.1,
            pDelay: 0,
            pReplay: 0.3,
            pRestart: 0.1,
          });
          expect(run.edges).toBe(0);
          expect(run.outcomes.get('epoch_retired') ?? 0).toBeGreaterThan(0);
        },
      ),
      { numRuns: 25 },
    );
  });
});
