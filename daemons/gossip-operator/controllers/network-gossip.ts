/**
 * The GridNetwork controller's gossip side: resolve the SWIM key (a configured but bad key fails the reconcile and
 * never falls back to plaintext), start the site's SWIM member once, announce the seeds, and publish this site's
 * state into the CRDT.
 */
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import type { KubeObject } from '../../shared/resource-store/types.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { GossipRuntime } from '../gossip-runtime.ts';
import { CONFIG_MAP, FIELD_MANAGER } from '../kinds.ts';
import { readSecretKey, SecretError } from '../secrets.ts';
import { certifiedIdentity, ephemeralIdentity, type SigningIdentity } from '../site-identity.ts';
import type { ProviderState } from '../state/records.ts';
import type { RevisionStore } from '../state/revision-store.ts';
import { loopbackProfile, wanProfile } from '../swim/config.ts';
import { checkKeyBytes, KeyRingError } from '../swim/keyring.ts';
import { SeedProblemMemory } from '../swim/seeds.ts';
import { operatorStateConfigMapName } from '../../../schemas/object-names.ts';

export class GossipSetupError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'GossipSetupError';
    this.reason = reason;
  }
}

/** The SWIM key: the Secret the GridNetwork names, else GRID_SWIM_ENCRYPT_KEY, else none (plaintext). */
export async function resolveSwimKey(ctx: OperatorContext, network: GridNetworkResource): Promise<Buffer | undefined> {
  const ref = network.spec.tls?.swimKeySecretRef ?? network.spec.tls?.swimKeyRef;
  if (ref === undefined) return ctx.config.swimKey;
  try {
    const bytes = await readSecretKey(ctx.store, ref, 'key');
    return checkKeyBytes(bytes, `Secret ${ref.namespace}/${ref.name} key "${ref.key ?? 'key'}"`);
  } catch (error) {
    if (error instanceof SecretError || error instanceof KeyRingError) {
      throw new GossipSetupError(
        'SwimKeyInvalid',
        `spec.tls.swimKeySecretRef: ${error.message}; gossip stays off (no plaintext fallback)`,
      );
    }
    throw error;
  }
}

/** The operator's revision high-water mark, kept in a ConfigMap so restarts never reuse a revision. */
export class StoreRevisionStore implements RevisionStore {
  readonly #ctx: OperatorContext;
  readonly #name: string;
  #warned = false;
  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
    this.#name = operatorStateConfigMapName(ctx.config.site);
  }
  async load(): Promise<number> {
    const object = (await this.#ctx.store.get(CONFIG_MAP, {
      name: this.#name,
      namespace: this.#ctx.config.namespace,
    })) as { data?: Record<string, string> } | undefined;
    const text = object?.data?.['revision'];
    const n = Number(text);
    return text !== undefined && /^\d+$/.test(text) && Number.isSafeInteger(n) ? n : 0;
  }
  /**
   * Persisting is a safety net: revisions are also wall-clock milliseconds, so they stay monotonic across restarts
   * unless the clock steps back. A failed save (e.g. no permission on this ConfigMap) is logged once and does not
   * stop this site from publishing its state.
   */
  async save(revision: number): Promise<void> {
    try {
      await this.#save(revision);
    } catch (error) {
      if (!this.#warned) {
        this.#warned = true;
        this.#ctx.logger.warn(
          { configMap: `${this.#ctx.config.namespace}/${this.#name}`, error: (error as Error).message.slice(0, 200) },
          'cannot persist the gossip revision high-water mark; relying on the wall clock',
        );
      }
    }
  }

  async #save(revision: number): Promise<void> {
    const object: KubeObject & { data: Record<string, string> } = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: this.#name,
        namespace: this.#ctx.config.namespace,
        labels: { 'app.kubernetes.io/managed-by': FIELD_MANAGER },
      },
      data: { revision: String(revision) },
    };
    await this.#ctx.store.apply(CONFIG_MAP, object, { fieldManager: FIELD_MANAGER, force: true });
  }
}

async function signingIdentity(
  ctx: OperatorContext,
  network: GridNetworkResource,
): Promise<{ identity: SigningIdentity; caPem?: string }> {
  const tls = network.spec.tls;
  if (tls?.siteSecretRef === undefined || tls.caSecretRef === undefined) {
    ctx.logger.warn(
      { network: network.metadata.name },
      'no spec.tls.siteSecretRef/caSecretRef: state records are signed with a key peers cannot verify, so no site will route to this one',
    );
    return { identity: ephemeralIdentity() };
  }
  const caPem = (await readSecretKey(ctx.store, tls.caSecretRef, 'ca.crt')).toString('utf8');
  const cert = (await readSecretKey(ctx.store, { ...tls.siteSecretRef, key: undefined }, 'tls.crt')).toString('utf8');
  const key = (await readSecretKey(ctx.store, { ...tls.siteSecretRef, key: undefined }, 'tls.key')).toString('utf8');
  try {
    return { identity: await certifiedIdentity(ctx.config.site, cert, key), caPem };
  } catch (error) {
    throw new GossipSetupError(
      'SiteCertificateInvalid',
      `Secret ${tls.siteSecretRef.namespace}/${tls.siteSecretRef.name}: cannot certify a state signing key (${(error as Error).message.slice(0, 160)})`,
    );
  }
}

const seedMemories = new WeakMap<GossipRuntime, SeedProblemMemory>();

/** One memory per SWIM member: its seeds are re-announced on every reconcile. */
function seedProblems(runtime: GossipRuntime): SeedProblemMemory {
  let memory = seedMemories.get(runtime);
  if (memory === undefined) {
    memory = new SeedProblemMemory();
    seedMemories.set(runtime, memory);
  }
  return memory;
}

/** Starts the SWIM member on the first good reconcile; later reconciles only rotate the key and re-announce seeds. */
export async function ensureGossip(ctx: OperatorContext, network: GridNetworkResource): Promise<GossipRuntime> {
  const key = await resolveSwimKey(ctx, network);
  let runtime = ctx.gossip;
  if (runtime === undefined) {
    let setup: { identity: SigningIdentity; caPem?: string };
    try {
      setup = await signingIdentity(ctx, network);
    } catch (error) {
      if (error instanceof GossipSetupError) throw error;
      throw new GossipSetupError('SiteCertificateInvalid', `site TLS material: ${(error as Error).message}`);
    }
    const name = network.metadata.name;
    const { host } = ctx.config.gossipBind;
    if ((host === '0.0.0.0' || host === '::') && ctx.config.gossipAdvertise === undefined) {
      ctx.logger.warn(
        { bind: host },
        'SWIM binds a wildcard address and no --gossip-advertise is set: peers cannot reach this member until an advertised address (e.g. the pod IP) is configured',
      );
    }
    runtime = await GossipRuntime.start({
      site: ctx.config.site,
      network: name,
      bindHost: ctx.config.gossipBind.host,
      bindPort: ctx.config.gossipBind.port,
      ...(ctx.config.gossipAdvertise !== undefined ? { advertiseAddress: ctx.config.gossipAdvertise } : {}),
      timing: ctx.config.swimProfile === 'loopback' ? loopbackProfile() : wanProfile(),
      ...(network.spec.swim !== undefined ? { swimSpec: network.spec.swim } : {}),
      ...(key !== undefined ? { key } : {}),
      identity: setup.identity,
      ...(setup.caPem !== undefined ? { caPem: setup.caPem } : {}),
      writer: ctx.config.identity,
      revisions: new StoreRevisionStore(ctx),
      logger: ctx.logger,
      metrics: ctx.metrics,
      onChange: () => ctx.enqueue(CONTROLLER_NAMES.network, name, 250),
    });
    ctx.gossip = runtime;
    ctx.logger.info({ network: name, address: runtime.address, encrypted: key !== undefined }, 'SWIM member started');
  } else if (key !== undefined) {
    if (runtime.keyring === undefined) {
      throw new GossipSetupError(
        'SwimKeyRequiresRestart',
        'a SWIM key was configured after gossip started in plaintext; restart the operator to switch to encrypted gossip',
      );
    }
    runtime.useKey(key);
  }
  const seeds = [...(network.spec.seeds ?? []), ...ctx.config.seeds];
  runtime.join(seeds).then(
    (result) => {
      const problems = (result as { problems?: readonly { seed: string; problem: string }[] }).problems ?? [];
      for (const p of seedProblems(runtime).changed(problems)) {
        ctx.logger.warn(
          { seed: p.seed, problem: p.problem },
          'SWIM seed skipped; logged again only if its problem changes',
        );
      }
    },
    (error: unknown) =>
      ctx.logger.warn({ error: (error as Error).message }, 'SWIM join failed; retried on the next reconcile'),
  );
  return runtime;
}

export async function publishLocalState(
  runtime: GossipRuntime,
  ctx: OperatorContext,
  providers: readonly ProviderState[],
  capabilities: { inference: boolean; agentTools: boolean },
  certificateBundle: string | undefined,
  tenantSpendUsd: Readonly<Record<string, number>>,
): Promise<void> {
  await runtime.publishSite({
    gateway_address: ctx.config.gatewayAddress,
    ...(certificateBundle !== undefined ? { public_cert_pem: certificateBundle } : {}),
    ...(ctx.signalsAddress !== undefined ? { signals_address: ctx.signalsAddress } : {}),
    capabilities: { inference: capabilities.inference, agent_tools: capabilities.agentTools, agent_to_agent: false },
    // This site's G-Counter slot: the spend its consumer gateways reported (status.gatewaySpendReports).
    tenant_spend_usd: tenantSpendUsd,
  });
  await runtime.publishProviders(providers);
}
