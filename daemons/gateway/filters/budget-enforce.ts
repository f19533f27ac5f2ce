// budget_enforce (consumer, right after caller_auth): the caller's quota. A tenant whose converged spendRatio
// (GridNetwork budgetStatus, polled from the site operator by the reporter) has reached soft_limit gets 429
// insufficient_quota for new requests; requests already answering are not touched, so streams finish. Each caller
// key has optional request and token limits per minute, answered as OpenAI does (429 rate_limit_exceeded with
// x-ratelimit-* headers, which successful answers carry too). Budgets not known yet (no answer from the operator
// since start) admit: spend is still metered and reported, and the limit applies from the first answer on.
import type { BudgetEnforceFilter } from '../../../schemas/generated/gateway-config.ts';
import type { Filter, GatewayRequest } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { KeyQuota } from '../usage/key-quota.ts';

export interface BudgetSource {
  /** spendRatio per tracked tenant from the newest answer, or undefined before the first one. */
  ratios(): ReadonlyMap<string, number> | undefined;
}

export function createBudgetEnforce(config: BudgetEnforceFilter, budgets: BudgetSource, quota: KeyQuota): Filter {
  const softLimit = config.soft_limit ?? 1;
  const limits = {
    ...(config.requests_per_minute === undefined ? {} : { requestsPerMinute: config.requests_per_minute }),
    ...(config.tokens_per_minute === undefined ? {} : { tokensPerMinute: config.tokens_per_minute }),
  };
  return {
    name: 'budget_enforce',
    apply(request: GatewayRequest): void {
      const tenant = request.tenant;
      if (tenant === undefined) return;
      const ratio = budgets.ratios()?.get(tenant);
      if (ratio !== undefined && ratio >= softLimit) {
        throw new GatewayError(
          429,
          'insufficient_quota',
          'insufficient_quota',
          "You exceeded your current quota: the tenant's budget is spent. Ask the grid operator to raise its capUsd.",
        );
      }
      if (
        request.callerKeyId === undefined ||
        (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined)
      )
        return;
      const verdict = quota.admit(request.callerKeyId, limits);
      for (const name in verdict.headers) request.res.addHeader(name, verdict.headers[name]!);
      if (!verdict.ok) {
        throw new GatewayError(
          429,
          'rate_limit_exceeded',
          verdict.kind,
          `Rate limit reached for ${verdict.kind} per minute on this key. Retry after ${verdict.retryAfterSeconds}s.`,
          {
            'retry-after': String(verdict.retryAfterSeconds),
          },
        );
      }
    },
  };
}
