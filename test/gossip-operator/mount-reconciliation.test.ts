// Mount requirements and delegated mount reconciliation of generated consumer configs (as praxisConfigStatus and
// mountReconciliationStatus report them), and the cleanup when generation stops: the pure
// requirements document, then the reconcile functions on a real local store (state directory on disk) with a
// Deployment and Secrets written the way a user or kubectl would.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generatedConfigCleanupFixture } from './mount-fixtures.ts';
import { publishGeneratedConfigs } from '../../daemons/gossip-operator/controllers/generated-config.ts';
import {
  MOUNT_FIELD_MANAGER,
  reconcileMounts,
  type MountInput,
} from '../../daemons/gossip-operator/controllers/mount-reconciler.ts';
import {
  ANNOTATION_CONFIG_REVISION,
  ANNOTATION_MOUNT_RECONCILIATION,
  MOUNT_REQUIREMENTS_KEY,
  renderMountRequirements,
  type DeploymentObject,
  type MountRequirementsInput,
} from '../../daemons/gossip-operator/controllers/mount-requirements.ts';
import { CONFIG_MAP, DEPLOYMENT, SECRET } from '../../daemons/gossip-operator/kinds.ts';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import type { MountReconciliationStatus, PraxisConfig } from '../../schemas/generated/gridnetworks.ts';
import type { OverlayCandidate } from '../../schemas/generated/overlay-envelope.ts';
import { mountRequirementsConfigMapName } from '../../schemas/object-names.ts';
import { capturingLogger, tempDir } from './helpers.ts';

const NS = 'gw-ns';
const TOKEN = 'tok-mount-s3cr3t-bytes-0123';
const KEY_PEM = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----';

const credential = (cluster: string, secret: string, namespace = NS, key = 'token'): OverlayCandidate => ({
  kind: 'inference_model',
  name: 'qwen3',
  site: 'site-a',
  cluster,
  fresh: true,
  credential: { strategy: 'bearer_token', secretRef: { name: secret, namespace, key } },
});

const PRAXIS: PraxisConfig = {
  generate: true,
  enableProjectedCredentials: true,
  credentialMountPath: '/run/secrets/grid-credentials',
  tlsCertMountPath: '/etc/praxis/tls',
  clusterEndpoints: [
    {
      cluster: 'api',
      address: 'api.example.internal:443',
      transport: { mode: 'tls', sni: 'api.example.internal', caSecretRef: { name: 'api-ca' } },
    },
    { cluster: 'site-b', address: '10.0.0.4:30080', transport: { mode: 'mutual_tls', sni: 'site-b.grid.internal' } },
    {
      cluster: 'other',
      address: 'other.example.internal:443',
      transport: { mode: 'tls', sni: 'other.example.internal' },
    },
  ],
};

function requirementsInput(overrides: Partial<MountRequirementsInput> = {}): MountRequirementsInput {
  return {
    network: 'grid',
    gateway: { name: 'edge', namespace: NS },
    praxis: PRAXIS,
    configMapName: 'praxis-edge',
    configText: 'listeners: []\n',
    candidates: [credential('api', 'api-token'), credential('other', 'other-token', NS, 'bearer')],
    tls: {
      siteSecretRef: { name: 'site-cert', namespace: NS },
      caSecretRef: { name: 'grid-ca', namespace: 'grid-system' },
    },
    ...overrides,
  };
}

describe('renderMountRequirements', () => {
  it('projects the credential, TLS, backend CA and overlay mounts as directories, never subPath', () => {
    const r = renderMountRequirements(requirementsInput());
    if (!r.ok) throw new Error(r.message);
    const byName = Object.fromEntries(r.document.volumes.map((v) => [v.name, v]));
    expect(Object.keys(byName)).toEqual(['grid-backend-ca', 'grid-credentials', 'grid-routing-overlay', 'grid-tls']);
    expect(byName['grid-credentials']).toEqual({
      name: 'grid-credentials',
      mountPath: '/run/secrets/grid-credentials',
      projected: {
        defaultMode: 0o644,
        sources: [
          { secret: { name: 'api-token', items: [{ key: 'token', path: 'api-token/token' }] } },
          { secret: { name: 'other-token', items: [{ key: 'bearer', path: 'other-token/bearer' }] } },
        ],
      },
    });
    // The site TLS Secret only (never the CA Secret, which holds the CA key), at tlsCertMountPath.
    expect(byName['grid-tls']?.mountPath).toBe('/etc/praxis/tls');
    expect(byName['grid-tls']?.projected.sources).toEqual([
      { secret: { name: 'site-cert', items: ['ca.crt', 'tls.crt', 'tls.key'].map((k) => ({ key: k, path: k })) } },
    ]);
    expect(byName['grid-backend-ca']).toMatchObject({
      mountPath: '/run/secrets/grid-backend-ca',
      projected: { sources: [{ secret: { name: 'api-ca', items: [{ key: 'ca.crt', path: 'api-ca/ca.crt' }] } }] },
    });
    // routing-overlay.json lands at /etc/praxis/routing/routing-overlay.json through a directory mount.
    expect(byName['grid-routing-overlay']).toEqual({
      name: 'grid-routing-overlay',
      mountPath: '/etc/praxis/routing',
      projected: {
        defaultMode: 0o644,
        sources: [
          {
            configMap: {
              name: 'grid-overlay-grid-edge',
              items: [{ key: 'routing-overlay.json', path: 'routing-overlay.json' }],
            },
          },
        ],
      },
    });
    expect(r.text).not.toMatch(/subPath/);
    expect(r.document.secrets.map((s) => `${s.purpose}:${s.name}`)).toEqual([
      'backend-ca:api-ca',
      'credential:api-token',
      'credential:other-token',
      'tls:site-cert',
    ]);
  });

  it('is deterministic: the same requirements in any order give the same text and revision; a config change moves it', () => {
    const a = renderMountRequirements(requirementsInput());
    const b = renderMountRequirements(
      requirementsInput({
        candidates: [
          credential('other', 'other-token', NS, 'bearer'),
          credential('api', 'api-token'),
          credential('api', 'api-token'),
        ],
        praxis: { ...PRAXIS, clusterEndpoints: [...(PRAXIS.clusterEndpoints ?? [])].reverse() },
      }),
    );
    const c = renderMountRequirements(requirementsInput({ configText: 'listeners: [1]\n' }));
    if (!a.ok || !b.ok || !c.ok) throw new Error('render failed');
    expect(b.text).toBe(a.text);
    expect(b.revision).toBe(a.revision);
    expect(a.revision).toMatch(/^[0-9a-f]{16}$/);
    expect(c.revision).not.toBe(a.revision);
    // The config is referenced by digest, never copied.
    expect(a.text).not.toContain('listeners');
  });

  it('while the overlay is held back for attestation, carries the credential mount root but none of the held Secrets', () => {
    const held = renderMountRequirements(requirementsInput({ credentialsHeld: true }));
    const attested = renderMountRequirements(requirementsInput());
    if (!held.ok || !attested.ok) throw new Error('render failed');
    // Step one of the two-step: an empty projected directory at the mount root, so the consumer rolls out with it.
    expect(held.document.volumes.find((v) => v.name === 'grid-credentials')).toEqual({
      name: 'grid-credentials',
      mountPath: '/run/secrets/grid-credentials',
      projected: { defaultMode: 0o644, sources: [] },
    });
    expect(held.document.secrets.map((s) => `${s.purpose}:${s.name}`)).toEqual(['backend-ca:api-ca', 'tls:site-cert']);
    expect(held.text).not.toContain('api-token');
    // Step two (supportsProjectedCredentials set): the referenced Secrets are mounted, a new revision rolls out.
    expect(attested.document.secrets.map((s) => s.name)).toContain('api-token');
    expect(attested.revision).not.toBe(held.revision);
    // Projected mode carries the root even with no credential reference yet; without projected mode it does not.
    const none = renderMountRequirements(requirementsInput({ candidates: [] }));
    expect(none.ok && none.document.volumes.map((v) => v.name)).toContain('grid-credentials');
    const inline = renderMountRequirements(
      requirementsInput({ candidates: [], praxis: { ...PRAXIS, enableProjectedCredentials: false } }),
    );
    expect(inline.ok && inline.document.volumes.map((v) => v.name)).not.toContain('grid-credentials');
  });

  it('refuses a Secret outside the gateway namespace and a mutual_tls cluster without a site TLS Secret, naming them', () => {
    const foreign = renderMountRequirements(
      requirementsInput({ candidates: [credential('api', 'api-token', 'other-ns')] }),
    );
    expect(foreign).toMatchObject({ ok: false, reason: 'SecretOutsideGatewayNamespace' });
    expect(!foreign.ok && foreign.message).toContain('other-ns/api-token');
    const tls = renderMountRequirements(
      requirementsInput({ tls: { siteSecretRef: { name: 'site-cert', namespace: 'grid-system' } } }),
    );
    expect(!tls.ok && tls.message).toContain('grid-system/site-cert');
    const none = renderMountRequirements(requirementsInput({ tls: undefined }));
    expect(none).toMatchObject({ ok: false, reason: 'MissingTlsSecret' });
  });
});

describe('reconcile on the local store', () => {
  let dirs: { path: string; remove: () => Promise<void> };
  let store: LocalStore;
  let log: ReturnType<typeof capturingLogger>;
  const ctx = () => ({ store, logger: log.logger });
  const USER = { fieldManager: 'kubectl-client-side-apply' };

  const secret = (name: string, data: Record<string, string>, namespace = NS) =>
    store.apply(SECRET, { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData: data }, USER);

  function deployment(annotated = true): DeploymentObject {
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'inference-gw',
        namespace: NS,
        ...(annotated ? { annotations: { [ANNOTATION_MOUNT_RECONCILIATION]: 'enabled' } } : {}),
      },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'gw' } },
        template: {
          metadata: { labels: { app: 'gw' }, annotations: { team: 'edge' } },
          spec: {
            containers: [
              {
                name: 'praxis',
                image: 'praxis:1',
                volumeMounts: [{ name: 'config', mountPath: '/etc/praxis/config' }],
              },
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
  // The owner switches the opt-in off (the local store merges annotations key by key, so it is changed, not removed).
  const optedOut = (): DeploymentObject => {
    const d = deployment();
    d.metadata.annotations = { [ANNOTATION_MOUNT_RECONCILIATION]: 'disabled' };
    return d;
  };
  const getDeployment = async () =>
    (await store.get(DEPLOYMENT, { name: 'inference-gw', namespace: NS })) as DeploymentObject;
  const delegated: PraxisConfig = {
    ...PRAXIS,
    mountReconciliation: { enabled: true, deploymentName: 'inference-gw', containerName: 'praxis' },
  };
  const input = (praxis: PraxisConfig = delegated, overrides: Partial<MountInput> = {}): MountInput => ({
    network: 'grid',
    generation: 3,
    gateway: { name: 'edge', namespace: NS },
    praxis,
    configMapName: 'praxis-edge',
    configText: 'listeners: []\n',
    candidates: [credential('api', 'api-token')],
    tls: { siteSecretRef: { name: 'site-cert', namespace: NS } },
    ...overrides,
  });
  const allSecrets = async () => {
    await secret('api-token', { token: TOKEN });
    await secret('site-cert', { 'ca.crt': 'CA', 'tls.crt': 'CERT', 'tls.key': KEY_PEM });
    await secret('api-ca', { 'ca.crt': 'CA2' });
  };
  const noSecretData = (what: unknown) => {
    const text = JSON.stringify(what);
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('PRIVATE KEY');
  };

  beforeEach(async () => {
    dirs = await tempDir('mounts');
    store = await openLocalStore({ stateDir: join(dirs.path, 'state'), coalesceMs: 5 });
    log = capturingLogger();
  });
  afterEach(async () => {
    await store.close();
    await dirs.remove();
  });

  it('without delegation publishes a reference-only requirements ConfigMap and replaces a superseded one it owns', async () => {
    const plain: PraxisConfig = { ...PRAXIS };
    await allSecrets();
    const first = await reconcileMounts(ctx(), input(plain), undefined);
    expect(first).toMatchObject({
      gatewayName: 'edge',
      namespace: NS,
      phase: 'RequirementsRendered',
      reason: '',
      observedGeneration: 3,
    });
    expect(first.deploymentName).toBeUndefined();
    const name1 = mountRequirementsConfigMapName(first.requirementsRevision ?? '');
    const cm = await store.get<{
      apiVersion: string;
      kind: string;
      metadata: { name: string; labels?: Record<string, string> };
      data: Record<string, string>;
    }>(CONFIG_MAP, { name: name1, namespace: NS });
    expect(cm?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
      'grid.praxis.fast/gateway': 'edge',
    });
    expect(JSON.parse(cm?.data[MOUNT_REQUIREMENTS_KEY] ?? '{}').kind).toBe('MountRequirements');
    expect(first.message).toContain(`${NS}/${name1}`);
    noSecretData([cm, first, log.lines]);

    const second = await reconcileMounts(ctx(), input(plain, { configText: 'listeners: [changed]\n' }), first);
    expect(second.requirementsRevision).not.toBe(first.requirementsRevision);
    expect(await store.get(CONFIG_MAP, { name: name1, namespace: NS })).toBeUndefined();
    expect(
      await store.get(CONFIG_MAP, {
        name: mountRequirementsConfigMapName(second.requirementsRevision ?? ''),
        namespace: NS,
      }),
    ).toBeDefined();

    // A ConfigMap of the superseded name that the operator did not create for this gateway is left alone.
    const userName = mountRequirementsConfigMapName(second.requirementsRevision ?? '');
    await store.apply(
      CONFIG_MAP,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: userName, namespace: NS, labels: { 'app.kubernetes.io/managed-by': 'someone-else' } },
        data: {},
      },
      { fieldManager: 'kubectl', force: true },
    );
    await reconcileMounts(ctx(), input(plain), second);
    expect(await store.get(CONFIG_MAP, { name: userName, namespace: NS })).toBeDefined();
  });

  it('delegated: mounts the reserved volumes into the selected container only, then waits for the rollout, then Ready', async () => {
    await allSecrets();
    await store.apply(DEPLOYMENT, deployment(), USER);
    const before = await getDeployment();

    const applied = await reconcileMounts(ctx(), input(), undefined);
    expect(applied).toMatchObject({ deploymentName: 'inference-gw', phase: 'MountsReconciling' });
    const after = await getDeployment();
    const pod = after.spec?.template?.spec;
    expect(pod?.volumes?.map((v) => v.name)).toEqual([
      'config',
      'scratch',
      'grid-backend-ca',
      'grid-credentials',
      'grid-routing-overlay',
      'grid-tls',
    ]);
    expect(pod?.volumes?.slice(0, 2)).toEqual(before.spec?.template?.spec?.volumes);
    const praxis = pod?.containers?.find((c) => c.name === 'praxis');
    expect(praxis?.volumeMounts).toEqual([
      { name: 'config', mountPath: '/etc/praxis/config' },
      { name: 'grid-backend-ca', mountPath: '/run/secrets/grid-backend-ca', readOnly: true },
      { name: 'grid-credentials', mountPath: '/run/secrets/grid-credentials', readOnly: true },
      { name: 'grid-routing-overlay', mountPath: '/etc/praxis/routing', readOnly: true },
      { name: 'grid-tls', mountPath: '/etc/praxis/tls', readOnly: true },
    ]);
    expect(praxis?.volumeMounts?.some((m) => m.subPath !== undefined)).toBe(false);
    expect(praxis?.['image']).toBe('praxis:1');
    expect(pod?.containers?.find((c) => c.name === 'sidecar')).toEqual(before.spec?.template?.spec?.containers?.[1]);
    expect(after.spec?.template?.metadata?.annotations).toEqual({
      team: 'edge',
      [ANNOTATION_CONFIG_REVISION]: applied.requirementsRevision,
    });
    expect(after.spec?.replicas).toBe(2);
    expect(after.metadata.generation).toBe((before.metadata.generation ?? 0) + 1);
    expect(applied.deploymentGeneration).toBe(after.metadata.generation);
    expect((after.metadata['managedFields'] as { manager: string }[]).map((m) => m.manager)).toContain(
      MOUNT_FIELD_MANAGER,
    );

    // Nothing changes on the next pass until the Deployment controller reports the rollout.
    const waiting = await reconcileMounts(ctx(), input(), applied);
    expect(waiting).toMatchObject({
      phase: 'WaitingForRollout',
      reason: 'RolloutInProgress',
      requirementsRevision: applied.requirementsRevision,
    });
    expect(waiting.appliedRevision).toBeUndefined();
    expect((await getDeployment()).metadata.resourceVersion).toBe(after.metadata.resourceVersion);

    const status = { fieldManager: 'kube-controller-manager' };
    const ref = { name: 'inference-gw', namespace: NS };
    // Observed but only one new replica available: still rolling.
    await store.patchStatus(
      DEPLOYMENT,
      ref,
      { observedGeneration: after.metadata.generation, replicas: 3, updatedReplicas: 2, availableReplicas: 2 },
      status,
    );
    expect((await reconcileMounts(ctx(), input(), waiting)).phase).toBe('WaitingForRollout');
    await store.patchStatus(DEPLOYMENT, ref, { replicas: 2, updatedReplicas: 2, availableReplicas: 2 }, status);
    const ready = await reconcileMounts(ctx(), input(), waiting);
    expect(ready).toMatchObject({
      phase: 'Ready',
      reason: '',
      appliedRevision: applied.requirementsRevision,
      deploymentGeneration: after.metadata.generation,
    });
    noSecretData([await getDeployment(), applied, waiting, ready, log.lines]);

    // A changed config is a new revision: rolled out again, the Ready revision kept until it is done.
    const next = await reconcileMounts(ctx(), input(delegated, { configText: 'listeners: [2]\n' }), ready);
    expect(next).toMatchObject({ phase: 'MountsReconciling', appliedRevision: applied.requirementsRevision });
    expect(next.requirementsRevision).not.toBe(applied.requirementsRevision);
    expect((await getDeployment()).spec?.template?.metadata?.annotations?.[ANNOTATION_CONFIG_REVISION]).toBe(
      next.requirementsRevision,
    );
  });

  it('refuses a Deployment without the opt-in annotation, and leaves it untouched', async () => {
    await allSecrets();
    await store.apply(DEPLOYMENT, deployment(false), USER);
    const before = await getDeployment();
    const result = await reconcileMounts(ctx(), input(), undefined);
    expect(result).toMatchObject({ phase: 'Error', reason: 'DeploymentNotAnnotated' });
    expect(result.message).toContain(
      `Deployment ${NS}/inference-gw lacks the annotation ${ANNOTATION_MOUNT_RECONCILIATION}`,
    );
    expect(await getDeployment()).toEqual(before);
  });

  it('reports a missing Deployment, a missing container and a mount path the user already uses', async () => {
    await allSecrets();
    expect(await reconcileMounts(ctx(), input(), undefined)).toMatchObject({
      phase: 'Error',
      reason: 'DeploymentNotFound',
    });
    await store.apply(DEPLOYMENT, deployment(), USER);
    const noContainer = {
      ...delegated,
      mountReconciliation: { enabled: true, deploymentName: 'inference-gw', containerName: 'ghost' },
    };
    expect(await reconcileMounts(ctx(), input(noContainer), undefined)).toMatchObject({
      phase: 'Error',
      reason: 'ContainerNotFound',
    });
    const clash = deployment();
    clash.spec?.template?.spec?.containers?.[0]?.volumeMounts?.push({ name: 'config', mountPath: '/etc/praxis/tls' });
    await store.apply(DEPLOYMENT, clash, USER);
    const result = await reconcileMounts(ctx(), input(), undefined);
    expect(result).toMatchObject({ phase: 'Error', reason: 'MountPathConflict' });
    expect(result.message).toContain('/etc/praxis/tls');
  });

  it('waits for a missing Secret without touching the Deployment, and errors on a Secret in another namespace', async () => {
    await store.apply(DEPLOYMENT, deployment(), USER);
    await secret('site-cert', { 'ca.crt': 'CA', 'tls.crt': 'CERT', 'tls.key': KEY_PEM });
    await secret('api-ca', { 'ca.crt': 'CA2' });
    const before = await getDeployment();
    const waiting = await reconcileMounts(ctx(), input(), undefined);
    expect(waiting).toMatchObject({ phase: 'WaitingForSecret', reason: 'SecretNotFound' });
    expect(waiting.message).toContain(`${NS}/api-token`);
    expect(await getDeployment()).toEqual(before);

    // The Secret exists, but in the wrong namespace: an Error naming it, the Deployment still untouched.
    await secret('api-token', { token: TOKEN }, 'other-ns');
    const foreign = await reconcileMounts(
      ctx(),
      input(delegated, { candidates: [credential('api', 'api-token', 'other-ns')] }),
      waiting,
    );
    expect(foreign).toMatchObject({
      phase: 'Error',
      reason: 'SecretOutsideGatewayNamespace',
      requirementsRevision: waiting.requirementsRevision,
    });
    expect(foreign.message).toContain('other-ns/api-token');
    expect(await getDeployment()).toEqual(before);
    noSecretData([waiting, foreign, log.lines]);
  });

  it('held back for attestation: rolls out the mount root without waiting for a credential Secret that does not exist yet', async () => {
    await store.apply(DEPLOYMENT, deployment(), USER);
    await secret('site-cert', { 'ca.crt': 'CA', 'tls.crt': 'CERT', 'tls.key': KEY_PEM });
    await secret('api-ca', { 'ca.crt': 'CA2' });
    // api-token is missing: with the hold it is neither required nor mounted, so step one is not blocked.
    const held = await reconcileMounts(ctx(), input(delegated, { credentialsHeld: true }), undefined);
    expect(held, held.message).toMatchObject({ phase: 'MountsReconciling', reason: 'MountsApplied' });
    const volume = (await getDeployment()).spec?.template?.spec?.volumes?.find((v) => v.name === 'grid-credentials');
    expect(volume).toEqual({ name: 'grid-credentials', projected: { defaultMode: 0o644, sources: [] } });
    // Attested (no hold): now the Secret is required, and its absence is waited for without touching the Deployment.
    const before = await getDeployment();
    const step2 = await reconcileMounts(ctx(), input(delegated), held);
    expect(step2).toMatchObject({ phase: 'WaitingForSecret', reason: 'SecretNotFound' });
    expect(step2.message).toContain(`${NS}/api-token`);
    expect(await getDeployment()).toEqual(before);
  });

  it('does not patch a Deployment that changed between its read and the apply (resourceVersion precondition)', async () => {
    await allSecrets();
    await store.apply(DEPLOYMENT, deployment(), USER);
    // The owner removes the opt-in annotation right after the operator's GET: the store sees the edit in between.
    const racing = new Proxy(store, {
      get(target, property) {
        if (property !== 'get') {
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (...args: Parameters<LocalStore['get']>) => {
          const found = await target.get(...args);
          if (args[0] === DEPLOYMENT) await target.apply(DEPLOYMENT, optedOut(), USER);
          return found;
        };
      },
    });
    const result = await reconcileMounts({ store: racing, logger: log.logger }, input(), undefined);
    expect(result).toMatchObject({ phase: 'MountsReconciling', reason: 'DeploymentChanged' });
    const after = await getDeployment();
    expect(after.metadata.annotations?.[ANNOTATION_MOUNT_RECONCILIATION]).toBe('disabled');
    expect(after.spec?.template?.spec?.volumes?.map((v) => v.name)).toEqual(['config', 'scratch']);
    // The next reconcile reads the Deployment again and refuses it for the missing annotation.
    expect(await reconcileMounts(ctx(), input(), result)).toMatchObject({
      phase: 'Error',
      reason: 'DeploymentNotAnnotated',
    });
  });

  it('local store: an apply with a stale resourceVersion precondition is a conflict and writes nothing', async () => {
    const first = await store.apply(DEPLOYMENT, deployment(), USER);
    const second = await store.apply(DEPLOYMENT, optedOut(), USER);
    expect(second.metadata.resourceVersion).not.toBe(first.metadata.resourceVersion);
    await expect(
      store.apply(DEPLOYMENT, deployment(), { ...USER, resourceVersion: first.metadata.resourceVersion ?? '' }),
    ).rejects.toMatchObject({ code: 'conflict', statusCode: 409 });
    expect((await getDeployment()).metadata.resourceVersion).toBe(second.metadata.resourceVersion);
    await expect(
      store.apply(
        DEPLOYMENT,
        { ...deployment(), metadata: { ...deployment().metadata, name: 'absent' } },
        { ...USER, resourceVersion: '1' },
      ),
    ).rejects.toMatchObject({ code: 'conflict' });
    const ok = await store.apply(DEPLOYMENT, deployment(), {
      ...USER,
      resourceVersion: second.metadata.resourceVersion ?? '',
    });
    expect(ok.metadata.annotations?.[ANNOTATION_MOUNT_RECONCILIATION]).toBe('enabled');
    expect(ok.metadata.resourceVersion).not.toBe(second.metadata.resourceVersion);
  });

  it('generation turned off: deletes only the ConfigMaps the operator owns and drops their status entries', async () => {
    const f = generatedConfigCleanupFixture(NS);
    // "edge" generated earlier; "userland" pointed at a ConfigMap the user owns (the operator's apply had failed).
    for (const cm of f.configMaps)
      await store.apply(CONFIG_MAP, cm, {
        fieldManager:
          cm.metadata.labels?.['app.kubernetes.io/managed-by'] === 'grid-operator' ? 'grid-operator' : 'kubectl',
      });
    const outcome = await publishGeneratedConfigs(ctx(), f.network, []);
    expect(outcome.praxisConfigStatus).toEqual([]);
    expect(outcome.mountReconciliationStatus).toEqual([]);
    expect(await store.get(CONFIG_MAP, { name: 'praxis-edge', namespace: NS })).toBeUndefined();
    expect(await store.get(CONFIG_MAP, { name: f.requirementsName, namespace: NS })).toBeUndefined();
    expect(await store.get(CONFIG_MAP, { name: 'user-config', namespace: NS })).toBeDefined();
    expect(log.lines.join('')).toContain('not created by the operator');

    // Still generating under a new configMapName: the old one it owned goes, the new one is written.
    for (const cm of f.configMaps) await store.apply(CONFIG_MAP, cm, { fieldManager: 'grid-operator' });
    const renamed = await publishGeneratedConfigs(ctx(), f.renamed, []);
    expect(renamed.praxisConfigStatus.map((s) => `${s.gatewayName}:${s.configMapName}:${s.phase}`)).toEqual([
      'edge:praxis-edge-v2:Rendered',
    ]);
    expect(await store.get(CONFIG_MAP, { name: 'praxis-edge', namespace: NS })).toBeUndefined();
    expect(await store.get(CONFIG_MAP, { name: 'praxis-edge-v2', namespace: NS })).toBeDefined();
    const mount = renamed.mountReconciliationStatus[0] as MountReconciliationStatus;
    expect(mount).toMatchObject({ gatewayName: 'edge', phase: 'RequirementsRendered' });

    // The gateway removed from consumerGateways altogether: what it generated goes with it.
    const removed = await publishGeneratedConfigs(
      ctx(),
      {
        ...f.renamed,
        spec: { consumerGateways: [] },
        status: {
          praxisConfigStatus: renamed.praxisConfigStatus,
          mountReconciliationStatus: renamed.mountReconciliationStatus,
        },
      },
      [],
    );
    expect(removed).toMatchObject({ praxisConfigStatus: [], mountReconciliationStatus: [], pending: false });
    expect(await store.get(CONFIG_MAP, { name: 'praxis-edge-v2', namespace: NS })).toBeUndefined();
    expect(
      await store.get(CONFIG_MAP, {
        name: mountRequirementsConfigMapName(mount.requirementsRevision ?? ''),
        namespace: NS,
      }),
    ).toBeUndefined();
    expect(await store.get(CONFIG_MAP, { name: 'user-config', namespace: NS })).toBeDefined();
  });
});
