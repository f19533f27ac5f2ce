// The real API server paths the daemons rely on: server-side apply with a field manager, a watch that sees
// ADDED then MODIFIED, ServiceAccount tokens from the TokenRequest API, and RBAC resourceNames that grant one
// ConfigMap and nothing else (overlay-sync's RBAC, docs/contract.md §4).
import { request } from 'node:https';
import {
  AuthenticationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  VersionApi,
  Watch,
} from '@kubernetes/client-node';
import type { KubeConfig, V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { adminKubeConfig, expectApiError, tokenKubeConfig, uniqueName, waitFor } from './kube.ts';

function rawGet(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${inject('apiServerUrl')}${path}`,
      { ca: inject('caPem'), headers, agent: false, timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

const FIELD_MANAGER = 'agn-gossip-operator';

function overlayConfigMap(namespace: string, name: string, revision: string): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace, labels: { 'grid.praxis.fast/overlay': 'true' } },
    data: { 'routing-overlay.json': JSON.stringify({ schema_version: '1.0.0', revision }) },
  };
}

describe('control plane', () => {
  it('is ready, reports the built version and authenticates every request', async () => {
    const kc = adminKubeConfig();
    const version = await kc.makeApiClient(VersionApi).getCode();
    expect(version.major).toBe('1');
    expect(version.gitVersion).toMatch(/^v1\.31\./);

    // No client certificate and no token: anonymous access is off, so the server refuses to identify us.
    const anonymous = await rawGet('/api/v1/namespaces');
    expect(anonymous.status).toBe(401);
    // A token the server never issued is rejected the same way, not treated as anonymous.
    const forged = await rawGet('/api/v1/namespaces', { authorization: 'Bearer not-a-real-token' });
    expect(forged.status).toBe(401);
  });
});

describe('server-side apply and watch', () => {
  let kc: KubeConfig;
  let namespace: string;

  beforeAll(async () => {
    kc = adminKubeConfig();
    namespace = uniqueName('ssa');
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  });

  it('applies a ConfigMap with a field manager and a watch sees ADDED then MODIFIED', async () => {
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const name = 'routing-overlay';
    const events: { type: string; revision: string | undefined; resourceVersion: string | undefined }[] = [];
    let watchError: unknown;
    const watch = await new Watch(kc).watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { fieldSelector: `metadata.name=${name}` },
      (type, obj: V1ConfigMap) => {
        const raw = obj.data?.['routing-overlay.json'];
        events.push({
          type,
          revision: raw === undefined ? undefined : (JSON.parse(raw) as { revision: string }).revision,
          resourceVersion: obj.metadata?.resourceVersion,
        });
      },
      (err: unknown) => {
        if (err) watchError = err;
      },
    );
    try {
      const first = await objects.patch(
        overlayConfigMap(namespace, name, 'r1'),
        undefined,
        undefined,
        FIELD_MANAGER,
        true,
        PatchStrategy.ServerSideApply,
      );
      const managers = (first.metadata?.managedFields ?? []).map((f) => [f.manager, f.operation]);
      expect(managers).toContainEqual([FIELD_MANAGER, 'Apply']);

      await waitFor('ADDED event', () => (events.some((e) => e.type === 'ADDED') ? true : undefined));

      // Re-applying identical content is a no-op: no new resourceVersion, so no event for watchers.
      const same = await objects.patch(
        overlayConfigMap(namespace, name, 'r1'),
        undefined,
        undefined,
        FIELD_MANAGER,
        true,
        PatchStrategy.ServerSideApply,
      );
      expect(same.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);

      const second = await objects.patch(
        overlayConfigMap(namespace, name, 'r2'),
        undefined,
        undefined,
        FIELD_MANAGER,
        true,
        PatchStrategy.ServerSideApply,
      );
      await waitFor('MODIFIED event', () => (events.some((e) => e.type === 'MODIFIED') ? true : undefined));

      expect(events.map((e) => [e.type, e.revision])).toEqual([
        ['ADDED', 'r1'],
        ['MODIFIED', 'r2'],
      ]);
      expect(events[1]?.resourceVersion).toBe(second.metadata?.resourceVersion);
      expect(watchError).toBeUndefined();
    } finally {
      watch.abort();
    }
  });

  it('refuses a second field manager that takes over an owned field without force (409 Conflict)', async () => {
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const name = 'owned-overlay';
    await objects.patch(
      overlayConfigMap(namespace, name, 'r1'),
      undefined,
      undefined,
      FIELD_MANAGER,
      true,
      PatchStrategy.ServerSideApply,
    );
    const status = await expectApiError(
      objects.patch(
        overlayConfigMap(namespace, name, 'intruder'),
        undefined,
        undefined,
        'someone-else',
        false,
        PatchStrategy.ServerSideApply,
      ),
      409,
    );
    expect(status.reason).toBe('Conflict');
    expect(status.message).toContain(FIELD_MANAGER);
    expect(status.message).toContain('routing-overlay.json');

    const stored = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name, namespace });
    expect(stored.data?.['routing-overlay.json']).toContain('"r1"');
  });
});

describe('ServiceAccount token and RBAC resourceNames', () => {
  let admin: KubeConfig;
  let namespace: string;
  let token: string;
  const serviceAccount = 'overlay-sync';
  const allowed = 'routing-overlay';
  const other = 'some-other-config';

  beforeAll(async () => {
    admin = adminKubeConfig();
    namespace = uniqueName('rbac');
    const core = admin.makeApiClient(CoreV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    for (const name of [allowed, other]) {
      await core.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { k: name } } });
    }
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: serviceAccount } } });
    // overlay-sync's rule: read and watch one named ConfigMap (docs/contract.md §4).
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: serviceAccount },
        rules: [
          { apiGroups: [''], resources: ['configmaps'], resourceNames: [allowed], verbs: ['get', 'list', 'watch'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: serviceAccount },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: serviceAccount },
        subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
      },
    });
    const minted = await core.createNamespacedServiceAccountToken({
      name: serviceAccount,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    token = minted.status?.token ?? '';
  });

  afterAll(() => {
    token = '';
  });

  it('mints a token that authenticates as the ServiceAccount', async () => {
    expect(token.split('.')).toHaveLength(3); // a signed JWT
    const review = await tokenKubeConfig(token)
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${namespace}:${serviceAccount}`);
    expect(review.status?.userInfo?.groups).toContain(`system:serviceaccounts:${namespace}`);
  });

  it('grants get on exactly the named ConfigMap and 403 on everything else', async () => {
    const core = tokenKubeConfig(token).makeApiClient(CoreV1Api);
    const got = await core.readNamespacedConfigMap({ name: allowed, namespace });
    expect(got.data?.k).toBe(allowed);

    const denied = await expectApiError(core.readNamespacedConfigMap({ name: other, namespace }), 403);
    expect(denied.reason).toBe('Forbidden');
    expect(denied.message).toContain(`system:serviceaccount:${namespace}:${serviceAccount}`);
    expect(denied.message).toContain(`"${other}"`);

    // resourceNames never cover an unfiltered list, writes, or the same name in another namespace.
    await expectApiError(core.listNamespacedConfigMap({ namespace }), 403);
    await expectApiError(
      core.replaceNamespacedConfigMap({
        name: allowed,
        namespace,
        body: { metadata: { name: allowed }, data: { k: 'x' } },
      }),
      403,
    );
    await expectApiError(core.readNamespacedConfigMap({ name: allowed, namespace: 'default' }), 403);
    await expectApiError(core.listNamespace(), 403);
  });

  it('lets the token list and watch the one ConfigMap through a metadata.name field selector', async () => {
    // This is how overlay-sync watches its ConfigMap: a list/watch narrowed to one name is authorized by resourceNames.
    const kc = tokenKubeConfig(token);
    const listed = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedConfigMap({ namespace, fieldSelector: `metadata.name=${allowed}` });
    expect(listed.items.map((c) => c.metadata?.name)).toEqual([allowed]);

    const seen: string[] = [];
    const watch = await new Watch(kc).watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { fieldSelector: `metadata.name=${allowed}`, resourceVersion: listed.metadata?.resourceVersion },
      (type, obj: V1ConfigMap) => seen.push(`${type}:${obj.data?.k ?? ''}`),
      () => {},
    );
    try {
      // The operator (admin here) rewrites the ConfigMap; the token's watch must see it.
      await admin.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({
        name: allowed,
        namespace,
        body: { metadata: { name: allowed }, data: { k: 'updated' } },
      });
      await waitFor('MODIFIED event on the watched ConfigMap', () =>
        seen.includes('MODIFIED:updated') ? true : undefined,
      );
    } finally {
      watch.abort();
    }

    // A watch without the name filter is refused outright.
    let unfilteredError: unknown;
    const denied = await new Watch(kc)
      .watch(
        `/api/v1/namespaces/${namespace}/configmaps`,
        {},
        () => {},
        (err: unknown) => {
          unfilteredError = err;
        },
      )
      .catch((err: unknown) => {
        unfilteredError = err;
        return undefined;
      });
    await waitFor('the unfiltered watch to be refused', () => (unfilteredError !== undefined ? true : undefined));
    denied?.abort();
    expect(String((unfilteredError as { message?: string }).message ?? unfilteredError)).toMatch(/403|Forbidden/);
  });
});
