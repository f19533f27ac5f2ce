/**
 * Rewrites what a compiled object says into what it means on this machine, through the address table: binds,
 * Service and advertised addresses, URLs, mount paths, and the gateway config (praxis.yaml). Pure functions; the
 * problems they find (an address nothing serves) are returned, not thrown, so the runner can report them.
 */
import { AddressTable, LOOPBACK, urlHostPort } from './address-table.ts';
import type { PodPlan } from './compiled-grid.ts';

export interface Mount {
  readonly mountPath: string;
  readonly dir: string;
}

export interface RewriteContext {
  readonly site: string;
  readonly table: AddressTable;
  /** Set for pod-scoped values: `0.0.0.0:N` binds map to this pod's ports. */
  readonly pod?: PodPlan;
  /** Longest mount path first. */
  readonly mounts: readonly Mount[];
  readonly problems: string[];
}

export function sortMounts(mounts: readonly Mount[]): Mount[] {
  return [...mounts].sort((a, b) => b.mountPath.length - a.mountPath.length);
}

export function rewritePath(path: string, mounts: readonly Mount[]): string | undefined {
  for (const mount of mounts) {
    const base = mount.mountPath.replace(/\/+$/, '');
    if (path === base) return mount.dir;
    if (path.startsWith(`${base}/`)) return `${mount.dir}${path.slice(base.length)}`;
  }
  return undefined;
}

/** One scalar: a bind, a host:port, a URL or a path; anything else is returned unchanged. */
export function rewriteValue(text: string, ctx: RewriteContext): string {
  const bind = /^0\.0\.0\.0:(\d{1,5})$/.exec(text);
  if (bind !== null) {
    if (ctx.pod === undefined) return text;
    return `${LOOPBACK}:${ctx.table.podPort(ctx.pod, Number(bind[1]))}`;
  }
  if (text === '0.0.0.0') return LOOPBACK;
  const hostPort = /^([A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  if (hostPort !== null) {
    const target = ctx.table.resolve(ctx.site, text);
    return target?.endpoints[0] ?? text;
  }
  const urlKey = /^https?:\/\//.test(text) ? urlHostPort(text) : undefined;
  if (urlKey !== undefined) {
    const target = ctx.table.resolve(ctx.site, urlKey);
    if (target === undefined) return text;
    const url = new URL(text);
    // The stand-in sims and every in-cluster backend here speak plain HTTP.
    const path = url.pathname === '/' && !text.endsWith('/') ? '' : url.pathname;
    return `http://${target.endpoints[0]}${path}${url.search}`;
  }
  if (text.startsWith('/')) return rewritePath(text, ctx.mounts) ?? text;
  return text;
}

/** Deep copy with every string scalar rewritten. */
export function rewriteDeep<T>(value: T, ctx: RewriteContext): T {
  if (typeof value === 'string') return rewriteValue(value, ctx) as T;
  if (Array.isArray(value)) return value.map((v) => rewriteDeep(v, ctx)) as T;
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewriteDeep(v, ctx)])) as T;
  }
  return value;
}

/** argv of a container: `--port N` is the pod's port for container port N; the rest as rewriteValue. */
export function rewriteArgs(args: readonly string[], ctx: RewriteContext): string[] {
  return args.map((arg, i) => {
    if (args[i - 1] === '--port' && /^\d{1,5}$/.test(arg) && ctx.pod !== undefined)
      return String(ctx.table.podPort(ctx.pod, Number(arg)));
    return rewriteValue(arg, ctx);
  });
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A gateway config (the Praxis shape): listener and admin binds, cert/key/CA, overlay and credential paths, and
 * load_balancer endpoints (a Service name expands to every pod behind it, like its ClusterIP would spread
 * connections). SNI stays: the certificates carry the compiled names. A cluster whose endpoint is an external API
 * now served by a stand-in sim loses its TLS block, because the stand-in speaks plain HTTP.
 */
export function rewriteGatewayConfig(config: Json, ctx: RewriteContext): Json {
  const out = rewriteDeep(config, { ...ctx, problems: [] }) as Json;
  const chains = Array.isArray(config['filter_chains']) ? (config['filter_chains'] as Json[]) : [];
  const outChains = out['filter_chains'] as Json[] | undefined;
  chains.forEach((chain, c) => {
    const filters = Array.isArray(chain['filters']) ? (chain['filters'] as Json[]) : [];
    filters.forEach((filter, f) => {
      if (filter['filter'] !== 'load_balancer' || !Array.isArray(filter['clusters'])) return;
      const outFilter = (outChains?.[c]?.['filters'] as Json[] | undefined)?.[f];
      const outClusters = outFilter?.['clusters'] as Json[] | undefined;
      (filter['clusters'] as Json[]).forEach((cluster, k) => {
        const outCluster = outClusters?.[k];
        if (outCluster === undefined || !Array.isArray(cluster['endpoints'])) return;
        const endpoints: string[] = [];
        let standIn = false;
        for (const endpoint of cluster['endpoints'] as unknown[]) {
          if (typeof endpoint !== 'string') continue;
          const target = ctx.table.resolve(ctx.site, endpoint);
          if (target === undefined) {
            ctx.problems.push(
              `cluster ${String(cluster['name'])}: endpoint ${endpoint} is served by nothing in the compiled grid`,
            );
            endpoints.push(endpoint);
            continue;
          }
          if (target.standIn !== undefined) standIn = true;
          endpoints.push(...target.endpoints);
        }
        outCluster['endpoints'] = [...new Set(endpoints)];
        if (standIn && isObject(outCluster['tls'])) delete outCluster['tls'];
      });
    });
  });
  return out;
}

/** Whether a parsed YAML document is a gateway config. */
export function isGatewayConfig(value: unknown): value is Json {
  return isObject(value) && Array.isArray(value['listeners']) && Array.isArray(value['filter_chains']);
}

/** Provider role: a listener that requires client certificates (the mTLS boundary in front of backends). */
export function isProviderGatewayConfig(config: Json): boolean {
  return (config['listeners'] as Json[]).some(
    (l) => isObject(l['tls']) && (l['tls'] as Json)['client_cert_mode'] === 'require',
  );
}

/** Organizations provider gateways trust (peer_identity_trust), which the consumers' client certificate must carry. */
export function trustedOrganizations(config: Json): string[] {
  const out: string[] = [];
  for (const chain of (config['filter_chains'] as Json[]) ?? []) {
    for (const filter of (chain['filters'] as Json[]) ?? []) {
      if (filter['filter'] !== 'peer_identity_trust') continue;
      for (const peer of (filter['trusted_peers'] as Json[]) ?? [])
        if (typeof peer['organization'] === 'string') out.push(peer['organization']);
    }
  }
  return out;
}

/** SNI names a consumer sends on the provider hop: the provider gateways' certificates must carry them. */
export function sniNames(config: Json): string[] {
  const out: string[] = [];
  for (const chain of (config['filter_chains'] as Json[]) ?? []) {
    for (const filter of (chain['filters'] as Json[]) ?? []) {
      if (filter['filter'] !== 'load_balancer') continue;
      for (const cluster of (filter['clusters'] as Json[]) ?? []) {
        const tls = cluster['tls'];
        if (isObject(tls) && typeof tls['sni'] === 'string') out.push(tls['sni']);
      }
    }
  }
  return out;
}

export { AddressTable };
