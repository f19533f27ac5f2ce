// The runner's translation of the compiled grid: one address table for every name the manifests use, gateway
// configs rewritten for loopback, the Secrets made real, and clear errors for manifests it cannot translate.
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { AddressTable, buildAddressTable } from '../../daemons/local-grid/address-table.ts';
import {
  CompiledGridError,
  compileSite,
  configMapData,
  loadCompiledGrid,
} from '../../daemons/local-grid/compiled-grid.ts';
import { ensureGridPki } from '../../daemons/local-grid/pki.ts';
import { rewriteGatewayConfig, rewriteValue } from '../../daemons/local-grid/rewrite.ts';
import { PortPool } from '../../daemons/local-grid/ports.ts';
import { materializePod } from '../../daemons/local-grid/pods.ts';
import { siteSecrets } from '../../daemons/local-grid/secrets.ts';
import {
  demoKeysFile,
  demoTenants,
  ensureDemoCallerKeys,
  requiresCallerKeys,
} from '../../daemons/local-grid/demo-keys.ts';
import { hashCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-translate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function counter(): { tcp: () => Promise<number>; gossip: () => Promise<number> } {
  let next = 20000;
  return { tcp: async () => next++, gossip: async () => next++ };
}

const sites = loadCompiledGrid(join(REPO_ROOT, 'dist'));
const east = sites.find((s) => s.site === 'east')!;
const west = sites.find((s) => s.site === 'west')!;
const configMapsOf = (site: typeof east) =>
  site.objects
    .filter((o) => o.kind === 'ConfigMap')
    .flatMap((o) =>
      Object.values((o['data'] ?? {}) as Record<string, string>).map(
        (text) => parseYaml(text) as Record<string, unknown>,
      ),
    )
    .filter((d) => d !== null && typeof d === 'object');

describe('compiled grid', () => {
  it('reads one site per manifest file and one pod per replica', () => {
    expect(sites.map((s) => s.site)).toEqual(['east', 'west']);
    expect(east.pods.filter((p) => p.deployment === 'consumer-gateway').map((p) => p.id)).toEqual([
      'consumer-gateway-0',
      'consumer-gateway-1',
    ]);
    expect(east.pods.find((p) => p.deployment === 'gossip-operator')?.id).toBe('gossip-operator');
  });

  it('refuses a directory it cannot use, saying what to do', () => {
    expect(() => loadCompiledGrid(join(dir, 'missing'))).toThrow(/cannot read .*missing\/: run "npx cdk8s synth"/);
    const crdsOnly = join(dir, 'crds-only');
    rmSync(crdsOnly, { recursive: true, force: true });
    mkdirSync(crdsOnly);
    writeFileSync(join(crdsOnly, 'crds.k8s.yaml'), readFileSync(join(REPO_ROOT, 'dist', 'crds.k8s.yaml')));
    expect(() => loadCompiledGrid(crdsOnly)).toThrow(CompiledGridError);
    writeFileSync(join(crdsOnly, 'broken.yaml'), 'kind: [unclosed\n');
    expect(() => loadCompiledGrid(crdsOnly)).toThrow(/broken\.yaml document 0/);
  });
});

describe('address table', () => {
  it('maps Service names per site, advertised names grid-wide, and an external API to a stand-in', async () => {
    const table = await buildAddressTable(sites, counter());
    const providerGateway = table.resolve('east', 'provider-gateway.grid-system.svc.cluster.local:8443')!;
    expect(providerGateway.endpoints).toHaveLength(2); // two replicas behind one Service
    for (const name of [
      'provider-gateway:8443',
      'provider-gateway.grid-system:8443',
      'provider-gateway.grid-system.svc:8443',
    ]) {
      expect(table.resolve('east', name)?.endpoints).toEqual(providerGateway.endpoints);
    }
    // Each site is its own cluster: the same Service name means a different pod at west.
    expect(table.resolve('west', 'provider-gateway.grid-system.svc.cluster.local:8443')!.endpoints).not.toEqual(
      providerGateway.endpoints,
    );
    expect(table.resolve('west', 'sim-east-llm-a.grid-system.svc.cluster.local:8080')).toBeUndefined();
    // Advertised addresses reach the other site's Service from anywhere.
    expect(table.resolve('east', 'gateway.west.grid.example.com:8443')?.site).toBe('west');
    const westOperator = west.pods.find((p) => p.deployment === 'gossip-operator')!;
    expect(table.resolve('east', 'gossip.west.grid.example.com:7946')?.endpoints).toEqual([
      `127.0.0.1:${table.podPort(westOperator, 7946)}`,
    ]);
    expect(table.standIns).toEqual([
      expect.objectContaining({
        site: 'west',
        provider: 'openai-west',
        replaces: 'api.openai.com:443',
        models: ['gpt-4o-mini'],
      }),
    ]);
    expect(table.resolve('east', 'api.openai.com:443')?.standIn).toBe('openai-west');
    expect(() => table.podPort(westOperator, 1234)).toThrow(/container port 1234 has no local port/);
  });

  it('says which advertised address it cannot place', async () => {
    const objects = structuredClone(east.objects) as typeof east.objects;
    const operator = objects.find(
      (o) => o.kind === 'Deployment' && o.metadata.name === 'gossip-operator',
    )! as unknown as { spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } } };
    operator.spec.template.spec.containers[0]!.env.find((e) => e.name === 'GRID_GATEWAY_ADDRESS')!.value =
      'gateway.east.grid.example.com:9999';
    await expect(buildAddressTable([compileSite('east', 'east.yaml', objects)], counter())).rejects.toThrow(
      /site east: GRID_GATEWAY_ADDRESS=gateway\.east\.grid\.example\.com:9999 matches 0 Services with port 9999/,
    );
  });
});

describe('rewriting', () => {
  it("rewrites a consumer's praxis.yaml for its pod: binds, endpoints, paths; SNI stays", async () => {
    const table = await buildAddressTable(sites, counter());
    const pod = east.pods.find((p) => p.id === 'consumer-gateway-1')!;
    const config = parseYaml(configMapData(east, 'grid-system', 'consumer-gateway-config')!['praxis.yaml']!) as Record<
      string,
      unknown
    >;
    const problems: string[] = [];
    const out = rewriteGatewayConfig(config, {
      site: 'east',
      table,
      pod,
      mounts: [
        { mountPath: '/run/praxis-routing', dir: '/x/overlay' },
        { mountPath: '/etc/praxis', dir: '/x/praxis' },
      ],
      problems,
    });
    const text = JSON.stringify(out);
    expect(text).not.toContain('0.0.0.0');
    expect(text).not.toContain('svc.cluster.local');
    expect(text).not.toContain('"/etc/praxis');
    const listener = (out['listeners'] as { address: string }[])[0]!;
    expect(listener.address).toBe(`127.0.0.1:${table.podPort(pod, 8080)}`);
    expect(text).toContain('"overlay_file":"/x/overlay/routing-overlay.json"');
    expect(text).toContain('"ca_path":"/x/praxis/tls/ca.crt"');
    expect(text).toContain('"sni":"gateway.west.grid.example.com"');
    const clusters = (
      out['filter_chains'] as { filters: { filter: string; clusters?: { name: string; endpoints: string[] }[] }[] }[]
    )[0]!.filters.find((f) => f.filter === 'load_balancer')!.clusters!;
    expect(clusters.find((c) => c.name === 'east-llm-a')!.endpoints).toEqual(
      table.resolve('east', 'provider-gateway:8443')!.endpoints,
    );
    expect(problems).toEqual([]);
  });

  it('points the external API cluster at its stand-in, without TLS, and reports an endpoint nothing serves', async () => {
    const table = await buildAddressTable(sites, counter());
    const pod = west.pods.find((p) => p.id === 'provider-gateway-0')!;
    const config = parseYaml(configMapData(west, 'grid-system', 'provider-gateway-config')!['praxis.yaml']!) as Record<
      string,
      unknown
    >;
    const problems: string[] = [];
    const out = rewriteGatewayConfig(config, { site: 'west', table, pod, mounts: [], problems });
    const lb = (
      out['filter_chains'] as { filters: { filter: string; clusters?: Record<string, unknown>[] }[] }[]
    )[0]!.filters.find((f) => f.filter === 'load_balancer')!;
    const openai = lb.clusters!.find((c) => c['name'] === 'backend-openai-west')!;
    expect(openai['endpoints']).toEqual([`127.0.0.1:${table.standIns[0]!.port}`]);
    expect(openai['tls']).toBeUndefined();
    // The example's A2A agent is an in-cluster Service the compiled grid names but does not run.
    expect(problems.splice(0)).toEqual([
      'cluster agent-backend-west-claims-agent: endpoint claims-agent.agents.svc.cluster.local:8080 is served by nothing in the compiled grid',
    ]);
    const broken = structuredClone(config) as {
      filter_chains: { filters: { filter: string; clusters?: { name: string; endpoints: string[] }[] }[] }[];
    };
    broken.filter_chains[0]!.filters.find((f) => f.filter === 'load_balancer')!.clusters!.find(
      (c) => c.name === 'backend-west-llm',
    )!.endpoints = ['nowhere.example:80'];
    rewriteGatewayConfig(broken as unknown as Record<string, unknown>, {
      site: 'west',
      table,
      pod,
      mounts: [],
      problems,
    });
    expect(problems).toEqual([
      'cluster agent-backend-west-claims-agent: endpoint claims-agent.agents.svc.cluster.local:8080 is served by nothing in the compiled grid',
      'cluster backend-west-llm: endpoint nowhere.example:80 is served by nothing in the compiled grid',
    ]);
  });

  it('rewrites provider URLs and leaves what it does not know alone', async () => {
    const table = await buildAddressTable(sites, counter());
    const ctx = { site: 'east', table, mounts: [], problems: [] };
    expect(rewriteValue('http://sim-east-llm-a.grid-system.svc.cluster.local:8080', ctx)).toMatch(
      /^http:\/\/127\.0\.0\.1:\d+$/,
    );
    expect(rewriteValue('https://api.openai.com/v1', ctx)).toBe(`http://127.0.0.1:${table.standIns[0]!.port}/v1`);
    expect(rewriteValue('http://db-tools.tools.svc.cluster.local:8080', ctx)).toBe(
      'http://db-tools.tools.svc.cluster.local:8080',
    );
    expect(rewriteValue('/health', ctx)).toBe('/health');
    expect(AddressTable.key('Gateway.EAST.example', 443)).toBe('gateway.east.example:443');
  });
});

describe('secrets and certificates', () => {
  it('issues what the manifests trust, and keeps tokens across starts', async () => {
    const pki = await ensureGridPki(join(dir, 'pki'), ['east', 'west'], {
      consumerOrganization: 'agn-demo-consumers',
      providerSans: { east: ['gateway.east.grid.example.com'] },
    });
    const eastPki = pki.sites[0]!;
    expect(new X509Certificate(readFileSync(eastPki.consumerClient.certFile)).subject).toContain(
      'O=agn-demo-consumers',
    );
    expect(new X509Certificate(readFileSync(eastPki.providerGateway.certFile)).subjectAltName).toContain(
      'DNS:gateway.east.grid.example.com',
    );
    expect(new X509Certificate(readFileSync(eastPki.siteIdentity.certFile)).subject).toContain('CN=east');
    // A manifest asking for another name gets a new certificate; the same ask reuses the old one.
    const again = await ensureGridPki(join(dir, 'pki'), ['east', 'west'], {
      consumerOrganization: 'agn-demo-consumers',
      providerSans: { east: ['gateway.east.grid.example.com'] },
    });
    expect(again.sites[0]!.providerGateway.fingerprint).toBe(eastPki.providerGateway.fingerprint);
    const renamed = await ensureGridPki(join(dir, 'pki'), ['east', 'west'], {
      consumerOrganization: 'agn-demo-consumers',
      providerSans: { east: ['edge.east.example'] },
    });
    expect(renamed.sites[0]!.providerGateway.fingerprint).not.toBe(eastPki.providerGateway.fingerprint);

    const swimKey = Buffer.alloc(32, 7);
    const first = siteSecrets(east, renamed, swimKey, () => undefined);
    const byName = (list: typeof first, name: string) => list.find((s) => s.name === name)!;
    expect(first.map((s) => s.name)).toEqual(
      expect.arrayContaining([
        'swim-key',
        'grid-ca',
        'grid-site-cert',
        'provider-gateway-tls',
        'consumer-gateway-tls',
        'east-llm-a-credential',
        'db-tools-credential',
      ]),
    );
    expect(byName(first, 'swim-key').data['key']).toEqual(swimKey);
    expect(byName(first, 'provider-gateway-tls').data['tls.crt']!.toString()).toBe(
      readFileSync(renamed.sites[0]!.providerGateway.certFile, 'utf8'),
    );
    expect(byName(first, 'consumer-gateway-tls').data['tls.crt']!.toString()).toBe(
      readFileSync(renamed.sites[0]!.consumerClient.certFile, 'utf8'),
    );
    const tokenA = byName(first, 'east-llm-a-credential').data['token']!;
    expect(tokenA.length).toBe(32);
    expect(byName(first, 'east-llm-b-credential').data['token']).not.toEqual(tokenA);
    const second = siteSecrets(east, renamed, swimKey, (_ns, name) => first.find((s) => s.name === name)?.data);
    expect(byName(second, 'east-llm-a-credential').data['token']).toEqual(tokenA);
    expect(byName(second, 'east-llm-a-credential').tokenKeys).toEqual(['token']);

    // east's consumer requires caller keys: one demo key per budgetPolicy tenant, kept 0600 and reused; the keys
    // Secret carries exactly their hashes (no key), not a random token.
    expect(requiresCallerKeys(configMapsOf(east))).toBe(true);
    expect(requiresCallerKeys(configMapsOf(west))).toBe(false);
    expect(demoTenants(sites)).toEqual(['team-a', 'team-b']);
    const keys = ensureDemoCallerKeys(join(dir, 'state'), demoTenants(sites));
    expect(keys.map((k) => k.tenant)).toEqual(['team-a', 'team-b']);
    for (const k of keys) expect(hashCallerKey(k.key, k.entry.salt)).toBe(k.entry.hash);
    expect(statSync(join(dir, 'state', 'caller-keys', 'demo-keys.json')).mode & 0o777).toBe(0o600);
    expect(ensureDemoCallerKeys(join(dir, 'state'), demoTenants(sites)).map((k) => k.key)).toEqual(
      keys.map((k) => k.key),
    );
    const withKeys = siteSecrets(east, renamed, swimKey, () => undefined, demoKeysFile(keys));
    const keysSecret = byName(withKeys, 'consumer-caller-keys');
    expect(JSON.parse(keysSecret.data['caller-keys.json']!.toString())).toEqual({ keys: keys.map((k) => k.entry) });
    expect(keys.some((k) => keysSecret.data['caller-keys.json']!.toString().includes(k.key))).toBe(false);
    expect(keysSecret.tokenKeys).toEqual([]);
    // A damaged keys file in the state directory is replaced by fresh keys, never half-used.
    writeFileSync(join(dir, 'state', 'caller-keys', 'demo-keys.json'), '{"keys": [{"tenant": "team-a"}]}');
    const fresh = ensureDemoCallerKeys(join(dir, 'state'), ['team-a']);
    expect(fresh[0]!.key).not.toBe(keys[0]!.key);
    expect(hashCallerKey(fresh[0]!.key, fresh[0]!.entry.salt)).toBe(fresh[0]!.entry.hash);
  });
});

describe('the dashboard token of a site compiled with token access', () => {
  it('is generated like a credential, kept across starts, and is the file the loopback operator reads', async () => {
    const pki = await ensureGridPki(join(dir, 'pki-dashboard'), ['east', 'west'], {});
    const swimKey = Buffer.alloc(32, 7);
    const first = siteSecrets(east, pki, swimKey, () => undefined);
    const secret = first.find((s) => s.name === 'grid-dashboard-token')!;
    expect(secret.namespace).toBe('grid-system');
    expect(secret.data['token']!.toString()).toMatch(/^[A-Za-z0-9_-]{32}$/);
    // A token: the leak checks (LocalGrid.tokens) look for it.
    expect(secret.tokenKeys).toEqual(['token']);
    const second = siteSecrets(east, pki, swimKey, (_ns, name) => first.find((s) => s.name === name)?.data);
    expect(second.find((s) => s.name === 'grid-dashboard-token')!.data['token']).toEqual(secret.data['token']);
    expect(siteSecrets(west, pki, swimKey, () => undefined).some((s) => s.name === 'grid-dashboard-token')).toBe(false);

    const table = await buildAddressTable(sites, counter());
    const plan = east.pods.find((p) => p.deployment === 'gossip-operator')!;
    const pod = materializePod(east, plan, join(dir, 'grid'), {
      repoRoot: REPO_ROOT,
      table,
      storeDir: join(dir, 'store'),
      manifestsDir: join(dir, 'manifests'),
      secrets: first,
      operatorEnv: {},
    });
    const operator = pod.processes.find((p) => p.role === 'operator')!;
    expect(operator.env['GRID_DASHBOARD']).toBe('token');
    expect(operator.adminAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    const file = operator.env['GRID_DASHBOARD_TOKEN_FILE']!;
    expect(file.startsWith(pod.dir)).toBe(true);
    expect(readFileSync(file)).toEqual(secret.data['token']);
    expect(statSync(file).mode & 0o077).toBe(0);
  });
});

describe('port pool', () => {
  it('never hands out the same port twice in one grid', async () => {
    const pool = new PortPool();
    const ports = [];
    for (let i = 0; i < 40; i++) ports.push(i % 4 === 0 ? await pool.gossip() : await pool.tcp());
    expect(new Set(ports).size).toBe(40);
  });
});
