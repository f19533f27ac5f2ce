// The real gossip-operator program against the real API server, as dist/east.k8s.yaml deploys it: its own
// ServiceAccount token (TokenRequest, never the admin's), the Secrets east's resources reference created by name,
// two replicas of site east competing for one Lease. Checks what a user relies on: the overlay ConfigMap of
// docs/contract.md §2.1 written by field manager grid-operator and accepted by a consumer, schema-valid status through
// the status subresource, logs free of secrets and of RBAC refusals, and one writer at a time with a hand-over on
// SIGTERM.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { validateCustomResource } from '../../schemas/crds/validate.ts';
import {
  inviteTokenSecretName,
  operatorStateConfigMapName,
  siteNameLedgerConfigMapName,
} from '../../schemas/object-names.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import { OVERLAY_SYNC_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import { createCa, issueLeaf, renderKubeconfig } from './certs.ts';
import { adminKubeConfig, waitFor } from './kube.ts';
import { applyManifests, readManifests, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';
import { freePort, startOperatorProcess } from './operator-process.ts';
import { referencedSecrets, secretData } from './site-secrets.ts';
import type { OperatorProcess } from './operator-process.ts';

const east = readManifests('east.k8s.yaml');
const NAMESPACE = 'grid-system';
const OPERATOR_SA = 'gossip-operator';
const FIELD_MANAGER = 'grid-operator';
const LEASE_NAME = 'gossip-operator-leader'; // the one Lease dist's Role grants by name
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/${LEASE_NAME}`;
const LEASE_SECONDS = 6;

const gridObjects = east.filter((m) => m.object.apiVersion.startsWith('grid.praxis.fast/')).map((m) => m.object);
const network = gridObjects.find((o) => o.kind === 'GridNetwork')!;
const operatorEnv = (() => {
  const deployment = east.find((m) => m.object.kind === 'Deployment' && m.object.metadata.name === OPERATOR_SA)!;
  const spec = deployment.object['spec'] as {
    template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } };
  };
  const container = spec.template.spec.containers.find((c) => c.name === 'gossip-operator')!;
  return Object.fromEntries((container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
})();
const SITE = operatorEnv['GRID_SITE_NAME']!;
const gateway = (network['spec'] as { consumerGateways: { name: string; namespace: string; siteName: string }[] })
  .consumerGateways[0]!;
const CONFIGMAP = overlayConfigMapName(network.metadata.name, gateway.name);
const CM_PATH = `/api/v1/namespaces/${gateway.namespace}/configmaps/${CONFIGMAP}`;

let admin: RawClient;
let workDir: string;
let kubeconfigPath: string;
const secretsInPlay: string[] = []; // every secret byte string that must never reach a log
const replicas = new Map<string, OperatorProcess>();
const stopped = new Set<string>(); // replicas this file stopped on purpose (npm reports the signal as 128)
const started = Date.now();

async function get(path: string): Promise<Record<string, any> | undefined> {
  const res = await admin.request('GET', path);
  return res.status === 200 ? (res.body as Record<string, any>) : undefined;
}

async function startReplica(identity: string): Promise<OperatorProcess> {
  const [gossipPort, adminPort] = [await freePort(), await freePort()];
  const daemon = startOperatorProcess(
    [
      '--store',
      'kubernetes',
      '--site',
      SITE,
      '--namespace',
      NAMESPACE,
      '--identity',
      identity,
      '--gossip-bind',
      `127.0.0.1:${gossipPort}`,
      '--gossip-advertise',
      `127.0.0.1:${gossipPort}`,
      '--admin',
      `127.0.0.1:${adminPort}`,
      '--swim-profile',
      'loopback',
      '--leader-elect',
      'true',
      '--lease-name',
      LEASE_NAME,
      '--lease-duration',
      `${LEASE_SECONDS}s`,
    ],
    { KUBECONFIG: kubeconfigPath, GRID_GATEWAY_ADDRESS: operatorEnv['GRID_GATEWAY_ADDRESS'] ?? '', LOG_LEVEL: 'debug' },
  );
  replicas.set(identity, daemon);
  return daemon;
}

async function makeSecrets(): Promise<void> {
  // A grid CA and a site certificate naming this site (CN and DNS SAN), as network-gossip.ts certifies its
  // state-signing key with them.
  const pki = join(workDir, 'grid-pki');
  await mkdir(pki);
  await createCa(pki, 'agn-grid-test-ca');
  await issueLeaf(pki, 'site', `/CN=${SITE}`, [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    `subjectAltName=DNS:${SITE}`,
  ]);
  const pem = (f: string) => readFile(join(pki, f), 'utf8');
  const material = { caPem: await pem('ca.crt'), certPem: await pem('site.crt'), keyPem: await pem('site.key') };
  for (const { ref, role } of referencedSecrets(gridObjects.map((o) => o['spec'])).values()) {
    const data = secretData(ref, role, material, secretsInPlay);
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: ref.name, namespace: ref.namespace },
      type: 'Opaque',
      data,
    };
    const res = await admin.apply(secret as Manifest['object'], 'agn-cluster-test', { force: 'true' });
    if (res.status !== 200 && res.status !== 201)
      throw new Error(`create Secret ${ref.namespace}/${ref.name}: HTTP ${res.status}`);
  }
}

beforeAll(async () => {
  admin = new RawClient(adminKubeConfig());
  await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  // A rerun (or an earlier file) may have left an overlay and a Lease behind; start like a fresh install.
  await admin.request('DELETE', CM_PATH);
  await admin.request('DELETE', LEASE_PATH);
  workDir = await mkdtemp(join(tmpdir(), 'agn-operator-'));
  await makeSecrets();
  const res = await admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${OPERATOR_SA}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest for ${OPERATOR_SA}: HTTP ${res.status}`);
  const token = (res.body as { status: { token: string } }).status.token;
  secretsInPlay.push(token);
  kubeconfigPath = join(workDir, 'operator.kubeconfig');
  await writeFile(
    kubeconfigPath,
    renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: OPERATOR_SA, token }),
    { mode: 0o600 },
  );
  // Two replicas of the same site, started together: the Lease decides which one works.
  await Promise.all([startReplica('east-op-a'), startReplica('east-op-b')]);
});

afterAll(async () => {
  const stops = [...replicas.values()].map((r) => r.stop());
  await Promise.allSettled(stops);
  // The control plane is shared with the other files (rbac.test.ts expects swim-key to be absent): remove what
  // this file and the operator created in grid-system.
  if (admin !== undefined) {
    const ns = `/api/v1/namespaces/${NAMESPACE}`;
    const invites = gridObjects
      .filter((o) => o.kind === 'SiteInvite')
      .map((o) => inviteTokenSecretName(o.metadata.name));
    const secrets = [
      ...[...referencedSecrets(gridObjects.map((o) => o['spec'])).values()].map(
        (s) => `${s.ref.namespace === NAMESPACE ? ns : `/api/v1/namespaces/${s.ref.namespace}`}/secrets/${s.ref.name}`,
      ),
      ...invites.map((n) => `${ns}/secrets/${n}`),
    ];
    for (const path of [
      ...secrets,
      CM_PATH,
      `${ns}/configmaps/${operatorStateConfigMapName(SITE)}`,
      `${ns}/configmaps/${siteNameLedgerConfigMapName(SITE)}`,
      LEASE_PATH,
    ])
      await admin.request('DELETE', path);
  }
  if (workDir !== undefined && process.env['AGN_CLUSTER_KEEP_WORKDIR'] === '1') {
    for (const [identity, r] of replicas) await writeFile(join(workDir, `${identity}.log`), r.output());
    console.log(`operator work directory kept: ${workDir}`);
  } else if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  secretsInPlay.splice(0);
});

async function leaseHolder(): Promise<string | undefined> {
  const holder = (await get(LEASE_PATH))?.['spec']?.['holderIdentity'] as string | undefined;
  return holder === undefined || holder === '' ? undefined : holder;
}

function failFast(): void {
  for (const [identity, r] of replicas) {
    if (!stopped.has(identity) && r.exited())
      throw new Error(`${identity} exited (${String(r.exitCode())}): ${r.output().slice(-2000)}`);
  }
}

let leader = '';
let standby = '';

describe('gossip-operator (real program, its ServiceAccount token) on east', () => {
  it('one replica takes the Lease and publishes the overlay ConfigMap of docs/contract.md §2.1 with field manager grid-operator', async () => {
    leader = await waitFor(
      'a replica to hold the Lease',
      async () => {
        failFast();
        return leaseHolder();
      },
      30_000,
    );
    expect([...replicas.keys()]).toContain(leader);
    standby = [...replicas.keys()].find((k) => k !== leader)!;

    const cm = await waitFor(
      'the overlay ConfigMap',
      async () => {
        failFast();
        return get(CM_PATH);
      },
      40_000,
    );
    const managers = (cm['metadata']['managedFields'] as { manager: string; operation: string }[]).map(
      (f) => `${f.manager}/${f.operation}`,
    );
    expect(managers).toEqual([`${FIELD_MANAGER}/Apply`]);
    expect(cm['metadata']['labels']).toMatchObject({
      'app.kubernetes.io/managed-by': 'grid-operator',
      'grid.praxis.fast/network': network.metadata.name,
      'grid.praxis.fast/gateway': gateway.name,
    });
    const text = cm['data']['routing-overlay.json'] as string;
    const verdict = validateOverlay(text, {
      maxBytes: OVERLAY_SYNC_MAX_OVERLAY_BYTES,
      allowLegacy: false,
      expectedScope: {
        network: network.metadata.name,
        gateway: gateway.name,
        namespace: gateway.namespace,
        local_site: gateway.siteName,
      },
    });
    expect(verdict.ok, JSON.stringify(verdict)).toBe(true);
    if (!verdict.ok || verdict.format !== 'envelope') throw new Error('not an envelope');
    const annotations = cm['metadata']['annotations'] as Record<string, string>;
    expect(annotations['grid.praxis.fast/overlay-schema-version']).toBe(verdict.envelope.schema_version);
    expect(annotations['grid.praxis.fast/overlay-revision']).toBe(verdict.revision);
    expect(annotations['grid.praxis.fast/overlay-content-digest']).toBe(verdict.envelope.content_digest.value);
    // routing-config.json is the bare payload of the same envelope, pretty-printed.
    expect(JSON.parse(cm['data']['routing-config.json'] as string)).toEqual(JSON.parse(text).overlay);
    expect(verdict.envelope.provenance.producer).toBe('grid-operator');
  });

  /** The operator replicas' warnings and errors, less the expected ones: the diagnostic of a slow or failed wait. */
  const operatorComplaints = (): string[] =>
    [...replicas.values()].flatMap((r) =>
      r
        .output()
        .split('\n')
        .filter((l) => /"level":"(warn|error)"/.test(l) && !/SWIM seed skipped|McpEndpointUnreachable/.test(l)),
    );

  it('writes schema-valid status through the status subresource for the network, its site and its providers', async () => {
    const path = (o: Manifest['object']) => admin.objectPath(o);
    let lastStatus: unknown;
    // The operator may publish a newer overlay between two reads (the providers' failing health checks turn their
    // candidates not fresh a moment later), so every revision compared below comes from one read of the GridNetwork
    // and both overlay ConfigMaps that agree with each other.
    const converged = await waitFor(
      'GridNetwork status.gridId and a Distributed routingMapStatus that matches both overlay ConfigMaps',
      async () => {
        const o = await get(await path(network));
        lastStatus = o?.['status'];
        const entries = o?.['status']?.['routingMapStatus'] as Record<string, any>[] | undefined;
        const entry = entries?.find((e) => e['gatewayName'] === gateway.name);
        const praxis = entries?.find((e) => e['dialect'] === 'praxis-main');
        if (!o?.['status']?.['gridId'] || entry?.['phase'] !== 'Distributed' || praxis?.['phase'] !== 'Distributed')
          return undefined;
        const cm = await get(CM_PATH);
        const praxisCm = await get(`/api/v1/namespaces/${praxis['namespace']}/configmaps/${praxis['configMapName']}`);
        const praxisOverlay = praxisCm?.['data']?.['routing-overlay.json'] as string | undefined;
        if (cm?.['metadata']?.['annotations']?.['grid.praxis.fast/overlay-revision'] !== entry['distributedRevision'])
          return undefined;
        if (
          praxisCm?.['metadata']?.['annotations']?.['grid.praxis.fast/overlay-revision'] !==
          praxis['distributedRevision']
        )
          return undefined;
        return praxisOverlay === undefined ? undefined : { net: o, entry, praxis, praxisOverlay };
      },
      45_000,
    ).catch((error: Error) => {
      // Say what the operator did see and log, so a slow or failed reconcile can be told apart.
      throw new Error(
        `${error.message}; last status ${JSON.stringify(lastStatus)?.slice(0, 1500)}; operator warnings: ${operatorComplaints().slice(-10).join(' | ').slice(0, 3000)}`,
      );
    });
    const { net, entry, praxis, praxisOverlay } = converged;
    expect(entry['configMapName']).toBe(CONFIGMAP);
    // dist's east also declares a Praxis AI main consumer (consumerGateways[] dialect praxis-main): rendered in the same
    // reconcile, it gets its own overlay without selection_policy, which Praxis main accepts, and its entry says the
    // weightedRandom split is not honoured there.
    expect(praxis).toMatchObject({
      phase: 'Distributed',
      conditions: [
        expect.objectContaining({ type: 'SelectionPolicyHonored', status: 'False', reason: 'WeightedSplitCollapsed' }),
      ],
    });
    expect(praxisOverlay).not.toContain('selection_policy');
    expect(
      validateOverlay(praxisOverlay, {
        maxBytes: OVERLAY_SYNC_MAX_OVERLAY_BYTES,
        allowLegacy: false,
        dialect: 'praxis-main',
      }),
    ).toMatchObject({ ok: true, revision: praxis['distributedRevision'] });
    const ownSite = gridObjects.find((o) => o.kind === 'GridSite' && o.metadata.name === SITE)!;
    const providers = gridObjects.filter((o) => o.kind === 'InferenceProvider');
    expect(providers.length).toBeGreaterThan(0);
    const started = Date.now();
    const withPhase = await Promise.all(
      [ownSite, ...providers].map((o) =>
        waitFor(
          `${o.kind} ${o.metadata.name} status.phase`,
          async () => {
            const got = await get(await path(o));
            return typeof got?.['status']?.['phase'] === 'string' ? got : undefined;
          },
          30_000,
        ),
      ),
    ).catch((error: Error) => {
      throw new Error(
        `${error.message}; operator warnings: ${operatorComplaints().slice(-10).join(' | ').slice(0, 3000)}`,
      );
    });
    console.log(`GridNetwork Distributed, then site and provider phases after ${Date.now() - started} ms`);
    // The providers' endpoints are cluster DNS names that do not resolve here: their health checks fail, so they
    // are Unavailable with the reason in status and Ready False ("If the operator cannot reach a backend's
    // endpoint, the InferenceProvider stays Unavailable and the overlay excludes it").
    for (const p of withPhase.slice(1)) {
      expect([p['metadata']['name'], p['status']['phase'], p['status']['reason']]).toEqual([
        p['metadata']['name'],
        'Unavailable',
        'HealthCheckFailed',
      ]);
      const ready = (p['status']['conditions'] as { type: string; status: string; reason: string }[]).find(
        (c) => c.type === 'Ready',
      );
      expect(ready).toMatchObject({ status: 'False', reason: 'HealthCheckFailed' });
    }
    const declared = providers.flatMap((p) => (p['spec'] as { models: { name: string }[] }).models.map((m) => m.name));
    expect(declared.length).toBeGreaterThan(0);
    await waitFor(
      "an overlay without the Unavailable providers' candidates",
      async () => {
        const text = (await get(CM_PATH))?.['data']?.['routing-overlay.json'] as string | undefined;
        if (text === undefined) return undefined;
        const candidates = JSON.parse(text).overlay.candidates as { kind: string; site: string }[];
        return candidates.some((c) => c.kind === 'inference_model' && c.site === SITE) ? undefined : candidates;
      },
      20_000,
    );
    for (const o of [net, ...withPhase]) {
      expect(validateCustomResource(o), `${o['kind']} ${o['metadata']['name']}`).toEqual([]);
      // Status goes through the subresource: the operator's manager owns only status fields.
      const mine = (o['metadata']['managedFields'] as { manager: string; subresource?: string }[]).filter(
        (f) => f.manager === FIELD_MANAGER,
      );
      expect(mine.length, `${o['kind']} ${o['metadata']['name']} has a grid-operator entry`).toBeGreaterThan(0);
      for (const f of mine) expect(f.subresource).toBe('status');
    }
  }, 120_000);

  it('the standby stays passive: it never starts controllers, and a deleted overlay comes back from the leader', async () => {
    const lead = replicas.get(leader)!;
    const wait = replicas.get(standby)!;
    await waitFor('both admin ports', async () => (lead.port() && wait.port() ? true : undefined), 20_000);
    expect((await lead.status())['leader']).toBe(true);
    expect((await wait.status())['leader']).toBe(false);
    expect((await wait.get('/readyz')).status).toBe(200); // a standby is ready: waiting is its job
    const before = (await get(CM_PATH))!;
    expect((await admin.request('DELETE', CM_PATH)).status).toBe(200);
    const recreated = await waitFor(
      'the leader to recreate the deleted overlay',
      async () => {
        const cm = await get(CM_PATH);
        return cm !== undefined && cm['metadata']['uid'] !== before['metadata']['uid'] ? cm : undefined;
      },
      30_000,
    );
    expect((recreated['metadata']['managedFields'] as { manager: string }[]).map((f) => f.manager)).toEqual([
      FIELD_MANAGER,
    ]);
    expect(await leaseHolder()).toBe(leader);
    expect(wait.logged('controllers started')).toHaveLength(0);
    expect(wait.logged('overlay distributed')).toHaveLength(0);
    expect(wait.logged('waiting for the Lease').length).toBe(1);
    // Its own counters agree: the leader applied the overlay, the standby never applied or rendered one.
    const applied = (text: string) =>
      [...text.matchAll(/^grid_overlay_applies_total\{outcome="applied"\} (\d+)/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
    expect(applied((await lead.get('/metrics')).body)).toBeGreaterThanOrEqual(2);
    const standbyMetrics = (await wait.get('/metrics')).body;
    expect(applied(standbyMetrics)).toBe(0);
    expect(standbyMetrics).not.toMatch(/^grid_overlay_renders_total\{[^}]*\} [1-9]/m);
  });

  it('after SIGTERM of the leader the standby takes the Lease within its duration and writes the overlay', async () => {
    const lead = replicas.get(leader)!;
    const wait = replicas.get(standby)!;
    const stoppedAt = Date.now();
    stopped.add(leader);
    await lead.stop();
    // A graceful stop (main.ts): no deadline passed, no failure, and the Lease released rather than left to expire.
    expect(lead.logged('shutting down')).toHaveLength(1);
    expect(lead.logged('shutdown failed')).toHaveLength(0);
    expect(lead.logged('shutdown deadline passed; exiting')).toHaveLength(0);
    // The old leader is gone: an overlay that appears from now on can only come from the new one.
    const before = await get(CM_PATH);
    expect((await admin.request('DELETE', CM_PATH)).status).toBe(200);
    const holder = await waitFor(
      'the standby to hold the Lease',
      async () => ((await leaseHolder()) === standby ? standby : undefined),
      LEASE_SECONDS * 1000,
    );
    const tookOverMs = Date.now() - stoppedAt;
    expect(holder).toBe(standby);
    expect(tookOverMs).toBeLessThan(LEASE_SECONDS * 1000);
    const lease = (await get(LEASE_PATH))!;
    expect(lease['spec']['leaseDurationSeconds']).toBe(LEASE_SECONDS);
    const cm = await waitFor(
      'the new leader to write the overlay',
      async () => {
        failFast();
        const got = await get(CM_PATH);
        return got !== undefined && got['metadata']['uid'] !== before?.['metadata']['uid'] ? got : undefined;
      },
      30_000,
    );
    expect((cm['metadata']['managedFields'] as { manager: string }[]).map((f) => f.manager)).toEqual([FIELD_MANAGER]);
    expect(wait.logged('acquired the Lease; this replica is the leader')).toHaveLength(1);
    // The line is written after the apply returns, so it can trail the ConfigMap the API server already shows.
    await waitFor(
      'the new leader to log the distribution',
      () => (wait.logged('overlay distributed').length > 0 ? true : undefined),
      10_000,
    );
    expect((await wait.status())['leader']).toBe(true);
    console.log(
      `leader ${leader} stopped; ${standby} held the Lease after ${tookOverMs} ms, overlay rewritten after ${Date.now() - stoppedAt} ms`,
    );
  });

  it('logs hold no secret bytes and no RBAC refusal (Forbidden / 403)', async () => {
    for (const identity of replicas.keys()) stopped.add(identity);
    await Promise.all([...replicas.values()].map((r) => r.stop()));
    for (const [identity, r] of replicas) {
      const text = r.output();
      expect(text.length, `${identity} logged something`).toBeGreaterThan(0);
      for (const secret of secretsInPlay) expect(text.includes(secret), `${identity} logged a secret`).toBe(false);
      const refusals = text.split('\n').filter((l) => /forbidden|\b(?:HTTP|status|code)\W{0,3}403\b/i.test(l));
      expect(refusals, `${identity}: ${refusals.slice(0, 3).join('\n')}`).toEqual([]);
    }
    console.log(`operator file wall time so far ${Date.now() - started} ms`);
  });
});
