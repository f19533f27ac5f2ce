// Delegated mount reconciliation and generated consumer configs on the real API server, as a ServiceAccount whose
// Role is exactly what constructs/permissions.ts grants a site whose gateway generates and delegates: the
// operator's server-side apply of the reserved projected volumes merges into a user's Deployment by list keys
// (other containers, user volumes and mounts untouched), drops the reserved entries it no longer lists, and the
// Role lets it touch the one named Deployment and nothing else.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { delegatedMountSecrets, referencedSecrets } from '../../constructs/grid-site-stack.ts';
import { policyRules } from '../../constructs/permissions.ts';
import { publishGeneratedConfigs } from '../../daemons/gossip-operator/controllers/generated-config.ts';
import {
  MOUNT_FIELD_MANAGER,
  reconcileMounts,
  type MountInput,
} from '../../daemons/gossip-operator/controllers/mount-reconciler.ts';
import {
  ANNOTATION_CONFIG_REVISION,
  ANNOTATION_MOUNT_RECONCILIATION,
  type DeploymentObject,
} from '../../daemons/gossip-operator/controllers/mount-requirements.ts';
import { CONFIG_MAP, DEPLOYMENT } from '../../daemons/gossip-operator/kinds.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { KubernetesStore } from '../../daemons/shared/resource-store/index.ts';
import type { GridNetworkResource } from '../../schemas/crds/types.ts';
import { generatedConfigNames } from '../../schemas/generated-config.ts';
import type { GridNetworkSpec, PraxisConfig } from '../../schemas/generated/gridnetworks.ts';
import type { OverlayCandidate } from '../../schemas/generated/overlay-envelope.ts';
import { mountRequirementsConfigMapName } from '../../schemas/object-names.ts';
import { renderKubeconfig } from './certs.ts';
import { adminKubeConfig, uniqueName } from './kube.ts';
import { RawClient } from './manifests.ts';

const NS = uniqueName('mounts');
const SA = 'grid-op';
const TOKEN = 'tok-cluster-mount-s3cr3t';
const USER_MANAGER = 'kubectl';

const credential: OverlayCandidate = {
  kind: 'inference_model',
  name: 'qwen3',
  site: 'site-a',
  cluster: 'api',
  fresh: true,
  credential: { strategy: 'bearer_token', secretRef: { name: 'api-token', namespace: NS, key: 'token' } },
};
const PRAXIS: PraxisConfig = {
  generate: true,
  enableProjectedCredentials: true,
  configMapName: 'praxis-edge',
  clusterEndpoints: [
    { cluster: 'api', address: 'api.example.internal:443', transport: { mode: 'tls', sni: 'api.example.internal' } },
  ],
  mountReconciliation: { enabled: true, deploymentName: 'inference-gw', containerName: 'praxis' },
};

/** The same gateway with a tls-mode backend whose custom CA Secret is named without a namespace (the gateway's). */
const PRAXIS_CA: PraxisConfig = {
  ...PRAXIS,
  clusterEndpoints: [
    {
      cluster: 'api',
      address: 'api.example.internal:443',
      transport: { mode: 'tls', sni: 'api.example.internal', caSecretRef: { name: 'backend-ca' } },
    },
  ],
};
/** The site's GridNetwork spec: the Role below is derived from it exactly as GridSiteStack derives it. */
const SPEC: GridNetworkSpec = { consumerGateways: [{ name: 'edge', namespace: NS, praxisConfig: PRAXIS_CA }] };

function userDeployment(name: string, annotated = true): DeploymentObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name,
      namespace: NS,
      ...(annotated ? { annotations: { [ANNOTATION_MOUNT_RECONCILIATION]: 'enabled' } } : {}),
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            { name: 'praxis', image: 'praxis:1', volumeMounts: [{ name: 'config', mountPath: '/etc/praxis/config' }] },
            { name: 'sidecar', image: 'sidecar:1', volumeMounts: [{ name: 'scratch', mountPath: '/tmp' }] },
          ],
          volumes: [
            { name: 'config', configMap: { name: 'praxis-edge' } },
            { name: 'scratch', emptyDir: {} },
          ],
        },
      },
    },
  };
}

describe('mount reconciliation as the operator ServiceAccount (Role from the permission table)', () => {
  let admin: RawClient;
  let store: KubernetesStore;
  let dir: string;
  const lines: string[] = [];
  const logger = createLogger({
    name: 'mounts-cluster',
    level: 'debug',
    destination: {
      write: (chunk: string) => {
        lines.push(chunk);
        return true;
      },
    } as unknown as NodeJS.WritableStream,
  });
  const ctx = () => ({ store, logger });
  const input = (praxis: PraxisConfig = PRAXIS, candidates: OverlayCandidate[] = [credential]): MountInput => ({
    network: 'grid',
    generation: 1,
    gateway: { name: 'edge', namespace: NS },
    praxis,
    configMapName: 'praxis-edge',
    configText: 'listeners: []\n',
    candidates,
    tls: undefined,
  });
  const adminDeployment = async (name: string) =>
    (await admin.request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/${name}`)).body as DeploymentObject;
  const post = async (path: string, body: unknown) => {
    const res = await admin.request('POST', path, body);
    if (res.status !== 201) throw new Error(`POST ${path}: HTTP ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  };

  beforeAll(async () => {
    admin = new RawClient(adminKubeConfig());
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await post(`/api/v1/namespaces/${NS}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: SA },
    });
    // api-token stands for a remote candidate's credential reference (in the gateway namespace), backend-ca for a
    // transport.caSecretRef: both are GETed by the mount check, neither carries a namespace the spec walk sees.
    const { praxisConfigMaps, delegatedDeployments } = generatedConfigNames(SPEC);
    const secrets = [
      ...referencedSecrets(SPEC),
      ...delegatedMountSecrets(SPEC, [{ name: 'api-token', namespace: NS }]),
    ].map((secret) => secret.name);
    expect(secrets.sort()).toEqual(['api-token', 'backend-ca']);
    const rules = policyRules('gossip-operator', 'namespace', {
      praxisConfigMaps,
      delegatedDeployments,
      referencedSecrets: secrets,
    });
    await post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: SA },
      rules,
    });
    await post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: SA },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: SA },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: NS }],
    });
    const minted = (await post(`/api/v1/namespaces/${NS}/serviceaccounts/${SA}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    })) as { status: { token: string } };
    dir = await mkdtemp(join(tmpdir(), 'agn-mounts-'));
    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(
      kubeconfigPath,
      renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: SA, token: minted.status.token }),
    );
    store = new KubernetesStore({ kubeconfigPath });
    await post(`/api/v1/namespaces/${NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'api-token' },
      stringData: { token: TOKEN },
    });
    for (const name of ['inference-gw', 'other-gw']) {
      const res = await admin.apply(userDeployment(name), USER_MANAGER);
      if (res.status !== 201 && res.status !== 200)
        throw new Error(`apply Deployment ${name}: HTTP ${res.status}: ${JSON.stringify(res.body)}`);
    }
  });

  afterAll(async () => {
    await store?.close();
    await admin?.request('DELETE', `/api/v1/namespaces/${NS}`);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('merges the reserved volumes into the user Deployment by list keys, then reports the rollout', async () => {
    const before = await adminDeployment('inference-gw');
    const applied = await reconcileMounts(ctx(), input(), undefined);
    expect(applied, applied.message).toMatchObject({ phase: 'MountsReconciling', deploymentName: 'inference-gw' });
    const after = await adminDeployment('inference-gw');
    const pod = after.spec?.template?.spec;
    expect(pod?.volumes?.map((v) => v.name).sort()).toEqual([
      'config',
      'grid-credentials',
      'grid-routing-overlay',
      'scratch',
    ]);
    expect(pod?.volumes?.find((v) => v.name === 'scratch')).toEqual(
      before.spec?.template?.spec?.volumes?.find((v) => v.name === 'scratch'),
    );
    const mounts = pod?.containers?.find((c) => c.name === 'praxis')?.volumeMounts ?? [];
    expect(mounts.map((m) => `${m.name}@${m.mountPath}`).sort()).toEqual([
      'config@/etc/praxis/config',
      'grid-credentials@/run/secrets/grid-credentials',
      'grid-routing-overlay@/etc/praxis/routing',
    ]);
    expect(mounts.some((m) => m.subPath !== undefined)).toBe(false);
    expect(pod?.containers?.find((c) => c.name === 'sidecar')).toEqual(
      before.spec?.template?.spec?.containers?.find((c) => c.name === 'sidecar'),
    );
    expect(pod?.containers?.find((c) => c.name === 'praxis')?.['image']).toBe('praxis:1');
    expect(after.spec?.template?.metadata?.annotations?.[ANNOTATION_CONFIG_REVISION]).toBe(
      applied.requirementsRevision,
    );
    expect(after.metadata.generation).toBe((before.metadata.generation ?? 0) + 1);
    expect((after.metadata['managedFields'] as { manager: string }[]).map((m) => m.manager)).toEqual(
      expect.arrayContaining([USER_MANAGER, MOUNT_FIELD_MANAGER]),
    );

    // The owner re-applies its own manifest (which knows nothing of the reserved volumes): they stay, owned by Grid.
    expect((await admin.apply(userDeployment('inference-gw'), USER_MANAGER)).status).toBe(200);
    const reapplied = await adminDeployment('inference-gw');
    expect(reapplied.spec?.template?.spec?.volumes?.map((v) => v.name).sort()).toEqual([
      'config',
      'grid-credentials',
      'grid-routing-overlay',
      'scratch',
    ]);
    expect(reapplied.metadata.generation).toBe(after.metadata.generation);

    // No Deployment controller runs here: the status is what it would write once every replica is new.
    const waiting = await reconcileMounts(ctx(), input(), applied);
    expect(waiting.phase).toBe('WaitingForRollout');
    const status = await admin.request(
      'PATCH',
      `/apis/apps/v1/namespaces/${NS}/deployments/inference-gw/status`,
      {
        status: {
          observedGeneration: after.metadata.generation,
          replicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
          readyReplicas: 1,
        },
      },
      { contentType: 'application/merge-patch+json' },
    );
    expect(status.status).toBe(200);
    const ready = await reconcileMounts(ctx(), input(), waiting);
    expect(ready).toMatchObject({ phase: 'Ready', appliedRevision: applied.requirementsRevision });

    // Requirements shrink (no credential reference left): the server drops what this manager no longer applies.
    // (Projected mode keeps the credential mount root even when empty, so this step turns projected mode off.)
    const shrunk = await reconcileMounts(ctx(), input({ ...PRAXIS, enableProjectedCredentials: false }, []), ready);
    expect(shrunk.phase).toBe('MountsReconciling');
    const final = await adminDeployment('inference-gw');
    expect(final.spec?.template?.spec?.volumes?.map((v) => v.name).sort()).toEqual([
      'config',
      'grid-routing-overlay',
      'scratch',
    ]);
    expect(
      final.spec?.template?.spec?.containers
        ?.find((c) => c.name === 'praxis')
        ?.volumeMounts?.map((m) => m.name)
        .sort(),
    ).toEqual(['config', 'grid-routing-overlay']);
    // The superseded requirements ConfigMap was deleted with the unnamed opt-in grant; the current one exists.
    expect(
      (
        await admin.request(
          'GET',
          `/api/v1/namespaces/${NS}/configmaps/${mountRequirementsConfigMapName(ready.requirementsRevision ?? '')}`,
        )
      ).status,
    ).toBe(404);
    expect(
      (
        await admin.request(
          'GET',
          `/api/v1/namespaces/${NS}/configmaps/${mountRequirementsConfigMapName(shrunk.requirementsRevision ?? '')}`,
        )
      ).status,
    ).toBe(200);
    expect(lines.join('')).not.toContain(TOKEN);
  });

  it('checks a transport.caSecretRef Secret through its named grant: waits for it, then mounts it', async () => {
    const waiting = await reconcileMounts(ctx(), input(PRAXIS_CA), undefined);
    // Without the grant this GET is a 403 and the gateway ends in DeploymentReconcileFailed.
    expect(waiting, waiting.message).toMatchObject({ phase: 'WaitingForSecret', reason: 'SecretNotFound' });
    expect(waiting.message).toContain(`${NS}/backend-ca`);
    await post(`/api/v1/namespaces/${NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'backend-ca' },
      stringData: { 'ca.crt': 'CA' },
    });
    const applied = await reconcileMounts(ctx(), input(PRAXIS_CA), waiting);
    expect(applied, applied.message).toMatchObject({ phase: 'MountsReconciling', reason: 'MountsApplied' });
    expect((await adminDeployment('inference-gw')).spec?.template?.spec?.volumes?.map((v) => v.name)).toContain(
      'grid-backend-ca',
    );
  });

  it('does not patch a Deployment whose annotation was removed after the read: the API server answers 409', async () => {
    // The owner drops the opt-in right after the operator's GET (its server-side apply no longer lists it).
    const racing = new Proxy(store, {
      get(target, property) {
        if (property !== 'get') {
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (...args: Parameters<KubernetesStore['get']>) => {
          const found = await target.get(...args);
          if (args[0] === DEPLOYMENT)
            expect((await admin.apply(userDeployment('inference-gw', false), USER_MANAGER)).status).toBe(200);
          return found;
        };
      },
    });
    const before = await adminDeployment('inference-gw');
    const result = await reconcileMounts({ store: racing, logger }, input(PRAXIS_CA, []), undefined);
    expect(result, result.message).toMatchObject({ phase: 'MountsReconciling', reason: 'DeploymentChanged' });
    const after = await adminDeployment('inference-gw');
    expect(after.metadata.annotations?.[ANNOTATION_MOUNT_RECONCILIATION]).toBeUndefined();
    expect(after.spec?.template?.metadata?.annotations?.[ANNOTATION_CONFIG_REVISION]).toBe(
      before.spec?.template?.metadata?.annotations?.[ANNOTATION_CONFIG_REVISION],
    );
    // The next reconcile reads it again and leaves it alone.
    expect(await reconcileMounts(ctx(), input(PRAXIS_CA, []), result)).toMatchObject({
      phase: 'Error',
      reason: 'DeploymentNotAnnotated',
    });
    expect((await admin.apply(userDeployment('inference-gw'), USER_MANAGER)).status).toBe(200);

    // Annotated again: the same requirements apply. Projected mode without a mounted credential is an empty
    // projected volume at the mount root, which the API server accepts (step one of the two-step).
    const root = await reconcileMounts(ctx(), input(PRAXIS_CA, []), result);
    expect(root, root.message).toMatchObject({ phase: 'MountsReconciling', reason: 'MountsApplied' });
    const volume = (await adminDeployment('inference-gw')).spec?.template?.spec?.volumes?.find(
      (v) => v.name === 'grid-credentials',
    ) as { projected?: { sources?: unknown[] } } | undefined;
    expect(volume?.projected).toBeDefined();
    expect(volume?.projected?.sources ?? []).toEqual([]);
  });

  it('is refused any Deployment but the named one', async () => {
    const other = await reconcileMounts(
      ctx(),
      input({ ...PRAXIS, mountReconciliation: { enabled: true, deploymentName: 'other-gw', containerName: 'praxis' } }),
      undefined,
    );
    expect(other).toMatchObject({ phase: 'Error', reason: 'DeploymentReconcileFailed' });
    expect(other.message).toMatch(/403|forbidden/i);
    expect((await adminDeployment('other-gw')).metadata.generation).toBe(1);
    await expect(
      store.apply(DEPLOYMENT, { ...userDeployment('new-gw') }, { fieldManager: MOUNT_FIELD_MANAGER }),
    ).rejects.toThrow();
  });

  it('writes the generated config ConfigMap by name and deletes it when generation stops', async () => {
    const network = (generate: boolean, status?: GridNetworkResource['status']): GridNetworkResource => ({
      apiVersion: 'grid.praxis.fast/v1alpha1',
      kind: 'GridNetwork',
      metadata: { name: 'grid', generation: 1 },
      spec: {
        consumerGateways: [
          { name: 'edge', namespace: NS, praxisConfig: { ...PRAXIS, generate, mountReconciliation: undefined } },
        ],
      },
      ...(status !== undefined ? { status } : {}),
    });
    const on = await publishGeneratedConfigs(ctx(), network(true), []);
    expect(on.praxisConfigStatus.map((s) => s.phase)).toEqual(['Rendered']);
    expect((await store.get(CONFIG_MAP, { name: 'praxis-edge', namespace: NS }))?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
    });
    const off = await publishGeneratedConfigs(
      ctx(),
      network(false, {
        praxisConfigStatus: on.praxisConfigStatus,
        mountReconciliationStatus: on.mountReconciliationStatus,
      }),
      [],
    );
    expect(off).toMatchObject({ praxisConfigStatus: [], mountReconciliationStatus: [] });
    expect((await admin.request('GET', `/api/v1/namespaces/${NS}/configmaps/praxis-edge`)).status).toBe(404);

    // The Role's unnamed ConfigMap grant (content-hashed requirements) reaches a user's ConfigMap too, so the
    // operator's labels are what protects it: a recorded name that is not the operator's own is left in place.
    await post(`/api/v1/namespaces/${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'legacy-config' },
      data: { 'praxis.yaml': 'mine' },
    });
    const legacy = {
      gatewayName: 'legacy',
      namespace: NS,
      configMapName: 'legacy-config',
      phase: 'Rendered' as const,
      reason: '',
      message: '',
      observedGeneration: 1,
    };
    const kept = await publishGeneratedConfigs(ctx(), network(false, { praxisConfigStatus: [legacy] }), []);
    expect(kept.praxisConfigStatus).toEqual([]);
    expect((await admin.request('GET', `/api/v1/namespaces/${NS}/configmaps/legacy-config`)).status).toBe(200);
  });
});
