// The gateway's one client toward its site operator's gateway ingest listener (GatewayAgeIngest: POST
// /v1/gateway-age-reports and /v1/gateway-spend-reports, plain HTTP behind a NetworkPolicy that admits the site's
// gateway pods). Each report kind is sent latest-wins: every tick the newest unsent document goes out; a failure
// is retried on the next tick with the newer document, never queued, because every report is cumulative.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import type { Logger } from '../shared/log.ts';
import type { SpendLedger } from './usage/spend-ledger.ts';

export const SPEND_REPORTS_PATH = '/v1/gateway-spend-reports';
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
  readonly logger: Logger;
  /** This process's epoch (random, 32 hex by default). */
  readonly epoch?: string;
}

export function startOperatorReporter(options: OperatorReporterOptions): OperatorReporter {
  const epoch = options.epoch ?? randomBytes(16).toString('hex');
  const replica = hostname().slice(0, 253);
  let acked = 0;
  let running: Promise<void> | undefined;
  let lastProblem: string | undefined;

  async function sendSpend(): Promise<void> {
    const sequence = options.spend.sequence;
    if (sequence <= acked) return;
    const body = JSON.stringify({ epoch, replica, sequence, spend_usd: options.spend.snapshot() });
    let problem: string | undefined;
    try {
      const res = await request(`${options.url}${SPEND_REPORTS_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: REQUEST_TIMEOUT_MS,
        bodyTimeout: REQUEST_TIMEOUT_MS,
      });
      await res.body.dump();
      // 200 duplicate means the operator already holds this sequence (a retry after a lost answer): done as well.
      if (res.statusCode === 200 || res.statusCode === 202) acked = sequence;
      else problem = `operator answered ${res.statusCode}`;
    } catch (error) {
      problem = (error as NodeJS.ErrnoException).code ?? (error as Error).name;
    }
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

  const flush = (): Promise<void> => {
    running ??= Promise.all([sendSpend(), pollBudgets()]).then(() => undefined).finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = setInterval(() => void flush(), options.intervalMs);
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
