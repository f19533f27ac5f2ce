// The fleet dashboard's replica discovery on the real API server, as dist/east.k8s.yaml deploys the operator: its
// own ServiceAccount token, token access with the env the Deployment sets, no --dashboard-targets. Pods built from
// east's consumer gateway Deployment are created by the admin and given a Running status with a loopback pod IP (no
// kubelet here), their containers' admin ports pointing at admin endpoints this test serves; the operator must list
// and watch them with the Role dist/ grants (no 403), show one row per pod, follow a deletion, and log no secret.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { renderKubeconfig } from './certs.ts';
import { adminKubeConfig, waitFor } from './kube.ts';
import { applyManifests, readManifests, RawClient } from './manifests.ts';
import { freePort, startOperatorProcess, type OperatorProcess } from './operator-process.ts';

const east = readManifests('east.k8s.yaml');
const NAMESPACE = 'grid-system';
const OPERATOR_SA = 'gossip-operator';
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/gossip-operator-leader`;
const DASHBOARD_TOKEN = 'cluster-suite-dashboard-token-0123456789';

type Container = {
  name: string;
  env?: { name: string; value?: string }[];
  ports?: { name?: string; containerPort: number }[];
};
type PodTemplate = {
  metadata: { labels: Record<string, string> };
  spec: { containers: Container[]; initContainers?: Container[]; [key: string]: unknown };
};
const template = (name: string): PodTemplate =>
  (
    east.find((m) => m.object.kind === 'Deployment' && m.object.metadata.name === name)!.object['spec'] as {
      template: PodTemplate;
    }
  ).template;
const operatorEnv = Object.fromEntries(
  (template(OPERATOR_SA).spec.containers[0]!.env ?? [])
    .filter((e) => e.value !== undefined)
    .map((e) => [e.name, e.value!]),
);
const PODS = ['consumer-gateway-7c9d-aaaaa', 'consumer-gateway-7c9d-bbbbb'];

let admin: RawClient;
let workDir: string;
let operator: OperatorProcess;
let token: string;
const servers: Server[] = [];

async function adminEndpoint(status: unknown): Promise<number> {
  const server = createServer((req, res) => {
    res.writeHead(req.url === '/status' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(req.url === '/status' ? JSON.stringify(status) : '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

/** A consumer gateway pod as its Deployment would create it, its admin ports moved to this test's endpoints. */
async function createPod(name: string): Promise<void> {
  const t = template('consumer-gateway');
  const gatewayPort = await adminEndpoint({ ready: true, accepted_revision: null });
  const syncPort = await adminEndpoint({
    state: 'ready',
    configmap: { namespace: NAMESPACE, name: 'grid-overlay-demo-consumer-gateway' },
    written: { revision: null },
    observed: { outcome: 'written' },
  });
  const port = (c: Container, portName: string, to: number): Container => ({
    ...c,
    ports: (c.ports ?? []).map((p) => (p.name === portName ? { ...p, containerPort: to } : p)),
  });
  const containers = t.spec.containers.map((c) =>
    c.name === 'gateway'
      ? port(c, 'admin', gatewayPort)
      : c.name === 'overlay-sync'
        ? port(c, 'sync-health', syncPort)
        : c,
  );
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE, labels: t.metadata.labels },
    spec: { ...t.spec, containers },
  };
  const created = await admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/pods`, pod);
  if (created.status !== 201)
    throw new Error(`create Pod ${name}: HTTP ${created.status} ${JSON.stringify(created.body).slice(0, 400)}`);
  const status = await admin.request(
    'PATCH',
    `/api/v1/namespaces/${NAMESPACE}/pods/${name}/status`,
    { status: { phase: 'Running', podIP: '127.0.0.1', podIPs: [{ ip: '127.0.0.1' }] } },
    { contentType: 'application/merge-patch+json' },
  );
  if (status.status !== 200)
    throw new Error(`Pod ${name} status: HTTP ${status.status} ${JSON.stringify(status.body).slice(0, 400)}`);
}

async function model(): Promise<{ delivery: { replica: string; state: string }[] } | undefined> {
  const port = operator.port();
  if (port === undefined) return undefined;
  const response = await fetch(`http://127.0.0.1:${port}/dashboard/model.json`, {
    headers: { authorization: `Bearer ${DASHBOARD_TOKEN}` },
  });
  return response.status === 200
    ? ((await response.json()) as { delivery: { replica: string; state: string }[] })
    : undefined;
}

beforeAll(async () => {
  admin = new RawClient(adminKubeConfig());
  await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  for (const name of PODS)
    await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/${name}`, undefined, {
      query: { gracePeriodSeconds: '0' },
    });
  // Another holder keeps the Lease, so this operator stays a standby: it serves the dashboard (every replica does)
  // and writes nothing the other files of the suite read.
  await admin.request('DELETE', LEASE_PATH);
  const lease = await admin.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'gossip-operator-leader', namespace: NAMESPACE },
    spec: {
      holderIdentity: 'another-replica',
      leaseDurationSeconds: 3600,
      renewTime: new Date().toISOString().replace('Z', '000Z'),
      acquireTime: new Date().toISOString().replace('Z', '000Z'),
    },
  });
  if (lease.status !== 201)
    throw new Error(`create Lease: HTTP ${lease.status} ${JSON.stringify(lease.body).slice(0, 300)}`);
  for (const name of PODS) await createPod(name);
  workDir = await mkdtemp(join(tmpdir(), 'agn-dashboard-cluster-'));
  const res = await admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${OPERATOR_SA}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest for ${OPERATOR_SA}: HTTP ${res.status}`);
  token = (res.body as { status: { token: string } }).status.token;
  const kubeconfig = join(workDir, 'operator.kubeconfig');
  await writeFile(kubeconfig, renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: OPERATOR_SA, token }), {
    mode: 0o600,
  });
  const tokenFile = join(workDir, 'dashboard-token');
  await writeFile(tokenFile, `${DASHBOARD_TOKEN}\n`, { mode: 0o600 });
  const [gossipPort, adminPort] = [await freePort(), await freePort()];
  operator = startOperatorProcess(
    [
      '--store',
      'kubernetes',
      '--site',
      operatorEnv['GRID_SITE_NAME']!,
      '--namespace',
      NAMESPACE,
      '--identity',
      'east-dashboard',
      '--gossip-bind',
      `127.0.0.1:${gossipPort}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
      '--swim-profile',
      'loopback',
      '--leader-elect',
      'true',
    ],
    // The dashboard env as the Deployment sets it; only the token file's path is this machine's.
    {
      KUBECONFIG: kubeconfig,
      GRID_DASHBOARD: operatorEnv['GRID_DASHBOARD']!,
      GRID_DASHBOARD_TOKEN_FILE: tokenFile,
      LOG_LEVEL: 'debug',
    },
  );
});

afterAll(async () => {
  await operator?.stop();
  for (const server of servers) server.close();
  if (admin !== undefined) {
    for (const name of PODS)
      await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/${name}`, undefined, {
        query: { gracePeriodSeconds: '0' },
      });
    await admin.request('DELETE', LEASE_PATH);
  }
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
});

describe('the dashboard of dist/east.k8s.yaml on the API server', () => {
  it('asks for its token, lists the consumer gateway pods with its own Role, and follows a deletion', async () => {
    expect(operatorEnv['GRID_DASHBOARD']).toBe('token');
    const shown = await waitFor(
      'both pods on the dashboard',
      async () => {
        const view = await model();
        return view?.delivery.length === 2 ? view : undefined;
      },
      30_000,
    );
    expect(shown.delivery.map((d) => [d.replica, d.state])).toEqual(PODS.map((name) => [name, 'ready']));
    expect((await fetch(`http://127.0.0.1:${operator.port()}/dashboard/model.json`)).status).toBe(401);

    await admin.request('DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/${PODS[0]}`, undefined, {
      query: { gracePeriodSeconds: '0' },
    });
    const after = await waitFor(
      'the deleted pod gone from the dashboard',
      async () => {
        const view = await model();
        return view?.delivery.length === 1 ? view : undefined;
      },
      30_000,
    );
    expect(after.delivery.map((d) => d.replica)).toEqual([PODS[1]]);

    const output = operator.output();
    expect(output.split('\n').filter((l) => /forbidden|\b(?:HTTP|status|code)\W{0,3}403\b/i.test(l))).toEqual([]);
    expect(output).not.toContain(DASHBOARD_TOKEN);
    expect(output).not.toContain(token);
  }, 90_000);
});
