// Loads and checks the gateway config: YAML or JSON, validated against schemas/gateway/gateway-config.schema.json
// (unknown keys are an error naming the key and its path), then Praxis AI's cross-field rules
// (schemas/gateway/praxis-rules.ts: a config Praxis AI refuses is refused here with the same reason), then this
// gateway's own: references between listeners, chains and clusters, one role per process, filter order, and the
// provider boundary rules (docs/contract.md §3.2).
import { readFile } from 'node:fs/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject } from 'ajv/dist/2020.js';
import { parse as parseYaml } from 'yaml';
import schema from '../../schemas/gateway/gateway-config.schema.json' with { type: 'json' };
import { praxisRuleProblems } from '../../schemas/gateway/praxis-rules.ts';
import type {
  A2ARouteFilter,
  AgentProviderRouteFilter,
  McpRouteFilter,
  ClusterConfig,
  CredentialInjectFilter,
  FilterConfig,
  GatewayConfig,
  GridSiteRouteFilter,
  IntelligentRouteFilter,
  ListenerConfig,
  LoadBalancerFilter,
  PeerIdentityTrustFilter,
  ProviderRouteFilter,
} from '../../schemas/generated/gateway-config.ts';

export type { GatewayConfig, ListenerConfig, FilterConfig } from '../../schemas/generated/gateway-config.ts';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export type GatewayRole = 'consumer' | 'provider';

/** One listener with its chains resolved into the ordered filter list it runs. */
export interface ResolvedListener {
  readonly listener: ListenerConfig;
  readonly filters: readonly FilterConfig[];
  readonly role: GatewayRole;
}

export interface ResolvedConfig {
  readonly config: GatewayConfig;
  readonly role: GatewayRole;
  readonly listeners: readonly ResolvedListener[];
}

const ajv = new Ajv2020({ allErrors: false, discriminator: true, strict: false, useDefaults: false });
const validateSchema = ajv.compile<GatewayConfig>(schema);

/** Keys that would make a filter nested or conditional; provider chains must have neither (docs/contract.md §3.2). */
const NESTING_KEYS = ['filters', 'branches', 'conditions', 'when', 'chain', 'on_match', 'skip'];

function pointer(path: string): string {
  return path === '' ? '/' : path;
}

function describeSchemaError(error: ErrorObject, document: unknown): string {
  const where = pointer(error.instancePath);
  switch (error.keyword) {
    case 'additionalProperties':
      return `unknown key "${String(error.params['additionalProperty'])}" at ${where}`;
    case 'discriminator': {
      const tag = lookup(document, error.instancePath);
      const value = typeof tag === 'object' && tag !== null ? (tag as Record<string, unknown>)['filter'] : undefined;
      return value === undefined
        ? `filter at ${where} has no "filter" name`
        : `unknown filter "${String(value)}" at ${where}`;
    }
    case 'required':
      return `missing key "${String(error.params['missingProperty'])}" at ${where}`;
    default: {
      const key = error.instancePath
        .split('/')
        .filter((part) => !/^\d+$/u.test(part))
        .pop();
      return `${key === undefined ? '' : `key "${key}" `}at ${where}: ${error.message ?? 'invalid'}`;
    }
  }
}

function lookup(document: unknown, instancePath: string): unknown {
  let node = document;
  for (const raw of instancePath.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

export function parseConfigText(text: string, source: string): unknown {
  try {
    return source.endsWith('.json') ? JSON.parse(text) : parseYaml(text, { maxAliasCount: 100 });
  } catch (error) {
    throw new ConfigError(
      `${source}: not valid ${source.endsWith('.json') ? 'JSON' : 'YAML'}: ${(error as Error).message.split('\n')[0]}`,
    );
  }
}

export async function loadConfigFile(path: string): Promise<ResolvedConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `cannot read config ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  return resolveConfig(parseConfigText(text, path), path);
}

function filterPipeline(config: GatewayConfig, listener: ListenerConfig, index: number): FilterConfig[] {
  const filters: FilterConfig[] = [];
  for (const chainName of listener.filter_chains) {
    const chain = config.filter_chains.find((c) => c.name === chainName);
    if (chain === undefined) {
      throw new ConfigError(
        `listeners[${index}] "${listener.name}": filter chain "${chainName}" is not defined in filter_chains`,
      );
    }
    filters.push(...chain.filters);
  }
  return filters;
}

function checkNesting(document: unknown, source: string): void {
  const chains = (document as { filter_chains?: unknown }).filter_chains;
  if (!Array.isArray(chains)) return;
  chains.forEach((chain, c) => {
    const filters = (chain as { filters?: unknown } | null)?.filters;
    if (!Array.isArray(filters)) return;
    filters.forEach((filter, f) => {
      if (typeof filter !== 'object' || filter === null) return;
      for (const key of NESTING_KEYS) {
        if (key in filter) {
          throw new ConfigError(
            `${source}: filter "${String((filter as Record<string, unknown>)['filter'])}" at /filter_chains/${c}/filters/${f} has "${key}": ` +
              'filters cannot be nested or conditional (a provider chain must run peer_identity_trust and provider_route unconditionally, at top level)',
          );
        }
      }
    });
  });
}

function indexOfFilter(filters: readonly FilterConfig[], name: FilterConfig['filter']): number[] {
  const out: number[] = [];
  filters.forEach((f, i) => {
    if (f.filter === name) out.push(i);
  });
  return out;
}

function checkListener(config: GatewayConfig, listener: ListenerConfig, index: number): ResolvedListener {
  const where = `listeners[${index}] "${listener.name}"`;
  const filters = filterPipeline(config, listener, index);
  const count = (name: FilterConfig['filter']): number => indexOfFilter(filters, name).length;
  for (const name of [
    'caller_auth',
    'budget_enforce',
    'usage_meter',
    'intelligent_route',
    'grid_site_route',
    'provider_route',
    'peer_identity_trust',
    'credential_inject',
    'load_balancer',
    'json_body_field',
    'openai_responses_format',
    'mcp_route',
    'a2a_route',
    'agent_provider_route',
  ] as const) {
    if (count(name) > 1)
      throw new ConfigError(`${where}: filter ${name} appears ${count(name)} times in its pipeline; at most once`);
  }
  if (count('intelligent_route') === 1 && count('grid_site_route') === 1) {
    throw new ConfigError(
      `${where}: intelligent_route and grid_site_route in one pipeline; a consumer pipeline has one route filter`,
    );
  }
  // grid_site_route is the consumer route of a gateway serving gridServing: it chooses the site instead of the overlay.
  const consumerRoute = count('grid_site_route') === 1 ? 'grid_site_route' : 'intelligent_route';
  const agentConsumer = count('mcp_route') === 1 || count('a2a_route') === 1;
  const isConsumer = count(consumerRoute) === 1 || agentConsumer;
  const isProvider =
    count('provider_route') === 1 || count('peer_identity_trust') === 1 || count('agent_provider_route') === 1;
  if (agentConsumer && isProvider) {
    throw new ConfigError(
      `${where}: mcp_route and a2a_route are consumer filters; a provider pipeline serves agents with agent_provider_route`,
    );
  }
  if (isConsumer && isProvider) {
    throw new ConfigError(
      `${where}: ${consumerRoute} and provider filters in one pipeline; consumer and provider roles run as separate gateways`,
    );
  }
  if (!isConsumer && !isProvider) {
    throw new ConfigError(
      `${where}: the pipeline has neither intelligent_route (consumer) nor provider_route (provider), nor grid_site_route (consumer of gridServing)`,
    );
  }
  const last = filters[filters.length - 1];
  if (last?.filter !== 'load_balancer') {
    throw new ConfigError(
      `${where}: the pipeline must end with load_balancer (it ends with ${last?.filter ?? 'nothing'})`,
    );
  }
  const pos = (name: FilterConfig['filter']): number => filters.findIndex((f) => f.filter === name);
  const routeName = isConsumer ? consumerRoute : 'provider_route';
  const route = pos(routeName);
  for (const parser of ['json_body_field', 'openai_responses_format'] as const) {
    if (pos(parser) > route) throw new ConfigError(`${where}: ${parser} must come before ${routeName}`);
  }
  if (count('credential_inject') === 1 && pos('credential_inject') < route) {
    throw new ConfigError(
      `${where}: credential_inject must come after ${routeName} (it reads the selected route's credential)`,
    );
  }
  if (count('caller_auth') === 1) {
    // A provider authenticates its peer site, never a caller: the caller's key must not travel that far.
    if (isProvider)
      throw new ConfigError(
        `${where}: caller_auth is a consumer filter; a provider pipeline authenticates peers with peer_identity_trust`,
      );
    if (pos('caller_auth') !== 0)
      throw new ConfigError(
        `${where}: caller_auth must be the first filter (found ${filters[0]?.filter ?? 'nothing'} first)`,
      );
  }
  if (count('budget_enforce') === 1) {
    if (pos('budget_enforce') !== 1 || pos('caller_auth') !== 0)
      throw new ConfigError(
        `${where}: budget_enforce must come right after caller_auth (it limits the authenticated caller)`,
      );
    const meter = filters.find((f) => f.filter === 'usage_meter');
    if (meter?.filter !== 'usage_meter' || meter.report === undefined) {
      throw new ConfigError(
        `${where}: budget_enforce needs usage_meter with report (budgets and token counts come from it)`,
      );
    }
  }
  if (count('usage_meter') === 1) {
    if (isProvider)
      throw new ConfigError(`${where}: usage_meter is a consumer filter; usage is metered where the caller is known`);
    if (pos('usage_meter') < route)
      throw new ConfigError(
        `${where}: usage_meter must come after ${routeName} (it records the routed provider and site)`,
      );
  }
  if (isProvider) {
    const tls = listener.tls;
    if (tls === undefined || tls.client_cert_mode !== 'require') {
      throw new ConfigError(
        `${where}: a provider listener must set tls.client_cert_mode: require (found ${tls === undefined ? 'no tls' : (tls.client_cert_mode ?? 'none')})`,
      );
    }
    if (tls.client_ca === undefined) {
      throw new ConfigError(`${where}: a provider listener requires tls.client_ca to verify peer certificates`);
    }
    if (filters[0]?.filter !== 'peer_identity_trust') {
      throw new ConfigError(
        `${where}: peer_identity_trust must be the first filter of a provider pipeline (found ${filters[0]?.filter ?? 'nothing'})`,
      );
    }
    if (count('provider_route') !== 1 && count('agent_provider_route') !== 1) {
      throw new ConfigError(
        `${where}: a provider pipeline needs a provider_route (or an agent_provider_route) after peer_identity_trust`,
      );
    }
  }
  if (
    listener.tls?.client_cert_mode !== undefined &&
    listener.tls.client_cert_mode !== 'none' &&
    listener.tls.client_ca === undefined
  ) {
    throw new ConfigError(`${where}: tls.client_cert_mode ${listener.tls.client_cert_mode} needs tls.client_ca`);
  }
  checkAgentRoutes(filters, where, pos);
  checkClusters(filters, where);
  checkCredentials(filters, where);
  return { listener, filters, role: isConsumer ? 'consumer' : 'provider' };
}

function checkClusters(filters: readonly FilterConfig[], where: string): void {
  const lb = filters.find((f): f is LoadBalancerFilter => f.filter === 'load_balancer');
  const names = new Set<string>();
  for (const cluster of lb?.clusters ?? []) {
    if (names.has(cluster.name))
      throw new ConfigError(`${where}: load_balancer cluster "${cluster.name}" is defined twice`);
    names.add(cluster.name);
    checkClusterTls(cluster, where);
  }
  const route = filters.find(
    (f): f is IntelligentRouteFilter | GridSiteRouteFilter =>
      f.filter === 'intelligent_route' || f.filter === 'grid_site_route',
  );
  for (const hop of route?.provider_hop_clusters ?? []) {
    if (!names.has(hop))
      throw new ConfigError(
        `${where}: ${route?.filter ?? ''}.provider_hop_clusters names "${hop}", which load_balancer.clusters does not define`,
      );
  }
  const mcp = filters.find((f): f is McpRouteFilter => f.filter === 'mcp_route');
  for (const hop of mcp?.provider_hop_clusters ?? []) {
    if (!names.has(hop))
      throw new ConfigError(
        `${where}: mcp_route.provider_hop_clusters names "${hop}", which load_balancer.clusters does not define`,
      );
  }
  filters
    .find((f): f is A2ARouteFilter => f.filter === 'a2a_route')
    ?.agents.forEach((agent, i) => {
      if (!names.has(agent.cluster))
        throw new ConfigError(
          `${where}: a2a_route.agents[${i}] (${agent.name}) names cluster "${agent.cluster}", which load_balancer.clusters does not define`,
        );
    });
  filters
    .find((f): f is AgentProviderRouteFilter => f.filter === 'agent_provider_route')
    ?.servers.forEach((server, i) => {
      if (!names.has(server.cluster))
        throw new ConfigError(
          `${where}: agent_provider_route.servers[${i}] (${server.protocol}/${server.name}) names cluster "${server.cluster}", which load_balancer.clusters does not define`,
        );
    });
  const pr = filters.find((f): f is ProviderRouteFilter => f.filter === 'provider_route');
  pr?.routes.forEach((route, i) => {
    if (!names.has(route.cluster)) {
      throw new ConfigError(
        `${where}: provider_route.routes[${i}] (candidate ${route.candidate_id}) names cluster "${route.cluster}", which load_balancer.clusters does not define`,
      );
    }
  });
  const trust = filters.find((f): f is PeerIdentityTrustFilter => f.filter === 'peer_identity_trust');
  trust?.trusted_peers.forEach((peer, i) => {
    if (peer.cert_digest === undefined && peer.organization === undefined && peer.serial_number === undefined) {
      throw new ConfigError(
        `${where}: peer_identity_trust.trusted_peers[${i}] matches nothing; set cert_digest, organization or serial_number`,
      );
    }
  });
}

/** The agent routes run after the filters that authorize (caller_auth, budget_enforce, peer_identity_trust) and before credential_inject. */
function checkAgentRoutes(
  filters: readonly FilterConfig[],
  where: string,
  pos: (name: FilterConfig['filter']) => number,
): void {
  for (const name of ['mcp_route', 'a2a_route', 'agent_provider_route'] as const) {
    const at = pos(name);
    if (at === -1) continue;
    for (const before of ['caller_auth', 'budget_enforce', 'peer_identity_trust'] as const) {
      if (pos(before) > at)
        throw new ConfigError(
          `${where}: ${before} must come before ${name} (it authorizes every request, agent ones too)`,
        );
    }
    if (pos('credential_inject') !== -1 && pos('credential_inject') < at)
      throw new ConfigError(`${where}: credential_inject must come after ${name} (it reads the server's credential)`);
  }
  const mcp = filters.find((f): f is McpRouteFilter => f.filter === 'mcp_route');
  const a2a = filters.find((f): f is A2ARouteFilter => f.filter === 'a2a_route');
  if (mcp !== undefined && a2a !== undefined && (mcp.path_prefix ?? '/mcp/') === (a2a.path_prefix ?? '/a2a/')) {
    throw new ConfigError(`${where}: mcp_route and a2a_route share path_prefix ${mcp.path_prefix ?? '/mcp/'}`);
  }
  for (const route of [mcp, a2a]) {
    const prefix =
      route === undefined ? undefined : (route.path_prefix ?? (route.filter === 'mcp_route' ? '/mcp/' : '/a2a/'));
    if (prefix !== undefined && (prefix.startsWith('/v1/') || prefix === '/v1/'))
      throw new ConfigError(`${where}: ${route!.filter}.path_prefix ${prefix} is under /v1/, the inference paths`);
  }
  const agents = new Set<string>();
  a2a?.agents.forEach((agent, i) => {
    if (agents.has(agent.name)) throw new ConfigError(`${where}: a2a_route.agents[${i}] repeats agent "${agent.name}"`);
    agents.add(agent.name);
  });
  const servers = new Set<string>();
  filters
    .find((f): f is AgentProviderRouteFilter => f.filter === 'agent_provider_route')
    ?.servers.forEach((server, i) => {
      const key = `${server.protocol}/${server.name}`;
      if (servers.has(key))
        throw new ConfigError(
          `${where}: agent_provider_route.servers[${i}] repeats ${server.protocol} server "${server.name}"`,
        );
      servers.add(key);
      if (server.protocol === 'mcp' && server.card_path !== undefined)
        throw new ConfigError(
          `${where}: agent_provider_route.servers[${i}] (${key}) sets card_path, which only an a2a server has`,
        );
    });
}

function checkClusterTls(cluster: ClusterConfig, where: string): void {
  if (cluster.tls?.verify === false && cluster.tls.ca !== undefined) {
    throw new ConfigError(
      `${where}: cluster "${cluster.name}" sets tls.ca with verify: false; a CA only matters when verifying`,
    );
  }
}

function checkCredentials(filters: readonly FilterConfig[], where: string): void {
  const ci = filters.find((f): f is CredentialInjectFilter => f.filter === 'credential_inject');
  const keys = new Set<string>();
  ci?.credentials?.forEach((credential, i) => {
    const sources = (['file', 'env_var', 'value'] as const).filter((k) => credential[k] !== undefined);
    if (sources.length !== 1) {
      throw new ConfigError(
        `${where}: credential_inject.credentials[${i}] (${credential.name}) must set exactly one of file, env_var, value (found ${sources.length === 0 ? 'none' : sources.join(', ')})`,
      );
    }
    const key = `${credential.name}\u0000${credential.namespace}\u0000${credential.key}`;
    if (keys.has(key))
      throw new ConfigError(`${where}: credential_inject.credentials[${i}] repeats credential ${credential.name}`);
    keys.add(key);
  });
}

/** Validates a parsed document; `source` names it in every message. */
export function resolveConfig(document: unknown, source: string): ResolvedConfig {
  checkNesting(document, source);
  if (!validateSchema(document)) {
    const first = validateSchema.errors?.[0];
    throw new ConfigError(
      `${source}: ${first === undefined ? 'invalid config' : describeSchemaError(first, document)}`,
    );
  }
  const config = document;
  const refused = praxisRuleProblems(config)[0];
  if (refused !== undefined)
    throw new ConfigError(`${source}: key "${refused.key}" at ${refused.pointer}: ${refused.message}`);
  const unique = (items: readonly { name: string }[], what: string): void => {
    const seen = new Set<string>();
    for (const item of items) {
      if (seen.has(item.name)) throw new ConfigError(`${source}: ${what} "${item.name}" is defined twice`);
      seen.add(item.name);
    }
  };
  unique(config.listeners, 'listener');
  unique(config.filter_chains, 'filter chain');
  let listeners: ResolvedListener[];
  try {
    listeners = config.listeners.map((l, i) => checkListener(config, l, i));
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${source}: ${error.message}`);
    throw error;
  }
  const roles = new Set(listeners.map((l) => l.role));
  if (roles.size > 1) {
    throw new ConfigError(`${source}: listeners mix consumer and provider roles; run one gateway process per role`);
  }
  return { config, role: listeners[0]?.role ?? 'consumer', listeners };
}
