// The RBAC that dist/east.k8s.yaml grants, exercised with the ServiceAccounts' own tokens (TokenRequest), never
// the admin's: the real overlay-sync program watches the one overlay ConfigMap it is scoped to while the
// operator's identity publishes overlays with server-side apply (field manager grid-operator, docs/contract.md §2.1);
// then each identity is shown to hold what the daemons need and to be refused what it was not granted.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import { siteNameLedgerConfigMapName } from '../../schemas/object-names.ts';
import { buildEnvelope, serializeOverlay } from '../../schemas/overlay/envelope.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { fnv1a32Hex } from '../../schemas/fnv1a.ts';
import type { KubeResponse } from '../../daemons/shared/resource-store/kube-http.ts';
import { renderKubeconfig } from './certs.ts';
import { adminKubeConfig, waitFor } from './kube.ts';
import { applyManifests, readManifests, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';
import { startOverlaySyncProcess } from './overlay-sync-process.ts';
import type { OverlaySyncProcess } from './overlay-sync-process.ts';
import { inject } from 'vitest';

const east = readManifests('east.k8s.yaml');
const NAMESPACE = 'grid-system';
const OPERATOR_SA = 'gossip-operator';
const OPERATOR_MANAGER = 'grid-operator';

// overlay-sync's identity and scope, read from the manifests rather than restated here.
const syncContainer = (() => {
  for (const m of east) {
    if (m.object.kind !== 'Deployment') continue;
    const spec = m.object['spec'] as {
      template: {
        spec: { serviceAccountName?: string; containers: { name: string; env?: { name: string; value?: string }[] }[] };
      };
    };
    const container = spec.template.spec.containers.find((c) => c.name === 'overlay-sync');
    if (container) {
      const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? '']));
      return { deployment: m.object.metadata.name, serviceAccount: spec.template.spec.serviceAccountName ?? '', env };
    }
  }
  throw new Error('dist/east.k8s.yaml has no Deployment with an overlay-sync container');
})();
const NETWORK = syncContainer.env['OVERLAY_SYNC_EXPECTED_NETWORK'] ?? '';
const GATEWAY = syncContainer.env['OVERLAY_SYNC_EXPECTED_GATEWAY'] ?? '';
const LOCAL_SITE = syncContainer.env['OVERLAY_SYNC_EXPECTED_LOCAL_SITE'] ?? '';
const CONFIGMAP = overlayConfigMapName(NETWORK, GATEWAY);

function overlayText(sequence: number, scope: { network?: string; namespace?: string } = {}): string {
  const candidates: OverlayCandidate[] = [0, 1].map((i) => ({
    kind: 'inference_model',
    name: `model-${i}`,
    site: i === 0 ? 'east' : 'west',
    cluster: `cluster-${i}`,
    fresh: true,
    stable_id: fnv1a32Hex(`inference_model/model-${i}/${i === 0 ? 'east' : 'west'}/cluster-${i}`),
    admission_state: 'new_and_existing',
    selection_tier: i === 0 ? 'local' : 'cross_region',
    score: ((sequence * 7919 + i) % 1000) / 1000,
    rank: i,
  }));
  const network = scope.network ?? NETWORK;
  return serializeOverlay(
    buildEnvelope({
      payload: {
        network,
        local_site: LOCAL_SITE,
        candidates,
        generated_at: `2026-11-29T00:00:${String(sequence % 60).padStart(2, '0')}Z`,
      },
      scope: { gateway: GATEWAY, namespace: scope.namespace ?? NAMESPACE },
      provenance: {
        producer_version: '0.1.0',
        source_uid: 'cluster-test',
        source_generation: sequence,
        rendered_at: '2026-11-29T00:00:00Z',
      },
    }),
  );
}

// The overlay ConfigMap as the operator publishes it (docs/contract.md §2.1): both data keys, labels, annotations.
function overlayConfigMap(text: string): Manifest['object'] {
  let annotations: Record<string, string> = {};
  let bare = '{}\n';
  try {
    const envelope = JSON.parse(text) as {
      schema_version: string;
      revision: { value: string };
      content_digest: { value: string };
      overlay: unknown;
    };
    annotations = {
      'grid.praxis.fast/overlay-schema-version': envelope.schema_version,
      'grid.praxis.fast/overlay-revision': envelope.revision.value,
      'grid.praxis.fast/overlay-content-digest': envelope.content_digest.value,
    };
    bare = serializeOverlay(envelope.overlay);
  } catch {
    // A malformed document is published as-is: that is the case under test.
  }
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: CONFIGMAP,
      namespace: NAMESPACE,
      labels: {
        'app.kubernetes.io/managed-by': 'grid-operator',
        'grid.praxis.fast/network': NETWORK,
        'grid.praxis.fast/gateway': GATEWAY,
      },
      annotations,
    },
    data: { 'routing-overlay.json': text, 'routing-config.json': bare },
  };
}

const revisionOf = (text: string): string => (JSON.parse(text) as { revision: { value: string } }).revision.value;

let admin: RawClient;
let operator: RawClient;
let sync: RawClient;
let workDir: string;
let syncKubeconfig: string;
const tokens: string[] = [];

async function mintToken(serviceAccount: string): Promise<string> {
  const res = await admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${serviceAccount}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest for ${serviceAccount}: HTTP ${res.status}`);
  const token = (res.body as { status: { token: string } }).status.token;
  tokens.push(token);
  return token;
}

function tokenClient(token: string): { client: RawClient; kubeconfig: string } {
  const kubeconfig = renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: 'sa', token });
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  return { client: new RawClient(kc), kubeconfig };
}

async function operatorApply(text: string): Promise<KubeResponse> {
  return operator.apply(overlayConfigMap(text), OPERATOR_MANAGER, { force: 'true' });
}

beforeAll(async () => {
  admin = new RawClient(adminKubeConfig());
  await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  // A rerun against a kept cluster starts from no overlay ConfigMap, like a fresh install.
  await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/configmaps/${CONFIGMAP}`);
  operator = tokenClient(await mintToken(OPERATOR_SA)).client;
  const minted = tokenClient(await mintToken(syncContainer.serviceAccount));
  sync = minted.client;
  workDir = await mkdtemp(join(tmpdir(), 'agn-rbac-'));
  syncKubeconfig = join(workDir, 'overlay-sync.kubeconfig');
  await writeFile(syncKubeconfig, minted.kubeconfig, { mode: 0o600 });
});

afterAll(async () => {
  tokens.splice(0);
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('the identities dist/ creates', () => {
  it('are the ServiceAccounts the Deployments run as, and their minted tokens authenticate as them', async () => {
    expect(syncContainer.serviceAccount).toMatch(/overlay-sync$/);
    expect(CONFIGMAP).toBe(syncContainer.env['OVERLAY_SYNC_CONFIGMAP']);
    const operatorDeployment = east.find(
      (m) => m.object.kind === 'Deployment' && m.object.metadata.name === OPERATOR_SA,
    );
    expect(
      (operatorDeployment!.object['spec'] as { template: { spec: { serviceAccountName: string } } }).template.spec
        .serviceAccountName,
    ).toBe(OPERATOR_SA);
    for (const [client, sa] of [
      [operator, OPERATOR_SA],
      [sync, syncContainer.serviceAccount],
    ] as const) {
      const res = await client.request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'SelfSubjectReview',
      });
      expect((res.body as { status: { userInfo: { username: string } } }).status.userInfo.username).toBe(
        `system:serviceaccount:${NAMESPACE}:${sa}`,
      );
    }
  });
});

describe('overlay-sync (real program, its own token) and the operator (its own token, SSA)', () => {
  let daemon: OverlaySyncProcess | undefined;
  let output: string;
  let written = '';

  const fileText = async (): Promise<string | undefined> => readFile(output, 'utf8').catch(() => undefined);
  const untilFile = (text: string, what: string) =>
    waitFor(what, async () => ((await fileText()) === text ? true : undefined), 30_000);
  const untilStatus = (what: string, accept: (s: Record<string, any>) => boolean) =>
    waitFor(
      what,
      async () => {
        const s = await daemon!.status();
        return accept(s) ? s : undefined;
      },
      30_000,
    );

  beforeAll(async () => {
    output = join(workDir, 'run', 'routing-overlay.json');
    daemon = startOverlaySyncProcess(['--store', 'kubernetes', '--kubeconfig', syncKubeconfig], {
      ...syncContainer.env,
      OVERLAY_SYNC_OUTPUT: output,
      OVERLAY_SYNC_HEALTH_ADDR: '127.0.0.1:0',
    });
    await waitFor(
      'overlay-sync to serve /status',
      async () =>
        daemon!.exited()
          ? Promise.reject(new Error(`exited: ${daemon!.stderr()}`))
          : (await daemon!.status())
            ? true
            : undefined,
      60_000,
    );
  });

  afterAll(async () => {
    await daemon?.stop();
    // The token never reaches a log line: no secret ever does.
    const log = JSON.stringify(daemon?.lines ?? []) + (daemon?.stderr() ?? '');
    for (const token of tokens) expect(log.includes(token)).toBe(false);
  });

  it('starts cold and not ready while its ConfigMap does not exist', async () => {
    const status = await untilStatus(
      'the absent ConfigMap to be observed',
      (s) => s['degraded_reason'] === 'configmap_absent' || s['observed']?.reason === 'configmap_absent',
    );
    expect(status['state']).toBe('cold');
    expect((await daemon!.get('/readyz')).status).toBe(503);
    expect(await fileText()).toBeUndefined();
  });

  it('writes the exact bytes of the overlay the operator applies with server-side apply', async () => {
    // Created, then updated with the operator's token: the file must always hold what was applied last.
    const first = overlayText(1);
    expect((await operatorApply(first)).status).toBe(201);
    await untilFile(first, 'the overlay file after the ConfigMap was created');
    const text = overlayText(11);
    const res = await operatorApply(text);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const managers = (
      (res.body as { metadata: { managedFields: { manager: string; operation: string }[] } }).metadata.managedFields ??
      []
    ).map((f) => `${f.manager}/${f.operation}`);
    expect(managers).toEqual([`${OPERATOR_MANAGER}/Apply`]);
    await untilFile(text, 'the first overlay file');
    written = text;
    const status = await untilStatus('ready', (s) => s['state'] === 'ready');
    expect(status['written'].revision).toBe(revisionOf(text));
    expect((await daemon!.get('/readyz')).status).toBe(200);
  });

  it('leaves the file unchanged on an invalid update (wrong scope, then not JSON) and reports why', async () => {
    const foreign = overlayText(2, { network: 'someone-elses-grid' });
    expect((await operatorApply(foreign)).status).toBe(200);
    let status = await untilStatus('the scope mismatch to be rejected', (s) => s['observed']?.outcome === 'rejected');
    expect(status['state']).toBe('ready_degraded');
    expect(status['degraded_reason']).toBe('scope_mismatch');
    expect(await fileText()).toBe(written);

    expect((await operatorApply('{"schema_version": "1.0.0", "revision": ')).status).toBe(200);
    status = await untilStatus(
      'the malformed document to be rejected',
      (s) => s['observed']?.outcome === 'rejected' && s['degraded_reason'] === 'malformed',
    );
    expect(await fileText()).toBe(written);
    expect(status['written'].revision).toBe(revisionOf(written));

    const next = overlayText(3);
    expect((await operatorApply(next)).status).toBe(200);
    await untilFile(next, 'the next valid overlay after two rejected ones');
    written = next;
    expect((await untilStatus('ready again', (s) => s['state'] === 'ready'))['degraded_reason']).toBeNull();
  });

  it('survives the ConfigMap being deleted and recreated without a restart, and ends on the newest update', async () => {
    const pidBefore = daemon!.pid;
    const del = await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/configmaps/${CONFIGMAP}`);
    expect(del.status).toBe(200);
    const status = await untilStatus(
      'the deletion to be observed',
      (s) => s['degraded_reason'] === 'configmap_deleted',
    );
    expect(status['state']).toBe('ready_degraded');
    expect(await fileText()).toBe(written); // last-known-good stays for the gateway

    // Recreated by the operator's apply, then updated right away: the last one must land.
    const recreated = overlayText(4);
    const newest = overlayText(5);
    expect((await operatorApply(recreated)).status).toBe(201);
    expect((await operatorApply(newest)).status).toBe(200);
    await untilFile(newest, 'the update made right after the recreate');
    await untilStatus(
      'ready after the recreate',
      (s) => s['state'] === 'ready' && s['written'].revision === revisionOf(newest),
    );
    expect(daemon!.exited()).toBe(false);
    expect(daemon!.pid).toBe(pidBefore);
    const restarted = daemon!.lines.filter((l) => l['msg'] === 'overlay-sync started');
    expect(restarted).toHaveLength(1);
  });
});

interface Probe {
  readonly what: string;
  readonly method: 'GET' | 'PATCH' | 'DELETE' | 'POST' | 'PUT';
  readonly path: string;
  readonly body?: unknown;
  readonly contentType?: string;
}

const merge = 'application/merge-patch+json';
const ns = `/api/v1/namespaces/${NAMESPACE}`;
const grid = '/apis/grid.praxis.fast/v1alpha1';

async function expectAllowed(client: RawClient, probe: Probe): Promise<number> {
  const res = await client.request(
    probe.method,
    probe.path,
    probe.body,
    probe.contentType ? { contentType: probe.contentType } : {},
  );
  expect(res.status, `${probe.what}: ${JSON.stringify(res.body)}`).not.toBe(403);
  expect(res.status, `${probe.what}: ${JSON.stringify(res.body)}`).toBeLessThan(500);
  return res.status;
}

async function expectRefused(client: RawClient, probe: Probe, serviceAccount: string): Promise<void> {
  const res = await client.request(
    probe.method,
    probe.path,
    probe.body,
    probe.contentType ? { contentType: probe.contentType } : {},
  );
  expect(res.status, `${probe.what} should be forbidden: ${JSON.stringify(res.body)}`).toBe(403);
  expect((res.body as { message: string }).message).toContain(`system:serviceaccount:${NAMESPACE}:${serviceAccount}`);
}

describe('what the operator token is granted', () => {
  it('creates its overlay ConfigMap with server-side apply, field manager grid-operator (docs/contract.md §2.1)', async () => {
    // The API server authorizes an apply that creates the object as `create`, checked with the URL's name, so the
    // table grants `create` scoped by resourceNames.
    const name = overlayConfigMapName(NETWORK, GATEWAY);
    await admin.request('DELETE', `${ns}/configmaps/${name}`);
    const res = await operatorApply(overlayText(99));
    expect(res.status, `operator SSA-create of ${name}: ${JSON.stringify(res.body)}`).toBe(201);
  });

  const gridObjects = east.filter((m) => m.object.apiVersion.startsWith('grid.praxis.fast/'));

  beforeAll(async () => {
    // East declares no AgentToAgentProvider; one is made (as admin) so every grid kind's status is covered.
    await admin.apply(
      {
        apiVersion: 'grid.praxis.fast/v1alpha1',
        kind: 'AgentToAgentProvider',
        metadata: { name: 'rbac-a2a' },
        spec: { gridNetworkRef: NETWORK, endpoint: 'http://agent.example.test:8080' },
      },
      'agn-cluster-test',
    );
  });

  it('patches the status subresource of every grid kind', async () => {
    const objects = [
      ...gridObjects.map((m) => m.object),
      { apiVersion: 'grid.praxis.fast/v1alpha1', kind: 'AgentToAgentProvider', metadata: { name: 'rbac-a2a' } },
    ];
    expect(new Set(objects.map((o) => o.kind)).size).toBe(6);
    for (const object of objects) {
      const path = await operator.objectPath(object as Manifest['object'], 'status');
      const res = await operator.request('PATCH', path, { status: { observedGeneration: 1 } }, { contentType: merge });
      expect(res.status, `${object.kind} ${object.metadata.name}: ${JSON.stringify(res.body)}`).toBe(200);
      expect((res.body as { status: { observedGeneration: number } }).status.observedGeneration).toBe(1);
    }
  });

  it('watches the grid kinds, reads its Secrets by name, and creates, reads and renews its leader Lease', async () => {
    await expectAllowed(operator, { what: 'list gridnetworks', method: 'GET', path: `${grid}/gridnetworks` });
    await expectAllowed(operator, {
      what: 'watch siteinvites',
      method: 'GET',
      path: `${grid}/siteinvites?watch=1&timeoutSeconds=1`,
    });
    // 404, not 403: allowed to read the referenced Secret, which nobody has created in this test cluster.
    expect(
      await expectAllowed(operator, { what: 'get Secret swim-key', method: 'GET', path: `${ns}/secrets/swim-key` }),
    ).toBe(404);
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;
    await admin.request('DELETE', `${leases}/gossip-operator-leader`);
    // As daemons/gossip-operator/manager/leader-election.ts does: server-side apply to the Lease's own URL, which
    // is authorized as create the first time and as patch afterwards, both scoped by name.
    const lease = (renewTime: string) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'gossip-operator-leader', namespace: NAMESPACE },
      spec: { holderIdentity: 'op-0', leaseDurationSeconds: 15, renewTime },
    });
    expect(
      (await operator.apply(lease('2026-11-29T12:00:00.000000Z'), 'grid-operator-leader-election', { force: 'true' }))
        .status,
    ).toBe(201);
    const read = await operator.request('GET', `${leases}/gossip-operator-leader`);
    expect(read.status).toBe(200);
    expect(
      (await operator.apply(lease('2026-11-29T12:00:05.000000Z'), 'grid-operator-leader-election', { force: 'true' }))
        .status,
    ).toBe(200);
    const another = { ...lease('2026-11-29T12:00:00.000000Z'), metadata: { name: 'other', namespace: NAMESPACE } };
    expect((await operator.apply(another, 'grid-operator-leader-election', { force: 'true' })).status).toBe(403);
  });

  it('creates and updates its site name ledger ConfigMap with server-side apply, and no other by that prefix', async () => {
    // As daemons/gossip-operator/site-name-ledger.ts does: the whole map applied to the ConfigMap's own URL.
    const name = siteNameLedgerConfigMapName(LOCAL_SITE);
    await admin.request('DELETE', `${ns}/configmaps/${name}`);
    const ledger = (data: Record<string, string>, cm = name) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: cm, namespace: NAMESPACE },
      data,
    });
    expect(
      (await operator.apply(ledger({ west: '2026-11-29T12:00:00Z' }), OPERATOR_MANAGER, { force: 'true' })).status,
    ).toBe(201);
    expect((await operator.request('GET', `${ns}/configmaps/${name}`)).status).toBe(200);
    expect(
      (
        await operator.apply(
          ledger({ west: '2026-11-29T12:00:00Z', north: '2026-11-29T12:00:05Z' }),
          OPERATOR_MANAGER,
          { force: 'true' },
        )
      ).status,
    ).toBe(200);
    expect(
      (
        await operator.apply(
          ledger({ west: '2026-11-29T12:00:00Z' }, siteNameLedgerConfigMapName('other')),
          OPERATOR_MANAGER,
          { force: 'true' },
        )
      ).status,
    ).toBe(403);
    await expectRefused(
      operator,
      { what: 'delete the site name ledger', method: 'DELETE', path: `${ns}/configmaps/${name}` },
      OPERATOR_SA,
    );
  });

  it('is refused everything else it might try', async () => {
    const refused: Probe[] = [
      {
        what: 'create a Secret',
        method: 'POST',
        path: `${ns}/secrets`,
        body: { metadata: { name: 'stolen' }, data: {} },
      },
      { what: 'read a Secret no resource references', method: 'GET', path: `${ns}/secrets/other` },
      { what: 'list Secrets', method: 'GET', path: `${ns}/secrets` },
      {
        what: 'delete a CRD',
        method: 'DELETE',
        path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gridnetworks.grid.praxis.fast',
      },
      {
        what: 'create a CRD',
        method: 'POST',
        path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        body: { metadata: { name: 'x.example.com' } },
      },
      {
        what: 'change a GridNetwork spec',
        method: 'PATCH',
        path: `${grid}/gridnetworks/${NETWORK}`,
        body: { spec: { region: 'x' } },
        contentType: merge,
      },
      { what: 'delete a GridNetwork', method: 'DELETE', path: `${grid}/gridnetworks/${NETWORK}` },
      { what: 'delete the overlay ConfigMap', method: 'DELETE', path: `${ns}/configmaps/${CONFIGMAP}` },
      {
        what: 'patch another ConfigMap',
        method: 'PATCH',
        path: `${ns}/configmaps/consumer-gateway-config`,
        body: { data: { x: 'y' } },
        contentType: merge,
      },
      { what: 'list ConfigMaps', method: 'GET', path: `${ns}/configmaps` },
      {
        what: 'update another Lease',
        method: 'PUT',
        path: `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/other`,
        body: { metadata: { name: 'other' } },
      },
      { what: 'create a Pod', method: 'POST', path: `${ns}/pods`, body: { metadata: { name: 'p' } } },
      {
        what: 'escalate its own Role',
        method: 'PATCH',
        path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/roles/${OPERATOR_SA}`,
        body: { rules: [] },
        contentType: merge,
      },
      {
        what: 'get a ConfigMap in another namespace',
        method: 'GET',
        path: `/api/v1/namespaces/default/configmaps/${CONFIGMAP}`,
      },
    ];
    for (const probe of refused) await expectRefused(operator, probe, OPERATOR_SA);
  });
});

describe('what the overlay-sync token is granted', () => {
  it('reads, lists and watches its one ConfigMap by name and nothing else', async () => {
    const sa = syncContainer.serviceAccount;
    await expectAllowed(sync, {
      what: 'list by name',
      method: 'GET',
      path: `${ns}/configmaps?fieldSelector=metadata.name%3D${CONFIGMAP}`,
    });
    await expectAllowed(sync, {
      what: 'watch by name',
      method: 'GET',
      path: `${ns}/configmaps?fieldSelector=metadata.name%3D${CONFIGMAP}&watch=1&timeoutSeconds=1`,
    });
    const refused: Probe[] = [
      { what: 'read another ConfigMap', method: 'GET', path: `${ns}/configmaps/consumer-gateway-config` },
      { what: 'list every ConfigMap', method: 'GET', path: `${ns}/configmaps` },
      {
        what: 'write its ConfigMap',
        method: 'PATCH',
        path: `${ns}/configmaps/${CONFIGMAP}`,
        body: { data: { x: 'y' } },
        contentType: merge,
      },
      { what: 'delete its ConfigMap', method: 'DELETE', path: `${ns}/configmaps/${CONFIGMAP}` },
      { what: 'read a Secret', method: 'GET', path: `${ns}/secrets/swim-key` },
      { what: 'list Secrets', method: 'GET', path: `${ns}/secrets` },
      { what: 'read the grid', method: 'GET', path: `${grid}/gridnetworks` },
      {
        what: 'read a Lease',
        method: 'GET',
        path: `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/gossip-operator-leader`,
      },
      {
        what: 'mint a token for the operator',
        method: 'POST',
        path: `${ns}/serviceaccounts/${OPERATOR_SA}/token`,
        body: { spec: {} },
      },
    ];
    for (const probe of refused) await expectRefused(sync, probe, sa);
  });
});
