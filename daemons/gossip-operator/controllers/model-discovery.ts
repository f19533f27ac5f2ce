/**
 * The model discovery loop (spec.modelDiscovery): its own queue, not the provider reconcile. It owns
 * status.modelDiscoveryUrl, modelDiscoveryError, servedModels and servedModelsExpiresAt. A success replaces the
 * held set and renews its deadline (an empty list is valid); a failure keeps the set without renewing it; a set
 * past its TTL, or discovery switched off, clears both fields.
 */
import type { InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { FIELD_MANAGER, INFERENCE_PROVIDER } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { discoverModels, discoveryUrl } from '../probes/model-discovery.ts';
import { credentialFor } from './inference-provider.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { nowRfc3339 } from './status.ts';

interface Held {
  models: string[];
  expiresAtMs: number;
  lastPollMs: number;
}

export class ModelDiscoveryController implements Controller {
  readonly name = CONTROLLER_NAMES.discovery;
  readonly kind = INFERENCE_PROVIDER;
  readonly #ctx: OperatorContext;
  readonly #held = new Map<string, Held>();
  readonly #lastPoll = new Map<string, number>();

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const provider = (await ctx.store.get(INFERENCE_PROVIDER, { name })) as InferenceProviderResource | undefined;
    if (provider === undefined) {
      this.#held.delete(name);
      this.#lastPoll.delete(name);
      return {};
    }
    const discovery = provider.spec?.modelDiscovery?.openAiModels;
    const status = provider.status ?? {};
    if (discovery === undefined) {
      this.#held.delete(name);
      this.#lastPoll.delete(name);
      const owned = ['modelDiscoveryUrl', 'modelDiscoveryError', 'servedModels', 'servedModelsExpiresAt'] as const;
      if (owned.some((k) => status[k] !== undefined)) {
        await ctx.store.patchStatus(INFERENCE_PROVIDER, { name }, Object.fromEntries(owned.map((k) => [k, null])), {
          fieldManager: FIELD_MANAGER,
        });
      }
      return {};
    }
    const interval = ctx.config.modelDiscoveryIntervalMs;
    const now = ctx.now();
    const last = this.#lastPoll.get(name);
    // Status writes of this loop come back as watch events: poll only when due.
    if (last !== undefined && now - last < interval) return { requeueAfterMs: interval - (now - last) };
    this.#lastPoll.set(name, now);

    const endpoint = discovery.endpoint ?? provider.spec.endpoint;
    let url: string;
    try {
      url = discoveryUrl({ endpoint, ...(discovery.path !== undefined ? { path: discovery.path } : {}) }).href;
    } catch {
      url = endpoint;
    }
    const credential = await credentialFor(ctx, provider.spec.auth);
    const tls = await resolveEndpointTls(ctx.store, discovery.tls ?? provider.spec.tls, 'ModelDiscoveryTls');
    const result =
      credential.verdict !== undefined
        ? { outcome: 'credential' as const, detail: credential.verdict.message, url }
        : !tls.ok
          ? { outcome: 'tls' as const, detail: tls.message, url }
          : await discoverModels({
              endpoint,
              ...(discovery.path !== undefined ? { path: discovery.path } : {}),
              ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
              ...(credential.token !== undefined ? { bearerToken: credential.token } : {}),
              timeoutMs: 5_000,
              ...(ctx.discoveryIsBlocked !== undefined ? { isBlocked: ctx.discoveryIsBlocked } : {}),
            });
    ctx.metrics.modelDiscovery.inc({ provider: name, outcome: result.outcome });
    const patch: Record<string, unknown> = { modelDiscoveryUrl: url };
    if (result.outcome === 'ok') {
      const models = [...new Set(result.models)];
      const held = { models, expiresAtMs: now + ctx.config.modelDiscoveryTtlMs, lastPollMs: now };
      this.#held.set(name, held);
      patch['servedModels'] = models;
      patch['servedModelsExpiresAt'] = nowRfc3339(held.expiresAtMs);
      patch['modelDiscoveryError'] = null;
    } else {
      ctx.logger.warn(
        { provider: name, outcome: result.outcome, detail: result.detail },
        'model discovery poll failed',
      );
      patch['modelDiscoveryError'] = result.outcome;
      const held = this.#held.get(name);
      if (held === undefined || held.expiresAtMs <= now) {
        this.#held.delete(name);
        patch['servedModels'] = null;
        patch['servedModelsExpiresAt'] = null;
      }
    }
    await ctx.store.patchStatus(INFERENCE_PROVIDER, { name }, patch, { fieldManager: FIELD_MANAGER });
    return { requeueAfterMs: interval };
  }
}
