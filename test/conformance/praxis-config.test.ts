// Praxis AI conformance of every praxis.yaml we render (issue 15). One table: each rule Praxis AI applies to a key we
// render, the Praxis source it comes from, an accepted and a refused example. Each row runs against our validator
// (daemons/gateway/config.ts over schemas/gateway/gateway-config.schema.json and schemas/gateway/praxis-rules.ts) and
// against the real gateway process: a refused config exits non-zero with one stderr line naming the key, its path
// and Praxis's reason. Then every compiled praxis.yaml in dist/, every pod-local config the local grid writes from
// them, and the operator's generated consumer config are checked against the same rules.
//
// Sources, read at these versions: praxis-proxy-core, praxis-proxy-filter and praxis-proxy-tls 0.5.3 (crates.io,
// what Praxis AI main builds with), and praxis-proxy/ai filters/src/routing/provider_route.rs at 0f95ac68 and
// filters/src/routing/{credential_inject,intelligent_route}.rs at 0d1c83b1. "stricter" marks a row where Praxis
// accepts and we refuse, on purpose (said why); Praxis never accepts less than the row shows.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { buildAddressTable } from '../../daemons/local-grid/address-table.ts';
import { configMapData, loadCompiledGrid } from '../../daemons/local-grid/compiled-grid.ts';
import { isGatewayConfig, rewriteGatewayConfig } from '../../daemons/local-grid/rewrite.ts';
import { ConfigError, parseConfigText, resolveConfig } from '../../daemons/gateway/config.ts';
import { renderPraxisConfig } from '../../daemons/gossip-operator/controllers/praxis-config.ts';
import { TENANT_FILTERS } from '../../constructs/consumer-gateway-config.ts';
import { extensionKeyPointers, praxisRuleProblems } from '../../schemas/gateway/praxis-rules.ts';
import type { GatewayConfig, ProviderRouteFilter } from '../../schemas/generated/gateway-config.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { makePki, spawnDaemon, waitForPort, type Pki } from '../gateway/helpers.ts';

const run = promisify(execFile);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const dir = mkdtempSync(join(tmpdir(), 'agn-praxis-conformance-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PATHS = ['/v1/chat/completions', '/v1/responses'];
const CRED = { strategy: 'bearer_token', secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } };

/** A provider config Praxis AI accepts (the shape the compiler renders), with file paths filled in by the test. */
function provider(pki: Pick<Pki, 'caPath' | 'providerCertPath' | 'providerKeyPath'>): Json {
  return {
    listeners: [
      {
        name: 'provider',
        address: '127.0.0.1:0',
        filter_chains: ['provider-inference'],
        tls: { certificates: [{ cert_path: pki.providerCertPath, key_path: pki.providerKeyPath }], client_ca: { ca_path: pki.caPath }, client_cert_mode: 'require' },
      },
    ],
    filter_chains: [
      {
        name: 'provider-inference',
        filters: [
          { filter: 'peer_identity_trust', trusted_peers: [{ organization: 'agn-demo-consumers' }] },
          { filter: 'json_body_field', field: 'model', header: 'x-gateway-model-name' },
          {
            filter: 'provider_route',
            provider_id: 'west',
            model_header: 'x-gateway-model-name',
            routes: [
              { candidate_id: '73f63e41', model: 'gpt-4o-mini', cluster: 'backend-openai', paths: [...PATHS], credential: structuredClone(CRED) },
              { candidate_id: 'db228c22', model: 'sim-model-v1', cluster: 'backend-sim', paths: [...PATHS], credential: structuredClone(CRED) },
            ],
          },
          { filter: 'credential_inject', credentials: [{ strategy: 'bearer_token', name: 'cred', namespace: 'grid-system', key: 'token', value: 'conformance-token' }] },
          {
            filter: 'load_balancer',
            clusters: [
              { name: 'backend-openai', endpoints: ['api.openai.com:443'], tls: { sni: 'api.openai.com', verify: true } },
              { name: 'backend-sim', endpoints: ['127.0.0.1:9'] },
            ],
          },
        ],
      },
    ],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 5,
  };
}

/** A consumer config Praxis AI accepts: the admin listener binds every address, so it says allow_public_admin. */
function consumer(): Json {
  return {
    listeners: [{ name: 'consumer', address: '127.0.0.1:0', filter_chains: ['main'] }],
    filter_chains: [
      {
        name: 'main',
        filters: [
          { filter: 'json_body_field', field: 'model', header: 'x-gateway-model-name' },
          { filter: 'openai_responses_format' },
          {
            filter: 'intelligent_route',
            overlay_file: join(dir, 'absent-overlay.json'),
            model_header: 'x-gateway-model-name',
            provider_hop_clusters: ['east-llm-a'],
            expected_overlay_scope: { network: 'grid', gateway: 'consumer-gateway', namespace: 'grid-system', local_site: 'east' },
            reload: { enabled: true, debounce_ms: 250 },
          },
          {
            filter: 'load_balancer',
            clusters: [
              {
                name: 'east-llm-a',
                endpoints: ['provider-gateway.grid-system.svc.cluster.local:8443'],
                tls: { ca: { ca_path: '/etc/praxis/tls/ca.crt' }, client_cert: { cert_path: '/etc/praxis/tls/tls.crt', key_path: '/etc/praxis/tls/tls.key' }, sni: 'gateway.east.grid.example.com', verify: true },
              },
            ],
          },
        ],
      },
    ],
    admin: { address: '0.0.0.0:0' },
    insecure_options: { allow_public_admin: true },
    shutdown_timeout_secs: 5,
  };
}

const FAKE = { caPath: '/etc/praxis/tls/ca.crt', providerCertPath: '/etc/praxis/tls/tls.crt', providerKeyPath: '/etc/praxis/tls/tls.key' };
const route = (doc: Json, i = 0): Json => doc.filter_chains[0].filters[2].routes[i];
const clusters = (doc: Json): Json[] => doc.filter_chains[0].filters.find((f: Json) => f.filter === 'load_balancer').clusters;

interface Rule {
  /** What Praxis refuses, and where it says so. */
  readonly rule: string;
  readonly source: string;
  readonly base: () => Json;
  readonly accept: (doc: Json) => void;
  readonly refuse: (doc: Json) => void;
  /** Our one-line reason: the key, its JSON pointer and Praxis's words. */
  readonly reason: RegExp;
}

const RULES: Rule[] = [
  {
    rule: 'provider_route routes[].paths is required (no default)',
    // provider_route.rs:81-82 `paths: Vec<String>` without #[serde(default)]: serde says "missing field `paths`".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:82',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete route(doc).paths,
    reason: /missing key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0$/,
  },
  {
    rule: 'provider_route paths: 1-64 entries',
    // provider_route.rs:38 MAX_PATHS_PER_ROUTE = 64; validate_route: "provider_route: paths must contain 1-64 entries".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:38 (validate_route)',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = Array.from({ length: 64 }, (_, i) => `/v1/p${i}`)),
    refuse: (doc) => (route(doc).paths = Array.from({ length: 65 }, (_, i) => `/v1/p${i}`)),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have more than 64 items/,
  },
  {
    rule: 'provider_route paths: at least one',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: paths.is_empty())',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = []),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have fewer than 1 items/,
  },
  {
    rule: 'provider_route paths are absolute (and at most 256 bytes)',
    // validate_route: "provider_route: paths must be absolute and bounded" (MAX_VALUE_LEN = 256, provider_route.rs:40).
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:40 (validate_route)',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = ['v1/chat/completions']),
    reason: /key "0" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths\/0: must match pattern|paths\/0: must match pattern/,
  },
  {
    rule: 'provider_route paths are unique',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: "provider_route: duplicate path")',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/responses', '/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = ['/v1/responses', '/v1/responses']),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have duplicate items/,
  },
  {
    rule: 'provider_route paths match exactly: no wildcard (stricter: Praxis would keep `*` as a literal character)',
    // on_request: `route.paths.iter().any(|path| path.as_ref() == ctx.request.uri.path())`. Our old default list had
    // /v1/responses/* as a wildcard; refusing `*` keeps one file from meaning two things.
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (ProviderRouteFilter::on_request)',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/responses', '/v1/responses/resp_1']),
    refuse: (doc) => (route(doc).paths = ['/v1/responses', '/v1/responses/*']),
    reason: /routes\/0\/paths\/1: must match pattern/,
  },
  {
    rule: 'provider_route candidate_id is unique',
    // from_config inserts into a HashMap keyed by candidate_id: "provider_route: duplicate candidate_id".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:166-167',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc, 1).candidate_id = route(doc, 0).candidate_id),
    reason: /key "candidate_id" at \/filter_chains\/0\/filters\/2\/routes\/1\/candidate_id: provider_route: duplicate candidate_id '73f63e41'/,
  },
  {
    rule: 'provider_route provider_id is required',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:51',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete doc.filter_chains[0].filters[2].provider_id,
    reason: /missing key "provider_id" at \/filter_chains\/0\/filters\/2$/,
  },
  {
    rule: 'provider_route and its routes deny unknown keys',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:48,67 (#[serde(deny_unknown_fields)])',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc).weight = 2),
    reason: /unknown key "weight" at \/filter_chains\/0\/filters\/2\/routes\/0$/,
  },
  {
    rule: 'a route credential names Secret, namespace and key',
    // CandidateCredential's secretRef fields are plain Strings that validate_route checks as non-blank.
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: credential.secretRef.namespace/key)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete route(doc).credential.secretRef.namespace,
    reason: /missing key "namespace" at \/filter_chains\/0\/filters\/2\/routes\/0\/credential\/secretRef$/,
  },
  {
    rule: 'credential_inject entries are keyed by name, namespace and key; the env source is env_var',
    source: 'praxis-proxy/ai filters/src/routing/credential_inject.rs (CredentialEntryConfig, deny_unknown_fields)',
    base: () => provider(FAKE),
    accept: (doc) => (doc.filter_chains[0].filters[3].credentials[0] = { name: 'cred', namespace: 'grid-system', key: 'token', env_var: 'AGN_CONFORMANCE_TOKEN' }),
    refuse: (doc) => (doc.filter_chains[0].filters[3].credentials[0] = { name: 'cred', namespace: 'grid-system', key: 'token', env: 'AGN_CONFORMANCE_TOKEN' }),
    reason: /unknown key "env" at \/filter_chains\/0\/filters\/3\/credentials\/0$/,
  },
  {
    rule: 'load_balancer clusters deny unknown keys: there is no authority',
    // Cluster has #[serde(deny_unknown_fields)] and no authority field (a later praxis-proxy-core adds one).
    source: 'praxis-proxy-core 0.5.3 src/config/cluster/mod.rs:39-41; load_balancer/mod.rs:86-91 (praxis-proxy-filter)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (clusters(doc)[0].authority = 'api.openai.com'),
    reason: /unknown key "authority" at \/filter_chains\/0\/filters\/4\/clusters\/0$/,
  },
  {
    rule: 'cluster tls denies unknown keys (seed 000: ca_system is not a field)',
    source: 'praxis-proxy-tls 0.5.3 src/config/cluster.rs:50-52',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (clusters(doc)[0].tls.ca_system = true),
    reason: /unknown key "ca_system" at \/filter_chains\/0\/filters\/4\/clusters\/0\/tls$/,
  },
  {
    rule: 'cluster tls.sni is a DNS host name, never an IP literal or a wildcard',
    source: 'praxis-proxy-tls 0.5.3 src/config/cluster.rs:95-100; src/sni_name.rs:87-113',
    base: () => provider(FAKE),
    accept: (doc) => (clusters(doc)[0].tls.sni = 'api-2.openai.com'),
    refuse: (doc) => (clusters(doc)[0].tls.sni = '10.0.0.4'),
    reason: /key "sni" at \/filter_chains\/0\/filters\/4\/clusters\/0\/tls\/sni: invalid SNI hostname '10\.0\.0\.4'/,
  },
  {
    rule: 'admin binds loopback unless insecure_options.allow_public_admin: true',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:222-240 (validate_admin_address)',
    base: () => consumer(),
    accept: (doc) => (doc.admin.address = '[::1]:0'),
    refuse: (doc) => delete doc.insecure_options,
    reason: /key "address" at \/admin\/address: admin endpoint '0\.0\.0\.0:0' must bind to a loopback address \(127\.0\.0\.1 or \[::1\]\); set insecure_options\.allow_public_admin: true/,
  },
  {
    rule: 'admin address is a socket address (no host names)',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:224-226 ("invalid admin_address")',
    base: () => consumer(),
    accept: (doc) => (doc.admin.address = '127.0.0.1:0'),
    refuse: (doc) => (doc.admin.address = 'localhost:9901'),
    reason: /key "address" at \/admin\/address: must match pattern/,
  },
  {
    rule: 'insecure_options and admin deny unknown keys (stricter for insecure_options: only the option we implement)',
    source: 'praxis-proxy-core 0.5.3 src/config/insecure_options.rs:148-149; src/config/admin.rs:36-37',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.insecure_options.allow_root = true),
    reason: /unknown key "allow_root" at \/insecure_options$/,
  },
  {
    rule: 'listener address is an IP socket address',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/address.rs:13-19',
    base: () => consumer(),
    accept: (doc) => (doc.listeners[0].address = '[::]:0'),
    refuse: (doc) => (doc.listeners[0].address = 'localhost:8080'),
    reason: /key "address" at \/listeners\/0\/address: must match pattern/,
  },
  {
    rule: 'listener name: ASCII letters, digits, _ and -',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/rules.rs:80; src/config/validate/mod.rs:35',
    base: () => consumer(),
    accept: (doc) => (doc.listeners[0].name = 'edge_0-a'),
    refuse: (doc) => (doc.listeners[0].name = 'edge.0'),
    reason: /key "name" at \/listeners\/0\/name: must match pattern/,
  },
  {
    rule: 'two listeners on one port, both wildcard or both specific, overlap',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/rules.rs:52-73',
    base: () => consumer(),
    accept: (doc) => doc.listeners.push({ name: 'second', address: '0.0.0.0:18081', filter_chains: ['main'] }, { name: 'third', address: '127.0.0.1:18082', filter_chains: ['main'] }),
    refuse: (doc) => doc.listeners.push({ name: 'second', address: '127.0.0.2:18081', filter_chains: ['main'] }, { name: 'third', address: '127.0.0.1:18081', filter_chains: ['main'] }),
    reason: /key "address" at \/listeners\/2\/address: listener 'third' address '127\.0\.0\.1:18081' overlaps with another listener on the same port/,
  },
  {
    rule: 'listener tls: one certificate (stricter: several need server_names or default, which we do not implement)',
    source: 'praxis-proxy-tls 0.5.3 src/config/listener.rs:202-204, 338-353',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => doc.listeners[0].tls.certificates.push({ cert_path: '/etc/praxis/tls/b.crt', key_path: '/etc/praxis/tls/b.key' }),
    reason: /key "certificates" at \/listeners\/0\/tls\/certificates: must NOT have more than 1 items/,
  },
  {
    rule: 'TLS file paths have no .. component',
    source: 'praxis-proxy-tls 0.5.3 src/config/certs.rs:66-74, 121-128',
    base: () => provider(FAKE),
    accept: (doc) => (doc.listeners[0].tls.client_ca.ca_path = '/etc/praxis/tls/..ca.crt'),
    refuse: (doc) => (doc.listeners[0].tls.client_ca.ca_path = '/etc/praxis/../tls/ca.crt'),
    reason: /key "ca_path" at \/listeners\/0\/tls\/client_ca\/ca_path: must match pattern/,
  },
  {
    rule: 'shutdown_timeout_secs is 1..3600',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:393-404',
    base: () => consumer(),
    accept: (doc) => (doc.shutdown_timeout_secs = 3600),
    refuse: (doc) => (doc.shutdown_timeout_secs = 0),
    reason: /key "shutdown_timeout_secs" at \/shutdown_timeout_secs: must be >= 1/,
  },
  {
    rule: 'peer_identity_trust entries set at least one match field',
    source: 'praxis-proxy-filter 0.5.3 src/builtins/http/security/peer_identity_trust.rs:176-180',
    base: () => provider(FAKE),
    accept: (doc) => (doc.filter_chains[0].filters[0].trusted_peers = [{ cert_digest: 'a'.repeat(64) }]),
    refuse: (doc) => (doc.filter_chains[0].filters[0].trusted_peers = [{}]),
    reason: /at \/filter_chains\/0\/filters\/0\/trusted_peers\/0: must NOT have fewer than 1 properties/,
  },
  {
    rule: 'json_body_field field and header are non-empty',
    source: 'praxis-proxy-filter 0.5.3 src/builtins/http/payload_processing/json_body_field/config.rs:63-69',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.filter_chains[0].filters[0].header = ''),
    reason: /key "header" at \/filter_chains\/0\/filters\/0\/header: must NOT have fewer than 1 characters/,
  },
  {
    rule: 'enabled session affinity names a header or a cookie; its lifetime is ttl_secs (1..86400)',
    source: 'praxis-proxy/ai filters/src/routing/intelligent_route.rs (SessionAffinityConfig; validate_session_affinity_config)',
    base: () => consumer(),
    accept: (doc) => (doc.filter_chains[0].filters[2].session_affinity = { enabled: true, cookie: 'agn_session', ttl_secs: 86400 }),
    refuse: (doc) => (doc.filter_chains[0].filters[2].session_affinity = { enabled: true, ttl_secs: 60 }),
    reason: /key "session_affinity" at \/filter_chains\/0\/filters\/2\/session_affinity: intelligent_route: session_affinity requires at least one of header or cookie/,
  },
  {
    rule: 'model_header is not in a namespace Praxis reserves (x-praxis-, x-mcp-)',
    source: 'praxis-proxy/ai filters/src/routing/descriptor.rs (validate_model_header)',
    base: () => provider(FAKE),
    accept: (doc) => (doc.filter_chains[0].filters[2].model_header = 'X-Model'),
    refuse: (doc) => (doc.filter_chains[0].filters[2].model_header = 'X-Praxis-Model'),
    reason: /key "model_header" at \/filter_chains\/0\/filters\/2\/model_header: provider_route: model_header must not use a reserved internal header prefix/,
  },
  {
    rule: 'a cluster a route selects is defined by the load_balancer',
    source: 'praxis-proxy-filter 0.5.3 src/pipeline/checks.rs:198-215 (check_misaligned_clusters)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc).cluster = 'backend-missing'),
    reason: /provider_route\.routes\[0\] \(candidate 73f63e41\) names cluster "backend-missing", which load_balancer\.clusters does not define/,
  },
  {
    rule: 'load_balancer needs a cluster-selecting filter before it',
    source: 'praxis-proxy-filter 0.5.3 src/pipeline/checks.rs:54-66 (check_lb_without_cluster_selector)',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => doc.filter_chains[0].filters.splice(2, 1),
    reason: /the pipeline has neither intelligent_route \(consumer\) nor provider_route \(provider\)/,
  },
  {
    rule: 'top-level keys are denied unless Praxis knows them',
    source: 'praxis-proxy-core 0.5.3 src/config/mod.rs:83-85 (#[serde(deny_unknown_fields)] on Config)',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.clusters_extra = []),
    reason: /unknown key "clusters_extra" at \/$/,
  },
];

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
    expect(extensionKeyPointers(extended)).toEqual(['/listeners/0/max_body_bytes', '/filter_chains/0/filters/3/clusters/0/body_idle_timeout_ms', '/admin/metrics_address']);
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
    const result = await run(process.execPath, [join(REPO_ROOT, 'daemons/gateway/main.ts'), '--config', path], { cwd: REPO_ROOT, timeout: 20_000 }).then(
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
    edge.filter_chains[0].filters[3].clusters[0].tls = { ca: { ca_path: pki.caPath }, client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath }, sni: 'gateway.east.grid.example.com', verify: true };
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
    .map((o) => ({ name: `${o.metadata.namespace}/${o.metadata.name}`, config: parseYaml(o.data['praxis.yaml']) as Json }));
}

/** What a compiled config must show beyond passing the validator: the rules above, visibly rendered. */
/**
 * The tenant filters (caller_auth, budget_enforce, usage_meter) are our gateway's extensions: a consumer declared with
 * callerKeys renders them and Praxis AI would refuse that config (README "Praxis compatibility"). They are the only
 * extension keys a config may carry, and exactly where a tenant filter is declared.
 */
function tenantFilterPointers(config: GatewayConfig): string[] {
  return config.filter_chains.flatMap((chain, c) =>
    chain.filters.flatMap((filter, f) => ((TENANT_FILTERS as readonly string[]).includes(filter.filter) ? [`/filter_chains/${c}/filters/${f}/filter`] : [])),
  );
}

function expectPraxisShape(config: GatewayConfig, where: string): void {
  expect(praxisRuleProblems(config), where).toEqual([]);
  expect(extensionKeyPointers(config), where).toEqual(tenantFilterPointers(config));
  // Praxis AI's defaults differ from ours (model_header X-Model, shutdown 30 s): the compiler renders both explicitly.
  expect(config.shutdown_timeout_secs, where).toBeDefined();
  for (const chain of config.filter_chains) {
    for (const filter of chain.filters) {
      if (filter.filter === 'intelligent_route' || filter.filter === 'provider_route') expect(filter.model_header, where).toBeDefined();
      if (filter.filter === 'provider_route') {
        const routes = (filter as ProviderRouteFilter).routes;
        expect(new Set(routes.map((r) => r.candidate_id)).size, where).toBe(routes.length);
        for (const r of routes) {
          expect(r.paths.length, where).toBeGreaterThanOrEqual(1);
          expect(r.paths.length, where).toBeLessThanOrEqual(64);
          for (const p of r.paths) expect(p, where).toMatch(/^\/[^*]*$/);
        }
      }
      if (filter.filter === 'load_balancer') for (const c of filter.clusters) expect(Object.keys(c), where).not.toContain('authority');
    }
  }
}

describe('every config we render', () => {
  const sites = loadCompiledGrid(join(REPO_ROOT, 'dist'));
  const compiled = sites.flatMap((site) => gatewayConfigsOf(site.objects as unknown as Json[]).map((c) => ({ ...c, site })));

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
      const tenant = resolved.config.filter_chains.flatMap((chain) => chain.filters.map((f) => f.filter)).filter((f) => (TENANT_FILTERS as readonly string[]).includes(f));
      expect(tenant, where).toEqual(`${site.site}:${name}` === 'east:grid-system/consumer-gateway-config' ? ['caller_auth', 'budget_enforce', 'usage_meter'] : []);
    }
  });

  it('dist/: a public admin address comes with a NetworkPolicy that opens only the listener to every source', () => {
    for (const { site, name, config } of compiled) {
      const admin = config.admin.address as string;
      if (admin.startsWith('127.') || admin.startsWith('[::1]')) continue;
      expect(config.insecure_options, name).toEqual({ allow_public_admin: true });
      const deployment = name.split('/')[1]!.replace(/-config$/, '');
      const policy = (site.objects as unknown as Json[]).find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === deployment);
      expect(policy, `${site.site} NetworkPolicy ${deployment}`).toBeDefined();
      const pod = (site.objects as unknown as Json[]).find((o) => o.kind === 'Deployment' && o.metadata.name === deployment);
      expect(policy.spec.podSelector.matchLabels).toEqual(pod.spec.selector.matchLabels);
      expect(policy.spec.policyTypes).toEqual(['Ingress']);
      const adminPort = Number(admin.slice(admin.lastIndexOf(':') + 1));
      const listenerPort = Number((config.listeners[0].address as string).split(':').pop());
      // A rule without `from` admits every source: only the listener port may have one.
      const open = policy.spec.ingress.filter((rule: Json) => rule.from === undefined).flatMap((rule: Json) => rule.ports.map((p: Json) => p.port));
      expect(open).toEqual([listenerPort]);
      expect(policy.spec.ingress.flatMap((rule: Json) => rule.ports.map((p: Json) => p.port))).not.toContain(adminPort);
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
        const local = rewriteGatewayConfig(doc as Record<string, unknown>, { site: site.site, table, pod, mounts, problems });
        expect(problems).toEqual([]);
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
    const result = renderPraxisConfig({
      network: 'grid',
      gateway: { name: 'edge', namespace: 'grid-system', siteName: 'site-a' },
      praxis: {
        generate: true,
        clusterEndpoints: [
          { cluster: 'local', address: '127.0.0.1:8000', transport: { mode: 'plaintext' } },
          { cluster: 'site-b', address: '10.0.0.4:30080', transport: { mode: 'mutual_tls', sni: 'site-b.grid.internal' } },
        ],
      },
      candidates: [{ kind: 'inference_model', name: 'qwen3', site: 'site-a', cluster: 'local', fresh: true }],
    });
    if (!result.ok) throw new Error(result.message);
    const resolved = resolveConfig(parseConfigText(result.text, 'generated.yaml'), 'generated.yaml');
    expectPraxisShape(resolved.config, 'generated');
    expect(resolved.config.admin).toEqual({ address: '127.0.0.1:9901' });
    expect(resolved.config.insecure_options).toBeUndefined();
  });
});
