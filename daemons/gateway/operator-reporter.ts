// The gateway's one client toward its site operator's gateway ingest listener (GatewayAgeIngest: POST
// /v1/gateway-age-reports and /v1/gateway-spend-reports, plain HTTP behind a NetworkPolicy that admits the site's
// gateway pods). Each report kind is sent latest-wins: every tick the newest unsent document goes out; a failure
// is retried on the next tick with the newer document, never queued, because every report is cumulative.
//
// Age reports (seed 001 "Gateway age evidence", schemas/signals/gateway-age-report.schema.json) go out only when
// they say something new, because every one the operator records is a GridNetwork status write: once at start (the
// process's record), when the count of rejected relayed ages grew (rejected: true), and once more when a tick passes
// with no new rejection (the newer clean evidence that resolves it). A clean process needs no renewal: freshness
// only ages rejected evidence.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import type { Logger } from '../shared/log.ts';
import type { SpendLedger } from './usage/spend-ledger.ts';

export const SPEND_REPORTS_PATH = '/v1/gateway-spend-reports';
export const AGE_REPORTS_PATH = '/v1/gateway-age-reports';

/**
 * This process's count of relayed ages it refused (a signal row whose age its own reading shows to be impossible),
 * cumulative since start. Whatever reads relayed ages counts a refusal here; the reporter tells the operator.
 */
export class AgeEvidence {
  #skewCount = 0;
  get skewCount(): number {
    return this.#skewCount;
  }
  reject(count = 1): void {
    if (Number.isSafeInteger(count) && count > 0) this.#skewCount += count;
  }
}
export const TENANT_BUDGETS_PATH = '/v1/tenant-budgets';

/** The newest converged budgetStatus the operator answered: spendRatio per tracked tenant (budget_enforce reads it). */
export class BudgetView {
  #ratios: ReadonlyMap<string, number> | undefined;
  ratios(): ReadonlyMap<string, number> | undefined {
    return this.#ratios;
  }
  update(budgets: unknown): boolean {
    if (!Array.isArray(budgets)) return false;
    const next = new Map<string, number>();
    for (const b of budgets) {
      const { tenantId, spendRatio } = (b ?? {}) as { tenantId?: unknown; spendRatio?: unknown };
      if (typeof tenantId === 'string' && typeof spendRatio === 'number' && Number.isFinite(spendRatio)) next.set(tenantId, spendRatio);
    }
    this.#ratios = next;
    return true;
  }
}
const REQUEST_TIMEOUT_MS = 5_000;

export interface OperatorReporter {
  /** Sends what is pending now (also run every interval). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface OperatorReporterOptions {
  /** The ingest listener's base URL, `http://HOST:PORT`. */
  readonly url: string;
  readonly intervalMs: number;
  readonly spend: SpendLedger;
  /** Filled from GET /v1/tenant-budgets on every tick. */
  readonly budgets: BudgetView;
  /** Rejected relayed ages; a fresh, never-rejecting count when absent. */
  readonly ages?: AgeEvidence;
  readonly logger: Logger;
  /** This process's epoch (random, 32 hex by default). */
  readonly epoch?: string;
}

export function startOperatorReporter(options: OperatorReporterOptions): OperatorReporter {
  const epoch = options.epoch ?? randomBytes(16).toString('hex');
  const replica = hostname().slice(0, 253);
  const ages = options.ages ?? new AgeEvidence();
  let acked = 0;
  let running: Promise<void> | undefined;
  let lastProblem: string | undefined;
  /** Age reports: the last sequence sent, and what the operator last recorded (undefined until the first one). */
  let ageSequence = 0;
  let ageRecorded: { skewCount: number; rejected: boolean } | undefined;
  let lastAgeProblem: string | undefined;

  /**
   * POSTs one report; undefined when the operator recorded it, else what went wrong. 200 (a duplicate: the operator
   * already holds this sequence, a retry after a lost answer) counts as recorded too.
   */
  async function post(path: string, body: string): Promise<string | undefined> {
    try {
      const res = await request(`${options.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: REQUEST_TIMEOUT_MS,
        bodyTimeout: REQUEST_TIMEOUT_MS,
      });
      await res.body.dump();
      return res.statusCode === 200 || res.statusCode === 202 ? undefined : `operator answered ${res.statusCode}`;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code ?? (error as Error).name;
    }
  }

  async function sendAges(): Promise<void> {
    const skewCount = ages.skewCount;
    const recorded = ageRecorded;
    if (recorded !== undefined && skewCount === recorded.skewCount && !recorded.rejected) return;
    // rejected: a refusal since the previous recorded report (the first report counts from zero).
    const rejected = skewCount > (recorded?.skewCount ?? 0);
    ageSequence += 1;
    const body = JSON.stringify({ epoch, replica, sequence: ageSequence, skewCount, rejected });
    const problem = await post(AGE_REPORTS_PATH, body);
    if (problem === undefined) ageRecorded = { skewCount, rejected };
    if (problem !== lastAgeProblem) {
      if (problem === undefined) options.logger.info({ sequence: ageSequence }, 'age reports reach the operator');
      else options.logger.warn({ url: options.url, problem }, 'age report not recorded; retried on the next tick');
      lastAgeProblem = problem;
    }
  }

  async function sendSpend(): Promise<void> {
    const sequence = options.spend.sequence;
    if (sequence <= acked) return;
    const body = JSON.stringify({ epoch, replica, sequence, spend_usd: options.spend.snapshot() });
    const problem = await post(SPEND_REPORTS_PATH, body);
    if (problem === undefined) acked = sequence;
    // One line per change of problem, so a long outage does not flood the log.
    if (problem !== lastProblem) {
      if (problem === undefined) options.logger.info({ sequence }, 'spend reports reach the operator again');
      else options.logger.warn({ url: options.url, problem }, 'spend report not recorded; the next report carries the same cumulative spend');
      lastProblem = problem;
    }
  }

  async function pollBudgets(): Promise<void> {
    try {
      const res = await request(`${options.url}${TENANT_BUDGETS_PATH}`, { method: 'GET', headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return;
      }
      options.budgets.update(((await res.body.json()) as { budgets?: unknown }).budgets);
    } catch {
      // The newest known budgets stay in force; the spend report of the same tick logs the outage once.
    }
  }

  const tick = (): Promise<void> => {
    running ??= Promise.all([sendSpend(), pollBudgets(), sendAges()]).then(() => undefined).finally(() => {
      running = undefined;
    });
    return running;
  };
  // "Sends what is pending now": a tick already in flight read its documents before the caller's latest spend or
  // rejection, so an explicit flush waits it out and sends again. The timer's ticks just skip a busy interval.
  const flush = async (): Promise<void> => {
    while (running !== undefined) await running;
    await tick();
  };
  const timer = setInterval(() => void tick(), options.intervalMs);
  timer.unref();
  return {
    flush,
    async close() {
      clearInterval(timer);
      await running;
      await flush();
    },
  };
}
