/**
 * InferenceProvider reconcile: validates the spec, its routing category and its Secret references, probes health
 * once per healthCheck.interval, and writes phase (Pending | Available | Degraded | Unavailable) plus the Ready
 * condition (False excludes the provider from routing). A provider whose probes fail failureThreshold times running
 * is Unavailable, and so out of the overlay, until one probe passes. Credential bytes are read only to probe with and
 * never reach status or logs.
 */
import type { GridNetworkResource, GridSiteResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { InferenceProviderStatus } from '../../../schemas/generated/inferenceproviders.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { FIELD_MANAGER, GRID_NETWORK, GRID_SITE, INFERENCE_PROVIDER } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { probeHealth } from '../probes/health-probe.ts';
import { readSecretKey, SecretError } from '../secrets.ts';
import { parseDurationMs } from '../../../schemas/durations.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { bearerCredential } from './routing-input.ts';
import { resolveBackendKind } from '../../routing/backend-kind.ts';
import { type HealthRecord, healthVerdict, recordProbe } from './provider-health.ts';
import { boundedMessage, type Condition, mergeConditions, sameJson, specOnly } from './status.ts';
import type { SignalState } from './provider-signals.ts';

type Phase = NonNullable<InferenceProviderStatus['phase']>;

interface Verdict {
  readonly phase: Phase;
  readonly reason: string;
  readonly message: string;
}

/** Sites of the network whose labels contain the selector (empty selector: none listed, the provider is local). */
export async function matchingSites(
  ctx: OperatorContext,
  network: string,
  selector: Record<string, string | undefined> | undefined,
): Promise<string[] | undefined> {
  if (selector === undefined || Object.keys(selector).length === 0) return undefined;
  const sites = (await ctx.store.list(GRID_SITE)).items as unknown as GridSiteResource[];
  return sites
    .filter((s) => s.spec?.gridNetworkRef === network)
    .filter((s) => Object.entries(selector).every(([k, v]) => s.metadata.labels?.[k] === v))
    .map((s) => s.metadata.name)
    .sort()
    .slice(0, 256);
}

/** The bearer token for probes, or a verdict explaining why the reference is unusable. */
export async function credentialFor(
  ctx: OperatorContext,
  auth: InferenceProviderResource['spec']['auth'],
): Promise<{ token?: string; verdict?: Verdict }> {
  if (auth === undefined || auth.credentialsManagedExternally === true || auth.manual === true) return {};
  if (auth.strategy !== 'bearer_token') return {};
  const ref = bearerCredential(auth);
  if (ref === undefined)
    return {
      verdict: {
        phase: 'Unavailable',
        reason: 'CredentialSecretRefMissing',
        message: 'spec.auth.strategy bearer_token needs spec.auth.secretRef',
      },
    };
  try {
    const token = (await readSecretKey(ctx.store, ref, 'token')).toString('utf8').trim();
    if (token === '')
      return {
        verdict: {
          phase: 'Unavailable',
          reason: 'CredentialSecretEmpty',
          message: `Secret ${ref.namespace}/${ref.name} key "${ref.key}" is empty`,
        },
      };
    return { token };
  } catch (error) {
    const reason =
      error instanceof SecretError && error.problem === 'key_missing'
        ? 'CredentialKeyMissing'
        : 'CredentialSecretMissing';
    return { verdict: { phase: 'Unavailable', reason, message: (error as Error).message } };
  }
}

/**
 * The Ready condition. An Unavailable provider is not ready, and the condition names the cause the phase carries
 * (a failed health check, a backendKind nothing routes) so `kubectl get -o wide` says why it left routing.
 */
export function readyCondition(
  phase: Phase,
  metricsConfigured: boolean,
  signal: SignalState | undefined,
  cause?: { readonly reason: string; readonly message: string },
): Omit<Condition, 'lastTransitionTime'> {
  if (phase === 'Unavailable') {
    return cause !== undefined && cause.reason !== ''
      ? { type: 'Ready', status: 'False', reason: cause.reason, message: boundedMessage(cause.message) }
      : { type: 'Ready', status: 'False', reason: 'ProviderUnavailable', message: 'the provider is Unavailable' };
  }
  if (!metricsConfigured)
    return {
      type: 'Ready',
      status: 'True',
      reason: 'MetricsNotConfigured',
      message: 'no metricsConfig: routed with neutral scores',
    };
  if (signal === undefined)
    return {
      type: 'Ready',
      status: 'Unknown',
      reason: 'AwaitingScrape',
      message: 'waiting for the first metrics scrape',
    };
  if (signal.failedClosed)
    return {
      type: 'Ready',
      status: 'False',
      reason: 'MetricsUnavailable',
      message: `metrics scrape ${signal.result}${signal.detail ? `: ${signal.detail}` : ''}; TLS metrics fail closed`,
    };
  if (signal.result === 'success')
    return { type: 'Ready', status: 'True', reason: 'MetricsScraped', message: scrapedMessage(signal) };
  if (signal.stale)
    return {
      type: 'Ready',
      status: 'True',
      reason: 'MetricsStale',
      message: `metrics scrape ${signal.result}; last good sample reused within staleMetricsSeconds`,
    };
  return {
    type: 'Ready',
    status: 'True',
    reason: signal.result === 'no_series' ? 'MetricsNoSeries' : 'MetricsNeutral',
    message: `metrics scrape ${signal.result}${signal.detail ? `: ${signal.detail}` : ''}; scored neutral`,
  };
}

/** Which signals the scrape returned, and which configured ones the page lacked (they score as missing). */
function scrapedMessage(signal: SignalState): string {
  if (signal.signals.length === 0) return 'the last scrape returned the configured series';
  const got = signal.signals.map((s) => s.signal);
  const missing = signal.configured.filter((s) => !got.includes(s as (typeof got)[number]));
  return `the last scrape returned ${got.join(', ')}${missing.length > 0 ? `; missing ${missing.join(', ')}` : ''}`;
}

export class InferenceProviderController implements Controller {
  readonly name = CONTROLLER_NAMES.provider;
  readonly kind = INFERENCE_PROVIDER;
  readonly #ctx: OperatorContext;
  /** Per provider: the consecutive failed probes and when the last probe ran (per process, cleared on restart). */
  readonly #health = new Map<string, HealthRecord>();

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  async #verdict(provider: InferenceProviderResource): Promise<Verdict & { requeueAfterMs?: number }> {
    const ctx = this.#ctx;
    const spec = provider.spec;
    const poll = ctx.config.providerPollIntervalMs;
    const issues = validateCustomResource(specOnly(provider));
    if (issues.length > 0) {
      return {
        phase: 'Unavailable',
        reason: 'ProviderConfigInvalid',
        message: issues
          .slice(0, 3)
          .map((i) => `${i.path || '(object)'}: ${i.message}`)
          .join('; '),
      };
    }
    // Refused, not dropped: a spelling no routing category matches is Unavailable with the reason in status.
    const category = resolveBackendKind(spec.providerKind, spec.backendKind);
    if (!category.ok)
      return {
        phase: 'Unavailable',
        reason: 'UnrecognizedBackendKind',
        message: `${category.message}; the provider is not routed`,
      };
    const network = (await ctx.store.get(GRID_NETWORK, { name: spec.gridNetworkRef })) as
      | GridNetworkResource
      | undefined;
    if (network === undefined)
      return {
        phase: 'Pending',
        reason: 'GridNetworkNotFound',
        message: `GridNetwork ${spec.gridNetworkRef} does not exist`,
        requeueAfterMs: poll,
      };
    const credential = await credentialFor(ctx, spec.auth);
    if (credential.verdict !== undefined) return { ...credential.verdict, requeueAfterMs: poll };
    const sharedTls = await resolveEndpointTls(ctx.store, spec.tls, 'EndpointTls');
    if (!sharedTls.ok)
      return { phase: 'Degraded', reason: sharedTls.reason, message: sharedTls.message, requeueAfterMs: poll };
    const check = spec.healthCheck;
    if (check === undefined) {
      this.#health.delete(provider.metadata.name);
      return { phase: 'Available', reason: '', message: '' };
    }
    const tls = check.tls !== undefined ? await resolveEndpointTls(ctx.store, check.tls, 'HealthCheckTls') : sharedTls;
    if (!tls.ok) return { phase: 'Degraded', reason: tls.reason, message: tls.message, requeueAfterMs: poll };
    const intervalMs = check.interval !== undefined ? (parseDurationMs(check.interval) ?? poll) : poll;
    const name = provider.metadata.name;
    const now = ctx.now();
    let record = this.#health.get(name);
    // One probe per interval however often the provider is reconciled (its own status writes requeue it too), so
    // failureThreshold counts probes, not reconciles. A changed spec is probed at once.
    const generation = provider.metadata.generation ?? 1;
    if (record === undefined || record.generation !== generation || now - record.probedAtMs >= intervalMs) {
      const timeoutMs = check.timeout !== undefined ? (parseDurationMs(check.timeout) ?? 5000) : 5000;
      const health = await probeHealth({
        providerEndpoint: spec.endpoint,
        ...(check.endpoint !== undefined ? { endpoint: check.endpoint } : {}),
        ...(check.path !== undefined ? { path: check.path } : {}),
        ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
        ...(credential.token !== undefined ? { bearerToken: credential.token } : {}),
        timeoutMs,
      });
      record = recordProbe(record, health, now, generation);
      this.#health.set(name, record);
    }
    const verdict = healthVerdict(record, check.failureThreshold ?? 1);
    return { ...verdict, requeueAfterMs: Math.max(1, record.probedAtMs + intervalMs - now) };
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const provider = (await ctx.store.get(INFERENCE_PROVIDER, { name })) as InferenceProviderResource | undefined;
    if (provider === undefined) {
      ctx.signals.forget(name);
      this.#health.delete(name);
      return {};
    }
    const verdict = await this.#verdict(provider);
    const spec = provider.spec ?? ({} as InferenceProviderResource['spec']);
    const sites =
      spec.gridNetworkRef !== undefined
        ? await matchingSites(ctx, spec.gridNetworkRef, spec.siteSelector?.matchLabels)
        : undefined;
    const generation = provider.metadata.generation ?? 1;
    const signal = spec.metricsConfig !== undefined ? ctx.signals.latest(name) : undefined;
    const ready = readyCondition(verdict.phase, spec.metricsConfig !== undefined, signal, verdict);
    const scraped = signal?.signals ?? [];
    const status: InferenceProviderStatus = {
      phase: verdict.phase,
      reason: verdict.reason,
      message: boundedMessage(verdict.message),
      observedGeneration: generation,
      conditions: mergeConditions(
        provider.status?.conditions as Condition[] | undefined,
        [{ ...ready, observedGeneration: generation }],
        ctx.now(),
      ),
      ...(sites !== undefined ? { matchingSites: sites } : {}),
      ...(scraped.length > 0 ? { scrapedSignals: [...scraped] } : {}),
    };
    // A merge patch removes a field only when sent as null; send it only when there is one to remove.
    const patch: Record<string, unknown> =
      scraped.length === 0 && provider.status?.scrapedSignals !== undefined
        ? { ...status, scrapedSignals: null }
        : { ...status };
    const before = provider.status;
    const readyBefore = before?.conditions?.find((c) => c.type === 'Ready');
    if (!sameJson({ ...before, ...patch }, before)) {
      await ctx.store.patchStatus(INFERENCE_PROVIDER, { name }, patch, { fieldManager: FIELD_MANAGER });
      if (readyBefore?.reason !== ready.reason || readyBefore?.status !== ready.status) {
        const fields = { provider: name, ready: ready.status, reason: ready.reason };
        if (ready.status === 'False') ctx.logger.warn(fields, 'provider not ready');
        else ctx.logger.info(fields, 'provider readiness changed');
      }
    }
    return verdict.requeueAfterMs !== undefined ? { requeueAfterMs: verdict.requeueAfterMs } : {};
  }
}
