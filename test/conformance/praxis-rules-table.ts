// The Praxis AI conformance table: each rule Praxis AI applies to a key we render, the Praxis source it
// comes from, an accepted and a refused example. praxis-config.test.ts runs it against our validator and our gateway;
// test/praxis/real-praxis.test.ts runs the rows Praxis's published crates enforce against the real Praxis parser.
//
// Sources, read at these versions: praxis-proxy-core, praxis-proxy-filter and praxis-proxy-tls 0.5.3 (crates.io,
// what Praxis AI main builds with), and praxis-proxy/ai filters/src/routing/provider_route.rs at 0f95ac68 and
// filters/src/routing/{credential_inject,intelligent_route}.rs at 0d1c83b1. "stricter" marks a row where Praxis
// accepts and we refuse, on purpose (said why); Praxis never accepts less than the row shows.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { renderPraxisConfig } from '../../daemons/gossip-operator/controllers/praxis-config.ts';
import type { Pki } from '../gateway/helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

/** Scratch directory of this table's examples (the consumer's overlay path points into it); callers remove it. */
export const dir = mkdtempSync(join(tmpdir(), 'agn-praxis-conformance-'));

const PATHS = ['/v1/chat/completions', '/v1/responses'];
const CRED = { strategy: 'bearer_token', secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } };

/** A provider config Praxis AI accepts (the shape the compiler renders), with file paths filled in by the test. */
export function provider(pki: Pick<Pki, 'caPath' | 'providerCertPath' | 'providerKeyPath'>): Json {
  return {
    listeners: [
      {
        name: 'provider',
        address: '127.0.0.1:0',
        filter_chains: ['provider-inference'],
        tls: {
          certificates: [{ cert_path: pki.providerCertPath, key_path: pki.providerKeyPath }],
          client_ca: { ca_path: pki.caPath },
          client_cert_mode: 'require',
        },
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
              {
                candidate_id: '73f63e41',
                model: 'gpt-4o-mini',
                cluster: 'backend-openai',
                paths: [...PATHS],
                credential: structuredClone(CRED),
              },
              {
                candidate_id: 'db228c22',
                model: 'sim-model-v1',
                cluster: 'backend-sim',
                paths: [...PATHS],
                credential: structuredClone(CRED),
              },
            ],
          },
          {
            filter: 'credential_inject',
            credentials: [
              {
                strategy: 'bearer_token',
                name: 'cred',
                namespace: 'grid-system',
                key: 'token',
                value: 'conformance-token',
              },
            ],
          },
          {
            filter: 'load_balancer',
            clusters: [
              {
                name: 'backend-openai',
                endpoints: ['api.openai.com:443'],
                tls: { sni: 'api.openai.com', verify: true },
              },
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
export function consumer(): Json {
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
            expected_overlay_scope: {
              network: 'grid',
              gateway: 'consumer-gateway',
              namespace: 'grid-system',
              local_site: 'east',
            },
            reload: { enabled: true, debounce_ms: 250 },
          },
          {
            filter: 'load_balancer',
            clusters: [
              {
                name: 'east-llm-a',
                endpoints: ['provider-gateway.grid-system.svc.cluster.local:8443'],
                tls: {
                  ca: { ca_path: '/etc/praxis/tls/ca.crt' },
                  client_cert: { cert_path: '/etc/praxis/tls/tls.crt', key_path: '/etc/praxis/tls/tls.key' },
                  sni: 'gateway.east.grid.example.com',
                  verify: true,
                },
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

export const FAKE = {
  caPath: '/etc/praxis/tls/ca.crt',
  providerCertPath: '/etc/praxis/tls/tls.crt',
  providerKeyPath: '/etc/praxis/tls/tls.key',
};
export const route = (doc: Json, i = 0): Json => doc.filter_chains[0].filters[2].routes[i];
export const clusters = (doc: Json): Json[] =>
  doc.filter_chains[0].filters.find((f: Json) => f.filter === 'load_balancer').clusters;

/** The operator's generated consumer config (GridNetwork consumerGateways[].praxisConfig.generate) for a two-site network. */
export function generatedConsumerConfig(): string {
  const result = renderPraxisConfig({
    network: 'grid',
    gateway: { name: 'edge', namespace: 'grid-system', siteName: 'site-a' },
    praxis: {
      generate: true,
      clusterEndpoints: [
        { cluster: 'local', address: '127.0.0.1:8000', transport: { mode: 'plaintext' } },
        {
          cluster: 'site-b',
          address: '10.0.0.4:30080',
          transport: { mode: 'mutual_tls', sni: 'site-b.grid.internal' },
        },
      ],
    },
    candidates: [{ kind: 'inference_model', name: 'qwen3', site: 'site-a', cluster: 'local', fresh: true }],
  });
  if (!result.ok) throw new Error(result.message);
  return result.text;
}

export interface Rule {
  /** What Praxis refuses, and where it says so. */
  readonly rule: string;
  readonly source: string;
  readonly base: () => Json;
  readonly accept: (doc: Json) => void;
  readonly refuse: (doc: Json) => void;
  /** Our one-line reason: the key, its JSON pointer and Praxis's words. */
  readonly reason: RegExp;
  /**
   * What the real Praxis parser (test/praxis: praxis-proxy 0.5.3 `--validate`) says about the refused example: its
   * error, 'accepts' where Praxis accepts it (a "stricter" row, or a check Praxis does not run on this shape), or 'ai'
   * where the rule lives in a Praxis AI filter, which the published crates do not contain.
   */
  readonly praxis: RegExp | 'accepts' | 'ai';
}

export const RULES: Rule[] = [
  {
    rule: 'provider_route routes[].paths is required (no default)',
    // provider_route.rs:81-82 `paths: Vec<String>` without #[serde(default)]: serde says "missing field `paths`".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:82',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete route(doc).paths,
    reason: /missing key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0$/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route paths: 1-64 entries',
    // provider_route.rs:38 MAX_PATHS_PER_ROUTE = 64; validate_route: "provider_route: paths must contain 1-64 entries".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:38 (validate_route)',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = Array.from({ length: 64 }, (_, i) => `/v1/p${i}`)),
    refuse: (doc) => (route(doc).paths = Array.from({ length: 65 }, (_, i) => `/v1/p${i}`)),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have more than 64 items/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route paths: at least one',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: paths.is_empty())',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = []),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have fewer than 1 items/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route paths are absolute (and at most 256 bytes)',
    // validate_route: "provider_route: paths must be absolute and bounded" (MAX_VALUE_LEN = 256, provider_route.rs:40).
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:40 (validate_route)',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = ['v1/chat/completions']),
    reason:
      /key "0" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths\/0: must match pattern|paths\/0: must match pattern/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route paths are unique',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: "provider_route: duplicate path")',
    base: () => provider(FAKE),
    accept: (doc) => (route(doc).paths = ['/v1/responses', '/v1/chat/completions']),
    refuse: (doc) => (route(doc).paths = ['/v1/responses', '/v1/responses']),
    reason: /key "paths" at \/filter_chains\/0\/filters\/2\/routes\/0\/paths: must NOT have duplicate items/,
    praxis: 'ai',
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
    praxis: 'ai',
  },
  {
    rule: 'provider_route candidate_id is unique',
    // from_config inserts into a HashMap keyed by candidate_id: "provider_route: duplicate candidate_id".
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:166-167',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc, 1).candidate_id = route(doc, 0).candidate_id),
    reason:
      /key "candidate_id" at \/filter_chains\/0\/filters\/2\/routes\/1\/candidate_id: provider_route: duplicate candidate_id '73f63e41'/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route provider_id is required',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:51',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete doc.filter_chains[0].filters[2].provider_id,
    reason: /missing key "provider_id" at \/filter_chains\/0\/filters\/2$/,
    praxis: 'ai',
  },
  {
    rule: 'provider_route and its routes deny unknown keys',
    source: 'praxis-proxy/ai filters/src/routing/provider_route.rs:48,67 (#[serde(deny_unknown_fields)])',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc).weight = 2),
    reason: /unknown key "weight" at \/filter_chains\/0\/filters\/2\/routes\/0$/,
    praxis: 'ai',
  },
  {
    rule: 'a route credential names Secret, namespace and key',
    // CandidateCredential's secretRef fields are plain Strings that validate_route checks as non-blank.
    source:
      'praxis-proxy/ai filters/src/routing/provider_route.rs (validate_route: credential.secretRef.namespace/key)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => delete route(doc).credential.secretRef.namespace,
    reason: /missing key "namespace" at \/filter_chains\/0\/filters\/2\/routes\/0\/credential\/secretRef$/,
    praxis: 'ai',
  },
  {
    rule: 'credential_inject entries are keyed by name, namespace and key; the env source is env_var',
    source: 'praxis-proxy/ai filters/src/routing/credential_inject.rs (CredentialEntryConfig, deny_unknown_fields)',
    base: () => provider(FAKE),
    accept: (doc) =>
      (doc.filter_chains[0].filters[3].credentials[0] = {
        name: 'cred',
        namespace: 'grid-system',
        key: 'token',
        env_var: 'AGN_CONFORMANCE_TOKEN',
      }),
    refuse: (doc) =>
      (doc.filter_chains[0].filters[3].credentials[0] = {
        name: 'cred',
        namespace: 'grid-system',
        key: 'token',
        env: 'AGN_CONFORMANCE_TOKEN',
      }),
    reason: /unknown key "env" at \/filter_chains\/0\/filters\/3\/credentials\/0$/,
    praxis: 'ai',
  },
  {
    rule: 'load_balancer clusters deny unknown keys: there is no authority',
    // Cluster has #[serde(deny_unknown_fields)] and no authority field (a later praxis-proxy-core adds one).
    source: 'praxis-proxy-core 0.5.3 src/config/cluster/mod.rs:39-41; load_balancer/mod.rs:86-91 (praxis-proxy-filter)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (clusters(doc)[0].authority = 'api.openai.com'),
    reason: /unknown key "authority" at \/filter_chains\/0\/filters\/4\/clusters\/0$/,
    praxis: /load_balancer: unknown field `authority`, expected one of `name`, /,
  },
  {
    rule: 'cluster tls denies unknown keys (seed 000: ca_system is not a field)',
    source: 'praxis-proxy-tls 0.5.3 src/config/cluster.rs:50-52',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (clusters(doc)[0].tls.ca_system = true),
    reason: /unknown key "ca_system" at \/filter_chains\/0\/filters\/4\/clusters\/0\/tls$/,
    praxis: /load_balancer: unknown field `ca_system`, expected one of `ca`, `client_cert`, `sni`, `verify`$/,
  },
  {
    rule: 'cluster tls.sni is a DNS host name, never an IP literal or a wildcard',
    source: 'praxis-proxy-tls 0.5.3 src/config/cluster.rs:95-100; src/sni_name.rs:87-113',
    base: () => provider(FAKE),
    accept: (doc) => (clusters(doc)[0].tls.sni = 'api-2.openai.com'),
    refuse: (doc) => (clusters(doc)[0].tls.sni = '10.0.0.4'),
    reason: /key "sni" at \/filter_chains\/0\/filters\/4\/clusters\/0\/tls\/sni: invalid SNI hostname '10\.0\.0\.4'/,
    praxis: /load_balancer: sni must be a valid DNS hostname: 10\.0\.0\.4$/,
  },
  {
    rule: 'admin binds loopback unless insecure_options.allow_public_admin: true',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:222-240 (validate_admin_address)',
    base: () => consumer(),
    accept: (doc) => (doc.admin.address = '[::1]:0'),
    refuse: (doc) => delete doc.insecure_options,
    reason:
      /key "address" at \/admin\/address: admin endpoint '0\.0\.0\.0:0' must bind to a loopback address \(127\.0\.0\.1 or \[::1\]\); set insecure_options\.allow_public_admin: true/,
    praxis:
      /config: admin endpoint '0\.0\.0\.0:0' must bind to a loopback address \(127\.0\.0\.1 or \[::1\]\); set insecure_options\.allow_public_admin: true/,
  },
  {
    rule: 'admin address is a socket address (no host names)',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:224-226 ("invalid admin_address")',
    base: () => consumer(),
    accept: (doc) => (doc.admin.address = '127.0.0.1:0'),
    refuse: (doc) => (doc.admin.address = 'localhost:9901'),
    reason: /key "address" at \/admin\/address: must match pattern/,
    praxis: /config: invalid admin_address 'localhost:9901'$/,
  },
  {
    rule: 'insecure_options and admin deny unknown keys (stricter for insecure_options: only the option we implement)',
    source: 'praxis-proxy-core 0.5.3 src/config/insecure_options.rs:148-149; src/config/admin.rs:36-37',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.insecure_options.allow_root = true),
    reason: /unknown key "allow_root" at \/insecure_options$/,
    praxis: 'accepts',
  },
  {
    rule: 'listener address is an IP socket address',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/address.rs:13-19',
    base: () => consumer(),
    accept: (doc) => (doc.listeners[0].address = '[::]:0'),
    refuse: (doc) => (doc.listeners[0].address = 'localhost:8080'),
    reason: /key "address" at \/listeners\/0\/address: must match pattern/,
    praxis: /config: listener 'consumer': invalid socket address 'localhost:8080'$/,
  },
  {
    rule: 'listener name: ASCII letters, digits, _ and -',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/rules.rs:80; src/config/validate/mod.rs:35',
    base: () => consumer(),
    accept: (doc) => (doc.listeners[0].name = 'edge_0-a'),
    refuse: (doc) => (doc.listeners[0].name = 'edge.0'),
    reason: /key "name" at \/listeners\/0\/name: must match pattern/,
    praxis: /config: listener name 'edge\.0' must contain only ASCII alphanumeric, '_', or '-'$/,
  },
  {
    rule: 'two listeners on one port, both wildcard or both specific, overlap',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/listener/rules.rs:52-73',
    base: () => consumer(),
    accept: (doc) =>
      doc.listeners.push(
        { name: 'second', address: '0.0.0.0:18081', filter_chains: ['main'] },
        { name: 'third', address: '127.0.0.1:18082', filter_chains: ['main'] },
      ),
    refuse: (doc) =>
      doc.listeners.push(
        { name: 'second', address: '127.0.0.2:18081', filter_chains: ['main'] },
        { name: 'third', address: '127.0.0.1:18081', filter_chains: ['main'] },
      ),
    reason:
      /key "address" at \/listeners\/2\/address: listener 'third' address '127\.0\.0\.1:18081' overlaps with another listener on the same port/,
    praxis: /config: listener 'third' address '127\.0\.0\.1:18081' overlaps with another listener on the same port$/,
  },
  {
    rule: 'listener tls: one certificate (stricter: several need server_names or default, which we do not implement)',
    source: 'praxis-proxy-tls 0.5.3 src/config/listener.rs:202-204, 338-353',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) =>
      doc.listeners[0].tls.certificates.push({ cert_path: '/etc/praxis/tls/b.crt', key_path: '/etc/praxis/tls/b.key' }),
    reason: /key "certificates" at \/listeners\/0\/tls\/certificates: must NOT have more than 1 items/,
    praxis:
      /listeners\[0\]: certificate \/etc\/praxis\/tls\/tls\.crt has no server_names and is not marked default: true; this is ambiguous/,
  },
  {
    rule: 'TLS file paths have no .. component',
    source: 'praxis-proxy-tls 0.5.3 src/config/certs.rs:66-74, 121-128',
    base: () => provider(FAKE),
    accept: (doc) => (doc.listeners[0].tls.client_ca.ca_path = '/etc/praxis/tls/..ca.crt'),
    refuse: (doc) => (doc.listeners[0].tls.client_ca.ca_path = '/etc/praxis/../tls/ca.crt'),
    reason: /key "ca_path" at \/listeners\/0\/tls\/client_ca\/ca_path: must match pattern/,
    praxis: /listeners\[0\]: TLS ca_path must not contain path traversal \(\.\.\): \/etc\/praxis\/\.\.\/tls\/ca\.crt/,
  },
  {
    rule: 'shutdown_timeout_secs is 1..3600',
    source: 'praxis-proxy-core 0.5.3 src/config/validate/rules.rs:393-404',
    base: () => consumer(),
    accept: (doc) => (doc.shutdown_timeout_secs = 3600),
    refuse: (doc) => (doc.shutdown_timeout_secs = 0),
    reason: /key "shutdown_timeout_secs" at \/shutdown_timeout_secs: must be >= 1/,
    praxis: /config: shutdown_timeout_secs must be > 0$/,
  },
  {
    rule: 'peer_identity_trust entries set at least one match field',
    source: 'praxis-proxy-filter 0.5.3 src/builtins/http/security/peer_identity_trust.rs:176-180',
    base: () => provider(FAKE),
    accept: (doc) => (doc.filter_chains[0].filters[0].trusted_peers = [{ cert_digest: 'a'.repeat(64) }]),
    refuse: (doc) => (doc.filter_chains[0].filters[0].trusted_peers = [{}]),
    reason: /at \/filter_chains\/0\/filters\/0\/trusted_peers\/0: must NOT have fewer than 1 properties/,
    praxis: /peer_identity_trust: trusted_peers\[0\] must specify at least one match field$/,
  },
  {
    rule: 'json_body_field field and header are non-empty',
    source: 'praxis-proxy-filter 0.5.3 src/builtins/http/payload_processing/json_body_field/config.rs:63-69',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.filter_chains[0].filters[0].header = ''),
    reason: /key "header" at \/filter_chains\/0\/filters\/0\/header: must NOT have fewer than 1 characters/,
    praxis: /json_body_field: 'header' must not be empty$/,
  },
  {
    rule: 'enabled session affinity names a header or a cookie; its lifetime is ttl_secs (1..86400)',
    source:
      'praxis-proxy/ai filters/src/routing/intelligent_route.rs (SessionAffinityConfig; validate_session_affinity_config)',
    base: () => consumer(),
    accept: (doc) =>
      (doc.filter_chains[0].filters[2].session_affinity = { enabled: true, cookie: 'agn_session', ttl_secs: 86400 }),
    refuse: (doc) => (doc.filter_chains[0].filters[2].session_affinity = { enabled: true, ttl_secs: 60 }),
    reason:
      /key "session_affinity" at \/filter_chains\/0\/filters\/2\/session_affinity: intelligent_route: session_affinity requires at least one of header or cookie/,
    praxis: 'ai',
  },
  {
    rule: 'model_header is not in a namespace Praxis reserves (x-praxis-, x-mcp-)',
    source: 'praxis-proxy/ai filters/src/routing/descriptor.rs (validate_model_header)',
    base: () => provider(FAKE),
    accept: (doc) => (doc.filter_chains[0].filters[2].model_header = 'X-Model'),
    refuse: (doc) => (doc.filter_chains[0].filters[2].model_header = 'X-Praxis-Model'),
    reason:
      /key "model_header" at \/filter_chains\/0\/filters\/2\/model_header: provider_route: model_header must not use a reserved internal header prefix/,
    praxis: 'ai',
  },
  {
    // Stricter: Praxis's check only compares clusters a filter declares (selected_clusters), and provider_route
    // declares none (it keeps the trait default), so real Praxis accepts this file and fails its requests at runtime.
    rule: 'a cluster a route selects is defined by the load_balancer (stricter: Praxis does not check provider_route routes)',
    source: 'praxis-proxy-filter 0.5.3 src/pipeline/checks.rs:198-215 (check_misaligned_clusters)',
    base: () => provider(FAKE),
    accept: () => {},
    refuse: (doc) => (route(doc).cluster = 'backend-missing'),
    reason:
      /provider_route\.routes\[0\] \(candidate 73f63e41\) names cluster "backend-missing", which load_balancer\.clusters does not define/,
    praxis: 'accepts',
  },
  {
    rule: 'load_balancer needs a cluster-selecting filter before it',
    source: 'praxis-proxy-filter 0.5.3 src/pipeline/checks.rs:54-66 (check_lb_without_cluster_selector)',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => doc.filter_chains[0].filters.splice(2, 1),
    reason: /the pipeline has neither intelligent_route \(consumer\) nor provider_route \(provider\)/,
    praxis:
      /pipeline validation failed for listener 'consumer': load_balancer without a preceding router or cluster-selecting filter/,
  },
  {
    rule: 'top-level keys are denied unless Praxis knows them',
    source: 'praxis-proxy-core 0.5.3 src/config/mod.rs:83-85 (#[serde(deny_unknown_fields)] on Config)',
    base: () => consumer(),
    accept: () => {},
    refuse: (doc) => (doc.clusters_extra = []),
    reason: /unknown key "clusters_extra" at \/$/,
    praxis: /config: invalid YAML: unknown field `clusters_extra`, expected one of `admin`, /,
  },
];
