// The gateway's one client toward its site operator's gateway ingest listener (GatewayAgeIngest: POST
// /v1/gateway-age-reports and /v1/gateway-spend-reports, GET /v1/tenant-budgets; plain HTTP behind a NetworkPolicy
// that admits the site's gateway pods, every request carrying the site's ingest token as a bearer token). Each
// report kind is sent latest-wins: every tick the newest unsent document goes out; a failure is retried on the next
// tick with the newer document, never queued, because every report is cumulative. At close (after the drain) the
// spend goes out once more marked final, so the operator retires this process's epoch at once (SpendEpochs).
//
// Age reports (schemas/signals/gateway-age-report.schema.json; the operator's side is
// gossip-operator/gateway-ages/evidence.ts) go out only when they say something new, because every one the operator
// records is a GridNetwork status write: once at start (the process's record), when the count of rejected relayed ages
// grew (rejected: true), and once more when a tick passes with no new rejection (the newer clean evidence that resolves
// it). A clean process needs no renewal: freshness only ages rejected evidence.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import type { Logger } from '../shared/log.ts';
import type { SpendLedger } from './usage/spend-ledger.ts';
import { SpendEpochs } from './usage/spend-epochs.ts';

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
      if (typeof tenantId === 'string' && typeof spendRatio === 'number' && Number.isFinite(spendRatio))
        next.set(tenantId, spendRatio);
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
  /** This process's first epoch (tests); `<start ms>-<random hex>` by default (schemas/signals/spend-epoch.ts). */
  readonly epoch?: string;
  /**
   * The site's ingest token (usage_meter.report.token_file, kept loaded off the request path), sent as
   * `Authorization: Bearer`. Undefined while the file could not be read: nothing is sent then (the operator would
   * refuse it), and the newer report goes out once the token is there.
   */
  readonly token?: () => string | undefined;
}

export function startOperatorReporter(options: OperatorReporterOptions): OperatorReporter {
  const replica = hostname().slice(0, 253);
  const epochs = new SpendEpochs({
    now: Date.now,
    randomHex: () => randomBytes(8).toString('hex'),
    replica,
    ...(options.epoch === undefined ? {} : { epoch: options.epoch }),
  });
  // Age evidence keeps the process's first epoch: a new spend epoch is a ledger matter, not a new process.
  const ageEpoch = epochs.epoch;
  const ages = options.ages ?? new AgeEvidence();
  let running: Promise<void> | undefined;
  let lastProblem: string | undefined;
  /** Age reports: the last sequence sent, and what the operator last recorded (undefined until the first one). */
  let ageSequence = 0;
  let ageRecorded: { skewCount: number; rejected: boolean } | undefined;
  let lastAgeProblem: string | undefined;

  /** The token header, or undefined when a token is configured and not loaded (then nothing is sent). */
  function authorization(): Record<string, string> | undefined {
    if (options.token === undefined) return {};
    const token = options.token();
    return token === undefined ? undefined : { authorization: `Bearer ${token}` };
  }

  /**
   * POSTs one report: the operator's status and JSON answer, or what went wrong before one. 200 (a duplicate: the
   * operator already holds this sequence, a retry after a lost answer) counts as recorded too.
   */
  async function post(path: string, body: string): Promise<{ status: number; answer: unknown } | string> {
    const auth = authorization();
    if (auth === undefined) return 'no ingest token loaded (usage_meter.report.token_file)';
    try {
      const res = await request(`${options.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body,
        headersTimeout: REQUEST_TIMEOUT_MS,
        bodyTimeout: REQUEST_TIMEOUT_MS,
      });
      const text = await res.body.text();
      let answer: unknown;
      try {
        answer = JSON.parse(text);
      } catch {
        answer = undefined;
      }
      return { status: res.statusCode, answer };
    } catch (error) {
      return (error as NodeJS.ErrnoException).code ?? (error as Error).name;
    }
  }

  /** undefined when the operator recorded the report, else the problem in words (never the token). */
  const problemOf = (result: { status: number } | string): string | undefined =>
    typeof result === 'string'
      ? result
      : result.status === 200 || result.status === 202
        ? undefined
        : result.status === 401
          ? "operator refused the ingest token (401): check usage_meter.report.token_file against the operator's --ingest-token-file"
          : `operator answered ${result.status}`;

  async function sendAges(): Promise<void> {
    const skewCount = ages.skewCount;
    const recorded = ageRecorded;
    if (recorded !== undefined && skewCount === recorded.skewCount && !recorded.rejected) return;
    // rejected: a refusal since the previous recorded report (the first report counts from zero).
    const rejected = skewCount > (recorded?.skewCount ?? 0);
    ageSequence += 1;
    const body = JSON.stringify({ epoch: ageEpoch, replica, sequence: ageSequence, skewCount, rejected });
    const problem = problemOf(await post(AGE_REPORTS_PATH, body));
    if (problem === undefined) ageRecorded = { skewCount, rejected };
    if (problem !== lastAgeProblem) {
      if (problem === undefined) options.logger.info({ sequence: ageSequence }, 'age reports reach the operator');
      else options.logger.warn({ url: options.url, problem }, 'age report not recorded; retried on the next tick');
      lastAgeProblem = problem;
    }
  }

  async function sendSpend(final = false): Promise<void> {
    // Twice at most: an epoch_retired answer is followed at once by the same spend under the new epoch.
    for (let attempt = 0; attempt < 2; attempt++) {
      const pending = epochs.report(options.spend.sequence, options.spend.snapshot(), final);
      if (pending === undefined) return;
      const result = await post(SPEND_REPORTS_PATH, JSON.stringify(pending.body));
      const answer = typeof result === 'string' ? 'refused' : epochs.answered(pending, result.status, result.answer);
      if (answer === 'new_epoch') {
        options.logger.info(
          { epoch: epochs.epoch },
          "the operator no longer knows this process's spend epoch; the spend after its last acknowledged report goes on under a new one",
        );
        continue;
      }
      const problem = answer === 'acked' ? undefined : (problemOf(result) ?? 'operator refused the report');
      // One line per change of problem, so a long outage does not flood the log.
      if (problem !== lastProblem) {
        if (problem === undefined)
          options.logger.info({ sequence: pending.body.sequence }, 'spend reports reach the operator again');
        else
          options.logger.warn(
            { url: options.url, problem },
            final
              ? 'final spend report not recorded; the operator retires this epoch later'
              : 'spend report not recorded; the next report carries the same cumulative spend',
          );
        lastProblem = problem;
      }
      return;
    }
  }

  async function pollBudgets(): Promise<void> {
    try {
      const auth = authorization();
      if (auth === undefined) return;
      const res = await request(`${options.url}${TENANT_BUDGETS_PATH}`, {
        method: 'GET',
        headers: auth,
        headersTimeout: REQUEST_TIMEOUT_MS,
        bodyTimeout: REQUEST_TIMEOUT_MS,
      });
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
    running ??= Promise.all([sendSpend(), pollBudgets(), sendAges()])
      .then(() => undefined)
      .finally(() => {
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
      while (running !== undefined) await running;
      // The last word on spend: final, so the operator retires this epoch now rather than when it needs the room.
      await Promise.all([sendSpend(true), sendAges()]);
    },
  };
}
