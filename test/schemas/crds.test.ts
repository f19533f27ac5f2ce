// validateCustomResource and applyDefaults against the example objects and every validation rule of docs/contract.md
// §1. Each rule row holds one invalid object (with the path and message a user sees) and the nearest valid one.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { API_VERSION } from '../../schemas/crds/definitions.ts';
import type { GridKind } from '../../schemas/crds/definitions.ts';
import { MAX_ISSUES, applyDefaults, validateCustomResource } from '../../schemas/crds/validate.ts';
import {
  RULES,
  endpoint,
  gateway,
  pressure,
  provider,
  resource,
  ruleObject,
  secret,
  toolProvider,
} from '../fixtures/crds/rule-cases.ts';

const VALID_DIR = fileURLToPath(new URL('../fixtures/crds/valid/', import.meta.url));

describe('seed examples (test/fixtures/crds/valid)', () => {
  const files = readdirSync(VALID_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort();

  it('covers every kind', () => {
    const kinds = new Set(files.map((f) => (parse(readFileSync(VALID_DIR + f, 'utf8')) as { kind: string }).kind));
    expect([...kinds].sort()).toEqual([
      'AgentToAgentProvider',
      'AgentToolProvider',
      'GridNetwork',
      'GridSite',
      'InferenceProvider',
      'SiteInvite',
    ]);
  });

  it.each(files)('%s validates with zero issues', (file) => {
    const obj: unknown = parse(readFileSync(VALID_DIR + file, 'utf8'));
    expect(validateCustomResource(obj)).toEqual([]);
  });

  it.each(files)('%s still validates once defaulted (what the API server stores)', (file) => {
    const obj = parse(readFileSync(VALID_DIR + file, 'utf8')) as { kind: GridKind };
    expect(validateCustomResource(applyDefaults(obj.kind, obj))).toEqual([]);
  });
});

describe('validation rules of docs/contract.md §1', () => {
  it.each(RULES.map((row, i) => [i, row.cite, row] as const))('row %i rejects: %s', (_i, _cite, row) => {
    const issues = validateCustomResource(ruleObject(row, row.invalid));
    const match = issues.find((issue) => issue.path === row.path && issue.message.includes(row.message));
    expect(match, `expected ${row.path}: ${row.message}\ngot ${JSON.stringify(issues, null, 2)}`).toBeDefined();
  });

  it.each(RULES.map((row, i) => [i, row.cite, row] as const))(
    'row %i accepts the nearest valid object: %s',
    (_i, _cite, row) => {
      expect(validateCustomResource(ruleObject(row, row.valid))).toEqual([]);
    },
  );
});

describe('applyDefaults', () => {
  it('fills the documented admissionPolicy.pressure defaults (docs/contract.md §1: enter 0.85, exit 0.70, failure 2, success 3, 10s, 30s)', () => {
    const defaulted = applyDefaults('GridNetwork', resource('GridNetwork', { admissionPolicy: {} })) as any;
    expect(defaulted.spec.admissionPolicy).toEqual({
      mode: 'instantaneous',
      missingMetrics: 'existingOnly',
      pressure: {
        enterThreshold: 0.85,
        exitThreshold: 0.7,
        failureThreshold: 2,
        successThreshold: 3,
        minimumStateDuration: '10s',
        recoveryHoldDown: '30s',
      },
    });
  });

  it('keeps set values and fills only the missing ones', () => {
    const defaulted = applyDefaults('GridNetwork', resource('GridNetwork', pressure({ enterThreshold: 0.95 }))) as any;
    expect(defaulted.spec.admissionPolicy.mode).toBe('stabilized');
    expect(defaulted.spec.admissionPolicy.pressure.enterThreshold).toBe(0.95);
    expect(defaulted.spec.admissionPolicy.pressure.exitThreshold).toBe(0.7);
  });

  it('fills routingPolicy geographyFirst and the SWIM profile, and no policy the seed leaves absent', () => {
    const spec = (applyDefaults('GridNetwork', resource('GridNetwork', {})) as any).spec;
    expect(spec.routingPolicy).toBe('geographyFirst');
    expect(spec.swim).toEqual({ probeInterval: '5s', suspicionTimeout: '10s', gossipNodes: 3 });
    expect(spec.gridId).toBe('');
    for (const absent of [
      'scoringPolicy',
      'selectionPolicy',
      'placementPolicy',
      'admissionPolicy',
      'staleCandidateTtlSeconds',
      'metricsRefreshInterval',
      'budgetPolicy',
    ]) {
      expect(spec, absent).not.toHaveProperty(absent);
    }
  });

  it('fills SiteInvite lifetime 24h and allowDeletedName false (seed 001: "default 24h")', () => {
    const spec = (applyDefaults('SiteInvite', resource('SiteInvite', { siteName: 'east2' })) as any).spec;
    expect(spec).toEqual({ siteName: 'east2', lifetime: '24h', allowDeletedName: false });
  });

  it('fills provider defaults: metrics path /metrics and timeout 2s, discovery path /v1/models, client cert keys, empty selectors', () => {
    const spec = (
      applyDefaults(
        'InferenceProvider',
        resource('InferenceProvider', {
          ...provider,
          tls: { caSecretRef: secret, clientCertificateSecretRef: { name: 'c', namespace: 'grid-system' } },
          metricsConfig: {},
          modelDiscovery: { openAiModels: {} },
          healthCheck: {},
        }),
      ) as any
    ).spec;
    expect(spec.metricsConfig).toEqual({ path: '/metrics', timeout: '2s', signalNames: {} });
    expect(spec.modelDiscovery.openAiModels.path).toBe('/v1/models');
    expect(spec.healthCheck.path).toBe('/health');
    expect(spec.tls.clientCertificateSecretRef).toEqual({
      name: 'c',
      namespace: 'grid-system',
      certificateKey: 'tls.crt',
      privateKeyKey: 'tls.key',
    });
    expect(spec.accessPolicy).toEqual({ siteSelector: { matchLabels: {} } });
    expect(spec.siteSelector).toEqual({ matchLabels: {} });
    expect(spec).not.toHaveProperty('capacityWeight');
  });

  it('fills the clusterEndpoints tls CA key ca.crt and GridSite tls mode Mutual', () => {
    const gn = (
      applyDefaults(
        'GridNetwork',
        resource('GridNetwork', endpoint({ mode: 'tls', sni: 'a.example', caSecretRef: { name: 'ca' } })),
      ) as any
    ).spec;
    expect(gn.consumerGateways[0].praxisConfig.clusterEndpoints[0].transport.caSecretRef).toEqual({
      name: 'ca',
      key: 'ca.crt',
    });
    expect(gn.consumerGateways[0].praxisConfig).toMatchObject({
      configMapName: 'praxis-consumer-config',
      tlsCertMountPath: '/etc/praxis/tls',
      listenerPort: 8080,
    });
    const gs = (
      applyDefaults('GridSite', resource('GridSite', { gridNetworkRef: 'p', gatewayEndpoint: { address: '' } })) as any
    ).spec;
    expect(gs.gatewayEndpoint.tls).toEqual({ mode: 'Mutual' });
  });

  it('never sets both a deprecated and a current name (defaulting must not trip the both-set rules)', () => {
    const obj = resource('GridNetwork', {
      gatewayRefs: [gateway({ consumerConfig: { enabled: true, credentialMountBase: '/run/x' } })],
    });
    const defaulted = applyDefaults('GridNetwork', obj) as any;
    expect(defaulted.spec).not.toHaveProperty('consumerGateways');
    expect(defaulted.spec.gatewayRefs[0].consumerConfig).not.toHaveProperty('generate');
    expect(defaulted.spec.gatewayRefs[0].consumerConfig).not.toHaveProperty('credentialMountPath');
    expect(validateCustomResource(defaulted)).toEqual([]);
  });

  it('returns a copy and leaves its input untouched', () => {
    const obj = resource('SiteInvite', { siteName: 'east2' });
    const before = structuredClone(obj);
    const defaulted = applyDefaults('SiteInvite', obj);
    expect(obj).toEqual(before);
    expect(defaulted).not.toBe(obj);
  });

  it('does not throw on input that is not an object', () => {
    expect(applyDefaults('GridSite', null)).toBeNull();
    expect(applyDefaults('GridSite', 'x')).toBe('x');
    expect(applyDefaults('GridSite', { spec: 7 })).toEqual({ spec: 7 });
  });
});

describe('validateCustomResource on bad input', () => {
  it.each([
    ['null', null, '', 'must be an object (got null)'],
    ['a number', 42, '', 'must be an object (got number)'],
    ['an array', [], '', 'must be an object (got an array)'],
    [
      'an unknown kind',
      { apiVersion: API_VERSION, kind: 'GridCluster', metadata: { name: 'a' }, spec: {} },
      'kind',
      'must be one of GridNetwork',
    ],
    [
      'another API version',
      { ...resource('GridSite', { gridNetworkRef: 'p' }), apiVersion: 'grid.praxis-proxy.io/v1alpha1' },
      'apiVersion',
      'must be grid.praxis.fast/v1alpha1',
    ],
    [
      'no metadata',
      { apiVersion: API_VERSION, kind: 'GridSite', spec: { gridNetworkRef: 'p' } },
      'metadata',
      'required object is missing',
    ],
    [
      'an invalid name',
      { ...resource('GridSite', { gridNetworkRef: 'p' }), metadata: { name: 'Cluster_B' } },
      'metadata.name',
      'must be a DNS subdomain',
    ],
    [
      'a namespace on a cluster-scoped kind',
      { ...resource('GridSite', { gridNetworkRef: 'p' }), metadata: { name: 'b', namespace: 'grid' } },
      'metadata.namespace',
      'cluster-scoped',
    ],
    [
      'no spec',
      { apiVersion: API_VERSION, kind: 'GridSite', metadata: { name: 'b' } },
      'spec',
      'required field is missing',
    ],
    ['a spec of the wrong type', resource('GridSite', 'production'), 'spec', 'must be of type object'],
    [
      'a BigInt',
      resource('InferenceProvider', { ...provider, capacityWeight: 5n }),
      'spec.capacityWeight',
      'must be of type integer',
    ],
    [
      'a wrong type where CEL reads',
      resource('GridNetwork', { selectionPolicy: { mode: 7 } }),
      'spec.selectionPolicy.mode',
      'must be of type string',
    ],
    [
      'a bad label value',
      resource('AgentToolProvider', {
        ...toolProvider,
        accessPolicy: { siteSelector: { matchLabels: { 'grid.praxis.fast/site': 'a b' } } },
      }),
      'spec.accessPolicy.siteSelector.matchLabels["grid.praxis.fast/site"]',
      'must match',
    ],
  ])('reports %s with one clear issue', (_name, input, path, message) => {
    const issues = validateCustomResource(input);
    expect(
      issues.some((i) => i.path === path && i.message.includes(message)),
      JSON.stringify(issues, null, 2),
    ).toBe(true);
  });

  it('does not run CEL on a node whose shape is already wrong (one issue, not a rule crash)', () => {
    const issues = validateCustomResource(resource('GridNetwork', { selectionPolicy: { mode: 7 } }));
    expect(issues).toEqual([{ path: 'spec.selectionPolicy.mode', message: 'must be of type string (got 7)' }]);
  });

  it('survives cyclic and exotic input without throwing', () => {
    const cyclic: Record<string, unknown> = resource('GridNetwork', {});
    (cyclic['spec'] as Record<string, unknown>)['self'] = cyclic;
    expect(() => validateCustomResource(cyclic)).not.toThrow();
    expect(validateCustomResource(cyclic).some((i) => i.path === 'spec.self')).toBe(true);
    expect(() => validateCustomResource(resource('GridNetwork', { seeds: [() => 1, Symbol('s')] }))).not.toThrow();
  });

  it('bounds the number of issues for garbage input', () => {
    const spec: Record<string, unknown> = { gridNetworkRef: 'p' };
    for (let i = 0; i < 200; i += 1) spec[`typo${i}`] = i;
    const issues = validateCustomResource(resource('GridSite', spec));
    expect(issues).toHaveLength(MAX_ISSUES);
    expect(issues.at(-1)?.message).toMatch(/^\d+ more issues not shown$/);
  });

  it('keeps long values out of messages', () => {
    const issues = validateCustomResource(resource('GridNetwork', { metricsRefreshInterval: 'x'.repeat(10_000) }));
    expect(issues.length).toBeGreaterThan(0);
    for (const issue of issues) expect(issue.message.length).toBeLessThan(300);
  });
});
