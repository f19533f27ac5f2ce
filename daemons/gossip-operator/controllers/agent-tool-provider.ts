/**
 * AgentToolProvider reconcile: the MCP probe (mcp-probe.ts) decides Available or Unavailable (no Degraded: the probe
 * has no partial success). discoveredTools, tools and protocolVersion are replaced on success and kept on failure;
 * matchingSites follows spec.siteSelector. An empty reason on Available means SitesMatched and on Pending
 * AwaitingSiteMatch: those are telemetry labels only (grid_mcp_probe_total), never written to status.reason.
 */
import type { AgentToolProviderResource, GridNetworkResource, InferenceProviderResource } from '../../../schemas/crds/types.ts';
import type { AgentToolProviderStatus } from '../../../schemas/generated/agenttoolproviders.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { AGENT_TOOL_PROVIDER, FIELD_MANAGER, GRID_NETWORK } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { type McpProbeResult, probeMcpTools } from '../probes/mcp-probe.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { credentialFor, matchingSites } from './inference-provider.ts';
import { sameJson, specOnly } from './status.ts';

export class AgentToolProviderController implements Controller {
  readonly name = CONTROLLER_NAMES.tools;
  readonly kind = AGENT_TOOL_PROVIDER;
  readonly #ctx: OperatorContext;

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const provider = (await ctx.store.get(AGENT_TOOL_PROVIDER, { name })) as AgentToolProviderResource | undefined;
    if (provider === undefined) return {};
    const generation = provider.metadata.generation ?? 1;
    const previous = provider.status ?? {};
    const write = async (status: AgentToolProviderStatus, outcome: string): Promise<void> => {
      ctx.metrics.mcpProbes.inc({ provider: name, outcome });
      if (!sameJson({ ...previous, ...status }, previous)) {
        await ctx.store.patchStatus(AGENT_TOOL_PROVIDER, { name }, status as Record<string, unknown>, { fieldManager: FIELD_MANAGER });
      }
    };
    const issues = validateCustomResource(specOnly(provider));
    if (issues.length > 0) {
      await write({ phase: 'Unavailable', reason: 'ProviderConfigInvalid', observedGeneration: generation }, 'ProviderConfigInvalid');
      return {};
    }
    const spec = provider.spec;
    const network = (await ctx.store.get(GRID_NETWORK, { name: spec.gridNetworkRef })) as GridNetworkResource | undefined;
    if (network === undefined) {
      await write({ phase: 'Pending', reason: 'GridNetworkNotFound', observedGeneration: generation }, 'GridNetworkNotFound');
      return { requeueAfterMs: ctx.config.providerPollIntervalMs };
    }
    const sites = await matchingSites(ctx, spec.gridNetworkRef, spec.siteSelector?.matchLabels);
    const siteFields = sites !== undefined ? { matchingSites: sites } : {};
    const credential = await credentialFor(ctx, spec.auth as InferenceProviderResource['spec']['auth']);
    if (credential.verdict !== undefined) {
      await write({ phase: 'Unavailable', reason: 'McpAuthTokenInvalid', observedGeneration: generation, ...siteFields }, 'McpAuthTokenInvalid');
      return { requeueAfterMs: ctx.config.providerPollIntervalMs };
    }
    const tls = await resolveEndpointTls(ctx.store, spec.tls, 'EndpointTls');
    if (!tls.ok) {
      await write({ phase: 'Unavailable', reason: tls.reason, observedGeneration: generation, ...siteFields }, tls.reason);
      return { requeueAfterMs: ctx.config.providerPollIntervalMs };
    }
    const probe = await probeMcpTools({
      endpoint: spec.endpoint,
      ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
      ...(credential.token !== undefined ? { bearerToken: credential.token } : {}),
      timeoutMs: 5_000,
    });
    if (!probe.ok) {
      const reason = probeReason(probe);
      ctx.logger.warn({ provider: name, reason, step: probe.step, detail: probe.detail }, 'MCP probe failed; keeping the previous tool list');
      await write({ phase: 'Unavailable', reason, observedGeneration: generation, ...siteFields }, reason);
      return { requeueAfterMs: ctx.config.providerPollIntervalMs };
    }
    const matched = sites === undefined || sites.length > 0;
    const tools = probe.tools.slice(0, 256).map((t) => (t.description === undefined ? { name: t.name } : { name: t.name, description: t.description }));
    // A different list from the one in status (a tool added, removed or redescribed) is a change a user should see;
    // the first list a provider ever reports is not.
    const changed = previous.tools !== undefined && !sameJson(previous.tools, tools);
    if (changed) {
      const before = new Set(previous.tools!.map((t) => t.name));
      const after = new Set(tools.map((t) => t.name));
      ctx.logger.info(
        { provider: name, added: [...after].filter((t) => !before.has(t)).slice(0, 32), removed: [...before].filter((t) => !after.has(t)).slice(0, 32) },
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
    return { requeueAfterMs: ctx.config.providerPollIntervalMs };
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
