/**
 * The rules Praxis AI applies to a praxis.yaml that the JSON Schema beside this file cannot say (cross-field and
 * cross-entry), with the reasons Praxis gives, plus the walk that finds this gateway's extension keys. Pure; used by
 * the gateway's config loader (a refused config never starts) and by the compiler's synth check (a refused config is
 * never written). Sources: praxis-proxy-core 0.5.3 (src/config/validate/*), praxis-proxy-tls 0.5.3 and Praxis AI
 * main (praxis-proxy/ai filters/src/routing/provider_route.rs); test/conformance/praxis-config.test.ts cites each.
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { GatewayConfig } from '../generated/gateway-config.ts';
import schema from './gateway-config.schema.json' with { type: 'json' };

/** One refused key: where it is (a JSON pointer), which key, and the reason in Praxis AI's words. */
export interface PraxisRuleProblem {
  readonly pointer: string;
  readonly key: string;
  readonly message: string;
}

/** host and port of an IP:port / [IPv6]:port address (the schema has already checked its shape). */
function splitAddress(address: string): { host: string; port: string } {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port: address.slice(colon + 1) };
}

/** Rust's IpAddr::is_loopback after normalize_mapped_ipv4: 127.0.0.0/8, ::1, and ::ffff:127.x.y.z. */
export function isLoopbackAddress(host: string): boolean {
  if (isIPv4(host)) return host.startsWith('127.');
  if (!isIPv6(host)) return false;
  const lower = host.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/u.exec(lower);
  if (mapped?.[1] !== undefined) return mapped[1].startsWith('127.');
  const groups = expandIPv6(lower);
  return groups?.slice(0, 7).every((g) => g === 0) === true && groups[7] === 1;
}

function expandIPv6(host: string): number[] | undefined {
  if (host.includes('.')) return undefined;
  const [head = '', tail] = host.split('::');
  const part = (text: string): number[] => (text === '' ? [] : text.split(':').map((g) => Number.parseInt(g, 16)));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const fill = 8 - left.length - right.length;
  if (fill < 0) return undefined;
  return [...left, ...Array<number>(fill).fill(0), ...right];
}

function isUnspecified(host: string): boolean {
  if (isIPv4(host)) return host === '0.0.0.0';
  const groups = isIPv6(host) ? expandIPv6(host.toLowerCase()) : undefined;
  return groups?.every((g) => g === 0) === true;
}

/** praxis-proxy-tls sni_name::validate for an upstream SNI: a DNS host name, no wildcard, no IP literal. */
export function sniProblem(sni: string): string | undefined {
  if (sni.includes('*')) return 'a wildcard is not a server name';
  if (isIPv4(sni) || isIPv6(sni)) return 'an IP literal is not a server name (RFC 6066 §3)';
  for (const label of sni.split('.')) {
    if (!/^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/u.test(label)) return `label "${label}" is not a DNS label`;
  }
  return undefined;
}

/** Header prefixes Praxis reserves for itself (it strips them before the upstream hop). */
const RESERVED_HEADER_PREFIXES = ['x-praxis-', 'x-mcp-'];

/** Every Praxis AI rule the schema cannot express, in the order Praxis checks them; empty when the config passes. */
export function praxisRuleProblems(config: GatewayConfig): PraxisRuleProblem[] {
  const problems: PraxisRuleProblem[] = [];

  // praxis-proxy-core 0.5.3 validate/listener/rules.rs validate_unique_addresses: the same address twice, or two
  // listeners on one port that are both wildcard or both specific.
  const raw = new Map<string, number>();
  const normalized = new Map<string, number>();
  config.listeners.forEach((listener, i) => {
    const pointer = `/listeners/${i}/address`;
    if (raw.has(listener.address)) {
      problems.push({
        pointer,
        key: 'address',
        message: `duplicate listener address '${listener.address}' (listeners '${listener.name}' and another share the same address)`,
      });
      return;
    }
    raw.set(listener.address, i);
    const { host, port } = splitAddress(listener.address);
    const key = `${isUnspecified(host)}/${port}`;
    if (normalized.has(key)) {
      problems.push({
        pointer,
        key: 'address',
        message: `listener '${listener.name}' address '${listener.address}' overlaps with another listener on the same port`,
      });
    }
    normalized.set(key, i);
  });

  // praxis-proxy-core 0.5.3 validate/rules.rs validate_admin_address.
  const admin = config.admin?.address ?? config.admin?.metrics_address;
  if (
    admin !== undefined &&
    !isLoopbackAddress(splitAddress(admin).host) &&
    config.insecure_options?.allow_public_admin !== true
  ) {
    const key = config.admin?.address !== undefined ? 'address' : 'metrics_address';
    problems.push({
      pointer: `/admin/${key}`,
      key,
      message: `admin endpoint '${admin}' must bind to a loopback address (127.0.0.1 or [::1]); set insecure_options.allow_public_admin: true to allow non-loopback binding`,
    });
  }

  config.filter_chains.forEach((chain, c) => {
    chain.filters.forEach((filter, f) => {
      const at = `/filter_chains/${c}/filters/${f}`;
      if (
        (filter.filter === 'intelligent_route' ||
          filter.filter === 'provider_route' ||
          filter.filter === 'grid_site_route') &&
        filter.model_header !== undefined
      ) {
        const header = filter.model_header.toLowerCase();
        // Praxis AI routing/descriptor.rs validate_model_header (the reference grid_site_route checks its header the same way).
        if (RESERVED_HEADER_PREFIXES.some((prefix) => header.startsWith(prefix))) {
          problems.push({
            pointer: `${at}/model_header`,
            key: 'model_header',
            message: `${filter.filter}: model_header must not use a reserved internal header prefix (${RESERVED_HEADER_PREFIXES.join(', ')})`,
          });
        }
      }
      if (filter.filter === 'intelligent_route') {
        const affinity = filter.session_affinity;
        // Praxis AI intelligent_route.rs validate_session_affinity_config (only when enabled).
        if (affinity?.enabled === true && affinity.header === undefined && affinity.cookie === undefined) {
          problems.push({
            pointer: `${at}/session_affinity`,
            key: 'session_affinity',
            message: 'intelligent_route: session_affinity requires at least one of header or cookie',
          });
        }
      }
      if (filter.filter === 'provider_route') {
        // Praxis AI provider_route.rs from_config: routes are a map keyed by candidate_id.
        const seen = new Map<string, number>();
        filter.routes.forEach((route, r) => {
          const first = seen.get(route.candidate_id);
          if (first !== undefined) {
            problems.push({
              pointer: `${at}/routes/${r}/candidate_id`,
              key: 'candidate_id',
              message: `provider_route: duplicate candidate_id '${route.candidate_id}' (routes[${first}] has it)`,
            });
          } else {
            seen.set(route.candidate_id, r);
          }
        });
      }
      if (filter.filter === 'load_balancer') {
        filter.clusters.forEach((cluster, k) => {
          const sni = cluster.tls?.sni;
          const problem = sni === undefined ? undefined : sniProblem(sni);
          // praxis-proxy-tls 0.5.3 config/cluster.rs ClusterTls::validate.
          if (problem !== undefined)
            problems.push({
              pointer: `${at}/clusters/${k}/tls/sni`,
              key: 'sni',
              message: `invalid SNI hostname '${sni}': ${problem}`,
            });
        });
      }
    });
  });
  return problems;
}

type SchemaNode = {
  $ref?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  oneOf?: SchemaNode[];
  const?: unknown;
  'x-agn-extension'?: boolean;
};

const defs = (schema as unknown as { $defs: Record<string, SchemaNode> }).$defs;

function resolveRef(node: SchemaNode): SchemaNode {
  return node.$ref === undefined ? node : resolveRef(defs[node.$ref.replace('#/$defs/', '')] ?? {});
}

/**
 * JSON pointers of the keys a document uses that the schema marks x-agn-extension: accepted by this gateway,
 * refused by Praxis AI. The gateway logs them at startup; the compiler renders none.
 */
export function extensionKeyPointers(document: unknown): string[] {
  const out: string[] = [];
  const walk = (value: unknown, node: SchemaNode, pointer: string): void => {
    const resolved = resolveRef(node);
    if (Array.isArray(value)) {
      if (resolved.items !== undefined)
        for (const [i, item] of value.entries()) walk(item, resolved.items, `${pointer}/${i}`);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const record = value as Record<string, unknown>;
    if (resolved.oneOf !== undefined) {
      const branch = resolved.oneOf.map(resolveRef).find((b) => b.properties?.['filter']?.const === record['filter']);
      if (branch !== undefined) walk(value, branch, pointer);
      return;
    }
    for (const [key, child] of Object.entries(record)) {
      const property = resolved.properties?.[key];
      if (property === undefined) continue;
      if (property['x-agn-extension'] === true) out.push(`${pointer}/${key}`);
      walk(child, property, `${pointer}/${key}`);
    }
  };
  walk(document, schema as unknown as SchemaNode, '');
  return out;
}
