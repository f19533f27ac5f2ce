/**
 * The gateway ingest listener: POST /v1/gateway-age-reports (schemas/signals/gateway-age-report.schema.json) and
 * /v1/gateway-spend-reports, GET /v1/tenant-budgets, on its own plain-HTTP listener, off unless
 * --gateway-age-address is set. Not the admin listener: that one is GET-only and scraped by probes, and this one
 * takes writes that end in status, so it gets its own port a NetworkPolicy can open to the site's gateway pods only,
 * and every request must carry the site's ingest token (--ingest-token-file) as a bearer token: a missing or wrong
 * one is answered 401 before the body is read. Reports are applied one at a time.
 *
 * GridNetwork status is the source of truth for the records (an operator may delete an entry after verifying a
 * process retired, or clear gatewayAgeReportOverflow after verifying coverage); this process only adds the
 * monotonic receipt time of the reports it received itself, so after a restart every record is of unknown freshness.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import type { GatewayAgeReport } from '../../../schemas/generated/gridnetworks.ts';
import { checkGatewayAgeReport } from '../../../schemas/signals/validate.ts';
import { parseListenAddress } from '../../shared/admin-server.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import { type Condition, mergeConditions, withOwnConditions } from '../controllers/status.ts';
import { patchStatusFresh } from '../controllers/status-write.ts';
import { GRID_NETWORK } from '../kinds.ts';
import type { OperatorMetrics } from '../metrics.ts';
import {
  type AgeRecord,
  applyReport,
  type EvidenceState,
  GATEWAY_AGES_REJECTED,
  gatewayAgesCondition,
  type ReportOutcome,
} from './evidence.ts';
import { listen } from '../../shared/listen.ts';
import { closeServer } from '../../shared/close-server.ts';
import { TokenFile } from '../../shared/token-file.ts';
import {
  GATEWAY_SPEND_REPORTS_PATH,
  MAX_SPEND_REPORT_BYTES,
  TENANT_BUDGETS_PATH,
  recordSpendReport,
  tenantBudgets,
} from '../tenant-spend/record.ts';

export const GATEWAY_AGES_FIELD_MANAGER = 'grid-operator-gateway-ages';
export const GATEWAY_AGE_REPORTS_PATH = '/v1/gateway-age-reports';
export const MAX_REPORT_BYTES = 4096;
/**
 * Reports accepted and not yet answered, at most: past it a report is answered 503 with Retry-After. A site has a
 * handful of gateway replicas each sending one report at a time, so 32 only fills when status writes stall.
 */
export const MAX_QUEUED_REPORTS = 32;
export const RETRY_AFTER_SECONDS = 5;
/** Concurrent connections; more are dropped by the server (reports are small and answered one at a time anyway). */
export const MAX_CONNECTIONS = 64;

export interface GatewayAgeIngestOptions {
  readonly address: string;
  /** The file holding the bearer token every request must carry (kept loaded, re-read when it changes). */
  readonly tokenFile: string;
  readonly store: ResourceStore;
  readonly logger: Logger;
  readonly metrics: OperatorMetrics;
  readonly now?: () => number;
  readonly monotonic?: () => number;
  /** Default MAX_QUEUED_REPORTS. */
  readonly maxQueuedReports?: number;
}

class ReportTooLarge extends Error {}

const STATUS_CODE: Record<ReportOutcome, number> = {
  recorded: 202,
  duplicate: 200,
  skew_count_decreased: 409,
  capacity: 429,
};

export class GatewayAgeIngest {
  readonly #o: GatewayAgeIngestOptions;
  readonly #now: () => number;
  readonly #mono: () => number;
  /** epoch -> (sequence, monotonic receipt) of reports this process recorded. */
  readonly #receipts = new Map<string, { sequence: number; monoMs: number }>();
  #queue: Promise<unknown> = Promise.resolve();
  #server: Server | undefined;
  #token: TokenFile | undefined;
  #pending = 0;

  constructor(options: GatewayAgeIngestOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#mono = options.monotonic ?? (() => performance.now());
  }

  get port(): number {
    return (this.#server?.address() as AddressInfo | undefined)?.port ?? 0;
  }

  /** Reports accepted and not yet answered (reading, queued or being written). Exposed for tests. */
  get pending(): number {
    return this.#pending;
  }

  /** Why a request may not be served (its token is missing or wrong, or none is loaded yet); undefined: it may. */
  #refusal(authorization: string | undefined): 'missing' | 'wrong' | 'no_token' | undefined {
    const token = this.#token;
    if (token?.current() === undefined) return 'no_token';
    const match = /^Bearer +(\S+) *$/iu.exec(authorization ?? '');
    if (match === null) return 'missing';
    return token.matches(match[1] as string) ? undefined : 'wrong';
  }

  async start(): Promise<void> {
    const { host, port } = parseListenAddress(this.#o.address);
    const maxPending = this.#o.maxQueuedReports ?? MAX_QUEUED_REPORTS;
    // A token file that cannot be read yet is logged (naming the file) and retried; requests get 503 meanwhile.
    this.#token = new TokenFile({
      file: this.#o.tokenFile,
      what: 'ingest token (--ingest-token-file)',
      logger: this.#o.logger,
    });
    await this.#token.start();
    const server = createServer((req, res) => {
      const reply = (status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
        if (res.headersSent) return;
        res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
        res.end(JSON.stringify(body));
      };
      // Before anything else, the body included: an unauthenticated request costs a header parse and nothing more.
      const refusal = this.#refusal(req.headers.authorization);
      if (refusal !== undefined) {
        this.#o.metrics.gatewayIngestRefused.inc({ reason: refusal });
        if (refusal === 'no_token')
          return reply(
            503,
            { error: 'the operator has no ingest token loaded (its --ingest-token-file cannot be read); retry later' },
            { 'retry-after': String(RETRY_AFTER_SECONDS), connection: 'close' },
          );
        return reply(
          401,
          {
            error: `${refusal === 'missing' ? 'no' : 'wrong'} ingest token: send Authorization: Bearer with the token of Secret grid-ingest-token (key token) of this site`,
          },
          { 'www-authenticate': 'Bearer', connection: 'close' },
        );
      }
      const path = (req.url ?? '').split('?')[0];
      if (path === TENANT_BUDGETS_PATH) {
        if (req.method !== 'GET') return reply(405, { error: 'method not allowed; use GET' });
        // Read-only and answered from status: the consumer gateways' budget_enforce polls it.
        tenantBudgets(this.#o.store).then(
          (r) => reply(r.status, r.body),
          () =>
            reply(503, { error: 'budgets could not be read; retry' }, { 'retry-after': String(RETRY_AFTER_SECONDS) }),
        );
        return;
      }
      // Tenant spend reports share this listener (and its NetworkPolicy) with the age reports: one gateway client.
      const spend = path === GATEWAY_SPEND_REPORTS_PATH;
      if (path !== GATEWAY_AGE_REPORTS_PATH && !spend)
        return reply(404, {
          error: `not found; POST reports to ${GATEWAY_AGE_REPORTS_PATH} or ${GATEWAY_SPEND_REPORTS_PATH}`,
        });
      const maxBytes = spend ? MAX_SPEND_REPORT_BYTES : MAX_REPORT_BYTES;
      if (req.method !== 'POST') return reply(405, { error: 'method not allowed; use POST' });
      // Each queued report waits on API calls: past the bound the gateway is told to come back rather than piling
      // up bodies and status writes behind a slow API server. Gateways retry, and only the newest report matters.
      if (this.#pending >= maxPending) {
        this.#o.metrics.gatewayAgeReports.inc({ outcome: 'busy' });
        return reply(
          503,
          { error: `more than ${maxPending} reports waiting to be recorded; retry later` },
          { 'retry-after': String(RETRY_AFTER_SECONDS), connection: 'close' },
        );
      }
      this.#pending++;
      let counted = true;
      const done = (): void => {
        if (counted) this.#pending--;
        counted = false;
      };
      res.once('close', done);
      readBoundedBody(req, maxBytes, (max) => new ReportTooLarge(`report larger than ${max} bytes`)).then(
        (bytes) => {
          let body: unknown;
          try {
            body = JSON.parse(bytes.toString('utf8'));
          } catch {
            (spend ? this.#o.metrics.gatewaySpendReports : this.#o.metrics.gatewayAgeReports).inc({
              outcome: 'invalid',
            });
            return reply(400, { error: 'report is not JSON' });
          }
          return (spend ? this.submitSpend(body) : this.submit(body)).then(
            (r) => reply(r.status, r.body),
            (error: unknown) => {
              this.#o.logger.warn({ error: errorFields(error) }, 'gateway age report could not be recorded');
              reply(
                503,
                { error: 'report could not be recorded; retry' },
                { 'retry-after': String(RETRY_AFTER_SECONDS) },
              );
            },
          );
        },
        (error: unknown) => {
          if (error instanceof ReportTooLarge) {
            if (!spend) this.#o.metrics.gatewayAgeReports.inc({ outcome: 'too_large' });
            reply(413, { error: `report larger than ${maxBytes} bytes` }, { connection: 'close' });
          }
          // Otherwise the client hung up mid-body: nobody to answer.
        },
      );
    });
    server.maxConnections = MAX_CONNECTIONS;
    server.headersTimeout = 5_000;
    server.requestTimeout = 10_000;
    server.keepAliveTimeout = 5_000;
    // Idle sockets (a gateway that connected and went quiet) are closed rather than held.
    server.timeout = 15_000;
    await listen(server, port, host);
    this.#server = server;
  }

  async close(): Promise<void> {
    const server = this.#server;
    // A report being applied finishes (its status write included) before the listener goes.
    if (server !== undefined) await closeServer(server);
    this.#token?.close();
    await this.#queue.catch(() => undefined);
  }

  /** Validates and applies one report (serialized); returns the HTTP answer. Exposed for tests. */
  submit(body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const run = this.#queue.then(() => this.#apply(body));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Records one tenant spend report (serialized with the age reports); returns the HTTP answer. */
  submitSpend(body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const run = this.#queue.then(async () => {
      const answer = await recordSpendReport(this.#o.store, body, { now: this.#now });
      this.#o.metrics.gatewaySpendReports.inc({
        outcome: answer.outcome ?? (answer.status === 400 ? 'invalid' : 'no_network'),
      });
      // Refusals mean a confused or misconfigured reporter; the answer names the field, never a key or a hash.
      if (answer.status === 400 || answer.status === 409)
        this.#o.logger.warn({ status: answer.status, ...answer.body }, 'gateway spend report refused');
      return answer;
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #apply(body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const checked = checkGatewayAgeReport(body);
    if (!checked.ok) {
      this.#o.metrics.gatewayAgeReports.inc({ outcome: 'invalid' });
      return { status: 400, body: { error: checked.error } };
    }
    const networks = ((await this.#o.store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[]).sort(
      (a, b) => (a.metadata.name < b.metadata.name ? -1 : 1),
    );
    const name = networks[0]?.metadata.name;
    if (name === undefined) {
      this.#o.metrics.gatewayAgeReports.inc({ outcome: 'no_network' });
      return { status: 503, body: { error: 'no GridNetwork to record the report into' } };
    }
    // The evidence is recomputed from each fresh read: a report raced by an administrator's removal of a
    // gatewayAgeReports entry (or by another status writer) is applied again to what is there now, never to what was.
    const monoMs = this.#mono();
    let applied:
      | { state: EvidenceState; outcome: ReportOutcome; condition: ReturnType<typeof gatewayAgesCondition> }
      | undefined;
    const written = await patchStatusFresh<GridNetworkResource>(
      this.#o.store,
      GRID_NETWORK,
      { name },
      GATEWAY_AGES_FIELD_MANAGER,
      (fresh) => {
        const before = this.#restore(fresh);
        const { state, outcome } = applyReport(before, checked.value, { monoMs, wallMs: this.#now() });
        const condition = gatewayAgesCondition(state, monoMs);
        applied = { state, outcome, condition };
        return this.#patch(fresh, before, state, condition);
      },
    );
    if (written.object === undefined || applied === undefined) {
      this.#o.metrics.gatewayAgeReports.inc({ outcome: 'no_network' });
      return { status: 503, body: { error: `GridNetwork ${name} disappeared before the report was recorded` } };
    }
    const { state, outcome, condition } = applied;
    this.#o.metrics.gatewayAgeReports.inc({ outcome });
    if (outcome === 'recorded') this.#receipts.set(checked.value.epoch, { sequence: checked.value.sequence, monoMs });
    for (const epoch of [...this.#receipts.keys()])
      if (!state.records.some((r) => r.epoch === epoch)) this.#receipts.delete(epoch);
    return { status: STATUS_CODE[outcome], body: { outcome, condition: condition.status } };
  }

  /** Status records plus this process's monotonic receipts (only for the very report it recorded). */
  #restore(network: GridNetworkResource): EvidenceState {
    const records: AgeRecord[] = (network.status?.gatewayAgeReports ?? []).map((r) => {
      const receipt = this.#receipts.get(r.epoch);
      return {
        epoch: r.epoch,
        replica: r.replica ?? '',
        sequence: r.sequence ?? 0,
        skewCount: r.skewCount ?? 0,
        reportedRejected: r.reportedRejected ?? r.rejected ?? false,
        // A record without an effective state is read conservatively as rejected.
        rejected: r.rejected ?? true,
        receivedAt: r.receivedAt ?? '',
        ...(receipt !== undefined && receipt.sequence === r.sequence ? { receivedMonoMs: receipt.monoMs } : {}),
      };
    });
    return { records, overflow: network.status?.gatewayAgeReportOverflow === true };
  }

  /** The status patch for `after` against the read `fresh` it was computed from; undefined: nothing changed. */
  #patch(
    fresh: GridNetworkResource,
    before: EvidenceState,
    after: EvidenceState,
    condition: { status: 'True' | 'False' | 'Unknown'; reason: string; message: string },
  ): Record<string, unknown> | undefined {
    const patch: Record<string, unknown> = {};
    if (after !== before) {
      patch['gatewayAgeReports'] = [...after.records]
        .sort((a, b) => (a.epoch < b.epoch ? -1 : 1))
        .map(
          (r): GatewayAgeReport => ({
            epoch: r.epoch,
            replica: r.replica,
            sequence: r.sequence,
            skewCount: r.skewCount,
            reportedRejected: r.reportedRejected,
            rejected: r.rejected,
            ...(r.receivedAt !== '' ? { receivedAt: r.receivedAt } : {}),
          }),
        );
      if (after.overflow) patch['gatewayAgeReportOverflow'] = true;
    }
    const conditions = fresh.status?.conditions as Condition[] | undefined;
    const generation = fresh.metadata.generation ?? 1;
    const stored = conditions?.find((c) => c.type === GATEWAY_AGES_REJECTED);
    if (
      stored === undefined ||
      stored.status !== condition.status ||
      stored.message !== condition.message ||
      stored.observedGeneration !== generation
    ) {
      const next = mergeConditions(
        conditions,
        [{ type: GATEWAY_AGES_REJECTED, ...condition, observedGeneration: generation }],
        this.#now(),
      );
      patch['conditions'] = withOwnConditions(conditions, next, [GATEWAY_AGES_REJECTED]);
    }
    return Object.keys(patch).length === 0 ? undefined : patch;
  }
}
