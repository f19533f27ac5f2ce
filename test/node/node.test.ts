// dist/ on a real single-node Kubernetes (test/node/node-cluster.ts): the node registers and goes Ready, the CRDs
// apply with kubectl, and the sim backend of dist/east.k8s.yaml runs from the project image as the kubelet runs it:
// its Secret projected with the compiled mode and fsGroup, a read-only root, its readiness probe, its Service through
// kube-proxy by ClusterIP and cluster DNS (from the node and from another pod), a deleted pod recreated by its
// ReplicaSet, a killed container restarted by the kubelet. Then the whole of dist/east.k8s.yaml applied as
// docs/deploy.md tells a user to (the Secrets `agn pki secrets` prints and the two it leaves to the user): every
// Deployment rolls out, overlay-sync writes the operator's overlay into the consumer gateway's volume, and a chat
// completion goes consumer gateway -> provider gateway (mTLS, by cluster DNS name) -> sim. Last, stop() leaves
// nothing behind.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../fixtures-path.ts';
import { type NodeCluster, startNodeCluster, sweepStaleNodes, waitFor } from './node-cluster.ts';

const DIST = join(REPO_ROOT, 'dist');
const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const IMAGE_ARCHIVE = process.env.AGN_NODE_IMAGE_ARCHIVE ?? join(REPO_ROOT, 'build', 'image', `agn-${version}.oci.tar`);
const NAMESPACE = 'grid-system';
const SIM = 'sim-east-llm-a';
const SIM_SECRET = 'east-llm-a-credential';
const EXAMPLE_DECLARATION = join(REPO_ROOT, 'constructs', 'example-grid.ts');
const EXAMPLE_PKI = join(REPO_ROOT, 'constructs', 'example-pki');

type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
};

function distObjects(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(join(DIST, file), 'utf8'))
    .map((d) => d.toJS() as K8sObject)
    .filter((o) => o !== null);
}

function pick(objects: readonly K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new Error(`dist has no ${kind} ${name}`);
  return found;
}

/** The reference the archive names (what `ctr images import` stores it under). */
function archiveReference(archive: string): string {
  const index = JSON.parse(execFileSync('tar', ['-xOf', archive, 'index.json'], { encoding: 'utf8' })) as {
    manifests: { annotations?: Record<string, string> }[];
  };
  return index.manifests[0]?.annotations?.['org.opencontainers.image.ref.name'] ?? '';
}

interface Pod {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { containers: { image: string }[] };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      containerID?: string;
      imageID?: string;
      state: Record<string, unknown>;
    }[];
  };
}

let node: NodeCluster;
let stopped = false;
/** The sim's bearer token, read back from the Secret `agn pki secrets` made. */
let simToken = '';
/** The caller key minted with `agn key mint` for the consumer gateway. */
let callerKey = '';

/** This repository's agn, as a user runs it. */
function agn(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons', 'cli', 'agn.ts'), ...args],
      { encoding: 'utf8', cwd: REPO_ROOT, timeout: 120_000 },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`agn ${args.join(' ')}: ${stderr.trim() || error.message}`));
        else resolve({ stdout, stderr });
      },
    );
  });
}

async function json<T>(args: readonly string[]): Promise<T> {
  return JSON.parse(await node.kubectlOk([...args, '-o', 'json'])) as T;
}

async function simPods(): Promise<Pod[]> {
  return (await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE, '-l', `app.kubernetes.io/instance=${SIM}`]))
    .items;
}

function ready(pod: Pod): boolean {
  return pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/** The one Ready sim pod (other than `not`), once there is exactly one. */
async function readySimPod(not?: string): Promise<Pod> {
  return await waitFor(
    `one Ready ${SIM} pod${not === undefined ? '' : ` other than ${not}`}`,
    async () => {
      const pods = (await simPods()).filter((p) => p.metadata.name !== not);
      return pods.length === 1 && pods[0] !== undefined && ready(pods[0]) ? pods[0] : undefined;
    },
    180_000,
    async () =>
      (await node.kubectl(['describe', 'pods', '-n', NAMESPACE, '-l', `app.kubernetes.io/instance=${SIM}`])).stdout,
  );
}

/** Runs an ES module script with this Node in the node's network namespace; returns its stdout parsed as JSON. */
async function inNodeScript<T>(script: string): Promise<T> {
  const result = await node.inNode([process.execPath, '--input-type=module', '-e', script], { timeoutMs: 30_000 });
  if (result.code !== 0)
    throw new Error(`script in ${node.netns} failed (${String(result.code)}): ${result.stderr.trim()}`);
  return JSON.parse(result.stdout) as T;
}

async function fetchInNode(url: string, token?: string): Promise<{ status: number; body: string }> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return await inNodeScript(`const r = await fetch(${JSON.stringify(url)}, { headers: ${JSON.stringify(headers)}, signal: AbortSignal.timeout(10000) });
process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() }));`);
}

beforeAll(async () => {
  if (!existsSync(IMAGE_ARCHIVE)) throw new Error(`${IMAGE_ARCHIVE} is missing: run npm run image (run.sh does)`);
  await sweepStaleNodes();
  node = await startNodeCluster({ site: 'east', keepWorkDir: process.env.AGN_NODE_KEEP_WORKDIR === '1' });
  const started = Date.now();
  await node.importImage(IMAGE_ARCHIVE);
  process.stderr.write(`[node east] image import: ${Date.now() - started} ms\n`);
});

afterAll(async () => {
  if (node !== undefined && !stopped) await node.stop();
});

describe('a single node built here', () => {
  it('registers with the kubelet built from k8s.io/kubernetes, on containerd, and goes Ready with the project image present', async () => {
    const n = await json<{
      status: {
        conditions: { type: string; status: string }[];
        nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string };
        addresses: { type: string; address: string }[];
      };
    }>(['get', 'node', node.nodeName]);
    expect(n.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(n.status.nodeInfo.kubeletVersion).toBe('v1.31.14');
    expect(n.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\/1\.6\./u);
    expect(n.status.addresses).toContainEqual({ type: 'InternalIP', address: node.nodeIp });
    const reference = archiveReference(IMAGE_ARCHIVE);
    expect(distObjects('east.k8s.yaml').some((o) => JSON.stringify(o).includes(`"image":"${reference}"`))).toBe(true);
    // In the node's containerd, where the kubelet looks (CRI namespace k8s.io); the pods below report it already present.
    const images = await node.inNode([
      'ctr',
      `--address=${node.containerdSocket}`,
      '--namespace=k8s.io',
      'images',
      'list',
      '--quiet',
    ]);
    expect(images.stdout.split('\n')).toContain(reference);
  });

  it('kubectl apply --server-side -f dist/crds.k8s.yaml installs the Grid CRDs, Established', async () => {
    const out = await node.kubectlOk([
      'apply',
      '--server-side',
      '--field-manager=agn',
      '-f',
      join(DIST, 'crds.k8s.yaml'),
    ]);
    const crds = distObjects('crds.k8s.yaml').filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.length).toBeGreaterThan(0);
    for (const crd of crds)
      expect(out).toContain(`customresourcedefinition.apiextensions.k8s.io/${crd.metadata.name} serverside-applied`);
    await node.kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(DIST, 'crds.k8s.yaml')]);
  });

  it(`runs ${SIM} of dist/east.k8s.yaml from the project image: Secret projected, read-only root, readiness probe passed`, async () => {
    const east = distObjects('east.k8s.yaml');
    const objects = [pick(east, 'Namespace', NAMESPACE), pick(east, 'Deployment', SIM), pick(east, 'Service', SIM)];
    await node.kubectlOk(['apply', '--server-side', '--field-manager=agn', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    });
    // The site's Secrets as docs/deploy.md makes them: `agn pki secrets --site east | kubectl apply --server-side -f -`
    // (the sim's credential among them).
    const secrets = await agn(['pki', 'secrets', EXAMPLE_DECLARATION, '--site', 'east', '--dir', EXAMPLE_PKI]);
    await node.kubectlOk(['apply', '--server-side', '-f', '-'], { input: secrets.stdout });
    const secret = await json<{ data: { token: string } }>(['get', 'secret', SIM_SECRET, '-n', NAMESPACE]);
    simToken = Buffer.from(secret.data.token, 'base64').toString('utf8');
    await node.kubectlOk(['-n', NAMESPACE, 'rollout', 'status', `deployment/${SIM}`, '--timeout=180s'], {
      timeoutMs: 200_000,
    });
    const pod = await readySimPod();
    const events = await node.kubectlOk([
      '-n',
      NAMESPACE,
      'get',
      'events',
      '--field-selector',
      `involvedObject.name=${pod.metadata.name},reason=Pulled`,
      '-o',
      'jsonpath={.items[*].message}',
    ]);
    expect(events).toContain(`Container image "${archiveReference(IMAGE_ARCHIVE)}" already present on machine`);
    const status = pod.status.containerStatuses?.[0];
    expect(pod.spec.containers[0]?.image).toBe(archiveReference(IMAGE_ARCHIVE));
    expect(status?.ready).toBe(true);
    expect(status?.state).toHaveProperty('running');
    expect(pod.status.podIP).toMatch(new RegExp(`^${node.podCidr.split('.').slice(0, 3).join('\\.')}\\.`, 'u'));

    // The kubelet's work inside the container: user, fsGroup, the Secret's compiled mode, read-only root, /tmp.
    const probe = await node.kubectlOk([
      '-n',
      NAMESPACE,
      'exec',
      pod.metadata.name,
      '-c',
      'sim',
      '--',
      'node',
      '-e',
      `
const fs = require('node:fs');
const token = '/etc/sim/credential/token';
const st = fs.statSync(token);
let rootWritable = true; try { fs.writeFileSync('/probe', 'x'); } catch { rootWritable = false; }
fs.writeFileSync('/tmp/probe', 'x');
console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), mode: (st.mode & 0o777).toString(8),
  fileGid: st.gid, token: fs.readFileSync(token, 'utf8'), rootWritable, tmpWritable: fs.readFileSync('/tmp/probe', 'utf8') === 'x' }));`,
    ]);
    const seen = JSON.parse(probe) as {
      uid: number;
      gid: number;
      groups: number[];
      mode: string;
      fileGid: number;
      token: string;
      rootWritable: boolean;
      tmpWritable: boolean;
    };
    expect(seen).toMatchObject({
      uid: 10001,
      gid: 10001,
      mode: '440',
      fileGid: 10001,
      token: simToken,
      rootWritable: false,
      tmpWritable: true,
    });
    expect(seen.groups).toContain(10001);
  });

  it('answers through its Service: ClusterIP and cluster DNS name from the node, with the projected token', async () => {
    const service = await json<{ spec: { clusterIP: string } }>(['get', 'service', SIM, '-n', NAMESPACE]);
    const fqdn = `${SIM}.${NAMESPACE}.svc.cluster.local`;
    const health = await fetchInNode(`http://${service.spec.clusterIP}:8080/health`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toMatchObject({ status: 'ok', provider: 'east-llm-a' });
    const resolved = await inNodeScript<string[]>(`import { promises as dns } from 'node:dns';
const r = new dns.Resolver(); r.setServers([${JSON.stringify(node.dnsIp)}]);
process.stdout.write(JSON.stringify(await r.resolve4(${JSON.stringify(fqdn)})));`);
    expect(resolved).toEqual([service.spec.clusterIP]);
    // The bearer token the sim reads from the Secret volume: refused without it, accepted with it.
    expect((await fetchInNode(`http://${service.spec.clusterIP}:8080/v1/models`)).status).toBe(401);
    const models = await fetchInNode(`http://${service.spec.clusterIP}:8080/v1/models`, simToken);
    expect(models.status).toBe(200);
    expect(models.body).toContain('sim-model-v1');
  });

  it('answers another pod by its cluster DNS names (the kubelet-written resolv.conf, kube-dns through kube-proxy)', async () => {
    const client = 'node-suite-client';
    const script = `const out = {};
for (const host of ['${SIM}.${NAMESPACE}.svc.cluster.local', '${SIM}']) {
  const r = await fetch('http://' + host + ':8080/health', { signal: AbortSignal.timeout(10000) });
  out[host] = r.status;
}
out.resolv = (await import('node:fs')).readFileSync('/etc/resolv.conf', 'utf8');
console.log(JSON.stringify(out));`;
    // The namespace enforces the restricted Pod Security Standard: the client pod meets it, as the workloads do.
    await node.kubectlOk(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: client, namespace: NAMESPACE },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          securityContext: {
            runAsUser: 10001,
            runAsGroup: 10001,
            runAsNonRoot: true,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'client',
              image: archiveReference(IMAGE_ARCHIVE),
              imagePullPolicy: 'IfNotPresent',
              command: ['node', '--input-type=module', '-e', script],
              securityContext: {
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
                readOnlyRootFilesystem: true,
              },
            },
          ],
        },
      }),
    });
    const phase = await waitFor(
      `pod ${client} to finish`,
      async () => {
        const p = await json<Pod>(['get', 'pod', client, '-n', NAMESPACE]);
        return p.status.phase === 'Succeeded' || p.status.phase === 'Failed' ? p.status.phase : undefined;
      },
      120_000,
      async () => (await node.kubectl(['describe', 'pod', client, '-n', NAMESPACE])).stdout,
    );
    const logs = await node.kubectlOk(['logs', client, '-n', NAMESPACE]);
    expect(phase, logs).toBe('Succeeded');
    const out = JSON.parse(logs.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(out[`${SIM}.${NAMESPACE}.svc.cluster.local`]).toBe(200);
    expect(out[SIM]).toBe(200);
    expect(out.resolv).toContain(`nameserver ${node.dnsIp}`);
    expect(out.resolv).toContain(`search ${NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local`);
    await node.kubectlOk(['delete', 'pod', client, '-n', NAMESPACE, '--wait=false']);
  });

  it('recreates a deleted pod (ReplicaSet), and the Service follows it to its new address', async () => {
    const before = await readySimPod();
    await node.kubectlOk(['delete', 'pod', before.metadata.name, '-n', NAMESPACE, '--wait=false']);
    const after = await readySimPod(before.metadata.name);
    expect(after.metadata.uid).not.toBe(before.metadata.uid);
    const service = await json<{ spec: { clusterIP: string } }>(['get', 'service', SIM, '-n', NAMESPACE]);
    await waitFor(
      'the Service to answer from the new pod',
      async () => {
        const slices = await json<{
          items: { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[] }[];
        }>(['get', 'endpointslices', '-n', NAMESPACE, '-l', `kubernetes.io/service-name=${SIM}`]);
        const addresses = slices.items
          .flatMap((s) => s.endpoints ?? [])
          .filter((e) => e.conditions?.ready === true)
          .flatMap((e) => e.addresses);
        if (addresses.length !== 1 || addresses[0] !== after.status.podIP) return undefined;
        return (await fetchInNode(`http://${service.spec.clusterIP}:8080/health`)).status === 200 ? true : undefined;
      },
      60_000,
    );
  });

  it('restarts a killed container in place (kubelet, restartPolicy Always)', async () => {
    const pod = await readySimPod();
    const containerId = pod.status.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//u, '') ?? '';
    expect(containerId).not.toBe('');
    const killed = await node.inNode([
      'ctr',
      `--address=${node.containerdSocket}`,
      '--namespace=k8s.io',
      'tasks',
      'kill',
      '--signal=SIGKILL',
      containerId,
    ]);
    expect(killed.code, killed.stderr).toBe(0);
    const restarted = await waitFor(
      'the sim container to restart and be Ready again',
      async () => {
        const p = await json<Pod>(['get', 'pod', pod.metadata.name, '-n', NAMESPACE]);
        const s = p.status.containerStatuses?.[0];
        return s !== undefined && s.restartCount >= 1 && ready(p) ? p : undefined;
      },
      120_000,
    );
    expect(restarted.metadata.uid).toBe(pod.metadata.uid);
    expect(restarted.status.containerStatuses?.[0]?.containerID).not.toBe(
      pod.status.containerStatuses?.[0]?.containerID,
    );
  });

  it('applies the whole of dist/east.k8s.yaml as docs/deploy.md does, and every Deployment rolls out', async () => {
    // The two Secrets `agn pki secrets` leaves to the user (it lists them on stderr): caller keys, a tool's token.
    const secrets = await agn(['pki', 'secrets', EXAMPLE_DECLARATION, '--site', 'east', '--dir', EXAMPLE_PKI]);
    expect(secrets.stderr).toContain(`${NAMESPACE}/consumer-caller-keys`);
    expect(secrets.stderr).toContain(`${NAMESPACE}/db-tools-credential`);
    const keysFile = join(node.workDir, 'caller-keys.json');
    callerKey = (await agn(['key', 'mint', '--tenant', 'team-a', '--keys-file', keysFile])).stdout.trim();
    await node.kubectlOk([
      '-n',
      NAMESPACE,
      'create',
      'secret',
      'generic',
      'consumer-caller-keys',
      `--from-file=caller-keys.json=${keysFile}`,
    ]);
    await node.kubectlOk([
      '-n',
      NAMESPACE,
      'create',
      'secret',
      'generic',
      'db-tools-credential',
      `--from-literal=token=node-suite-${Date.now().toString(36)}`,
    ]);
    const applied = await node.kubectlOk([
      'apply',
      '--server-side',
      '--field-manager=agn',
      '-f',
      join(DIST, 'east.k8s.yaml'),
    ]);
    const objects = distObjects('east.k8s.yaml');
    expect(applied.trim().split('\n')).toHaveLength(objects.length);
    const deployments = objects.filter((o) => o.kind === 'Deployment').map((o) => o.metadata.name);
    expect(deployments).toEqual(
      expect.arrayContaining(['gossip-operator', 'provider-gateway', 'consumer-gateway', SIM]),
    );
    const started = Date.now();
    const rollout = await node.kubectl(['-n', NAMESPACE, 'rollout', 'status', 'deployment', '--timeout=420s'], {
      timeoutMs: 440_000,
    });
    const pods = (await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE])).items;
    const restarts = pods.flatMap((p) =>
      (p.status.containerStatuses ?? [])
        .filter((c) => c.restartCount > 0)
        .map((c) => `${p.metadata.name}/${c.name}: ${c.restartCount}`),
    );
    process.stderr.write(
      `[node east] whole site rolled out in ${Date.now() - started} ms; restarts: ${restarts.length === 0 ? 'none' : restarts.join(', ')}\n`,
    );
    expect(
      rollout.code,
      `${rollout.stdout}${rollout.stderr}\n${(await node.kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'wide'])).stdout}`,
    ).toBe(0);
    for (const pod of pods.filter((p) => p.status.phase === 'Running' && p.metadata.deletionTimestamp === undefined))
      expect(ready(pod), pod.metadata.name).toBe(true);
  });

  it("overlay-sync writes the overlay the operator renders into the consumer gateway's volume", async () => {
    const configMap = 'grid-overlay-demo-consumer-gateway';
    const rendered = await waitFor(
      `ConfigMap ${configMap}`,
      async () => {
        const result = await node.kubectl(['get', 'configmap', configMap, '-n', NAMESPACE, '-o', 'json']);
        return result.code === 0 ? (JSON.parse(result.stdout) as { data: Record<string, string> }).data : undefined;
      },
      120_000,
    );
    const overlay = rendered['routing-overlay.json'];
    expect(overlay).toBeDefined();
    const pods = (
      await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE, '-l', 'app.kubernetes.io/name=consumer-gateway'])
    ).items;
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) {
      await waitFor(
        `the overlay in ${pod.metadata.name}`,
        async () => {
          const file = await node.kubectl([
            '-n',
            NAMESPACE,
            'exec',
            pod.metadata.name,
            '-c',
            'gateway',
            '--',
            'node',
            '-e',
            "process.stdout.write(require('node:fs').readFileSync('/run/praxis-routing/routing-overlay.json', 'utf8'))",
          ]);
          return file.code === 0 && file.stdout === overlay ? true : undefined;
        },
        120_000,
      );
    }
  });

  it('serves a chat completion consumer gateway -> provider gateway (mTLS, cluster DNS) -> sim', async () => {
    const service = await json<{ spec: { clusterIP: string } }>([
      'get',
      'service',
      'consumer-gateway',
      '-n',
      NAMESPACE,
    ]);
    const body = JSON.stringify({
      model: 'sim-model-v1',
      messages: [{ role: 'user', content: 'hello from the node suite' }],
    });
    const answer = await waitFor(
      'a chat completion through the consumer gateway',
      async () => {
        const res = await inNodeScript<{
          status: number;
          body: string;
        }>(`const r = await fetch('http://${service.spec.clusterIP}:8080/v1/chat/completions', {
  method: 'POST', body: ${JSON.stringify(body)}, signal: AbortSignal.timeout(20000),
  headers: { authorization: 'Bearer ${callerKey}', 'content-type': 'application/json' } });
process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() }));`);
        return res.status === 200 ? res : undefined;
      },
      120_000,
    );
    const completion = JSON.parse(answer.body) as {
      model: string;
      system_fingerprint: string;
      choices: { message: { content: string } }[];
    };
    expect(completion.model).toBe('sim-model-v1');
    expect(['east-llm-a', 'east-llm-b']).toContain(completion.system_fingerprint);
    expect(completion.choices[0]?.message.content.length).toBeGreaterThan(0);
  });

  it('stops without leaving a process, mount, cgroup, network namespace or route behind', async () => {
    const pids = Object.values(node.pids());
    expect(pids.length).toBeGreaterThanOrEqual(8);
    stopped = true;
    await node.stop();
    const alive = pids.filter((pid) => existsSync(`/proc/${pid}`));
    expect(alive).toEqual([]);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(node.workDir);
    expect(existsSync(`/run/netns/${node.netns}`)).toBe(false);
    expect(existsSync(node.workDir)).toBe(false);
    for (const hierarchy of ['memory', 'cpu', 'pids', 'unified'])
      expect(existsSync(`/sys/fs/cgroup/${hierarchy}${node.cgroupRoot}`)).toBe(false);
    expect(execFileSync('ip', ['-4', 'route'], { encoding: 'utf8' })).not.toContain(node.podCidr);
    const shims = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(node.containerdSocket));
    expect(shims).toEqual([]);
  });
});
