/**
 * AgentToAgentProvider reconcile: the agent card probe (a2a-card-probe.ts) decides Available or Unavailable, like
 * the AgentToolProvider's tools/list probe. Degraded (a phase the CRD lists for this kind) means the card was read but
 * lacks a skill spec.agentCard.skills declares: the agent answers, not with everything it was declared to offer.
 *
 * agentName, skills, capabilities, protocolVersion, interfaces and cardPath are replaced on success and kept on
 * failure; matchingSites follows spec.siteSelector. A card different from the one in status is logged and stamps
 * cardChangedAt. An empty reason on Available means SitesMatched and on Pending AwaitingSiteMatch: telemetry labels
 * only (grid_a2a_probe_total), never written to status.reason.
 *
 * AgentToAgentProviders are not in the routing overlay: its candidate kinds are inference_model and mcp_tool.
 */
import type {
  AgentToAgentProviderResource,
  GridNetworkResource,
  InferenceProviderResource,
} from '../../../schemas/crds/types.ts';
import type { AgentToAgentProviderStatus } from '../../../schemas/generated/agenttoagentproviders.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { OperatorContext } from '../context.ts';
import { CONTROLLER_NAMES } from '../context.ts';
import { AGENT_TO_AGENT_PROVIDER, FIELD_MANAGER, GRID_NETWORK } from '../kinds.ts';
import type { Controller, ReconcileResult } from '../manager/manager.ts';
import { type A2aCard, type A2aCardProbeResult, probeAgentCard } from '../probes/a2a-card-probe.ts';
import { resolveEndpointTls } from './endpoint-tls.ts';
import { credentialFor, matchingSites } from './inference-provider.ts';
import { boundedMessage, nowRfc3339, sameJson, specOnly } from './status.ts';

const PROBE_TIMEOUT_MS = 5_000;
/** The binding the grid's gateways route A2A over (JSON-RPC `message/send`, `message/stream`, `tasks/*`). */
const ROUTED_BINDING = 'JSONRPC';

export class AgentToAgentProviderController implements Controller {
  readonly name = CONTROLLER_NAMES.agents;
  readonly kind = AGENT_TO_AGENT_PROVIDER;
  readonly #ctx: OperatorContext;

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const provider = (await ctx.store.get(AGENT_TO_AGENT_PROVIDER, { name })) as
      | AgentToAgentProviderResource
      | undefined;
    if (provider === undefined) return {};
    const generation = provider.metadata.generation ?? 1;
    const previous = provider.status ?? {};
    const poll = { requeueAfterMs: ctx.config.providerPollIntervalMs };
    const write = async (status: AgentToAgentProviderStatus, outcome: string): Promise<void> => {
      ctx.metrics.a2aProbes.inc({ provider: name, outcome });
      const next = { message: '', ...status };
      if (!sameJson({ ...previous, ...next }, previous)) {
        await ctx.store.patchStatus(AGENT_TO_AGENT_PROVIDER, { name }, next as Record<string, unknown>, {
          fieldManager: FIELD_MANAGER,
        });
      }
    };
    const fail = async (
      phase: 'Unavailable' | 'Pending',
      reason: string,
      message: string,
      extra: Partial<AgentToAgentProviderStatus> = {},
    ): Promise<void> => {
      await write(
        { phase, reason, message: boundedMessage(message), observedGeneration: generation, ...extra },
        reason,
      );
    };
    const issues = validateCustomResource(specOnly(provider));
    if (issues.length > 0) {
      await fail(
        'Unavailable',
        'ProviderConfigInvalid',
        issues
          .slice(0, 3)
          .map((i) => `${i.path}: ${i.message}`)
          .join('; '),
      );
      return {};
    }
    const spec = provider.spec;
    const network = (await ctx.store.get(GRID_NETWORK, { name: spec.gridNetworkRef })) as
      | GridNetworkResource
      | undefined;
    if (network === undefined) {
      await fail(
        'Pending',
        'GridNetworkNotFound',
        `spec.gridNetworkRef names GridNetwork ${spec.gridNetworkRef}, which does not exist`,
      );
      return poll;
    }
    const sites = await matchingSites(ctx, spec.gridNetworkRef, spec.siteSelector?.matchLabels);
    const siteFields = sites !== undefined ? { matchingSites: sites } : {};
    const credential = await credentialFor(ctx, spec.auth as InferenceProviderResource['spec']['auth']);
    if (credential.verdict !== undefined) {
      await fail('Unavailable', 'A2aAuthTokenInvalid', `spec.auth: ${credential.verdict.message}`, siteFields);
      return poll;
    }
    const tls = await resolveEndpointTls(ctx.store, spec.tls, 'EndpointTls');
    if (!tls.ok) {
      await fail('Unavailable', tls.reason, `spec.tls: ${tls.message}`, siteFields);
      return poll;
    }
    const probe = await probeAgentCard({
      endpoint: spec.endpoint,
      ...(tls.tls !== undefined ? { tls: tls.tls } : {}),
      ...(credential.token !== undefined ? { bearerToken: credential.token } : {}),
      timeoutMs: PROBE_TIMEOUT_MS,
    });
    if (!probe.ok) {
      const reason = cardProbeReason(probe);
      ctx.logger.warn(
        { provider: name, reason, cardPath: probe.cardPath, detail: probe.detail },
        'A2A agent card probe failed; keeping the previous card',
      );
      await fail('Unavailable', reason, probe.detail, siteFields);
      return poll;
    }
    const card = cardStatus(probe.card, probe.cardPath);
    // A card seen before and different now (a skill added, removed or redescribed) is a change a user should see;
    // the first card a provider ever reports is not.
    const changed = previous.skills !== undefined && !sameJson(cardFieldsOf(previous), card);
    if (changed) {
      const before = new Set(previous.skills!.map((s) => s.id));
      const after = new Set(card.skills.map((s) => s.id));
      ctx.logger.info(
        {
          provider: name,
          added: [...after].filter((s) => !before.has(s)).slice(0, 32),
          removed: [...before].filter((s) => !after.has(s)).slice(0, 32),
        },
        'A2A agent card changed',
      );
    }
    const base = {
      ...card,
      ...(changed ? { cardChangedAt: nowRfc3339(ctx.now()) } : {}),
      observedGeneration: generation,
      ...siteFields,
    };
    if (!probe.card.interfaces.some((i) => i.protocolBinding === ROUTED_BINDING)) {
      const offered = [...new Set(probe.card.interfaces.map((i) => i.protocolBinding))].join(', ');
      const message = `the agent card at ${probe.cardPath} offers ${offered} but no ${ROUTED_BINDING} interface, the binding the grid routes A2A over`;
      await write(
        { ...base, phase: 'Unavailable', reason: 'A2aJsonRpcInterfaceMissing', message: boundedMessage(message) },
        'A2aJsonRpcInterfaceMissing',
      );
      return poll;
    }
    if (sites !== undefined && sites.length === 0) {
      await write({ ...base, phase: 'Pending', reason: '' }, 'AwaitingSiteMatch');
      return poll;
    }
    const offered = new Set(card.skills.map((s) => s.id));
    const missing = (spec.agentCard?.skills ?? []).filter((s) => !offered.has(s));
    if (missing.length > 0) {
      const message = `spec.agentCard.skills declares ${missing.slice(0, 8).join(', ')}${missing.length > 8 ? ` and ${missing.length - 8} more` : ''}, which the agent card at ${probe.cardPath} does not list`;
      await write(
        { ...base, phase: 'Degraded', reason: 'A2aDeclaredSkillsMissing', message: boundedMessage(message) },
        'A2aDeclaredSkillsMissing',
      );
      return poll;
    }
    await write({ ...base, phase: 'Available', reason: '' }, 'SitesMatched');
    return poll;
  }
}

type CardStatus = Required<
  Pick<AgentToAgentProviderStatus, 'agentName' | 'skills' | 'capabilities' | 'interfaces' | 'cardPath'>
> &
  Pick<AgentToAgentProviderStatus, 'protocolVersion'>;

function cardStatus(card: A2aCard, cardPath: CardStatus['cardPath']): CardStatus {
  return {
    agentName: card.name,
    skills: card.skills.map((s) => ({ ...s })),
    capabilities: { ...card.capabilities },
    ...(card.protocolVersion !== undefined ? { protocolVersion: card.protocolVersion } : {}),
    interfaces: card.interfaces.map((i) => ({ ...i })),
    cardPath,
  };
}

/** The fields of status a card fills, for comparing a new card with the previous one. */
function cardFieldsOf(status: AgentToAgentProviderStatus): Partial<CardStatus> {
  const { agentName, skills, capabilities, protocolVersion, interfaces, cardPath } = status;
  return { agentName, skills, capabilities, protocolVersion, interfaces, cardPath };
}

/** The status reason of a failed probe: what failed, in the terms of the step that failed. */
export function cardProbeReason(probe: Extract<A2aCardProbeResult, { ok: false }>): string {
  if (probe.reason === 'not_found') return 'A2aAgentCardNotFound';
  if (probe.reason === 'http_status')
    return probe.status === 401 || probe.status === 403 ? 'A2aAuthRejected' : 'A2aAgentCardHttpError';
  // An answer over the bound is a card no agent should serve, not an endpoint that is down.
  if (probe.reason === 'invalid_card' || probe.reason === 'too_large') return 'A2aAgentCardInvalid';
  return 'A2aEndpointUnreachable';
}
