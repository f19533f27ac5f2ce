// The serving config's lifecycle on a real API server (a control plane of its own: this file changes the GridNetwork
// and the operator's Role, which the shared plane's other files rely on). dist/'s east, synthesized here with its
// consumer gateway declared gridServing (and peerSignals, which gridServing needs), is applied as a user would; the
// real gossip-operator runs on that site's ServiceAccount token, so it has exactly the Role the constructs compile:
// it applies grid-serving-demo-consumer-gateway and reports it in GridNetwork status.servingConfigStatus; the
// serving sidecar's ServiceAccount reads that one ConfigMap and nothing else it should not (and the real overlay-sync
// in serving mode writes its bytes); re-applying the site synthesized without gridServing makes the operator delete
// the ConfigMap, while a look-alike ConfigMap and, later, a ConfigMap at the same name the operator no longer owns
// are left in place.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { Testing } from 'cdk8s';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleGrid } from '../../constructs/example-grid.ts';
import { buildGrid } from '../../constructs/grid.ts';
import { createCertificateAuthority, createSiteCertificate } from '../../daemons/shared/tls.ts';
import { validateCustomResource } from '../../schemas/crds/validate.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import {
  SERVING_DATA_KEY,
  servingConfigMapName,
  SYNC_MAX_SERVING_BYTES,
  validateServing,
} from '../../schemas/serving/serving-config.ts';
import { renderKubeconfig } from './certs.ts';
import { resolveBinDir, startControlPlane, type ControlPlane } from './control-plane.ts';
import { waitFor } from './kube.ts';
import { applyManifests, applyObjects, RawClient, type Manifest } from './manifests.ts';
import { freePort, startOperatorProcess, type OperatorProcess } from './operator-process.ts';
import { referencedSecrets, secretData } from './site-secrets.ts';
import { startOverlaySyncProcess, type OverlaySyncProcess } from './overlay-sync-process.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

const NS = 'grid-system';
const OPERATOR_SA = 'gossip-operator';
const SITE = 'east';

/** dist/'s east as the compiler builds it, with its consumer gateway served or not. */
function eastSite(gridServing: boolean): Manifest[] {
  const declaration = {
    ...exampleGrid,
    sites: exampleGrid.sites.map((s) =>
      s.name !== SITE
        ? s
        : {
            ...s,
            peerSignals: { advertise: 'gossip.east.grid.example.com:7950' },
            consumerGateway: { ...s.consumerGateway, ...(gridServing ? { gridServing: {} } : {}) },
          },
    ),
  };
  const built = buildGrid(Testing.app(), declaration);
  const objects = Testing.synth(built.sites.find((s) => s.siteName === SITE)!) as Manifest['object'][];
  return objects.map((object, index) => ({ file: `east (gridServing ${gridServing ? 'on' : 'off'})`, index, object }));
}

const served = eastSite(true);
const network = served.find((m) => m.object.kind === 'GridNetwork')!.object;
const gateway = (
  network['spec'] as { consumerGateways: { name: string; namespace: string; gridServing?: boolean }[] }
).consumerGateways.find((g) => g.gridServing === true)!;
const SERVING = servingConfigMapName(network.metadata.name, gateway.name);
const FOREIGN = `${SERVING}-backup`;
const cmPath = (name: string) => `/api/v1/namespaces/${NS}/configmaps/${name}`;
const NETWORK_PATH = `/apis/grid.praxis.fast/v1alpha1/gridnetworks/${network.metadata.name}`;
const deployment = (name: string) =>
  served.find((m) => m.object.kind === 'Deployment' && m.object.metadata.name === name)!.object['spec'] as {
    template: {
      spec: { serviceAccountName?: string; containers: { name: string; env?: { name: string; value?: string }[] }[] };
    };
  };
const envOf = (deploymentName: string, container: string): Record<string, string> =>
  Object.fromEntries(
    (deployment(deploymentName).template.spec.containers.find((c) => c.name === container)?.env ?? [])
      .filter((e) => e.value !== undefined)
      .map((e) => [e.name, e.value!]),
  );
const servingSync = {
  serviceAccount: deployment(gateway.name).template.spec.serviceAccountName ?? '',
  env: envOf(gateway.name, 'serving-sync'),
};

let plane: ControlPlane | undefined;
let admin: RawClient;
let workDir: string;
let operator: OperatorProcess | undefined;
let sync: OverlaySyncProcess | undefined;
let signalsPort = 0;
const secretsInPlay: string[] = [];

const get = async (path: string): Promise<Json | undefined> => {
  const res = await admin.request('GET', path);
  return res.status === 200 ? (res.body as Json) : undefined;
};

/** Every Secret the site's grid objects reference, made with material of the role it plays there. */
async function makeSecrets(): Promise<void> {
  const ca = await createCertificateAuthority({ commonName: 'agn serving test ca' });
  const site = await createSiteCertificate(ca, { commonName: SITE, sans: [SITE] });
  const material = { caPem: ca.certPem, certPem: site.certPem, keyPem: site.keyPem };
  const specs = served.filter((m) => m.object.apiVersion.startsWith('grid.praxis.fast/')).map((m) => m.object['spec']);
  for (const { ref, role } of referencedSecrets(specs).values()) {
    const data = secretData(ref, role, material, secretsInPlay);
    const res = await admin.request('POST', `/api/v1/namespaces/${ref.namespace}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: ref.name },
      type: 'Opaque',
      data,
    });
    if (res.status !== 201) throw new Error(`create Secret ${ref.namespace}/${ref.name}: HTTP ${res.status}`);
  }
}

async function kubeconfigFor(serviceAccount: string): Promise<{ path: string; client: RawClient }> {
  const res = await admin.request('POST', `/api/v1/namespaces/${NS}/serviceaccounts/${serviceAccount}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest for ${serviceAccount}: HTTP ${res.status}`);
  const token = (res.body as { status: { token: string } }).status.token;
  secretsInPlay.push(token);
  const text = renderKubeconfig(plane!.server, plane!.caPem, { name: serviceAccount, token });
  const path = join(workDir, `${serviceAccount}.kubeconfig`);
  await writeFile(path, text, { mode: 0o600 });
  const kc = new KubeConfig();
  kc.loadFromString(text);
  return { path, client: new RawClient(kc) };
}

/** The operator's warnings, for a wait that timed out. */
const complaints = (): string =>
  (operator?.output() ?? '')
    .split('\n')
    .filter((l) => /"level":"(warn|error)"/.test(l) && !/SWIM seed skipped/.test(l))
    .slice(-8)
    .join(' | ')
    .slice(0, 3000);

/** The serving ConfigMap and the GridNetwork's entry for it, once the entry is Distributed at the ConfigMap's revision. */
async function distributed(): Promise<{ cm: Json; entry: Json; net: Json }> {
  let last: unknown;
  return waitFor(
    "a Distributed servingConfigStatus entry at the serving ConfigMap's revision",
    async () => {
      if (operator?.exited()) throw new Error(`gossip-operator exited: ${operator.output().slice(-2000)}`);
      const net = await get(NETWORK_PATH);
      const entry = (net?.['status']?.['servingConfigStatus'] as Json[] | undefined)?.find(
        (e) => e['gatewayName'] === gateway.name && e['namespace'] === gateway.namespace,
      );
      last = net?.['status'];
      const cm = await get(cmPath(SERVING));
      if (entry?.['phase'] !== 'Distributed' || cm === undefined) return undefined;
      return cm['metadata']['annotations']?.['grid.praxis.fast/serving-revision'] === entry['distributedRevision']
        ? { cm, entry, net: net! }
        : undefined;
    },
    60_000,
  ).catch((error: Error) => {
    throw new Error(
      `${error.message}; last status ${JSON.stringify(last)?.slice(0, 1500)}; operator warnings: ${complaints()}`,
    );
  });
}

/** Applies the site synthesized with gridServing on or off, as a user re-applying their compiled manifests. */
async function applySite(gridServing: boolean): Promise<void> {
  await applyObjects(admin, gridServing ? served : eastSite(false));
}

const cmLabels = () => ({
  'app.kubernetes.io/managed-by': 'grid-operator',
  'grid.praxis.fast/network': network.metadata.name,
  'grid.praxis.fast/gateway': gateway.name,
  'app.kubernetes.io/component': 'serving',
});

const deletesCounted = async (outcome: string): Promise<number> => {
  const text = (await operator!.get('/metrics')).body;
  return Number(
    new RegExp(`^grid_serving_config_deletes_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0,
  );
};

beforeAll(async () => {
  plane = await startControlPlane({ binDir: resolveBinDir() });
  const kc = new KubeConfig();
  kc.loadFromFile(plane.kubeconfigPath);
  admin = new RawClient(kc);
  workDir = await mkdtemp(join(tmpdir(), 'agn-serving-'));
  await applyManifests(admin, ['crds.k8s.yaml']);
  await applySite(true);
  await makeSecrets();
  const { path } = await kubeconfigFor(OPERATOR_SA);
  const operatorEnv = envOf(OPERATOR_SA, 'gossip-operator');
  const [gossipPort, adminPort] = [await freePort(), await freePort()];
  signalsPort = await freePort();
  operator = startOperatorProcess(
    [
      '--store',
      'kubernetes',
      '--site',
      SITE,
      '--namespace',
      NS,
      '--identity',
      'east-serving-op',
      '--gossip-bind',
      `127.0.0.1:${gossipPort}`,
      '--gossip-advertise',
      `127.0.0.1:${gossipPort}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
      '--signals-address',
      `127.0.0.1:${signalsPort}`,
      '--swim-profile',
      'loopback',
      '--leader-elect',
      'false',
    ],
    {
      KUBECONFIG: path,
      GRID_GATEWAY_ADDRESS: operatorEnv['GRID_GATEWAY_ADDRESS'] ?? '',
      GRID_METRICS_SCRAPER_SERVICE_ACCOUNT: operatorEnv['GRID_METRICS_SCRAPER_SERVICE_ACCOUNT'] ?? '',
      LOG_LEVEL: 'debug',
    },
  );
}, 180_000);

afterAll(async () => {
  await Promise.allSettled([operator?.stop(), sync?.stop()]);
  if (workDir !== undefined && process.env['AGN_CLUSTER_KEEP_WORKDIR'] === '1') {
    await writeFile(join(workDir, 'operator.log'), operator?.output() ?? '');
    console.log(`serving work directory kept: ${workDir}`);
  } else if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  await plane?.stop();
});

describe('serving config lifecycle (real operator, the Role the constructs compile for a gridServing gateway)', () => {
  it('the operator applies the serving ConfigMap with its labels, and it is what the gateway accepts', async () => {
    expect(gateway.name).toBe('consumer-gateway');
    const { cm } = await distributed();
    expect(
      (cm['metadata']['managedFields'] as { manager: string; operation: string }[]).map(
        (f) => `${f.manager}/${f.operation}`,
      ),
    ).toEqual(['grid-operator/Apply']);
    expect(cm['metadata']['labels']).toEqual(cmLabels());
    const verdict = validateServing(cm['data'][SERVING_DATA_KEY] as string, {
      maxBytes: SYNC_MAX_SERVING_BYTES,
      expectedScope: {
        network: network.metadata.name,
        gateway: gateway.name,
        namespace: gateway.namespace,
        local_site: SITE,
      },
    });
    if (!verdict.ok) throw new Error(`${verdict.reason}: ${verdict.message}`);
    expect(verdict.revision).toBe(cm['metadata']['annotations']['grid.praxis.fast/serving-revision']);
    // This site's signals endpoint is the one the operator bound; its providers are east's two.
    expect(verdict.document.serving.sites).toContainEqual({ site: SITE, signals_address: `127.0.0.1:${signalsPort}` });
    const declared = served
      .filter((m) => m.object.kind === 'InferenceProvider')
      .map((m) => m.object.metadata.name)
      .sort();
    expect(declared.length).toBeGreaterThan(0);
    for (const e of verdict.document.serving.entries)
      expect([e.site, declared.includes(e.provider)]).toEqual([SITE, true]);
  }, 90_000);

  it('the GridNetwork status carries the serving entry: revision, counts, renderedAt, schema-valid, no secret', async () => {
    const { cm, entry, net } = await distributed();
    const document = JSON.parse(cm['data'][SERVING_DATA_KEY] as string) as {
      serving: { entries: { admission: string }[]; sites: unknown[] };
    };
    expect(entry).toMatchObject({
      configMapName: SERVING,
      schemaVersion: '1.0',
      renderedRevision: entry['distributedRevision'],
      providerCount: document.serving.entries.length,
      admittingCount: document.serving.entries.filter((e) => e.admission === 'all').length,
      siteCount: document.serving.sites.length,
      reason: '',
      message: '',
    });
    expect(Number.isNaN(Date.parse(entry['renderedAt'] as string))).toBe(false);
    expect(validateCustomResource(net as Parameters<typeof validateCustomResource>[0])).toEqual([]);
    const text = JSON.stringify(net['status']);
    for (const secret of secretsInPlay) expect(text.includes(secret)).toBe(false);
    const mine = (
      net['metadata']['managedFields'] as { manager: string; subresource?: string; fieldsV1?: Json }[]
    ).filter((f) => JSON.stringify(f.fieldsV1 ?? {}).includes('servingConfigStatus'));
    expect(mine.map((f) => `${f.manager}/${f.subresource ?? ''}`)).toEqual(['grid-operator/status']);
  }, 90_000);

  it("the serving sidecar's ServiceAccount reads that ConfigMap (the real overlay-sync writes its bytes) and is refused the rest", async () => {
    expect(servingSync.env['OVERLAY_SYNC_CONTRACT']).toBe('serving');
    expect(servingSync.env['OVERLAY_SYNC_CONFIGMAP']).toBe(SERVING);
    const { path, client } = await kubeconfigFor(servingSync.serviceAccount);
    // A look-alike: a similar name and even the operator's serving labels, but never written by it.
    const lookAlike = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: FOREIGN, labels: cmLabels() },
      data: { [SERVING_DATA_KEY]: '{"someone":"else"}' },
    };
    expect((await admin.request('POST', `/api/v1/namespaces/${NS}/configmaps`, lookAlike)).status).toBe(201);
    const status = async (
      method: 'GET' | 'PATCH' | 'DELETE' | 'POST',
      p: string,
      body?: unknown,
      query?: Record<string, string>,
    ) =>
      (
        await client.request(method, p, body, {
          ...(query ? { query } : {}),
          ...(method === 'PATCH' ? { contentType: 'application/merge-patch+json' } : {}),
        })
      ).status;
    expect(await status('GET', cmPath(SERVING))).toBe(200);
    expect(
      await status('GET', `/api/v1/namespaces/${NS}/configmaps`, undefined, {
        fieldSelector: `metadata.name=${SERVING}`,
      }),
    ).toBe(200);
    expect(await status('GET', cmPath(overlayConfigMapName(network.metadata.name, gateway.name)))).not.toBe(403);
    const refused: [string, number][] = [];
    for (const [what, code] of [
      ['patch the serving ConfigMap', await status('PATCH', cmPath(SERVING), { data: { x: 'y' } })],
      ['delete the serving ConfigMap', await status('DELETE', cmPath(SERVING))],
      ['read a look-alike ConfigMap', await status('GET', cmPath(FOREIGN))],
      ['list every ConfigMap', await status('GET', `/api/v1/namespaces/${NS}/configmaps`)],
      [
        'create a ConfigMap',
        await status('POST', `/api/v1/namespaces/${NS}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'x' },
        }),
      ],
      ['read the site certificate Secret', await status('GET', `/api/v1/namespaces/${NS}/secrets/grid-site-cert`)],
      ['read the GridNetwork', await status('GET', NETWORK_PATH)],
    ] as const)
      refused.push([what, code]);
    expect(refused).toEqual(refused.map(([what]) => [what, 403]));

    const output = join(workDir, 'run', 'serving-config.json');
    sync = startOverlaySyncProcess(['--store', 'kubernetes', '--kubeconfig', path], {
      ...servingSync.env,
      OVERLAY_SYNC_OUTPUT: output,
      OVERLAY_SYNC_HEALTH_ADDR: '127.0.0.1:0',
    });
    const written = await waitFor(
      'the serving sidecar to write the serving config',
      async () => {
        if (sync!.exited()) throw new Error(`overlay-sync exited: ${sync!.stderr()}`);
        const [cm, text] = [await get(cmPath(SERVING)), await readFile(output, 'utf8').catch(() => undefined)];
        return text !== undefined && text === cm?.['data']?.[SERVING_DATA_KEY] ? text : undefined;
      },
      60_000,
    );
    expect(validateServing(written, { maxBytes: SYNC_MAX_SERVING_BYTES }).ok).toBe(true);
    await sync.stop();
    const log = JSON.stringify(sync.lines) + sync.stderr();
    for (const secret of secretsInPlay) expect(log.includes(secret)).toBe(false);
  }, 120_000);

  it('re-applying the site without gridServing makes the operator delete its serving ConfigMap; the look-alike survives', async () => {
    await distributed();
    const foreign = (await get(cmPath(FOREIGN)))!;
    const started = Date.now();
    await applySite(false);
    const net = await get(NETWORK_PATH);
    expect(
      (net!['spec']['consumerGateways'] as Json[]).find((g) => g['name'] === gateway.name)?.['gridServing'],
    ).toBeUndefined();
    await waitFor(
      'the operator to delete the serving ConfigMap',
      async () => ((await admin.request('GET', cmPath(SERVING))).status === 404 ? true : undefined),
      30_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; operator warnings: ${complaints()}`);
    });
    console.log(
      `serving ConfigMap deleted ${Date.now() - started} ms after the site was re-applied without gridServing`,
    );
    expect((await get(cmPath(FOREIGN)))?.['metadata']['resourceVersion']).toBe(foreign['metadata']['resourceVersion']);
    await waitFor(
      'the serving entry to leave the status',
      async () => {
        const entries = (await get(NETWORK_PATH))?.['status']?.['servingConfigStatus'] as Json[] | undefined;
        return (entries ?? []).length === 0 ? true : undefined;
      },
      30_000,
    );
    const deleted = operator!.logged('serving config deleted: gateway no longer served');
    expect(deleted.map((l) => l['configMap'])).toEqual([`${NS}/${SERVING}`]);
    expect(await deletesCounted('deleted')).toBe(1);
  }, 90_000);

  it("a ConfigMap at the serving name that no longer carries the operator's labels is left in place when gridServing goes", async () => {
    await applySite(true);
    const { cm } = await distributed();
    // Someone takes the ConfigMap over: the operator's labels go; its revision annotation and data stay, so the
    // operator sees its revision in place and does not re-apply.
    const labels = Object.fromEntries(Object.keys(cm['metadata']['labels'] as Json).map((k) => [k, null]));
    const res = await admin.request(
      'PATCH',
      cmPath(SERVING),
      { metadata: { labels: { ...labels, owner: 'team-a' } } },
      { contentType: 'application/merge-patch+json' },
    );
    expect(res.status).toBe(200);
    await applySite(false);
    await waitFor(
      'the serving entry to leave the status',
      async () => {
        const entries = (await get(NETWORK_PATH))?.['status']?.['servingConfigStatus'] as Json[] | undefined;
        return (entries ?? []).length === 0 ? true : undefined;
      },
      30_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; operator warnings: ${complaints()}`);
    });
    const kept = await get(cmPath(SERVING));
    expect(kept?.['metadata']['labels']).toEqual({ owner: 'team-a' });
    const left = operator!.lines.filter(
      (l) =>
        typeof l['msg'] === 'string' &&
        (l['msg'] as string).includes('left in place') &&
        l['configMap'] === `${NS}/${SERVING}`,
    );
    expect(left).toHaveLength(1);
    expect(left[0]!['msg']).toContain('app.kubernetes.io/managed-by=grid-operator');
    expect([await deletesCounted('deleted'), await deletesCounted('foreign')]).toEqual([1, 1]);
  }, 120_000);

  it('the operator logged no RBAC refusal and no secret bytes', async () => {
    await operator!.stop();
    const text = operator!.output();
    expect(text.length).toBeGreaterThan(0);
    for (const secret of secretsInPlay) expect(text.includes(secret), 'the operator logged a secret').toBe(false);
    const refusals = text.split('\n').filter((l) => /forbidden|\b(?:HTTP|status|code)\W{0,3}403\b/i.test(l));
    expect(refusals).toEqual([]);
  });
});
