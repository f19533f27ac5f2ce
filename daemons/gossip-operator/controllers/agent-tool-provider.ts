/**
 * AgentToolProvider reconcile: the MCP probe (mcp-probe.ts) decides Available or Unavailable (no Degraded: the probe
 * has no partial success). discoveredTools, tools and protocolVersion are replaced on success and kept on failure;
 * matchingSites follows spec.siteSelector. An empty reason on Available means SitesMatched and on Pending
 * AwaitingSiteMatch: those are telemetry labels only (grid_mcp_probe_total), never written to status.reason.
 *
 * A server whose initialize advertises `tools.listChanged` is also watched (mcp-list-watch.ts): one watcher per
 * provider, kept while probes succeed with the same endpoint, credential, TLS and generation, replaced when one of
 * them changes, stopped when the provider is gone, a probe fails or the capability goes. An announced change queues
 * the provider at once, so its status.tools follow the server well before the next poll. The work queue folds a
 * burst of announcements into one probe (a key queued or in flight is queued once more at most).
 */
import { createHash } from 'node:crypto';
import type {
  AgentToolProviderResource,
  GridNetworkResource,
  InferenceProviderResource,
} from '../../../schemas/crds/types.ts';
import type { AgentToolProviderStatus } from '../../../schemas/generated/agenttoolproviders.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { AGENT_TOOL_PROVIDER, FIELD_MANAGER, GRID_NETWORK } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { McpListWatch, type McpListWatchReport } from '../probes/mcp-list-watch.ts';
import { type McpProbeResult, probeMcpTools } from '../probes/mcp-probe.ts';
import type { ProbeTls } from '../probes/http-probe.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { credentialFor, matchingSites } from './inference-provider.ts';
import { sameJson, specOnly } from './status.ts';

/** What a provider's watcher connects with; `key` changes whenever any of it (or the generation) does. */
interface WatchTarget {
  readonly key: string;
  readonly endpoint: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
}

const PROBE_TIMEOUT_MS = 5_000;

export class AgentToolProviderController implements Controller {
  readonly name = CONTROLLER_NAMES.tools;
  readonly kind = AGENT_TOOL_PROVIDER;
  readonly #ctx: OperatorContext;
  readonly #watches = new Map<string, { readonly key: string; readonly watch: McpListWatch }>();
  /** Watchers being stopped (their DELETE in flight): close() waits for them too. */
  readonly #stopping = new Set<Promise<void>>();
  #closed = false;

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const [result, target] = await this.#reconcile(name);
    this.#keepWatch(name, target);
    return result;
  }

  /** Stops every watcher and ends their sessions (the operator stopping or losing leadership). */
  async close(): Promise<void> {
    this.#closed = true;
    for (const name of [...this.#watches.keys()]) this.#keepWatch(name, undefined);
    await Promise.all([...this.#stopping]);
  }

  /** Whether `name` has a watcher running now (tests). */
  watching(name: string): boolean {
    const entry = this.#watches.get(name);
    return entry !== undefined && !entry.watch.unsupported;
  }

  /** Starts, keeps, replaces or stops the provider's watcher so that it matches `target` (undefined: none). */
  #keepWatch(name: string, target: WatchTarget | undefined): void {
    const current = this.#watches.get(name);
    if (current !== undefined && target !== undefined && current.key === target.key) return;
    if (current !== undefined) {
      this.#watches.delete(name);
      const stopped = current.watch.stop();
      this.#stopping.add(stopped);
      void stopped.finally(() => this.#stopping.delete(stopped));
    }
    if (target === undefined || this.#closed) return;
    const ctx = this.#ctx;
    const watch = new McpListWatch({
      endpoint: target.endpoint,
      ...(target.tls !== undefined ? { tls: target.tls } : {}),
      ...(target.bearerToken !== undefined ? { bearerToken: target.bearerToken } : {}),
      timeoutMs: PROBE_TIMEOUT_MS,
      onChanged: (cause) => {
        ctx.logger.debug({ provider: name, cause }, 'MCP tool list may have changed; probing now');
        ctx.enqueue(this.name, name);
      },
      onReport: (report) => logWatchReport(ctx, name, report),
    });
    this.#watches.set(name, { key: target.key, watch });
  }

  async #reconcile(name: string): Promise<[ReconcileResult, WatchTarget?]> {
    const ctx = this.#ctx;
    const provider = (await ctx.store.get(AGENT_TOOL_PROVIDER, { name })) as AgentToolProviderResource | undefined;
    if (provider === undefined) return [{}];
    const generation = provider.metadata.generation ?? 1;
    const previous = provider.status ?? {};
    const write = async (status: AgentToolProviderStatus, outcome: string): Promise<void> => {
      ctx.metrics.mcpProbes.inc({ provider: name, outcome });
      if (!sameJson({ ...previous, ...status }, previous)) {
        await ctx.store.patchStatus(AGENT_TOOL_PROVIDER, { name }, status as Record<string, unknown>, {
          fieldManager: FIELD_MANAGER,
        });
      }
    };
    const issues = validateCustomResource(specOnly(provider));
    if (issues.length > 0) {
      await write(
        { phase: 'Unavailable', reason: 'ProviderConfigInvalid', observedGeneration: generation },
        'ProviderConfigInvalid',
      );
      return [{}];
    }
    const spec = provider.spec;
    const network = (await ctx.store.get(GRID_NETWORK, { name: spec.gridNetworkRef })) as
      | GridNetworkResource
      | undefined;
    if (network === undefined) {
      await write(
        { phase: 'Pending', reason: 'GridNetworkNotFound', observedGeneration: generation },
        'GridNetworkNotFound',
      );
      return [{ requeueAfterMs: ctx.config.providerPollIntervalMs }];
    }
    const sites = await matchingSites(ctx, spec.gridNetworkRef, spec.siteSelector?.matchLabels);
    const siteFields = sites !== undefined ? { matchingSites: sites } : {};
    const credential = await credentialFor(ctx, spec.auth as InferenceProviderResource['spec']['auth']);
    if (credential.verdict !== undefined) {
      await write(
        { phase: 'Unavailable', reason: 'McpAuthTokenInvalid', observedGeneration: generation, ...siteFields },
        'McpAuthTokenInvalid',
      );
      return [{ requeueAfterMs: ctx.config.providerPollIntervalMs }];
    }
    const tls = await resolveEndpointTls(ctx.store, spec.tls, 'EndpointTls');
    if (!tls.ok) {
      await write(
        { phase: 'Unavailable', reason: tls.reason, observedGeneration: generation, ...siteFields },
        tls.reason,
      );
      return [{ requeueAfterMs: ctx.config.providerPollIntervalMs }];
    }
    const connection = {
      endpoint: spec.endpoint,
      ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
      ...(credential.token !== undefined ? { bearerToken: credential.token } : {}),
    };
    const probe = await probeMcpTools({ ...connection, timeoutMs: PROBE_TIMEOUT_MS });
    if (!probe.ok) {
      const reason = probeReason(probe);
      ctx.logger.warn(
        { provider: name, reason, step: probe.step, detail: probe.detail },
        'MCP probe failed; keeping the previous tool list',
      );
      await write({ phase: 'Unavailable', reason, observedGeneration: generation, ...siteFields }, reason);
      return [{ requeueAfterMs: ctx.config.providerPollIntervalMs }];
    }
    const matched = sites === undefined || sites.length > 0;
    const tools = probe.tools
      .slice(0, 256)
      .map((t) => (t.description === undefined ? { name: t.name } : { name: t.name, description: t.description }));
    // A different list from the one in status (a tool added, removed or redescribed) is a change a user should see;
    // the first list a provider ever reports is not.
    const changed = previous.tools !== undefined && !sameJson(previous.tools, tools);
    if (changed) {
      const before = new Set(previous.tools!.map((t) => t.name));
      const after = new Set(tools.map((t) => t.name));
      ctx.logger.info(
        {
          provider: name,
          added: [...after].filter((t) => !before.has(t)).slice(0, 32),
          removed: [...before].filter((t) => !after.has(t)).slice(0, 32),
        },
        'MCP tool list changed',
      );
    }
    await write(
      {
        phase: matched ? 'Available' : 'Pending',
        reason: '',
        discoveredTools: tools.map((t) => t.name),
        tools,
        protocolVersion: probe.protocolVersion,
        session: probe.session,
        ...(changed ? { toolsChangedAt: new Date(ctx.now()).toISOString().replace(/\.\d{3}Z$/, 'Z') } : {}),
        observedGeneration: generation,
        ...siteFields,
      },
      matched ? 'SitesMatched' : 'AwaitingSiteMatch',
    );
    // A digest, so the key is one more value to compare and not one more place the token sits in clear.
    const key = createHash('sha256')
      .update(JSON.stringify([generation, connection.endpoint, connection.bearerToken ?? null, connection.tls ?? null]))
      .digest('hex');
    return [
      { requeueAfterMs: ctx.config.providerPollIntervalMs },
      probe.toolsListChanged ? { key, ...connection } : undefined,
    ];
  }
}

function logWatchReport(ctx: OperatorContext, provider: string, report: McpListWatchReport): void {
  if (report.state === 'watching') {
    ctx.logger.info(
      { provider, protocolVersion: report.protocolVersion, session: report.session },
      'watching the MCP server for tool list changes',
    );
  } else if (report.state === 'retrying') {
    ctx.logger.warn(
      { provider, detail: report.detail, retryInMs: report.retryInMs },
      'MCP tool list watch interrupted; retrying',
    );
  } else {
    ctx.logger.warn(
      { provider, detail: report.detail },
      'MCP server advertises tools.listChanged but cannot be watched; changes show at the next probe',
    );
  }
}

/** The status reason of a failed probe: what failed, in the terms of the step that failed. */
export function probeReason(probe: Extract<McpProbeResult, { ok: false }>): string {
  if (probe.reason === 'unsupported_version') return 'McpProtocolVersionUnsupported';
  if (probe.reason === 'http_status' && /HTTP 40[13]$/.test(probe.detail)) return 'McpAuthRejected';
  if (probe.reason === 'http_status' || probe.reason === 'invalid_response') {
    // discover, initialize and initialized are the handshake, whichever revision it was.
    return probe.step === 'tools/list' ? 'McpToolsListInvalidResponse' : 'McpInitializeFailed';
  }
  return 'McpEndpointUnreachable';
}
