// Praxis AI conformance of every praxis.yaml we render. One table: each rule Praxis AI applies to a key we
// render, the Praxis source it comes from, an accepted and a refused example. Each row runs against our validator
// (daemons/gateway/config.ts over schemas/gateway/gateway-config.schema.json and schemas/gateway/praxis-rules.ts) and
// against the real gateway process: a refused config exits non-zero with one stderr line naming the key, its path
// and Praxis's reason. Then every compiled praxis.yaml in dist/, every pod-local config the local grid writes from
// them, and the operator's generated consumer config are checked against the same rules. The table and its sources
// are in praxis-rules-table.ts; test/praxis runs the real Praxis parser on the same files (npm run test:praxis).
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { buildAddressTable } from '../../daemons/local-grid/address-table.ts';
import { configMapData, loadCompiledGrid } from '../../daemons/local-grid/compiled-grid.ts';
import { isGatewayConfig, rewriteGatewayConfig } from '../../daemons/local-grid/rewrite.ts';
import { ConfigError, parseConfigText, resolveConfig } from '../../daemons/gateway/config.ts';
import { AGENT_FILTERS, LOCAL_LOAD_KEY, TENANT_FILTERS } from '../../constructs/consumer-gateway-config.ts';
import { AGENT_PROVIDER_FILTER } from '../../constructs/provider-gateway-config.ts';
import { extensionKeyPointers, praxisRuleProblems } from '../../schemas/gateway/praxis-rules.ts';
import type { GatewayConfig, ProviderRouteFilter } from '../../schemas/generated/gateway-config.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { makePki, spawnDaemon, waitForPort, type Pki } from '../gateway/helpers.ts';
import { consumer, dir, FAKE, generatedConsumerConfig, provider, RULES, type Json } from './praxis-rules-table.ts';

const run = promisify(execFile);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function ourReason(doc: Json): string {
  try {
    resolveConfig(doc, 'praxis.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('our validator accepted the refused example');
}

describe('Praxis AI rules, our validator', () => {
  it.each(RULES.map((r) => [r.rule, r] as const))('%s', (_name, r) => {
    const accepted = r.base();
    r.accept(accepted);
    expect(() => resolveConfig(accepted, 'praxis.yaml')).not.toThrow();
    const refused = r.base();
    r.refuse(refused);
    const message = ourReason(refused);
    expect(message).toMatch(/^praxis\.yaml: /);
    expect(message).toMatch(r.reason);
    expect(message).not.toContain('\n');
  });

  it('lists every extension key a config uses, and the compiler-shaped configs use none', () => {
    expect(extensionKeyPointers(provider(FAKE))).toEqual([]);
    expect(extensionKeyPointers(consumer())).toEqual([]);
    const extended = consumer();
    extended.listeners[0].max_body_bytes = 4096;
    extended.admin = { metrics_address: '127.0.0.1:0' };
    extended.filter_chains[0].filters[3].clusters[0].body_idle_timeout_ms = 1000;
    expect(extensionKeyPointers(extended)).toEqual([
      '/listeners/0/max_body_bytes',
      '/filter_chains/0/filters/3/clusters/0/body_idle_timeout_ms',
      '/admin/metrics_address',
    ]);
    expect(() => resolveConfig(extended, 'praxis.yaml')).not.toThrow();
  });
});

describe('Praxis AI rules, the real gateway process', () => {
  let pki: Pki;
  beforeAll(async () => {
    pki = await makePki(dir);
  });

  const write = (name: string, doc: Json): string => {
    const path = join(dir, name);
    writeFileSync(path, stringifyYaml(doc));
    return path;
  };

  it.each(RULES.map((r, i) => [r.rule, r, i] as const))('refuses: %s', async (_name, r, i) => {
    const doc = r.base();
    r.refuse(doc);
    const path = write(`refused-${i}.yaml`, doc);
    const result = await run(process.execPath, [join(REPO_ROOT, 'daemons/gateway/main.ts'), '--config', path], {
      cwd: REPO_ROOT,
      timeout: 20_000,
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code?: number; stderr?: string }) => ({ code: error.code ?? -1, stderr: error.stderr ?? '' }),
    );
    expect(result.code).not.toBe(0);
    const lines = result.stderr.split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`gateway: ${path}: `);
    expect(lines[0]).toMatch(r.reason);
  });

  it('starts on the accepted provider and consumer shapes', async () => {
    const edge = consumer();
    edge.filter_chains[0].filters[3].clusters[0].tls = {
      ca: { ca_path: pki.caPath },
      client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
      sni: 'gateway.east.grid.example.com',
      verify: true,
    };
    const configs = [write('accepted-provider.yaml', provider(pki)), write('accepted-consumer.yaml', edge)];
    for (const path of configs) {
      const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', path]);
      try {
        expect(await waitForPort(daemon, 'admin')).toBeGreaterThan(0);
        expect(daemon.stderr()).toBe('');
      } finally {
        await daemon.stop();
      }
    }
  });
});

/** Every praxis.yaml in a list of manifests, with the ConfigMap it came from. */
function gatewayConfigsOf(objects: readonly Json[]): { name: string; config: Json }[] {
  return objects
    .filter((o) => o.kind === 'ConfigMap' && typeof o.data?.['praxis.yaml'] === 'string')
    .map((o) => ({
      name: `${o.metadata.namespace}/${o.metadata.name}`,
      config: parseYaml(o.data['praxis.yaml']) as Json,
    }));
}

/** The agent routes: a consumer's mcp_route and a2a_route, a provider gateway's agent_provider_route. */
const AGENT_EXTENSIONS: readonly string[] = [...AGENT_FILTERS, AGENT_PROVIDER_FILTER];

/**
 * The extension keys a compiled config may carry (docs/praxis-compatibility.md), and only where declared: the
 * tenant filters (caller_auth, budget_enforce, usage_meter, with every key inside them) of a consumer declared with
 * callerKeys, the agent routes of a gateway whose sites offer tool servers or agents, and intelligent_route's
 * local_load of one declared with localLoad. Praxis AI would refuse each.
 */
function declaredExtensionPointers(config: GatewayConfig): string[] {
  return extensionKeyPointers(config).filter((pointer) => {
    const match = /^\/filter_chains\/(\d+)\/filters\/(\d+)\/([^/]+)/.exec(pointer);
    const filter =
      match === null ? undefined : config.filter_chains[Number(match[1])]?.filters[Number(match[2])]?.filter;
    if (filter === undefined) return false;
    return (
      (TENANT_FILTERS as readonly string[]).includes(filter) ||
      AGENT_EXTENSIONS.includes(filter) ||
      `${filter}/${match![3]}` === LOCAL_LOAD_KEY
    );
  });
}

function expectPraxisShape(config: GatewayConfig, where: string): void {
  expect(praxisRuleProblems(config), where).toEqual([]);
  expect(extensionKeyPointers(config), where).toEqual(declaredExtensionPointers(config));
  // Praxis AI's defaults differ from ours (model_header X-Model, shutdown 30 s): the compiler renders both explicitly.
  expect(config.shutdown_timeout_secs, where).toBeDefined();
  for (const chain of config.filter_chains) {
    for (const filter of chain.filters) {
      if (filter.filter === 'intelligent_route' || filter.filter === 'provider_route')
        expect(filter.model_header, where).toBeDefined();
      if (filter.filter === 'provider_route') {
        const routes = (filter as ProviderRouteFilter).routes;
        expect(new Set(routes.map((r) => r.candidate_id)).size, where).toBe(routes.length);
        for (const r of routes) {
          expect(r.paths.length, where).toBeGreaterThanOrEqual(1);
          expect(r.paths.length, where).toBeLessThanOrEqual(64);
          for (const p of r.paths) expect(p, where).toMatch(/^\/[^*]*$/);
        }
      }
      if (filter.filter === 'load_balancer')
        for (const c of filter.clusters) expect(Object.keys(c), where).not.toContain('authority');
    }
  }
}

describe('every config we render', () => {
  const sites = loadCompiledGrid(join(REPO_ROOT, 'dist'));
  const compiled = sites.flatMap((site) =>
    gatewayConfigsOf(site.objects as unknown as Json[]).map((c) => ({ ...c, site })),
  );

  it('dist/: each compiled praxis.yaml passes our validator and shows the Praxis rules', () => {
    expect(compiled.map((c) => `${c.site.site}:${c.name}`).sort()).toEqual([
      'east:grid-system/consumer-gateway-config',
      'east:grid-system/provider-gateway-config',
      'west:grid-system/provider-gateway-config',
    ]);
    for (const { site, name, config } of compiled) {
      const where = `${site.site} ${name}`;
      const resolved = resolveConfig(config, where);
      expectPraxisShape(resolved.config, where);
      // Only east's consumer is declared with callerKeys: it, and nothing else, carries the tenant filters, all three.
      const tenant = resolved.config.filter_chains
        .flatMap((chain) => chain.filters.map((f) => f.filter))
        .filter((f) => (TENANT_FILTERS as readonly string[]).includes(f));
      expect(tenant, where).toEqual(
        `${site.site}:${name}` === 'east:grid-system/consumer-gateway-config'
          ? ['caller_auth', 'budget_enforce', 'usage_meter']
          : [],
      );
      // east offers a tool server and west an agent: both provider gateways serve them; east's consumer reaches both.
      const agents = resolved.config.filter_chains
        .flatMap((chain) => chain.filters.map((f) => f.filter))
        .filter((f) => AGENT_EXTENSIONS.includes(f));
      expect(agents, where).toEqual(
        name === 'grid-system/consumer-gateway-config' ? ['mcp_route', 'a2a_route'] : ['agent_provider_route'],
      );
    }
  });

  it('dist/: a public admin address comes with a NetworkPolicy that opens only the listener to every source, the admin port to named peers only', () => {
    for (const { site, name, config } of compiled) {
      const admin = config.admin.address as string;
      if (admin.startsWith('127.') || admin.startsWith('[::1]')) continue;
      expect(config.insecure_options, name).toEqual({ allow_public_admin: true });
      const deployment = name.split('/')[1]!.replace(/-config$/, '');
      const policy = (site.objects as unknown as Json[]).find(
        (o) => o.kind === 'NetworkPolicy' && o.metadata.name === deployment,
      );
      expect(policy, `${site.site} NetworkPolicy ${deployment}`).toBeDefined();
      const pod = (site.objects as unknown as Json[]).find(
        (o) => o.kind === 'Deployment' && o.metadata.name === deployment,
      );
      expect(policy.spec.podSelector.matchLabels).toEqual(pod.spec.selector.matchLabels);
      expect(policy.spec.policyTypes).toEqual(['Ingress']);
      const adminPort = Number(admin.slice(admin.lastIndexOf(':') + 1));
      const listenerPort = Number((config.listeners[0].address as string).split(':').pop());
      // A rule without `from` admits every source: only the listener port may have one.
      const open = policy.spec.ingress
        .filter((rule: Json) => rule.from === undefined)
        .flatMap((rule: Json) => rule.ports.map((p: Json) => p.port));
      expect(open).toEqual([listenerPort]);
      // The admin port only for named peers: the operator pods the dashboard reads replica state with (podSelector),
      // or CIDRs declared as metrics scrapers; never an ipBlock of everything.
      for (const rule of policy.spec.ingress.filter((r: Json) => r.ports.some((p: Json) => p.port === adminPort))) {
        for (const from of rule.from as Json[]) {
          expect(
            from.podSelector !== undefined ||
              (from.ipBlock !== undefined && from.ipBlock.cidr !== '0.0.0.0/0' && from.ipBlock.cidr !== '::/0'),
            `${name}: ${JSON.stringify(from)}`,
          ).toBe(true);
        }
      }
    }
  });

  it('local grid: every pod-local config the runner writes from dist/ passes too', async () => {
    let next = 30000;
    const table = await buildAddressTable(sites, { tcp: async () => next++, gossip: async () => next++ });
    let count = 0;
    for (const site of sites) {
      for (const pod of site.pods.filter((p) => p.deployment.endsWith('-gateway'))) {
        const data = configMapData(site, pod.namespace, `${pod.deployment}-config`)!;
        const doc = parseYaml(data['praxis.yaml']!) as unknown;
        expect(isGatewayConfig(doc)).toBe(true);
        const problems: string[] = [];
        const mounts = [
          { mountPath: '/run/praxis-routing', dir: join(dir, site.site, pod.id, 'overlay') },
          { mountPath: '/etc/praxis', dir: join(dir, site.site, pod.id, 'praxis') },
        ];
        const local = rewriteGatewayConfig(doc as Record<string, unknown>, {
          site: site.site,
          table,
          pod,
          mounts,
          problems,
        });
        // The example's tool server and agent are in-cluster Services the compiled grid names but does not run.
        expect(problems.filter((p) => !/ endpoint \S+\.svc\.cluster\.local:\d+ is served by nothing/.test(p))).toEqual(
          [],
        );
        const where = `${site.site}/${pod.id}`;
        const resolved = resolveConfig(parseConfigText(stringifyYaml(local), `${where}.yaml`), where);
        expectPraxisShape(resolved.config, where);
        // On loopback the admin port needs no override, but the compiled one is kept and still valid.
        expect(resolved.config.admin?.address, where).toMatch(/^127\.0\.0\.1:\d+$/);
        count++;
      }
    }
    expect(count).toBe(6);
  });

  it("the operator's generated consumer config binds admin to loopback and passes", () => {
    const text = generatedConsumerConfig();
    const resolved = resolveConfig(parseConfigText(text, 'generated.yaml'), 'generated.yaml');
    expectPraxisShape(resolved.config, 'generated');
    expect(resolved.config.admin).toEqual({ address: '127.0.0.1:9901' });
    expect(resolved.config.insecure_options).toBeUndefined();
  });
});
