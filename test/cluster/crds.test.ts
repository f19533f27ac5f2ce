// The six Grid CRDs (schemas/crds/definitions.ts) on a real API server: they install and become Established,
// discovery and `kubectl get` columns are what docs/contract.md §1 lists, and the API server itself enforces the
// OpenAPI and CEL rules: each invalid object below is rejected with its rule's message, its valid twin is accepted.
import { ApiextensionsV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { crdManifest, DEFINITIONS, GROUP, KINDS, VERSION } from '../../schemas/crds/definitions.ts';
import type { GridKind } from '../../schemas/crds/definitions.ts';
import { adminGet, adminKubeConfig, adminRequest, expectApiError, uniqueName, waitFor } from './kube.ts';

let kc: KubeConfig;
let objects: CustomObjectsApi;

function gridObject(kind: GridKind, name: string, spec: Record<string, unknown>): Record<string, unknown> {
  return { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec };
}

function create(kind: GridKind, spec: Record<string, unknown>, name = uniqueName(kind.toLowerCase())) {
  return objects.createClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: DEFINITIONS[kind].plural,
    body: gridObject(kind, name, spec),
  }) as Promise<Record<string, unknown> & { metadata: { name: string; resourceVersion: string } }>;
}

beforeAll(async () => {
  kc = adminKubeConfig();
  objects = kc.makeApiClient(CustomObjectsApi);
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  for (const kind of KINDS) {
    // Raw JSON, not ApiextensionsV1Api: see adminRequest for what the typed client would drop.
    const res = await adminRequest(
      'POST',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      crdManifest(kind),
    );
    // 409: another test file already installed the same CRDs from dist/ (server-side apply); the checks below
    // compare what is stored with crdManifest() either way.
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`creating the ${kind} CRD: HTTP ${res.status}: ${res.body}`);
  }
  for (const kind of KINDS) {
    const name = `${DEFINITIONS[kind].plural}.${GROUP}`;
    await waitFor(`${name} to be Established`, async () => {
      const crd = await ext.readCustomResourceDefinition({ name });
      const established = crd.status?.conditions?.find((c) => c.type === 'Established');
      return established?.status === 'True' ? true : undefined;
    });
  }
  // Established means the server accepts the kind; the discovery document can lag a moment behind it.
  await waitFor('discovery of the Grid group', async () => {
    const res = await adminGet(`/apis/${GROUP}/${VERSION}`);
    if (res.status !== 200) return undefined;
    const names = (JSON.parse(res.body) as { resources: { name: string }[] }).resources.map((r) => r.name);
    return KINDS.every((k) => names.includes(DEFINITIONS[k].plural)) ? true : undefined;
  });
});

describe('Grid CRDs', () => {
  it('install with their names, short names, category and a status subresource, all cluster-scoped', async () => {
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    for (const kind of KINDS) {
      const crd = await ext.readCustomResourceDefinition({ name: `${DEFINITIONS[kind].plural}.${GROUP}` });
      const conditions = Object.fromEntries((crd.status?.conditions ?? []).map((c) => [c.type, c.status]));
      expect(conditions, kind).toMatchObject({ Established: 'True', NamesAccepted: 'True' });
    }
    const res = await adminGet(`/apis/${GROUP}/${VERSION}`);
    const resources = (
      JSON.parse(res.body) as {
        resources: { name: string; kind: string; namespaced: boolean; shortNames?: string[]; categories?: string[] }[];
      }
    ).resources;
    for (const kind of KINDS) {
      const def = DEFINITIONS[kind];
      const main = resources.find((r) => r.name === def.plural);
      expect(main, kind).toMatchObject({
        kind,
        namespaced: false,
        shortNames: [...def.shortNames],
        categories: ['grid'],
      });
      expect(
        resources.some((r) => r.name === `${def.plural}/status`),
        `${kind} status subresource`,
      ).toBe(true);
    }
  });

  it('are stored with every CEL rule and default of the manifest (nothing dropped on the way in)', async () => {
    const count = (node: unknown, key: string): number => {
      if (Array.isArray(node)) return node.reduce((n: number, v) => n + count(v, key), 0);
      if (node === null || typeof node !== 'object') return 0;
      return Object.entries(node).reduce((n, [k, v]) => n + (k === key ? 1 : 0) + count(v, key), 0);
    };
    for (const kind of KINDS) {
      const res = await adminGet(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${DEFINITIONS[kind].plural}.${GROUP}`,
      );
      const stored = (JSON.parse(res.body) as { spec: { versions: { schema: unknown }[] } }).spec.versions[0]?.schema;
      const manifest = crdManifest(kind).spec.versions[0]?.schema;
      for (const key of ['x-kubernetes-validations', 'default']) {
        expect(count(stored, key), `${kind} ${key}`).toBe(count(manifest, key));
      }
    }
    expect(count(crdManifest('SiteInvite'), 'x-kubernetes-validations')).toBeGreaterThan(0);
  });

  it('serve the printer columns kubectl shows (InferenceProvider: Provider, Ready, Age; wide: Reason, Phase)', async () => {
    await create('InferenceProvider', {
      gridNetworkRef: 'grid-a',
      providerKind: 'open_ai',
      backendKind: 'api_provider',
      endpoint: 'https://api.example.test/v1',
    });
    const res = await adminGet(`/apis/${GROUP}/${VERSION}/inferenceproviders`, 'Table;v=v1;g=meta.k8s.io');
    expect(res.status).toBe(200);
    const table = JSON.parse(res.body) as { columnDefinitions: { name: string; priority: number }[]; rows: unknown[] };
    expect(table.columnDefinitions.map((c) => [c.name, c.priority])).toEqual([
      ['Name', 0],
      ['Provider', 0],
      ['Ready', 0],
      ['Age', 0],
      ['Reason', 1],
      ['Phase', 1],
    ]);
    expect(table.rows.length).toBeGreaterThanOrEqual(1);
  });
});

interface RuleCase {
  readonly rule: string;
  readonly kind: GridKind;
  readonly invalid: Record<string, unknown>;
  readonly message: RegExp;
  readonly valid: Record<string, unknown>;
}

// One invalid object per rule with the message the rule must produce, and a valid twin that differs only in
// the offending field, so an over-broad rule (rejecting the twin too) fails as surely as a missing one.
const cases: RuleCase[] = [
  {
    rule: 'pressure exitThreshold < enterThreshold (CEL)',
    kind: 'GridNetwork',
    invalid: { admissionPolicy: { mode: 'stabilized', pressure: { enterThreshold: 0.6, exitThreshold: 0.8 } } },
    message: /exitThreshold must be less than enterThreshold/,
    valid: { admissionPolicy: { mode: 'stabilized', pressure: { enterThreshold: 0.85, exitThreshold: 0.7 } } },
  },
  {
    rule: 'weightedRandom requires placementPolicy (CEL)',
    kind: 'GridNetwork',
    invalid: { selectionPolicy: { mode: 'weightedRandom' } },
    message: /placementPolicy must be set if and only if selectionPolicy.mode is weightedRandom/,
    valid: { selectionPolicy: { mode: 'weightedRandom' }, placementPolicy: { strategy: 'static' } },
  },
  {
    rule: 'placementPolicy only with weightedRandom (CEL)',
    kind: 'GridNetwork',
    invalid: { selectionPolicy: { mode: 'roundRobin' }, placementPolicy: { strategy: 'static' } },
    message: /placementPolicy must be set if and only if selectionPolicy.mode is weightedRandom/,
    valid: { selectionPolicy: { mode: 'roundRobin' } },
  },
  {
    rule: 'deprecated swimKeyRef and swimKeySecretRef together (CEL)',
    kind: 'GridNetwork',
    invalid: {
      tls: { swimKeyRef: { name: 'k', namespace: 'grid' }, swimKeySecretRef: { name: 'k', namespace: 'grid' } },
    },
    message: /swimKeyRef is the deprecated name of swimKeySecretRef/,
    valid: { tls: { swimKeyRef: { name: 'k', namespace: 'grid' } } },
  },
  {
    rule: 'metricsRefreshInterval at least one second (OpenAPI pattern)',
    kind: 'GridNetwork',
    invalid: { metricsRefreshInterval: '500ms' },
    message: /spec.metricsRefreshInterval/,
    valid: { metricsRefreshInterval: '1500ms' },
  },
  {
    rule: 'deprecated egress and gatewayEndpoint together (CEL)',
    kind: 'GridSite',
    invalid: {
      gridNetworkRef: 'grid-a',
      egress: { address: 'gw.example.test:443' },
      gatewayEndpoint: { address: 'gw.example.test:443' },
    },
    message: /egress is the deprecated name of gatewayEndpoint/,
    valid: { gridNetworkRef: 'grid-a', egress: { address: 'gw.example.test:443' } },
  },
  {
    rule: 'SiteInvite lifetime 5m..168h (CEL)',
    kind: 'SiteInvite',
    invalid: { siteName: 'site-b', lifetime: '1m' },
    message: /lifetime 1m must be from 5m through 168h/,
    valid: { siteName: 'site-b', lifetime: '5m' },
  },
  {
    rule: 'EndpointTls exactly one CA source (CEL)',
    kind: 'InferenceProvider',
    invalid: {
      gridNetworkRef: 'grid-a',
      providerKind: 'self_hosted',
      backendKind: 'local',
      endpoint: 'https://vllm.example.test',
      tls: { caSecretRef: { name: 'ca', namespace: 'grid' }, caConfigMapRef: { name: 'ca', namespace: 'grid' } },
    },
    message: /set exactly one of caSecretRef and caConfigMapRef/,
    valid: {
      gridNetworkRef: 'grid-a',
      providerKind: 'self_hosted',
      backendKind: 'local',
      endpoint: 'https://vllm.example.test',
      tls: { caConfigMapRef: { name: 'ca', namespace: 'grid' } },
    },
  },
];

describe('validation enforced by the API server', () => {
  it.each(cases)('$kind: $rule', async ({ kind, invalid, message, valid }) => {
    const status = await expectApiError(create(kind, invalid), 422);
    expect(status.reason).toBe('Invalid');
    expect(status.message).toMatch(message);
    const created = await create(kind, valid);
    expect(created.metadata.resourceVersion).toBeTruthy();
  });

  it('SiteInvite: defaults lifetime to 24h and refuses any later spec change (transition rule)', async () => {
    const name = uniqueName('invite');
    const created = await create('SiteInvite', { siteName: 'site-c' }, name);
    expect((created.spec as { lifetime?: string }).lifetime).toBe('24h');

    const changed = { ...created, spec: { ...(created.spec as object), siteName: 'site-d' } };
    const status = await expectApiError(
      objects.replaceClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: 'siteinvites',
        name,
        body: changed,
      }),
      422,
    );
    expect(status.message).toMatch(/SiteInvite spec is immutable/);

    // Metadata is not spec: labelling an invite stays possible.
    const labelled = {
      ...created,
      metadata: { ...created.metadata, labels: { 'grid.praxis.fast/site': 'site-c' } },
    };
    await objects.replaceClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'siteinvites',
      name,
      body: labelled,
    });
  });

  it('GridSite status: a certificate field carrying a private key is refused through the status subresource', async () => {
    const name = uniqueName('site');
    const created = await create('GridSite', { gridNetworkRef: 'grid-a' }, name);
    const leak = {
      ...created,
      status: { publicCertPem: '-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n' },
    };
    const status = await expectApiError(
      objects.replaceClusterCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        plural: 'gridsites',
        name,
        body: leak,
      }),
      422,
    );
    expect(status.message).toMatch(/publicCertPem must never contain private key material/);
    // The rejection message names the rule, never echoes the submitted key text.
    expect(status.message).not.toContain('BEGIN EC PRIVATE KEY');

    const ok = {
      ...created,
      status: { publicCertPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' },
    };
    await objects.replaceClusterCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      plural: 'gridsites',
      name,
      body: ok,
    });
  });
});
