// dist/ on real Kubernetes: two sites, two single-node clusters (test/node/node-cluster.ts), east and west, joined
// as the internet would join them by the suite's cloud double (test/node/cloud-double.ts: routes between the nodes,
// load-balancer addresses in status.loadBalancer, the external-dns names in both sites' DNS). On east: the node
// registers and goes Ready, the CRDs apply with kubectl, and the sim backend of dist/east.k8s.yaml runs from the
// project image as the kubelet runs it: its Secret projected with the compiled mode and fsGroup, a read-only root,
// its readiness probe, its Service through kube-proxy by ClusterIP and cluster DNS (from the node and from another
// pod), a deleted pod recreated by its ReplicaSet, a killed container restarted by the kubelet. Then each site's
// manifests applied as docs/deploy.md tells a user to (the Secrets `agn pki secrets` prints and the ones it leaves to
// the user): every Deployment of both sites rolls out, overlay-sync writes the operator's overlay into the consumer
// gateway's volume, a chat completion goes consumer gateway -> provider gateway (mTLS, by cluster DNS name) -> sim.
// Across sites: each LoadBalancer Service has its address and its public name resolves in the pods of both sites,
// each side holds the other's GridSite Active (TlsVerified), the operators form one gossip grid, the consumer's overlay
// lists west's candidates; a `kubectl rollout restart` of the consumer gateway under load loses no request; a caller
// key revoked in its Secret is refused without a restart; with east's sims scaled to 0 west serves east's consumer.
// Then east applied again: dist/ held and run as compiled, the sites apart but for their load balancers, enrollment
// at east's public address, stops within 3 s (exit 0) under load, SIGINT, usage errors. Last, stop() leaves nothing
// behind.
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { inviteTokenSecretName } from '../../schemas/object-names.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { type CloudDouble, startCloudDouble } from './cloud-double.ts';
import type { RunResult } from './daemon.ts';
import {
  type BlockRun,
  blockForSite,
  deployBlocks,
  makeGridRepository,
  readDeployPage,
  runBlock,
} from './deploy-docs.ts';
import {
  freeNodeIndexes,
  NETPOL_TABLE,
  type NodeCluster,
  startNodeCluster,
  sweepStaleNodes,
  waitFor,
} from './node-cluster.ts';
import {
  completionsInARow,
  containerdId,
  criLog,
  type PodStatus,
  loadScript,
  startLoad,
  watchTaskExits,
  watchTerminations,
} from './stops.ts';

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

/** A pod as kubectl -o json shows it: the fields the suite reads. */
type Pod = PodStatus;

/** East: most of the suite runs here. */
let node: NodeCluster;
let west: NodeCluster;
let cloud: CloudDouble | undefined;
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

const DEPLOY_BLOCKS = deployBlocks(readDeployPage(REPO_ROOT));
/** A caller key as `agn key mint` prints it (agn_<16 hex id>_<secret>). */
const CALLER_KEY = /agn_[0-9a-f]{16}_[A-Za-z0-9_-]+/gu;

/** Where the deploy page's commands run for a site: a grid repository in the node's work directory. */
function gridRepository(on: NodeCluster): string {
  return join(on.workDir, 'grid-repository');
}

/**
 * Deploys SITE's cluster with docs/deploy.md's blocks as they stand (the every-site block, then the site's own), from
 * a grid repository laid out as the page assumes; fails with what the commands printed and the pods' state.
 */
async function deploySite(
  on: NodeCluster,
  env: Record<string, string>,
  { ownSecrets = true }: { ownSecrets?: boolean } = {},
): Promise<BlockRun> {
  const own = ownSecrets ? DEPLOY_BLOCKS.bySite.get(on.site) : '';
  if (own === undefined)
    throw new Error(`docs/deploy.md has no block marked "test/node runs this block on ${on.site}"`);
  const binDir = process.env.AGN_NODE_BIN;
  if (binDir === undefined) throw new Error('AGN_NODE_BIN is not set: run the suite with npm run test:node');
  const repository = existsSync(gridRepository(on))
    ? gridRepository(on)
    : makeGridRepository(gridRepository(on), REPO_ROOT);
  const script = `${blockForSite(DEPLOY_BLOCKS, on.site)}\n${own}`;
  const run = await runBlock(script, {
    cwd: repository,
    kubectlDir: binDir,
    kubeconfig: on.kubeconfigPath,
    env,
    timeoutMs: 660_000,
  });
  const pods = run.code === 0 ? '' : (await on.kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'wide'])).stdout;
  // What the commands printed, but never a caller key `agn key mint` printed among it.
  const printed = `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`.replace(CALLER_KEY, 'agn_<key>');
  expect(run.code, `${script}\n${printed}\n--- pods\n${pods}`).toBe(0);
  return run;
}

/** Every object of the compiled file is in the cluster (`kubectl get -f` names each or fails). */
async function expectAllApplied(on: NodeCluster, file: string): Promise<void> {
  const names = (await on.kubectlOk(['get', '-f', join(DIST, file), '-o', 'name'])).trim().split('\n');
  expect(names).toHaveLength(distObjects(file).length);
}

async function json<T>(args: readonly string[], on: NodeCluster = node): Promise<T> {
  return JSON.parse(await on.kubectlOk([...args, '-o', 'json'])) as T;
}

async function simPods(): Promise<Pod[]> {
  return (await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE, '-l', `app.kubernetes.io/instance=${SIM}`]))
    .items;
}

/** East's consumer gateway pods. */
async function consumerGatewayPods(): Promise<Pod[]> {
  return (
    await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE, '-l', 'app.kubernetes.io/name=consumer-gateway'])
  ).items;
}

/** Runs `script` with node in an operator pod's container (a pod of the site, where its DNS and routes apply). */
function inOperator(on: NodeCluster, pod: string, script: string): Promise<RunResult> {
  return on.kubectl(['-n', NAMESPACE, 'exec', pod, '-c', 'gossip-operator', '--', 'node', '-e', script]);
}

/** The overlay file overlay-sync wrote into a consumer gateway pod's volume, as the gateway container reads it. */
function overlayInPod(pod: string): Promise<RunResult> {
  return node.kubectl([
    '-n',
    NAMESPACE,
    'exec',
    pod,
    '-c',
    'gateway',
    '--',
    'node',
    '-e',
    "process.stdout.write(require('node:fs').readFileSync('/run/praxis-routing/routing-overlay.json', 'utf8'))",
  ]);
}

/** Until the overlay file in POD's volume equals the overlay ConfigMap as it is then (the operator may render anew). */
async function overlayDelivered(pod: string): Promise<void> {
  await waitFor(
    `the overlay in ${pod}`,
    async () => {
      const overlay = (
        await json<{ data: Record<string, string> }>([
          'get',
          'configmap',
          'grid-overlay-demo-consumer-gateway',
          '-n',
          NAMESPACE,
        ])
      ).data['routing-overlay.json'];
      const file = await overlayInPod(pod);
      return file.code === 0 && file.stdout === overlay ? true : undefined;
    },
    120_000,
  );
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

/**
 * A pod of grid-system that runs `command` once from the project image, labelled with nothing a NetworkPolicy
 * selects. The namespace enforces the restricted Pod Security Standard: the pod meets it, as the workloads do.
 */
function oneShotPod(name: string, container: string, command: readonly string[]): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE },
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
          name: container,
          image: archiveReference(IMAGE_ARCHIVE),
          imagePullPolicy: 'IfNotPresent',
          command,
          securityContext: {
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
            readOnlyRootFilesystem: true,
          },
        },
      ],
    },
  });
}

/** Runs `script` (an ES module) with the project image's node in a one-shot pod on the east node, to its end. */
async function runClientPod(name: string, script: string): Promise<{ phase: string; logs: string }> {
  await node.kubectlOk(['apply', '-f', '-'], {
    input: oneShotPod(name, 'client', ['node', '--input-type=module', '-e', script]),
  });
  const phase = await waitFor(
    `pod ${name} to finish`,
    async () => {
      const p = await json<Pod>(['get', 'pod', name, '-n', NAMESPACE]);
      return p.status.phase === 'Succeeded' || p.status.phase === 'Failed' ? p.status.phase : undefined;
    },
    120_000,
    async () => (await node.kubectl(['describe', 'pod', name, '-n', NAMESPACE])).stdout,
  );
  const logs = await node.kubectlOk(['logs', name, '-n', NAMESPACE]);
  await node.kubectlOk(['delete', 'pod', name, '-n', NAMESPACE, '--wait=false']);
  return { phase, logs };
}

/** Runs an ES module script with this Node in the node's network namespace; returns its stdout parsed as JSON. */
async function inNodeScript<T>(script: string, on: NodeCluster = node, timeoutMs = 30_000): Promise<T> {
  const result = await on.inNode([process.execPath, '--input-type=module', '-e', script], { timeoutMs });
  if (result.code !== 0)
    throw new Error(`script in ${on.netns} failed (${String(result.code)}): ${result.stderr.trim()}`);
  return JSON.parse(result.stdout) as T;
}

async function fetchInNode(
  url: string,
  token?: string,
  on: NodeCluster = node,
): Promise<{ status: number; body: string }> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return await inNodeScript(
    `const r = await fetch(${JSON.stringify(url)}, { headers: ${JSON.stringify(headers)}, signal: AbortSignal.timeout(10000) });
process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() }));`,
    on,
  );
}

const CHAT_BODY = JSON.stringify({
  model: 'sim-model-v1',
  messages: [{ role: 'user', content: 'hello from the node suite' }],
});

/** One chat completion from the east node's namespace with a caller key. */
async function chatInNode(url: string, key: string): Promise<{ status: number; body: string }> {
  return await inNodeScript(`const r = await fetch(${JSON.stringify(url)}, {
  method: 'POST', body: ${JSON.stringify(CHAT_BODY)}, signal: AbortSignal.timeout(20000),
  headers: { authorization: ${JSON.stringify(`Bearer ${key}`)}, 'content-type': 'application/json' } });
process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() }));`);
}

beforeAll(async () => {
  if (!existsSync(IMAGE_ARCHIVE)) throw new Error(`${IMAGE_ARCHIVE} is missing: run npm run image (run.sh does)`);
  await sweepStaleNodes();
  const keepWorkDir = process.env.AGN_NODE_KEEP_WORKDIR === '1';
  const [eastIndex, westIndex] = freeNodeIndexes(2);
  // Two sites, two clusters, started side by side.
  const started = await Promise.allSettled([
    startNodeCluster({ site: 'east', index: eastIndex, keepWorkDir }),
    startNodeCluster({ site: 'west', index: westIndex, keepWorkDir }),
  ]);
  const failed = started.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed.length > 0) {
    for (const r of started) if (r.status === 'fulfilled') await r.value.stop();
    stopped = true;
    throw new Error(failed.map((r) => (r.reason as Error).message).join('\n'));
  }
  [node, west] = started.map((r) => (r as PromiseFulfilledResult<NodeCluster>).value) as [NodeCluster, NodeCluster];
  cloud = await startCloudDouble([node, west]);
  const importStarted = Date.now();
  await Promise.all([node.importImage(IMAGE_ARCHIVE), west.importImage(IMAGE_ARCHIVE)]);
  process.stderr.write(`[node east, west] image import: ${Date.now() - importStarted} ms\n`);
});

afterAll(async () => {
  await cloud?.stop();
  if (!stopped) {
    stopped = true;
    for (const n of [node, west]) if (n !== undefined) await n.stop();
  }
});

describe('two sites, each a single node built here', () => {
  it('registers each node with the kubelet built from k8s.io/kubernetes, on containerd, Ready with the project image present', async () => {
    const reference = archiveReference(IMAGE_ARCHIVE);
    for (const [site, file] of [
      [node, 'east.k8s.yaml'],
      [west, 'west.k8s.yaml'],
    ] as const) {
      const n = await json<{
        status: {
          conditions: { type: string; status: string }[];
          nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string };
          addresses: { type: string; address: string }[];
        };
      }>(['get', 'node', site.nodeName], site);
      expect(n.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect(n.status.nodeInfo.kubeletVersion).toBe('v1.31.14');
      expect(n.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\/1\.6\./u);
      expect(n.status.addresses).toContainEqual({ type: 'InternalIP', address: site.nodeIp });
      expect(distObjects(file).some((o) => JSON.stringify(o).includes(`"image":"${reference}"`))).toBe(true);
      // In the node's containerd, where the kubelet looks (CRI namespace k8s.io); the pods below report it already present.
      const images = await site.ctr(['images', 'list', '--quiet']);
      expect(images.stdout.split('\n')).toContain(reference);
    }
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
    const script = `const out = {};
for (const host of ['${SIM}.${NAMESPACE}.svc.cluster.local', '${SIM}']) {
  const r = await fetch('http://' + host + ':8080/health', { signal: AbortSignal.timeout(10000) });
  out[host] = r.status;
}
out.resolv = (await import('node:fs')).readFileSync('/etc/resolv.conf', 'utf8');
console.log(JSON.stringify(out));`;
    const { phase, logs } = await runClientPod('node-suite-client', script);
    expect(phase, logs).toBe('Succeeded');
    const out = JSON.parse(logs.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(out[`${SIM}.${NAMESPACE}.svc.cluster.local`]).toBe(200);
    expect(out[SIM]).toBe(200);
    expect(out.resolv).toContain(`nameserver ${node.dnsIp}`);
    expect(out.resolv).toContain(`search ${NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local`);
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
    const killed = await node.ctr(['tasks', 'kill', '--signal=SIGKILL', containerId]);
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

  it('deploys west with the commands of docs/deploy.md, as they stand: every object of dist/west.k8s.yaml applied', async () => {
    const run = await deploySite(west, { OPENAI_API_KEY: `node-suite-${Date.now().toString(36)}` });
    // What `agn pki secrets` listed for the user is exactly what the page's west block makes.
    const listed = [...run.stderr.matchAll(/^ {2}([a-z0-9-]+\/[a-z0-9.-]+): /gmu)].map((m) => m[1]);
    expect(listed).toEqual([`${NAMESPACE}/openai-credential`]);
    await expectAllApplied(west, 'west.k8s.yaml');
  });

  it('deploys east with the commands of docs/deploy.md, as they stand, and every Deployment rolls out', async () => {
    const started = Date.now();
    const run = await deploySite(node, { DB_TOOLS_TOKEN: `node-suite-${Date.now().toString(36)}` });
    const listed = [...run.stderr.matchAll(/^ {2}([a-z0-9-]+\/[a-z0-9.-]+): /gmu)].map((m) => m[1]);
    expect(listed).toEqual([`${NAMESPACE}/consumer-caller-keys`, `${NAMESPACE}/db-tools-credential`]);
    // `agn key mint` printed team-a's key once, among kubectl's lines.
    callerKey = new RegExp(`^${CALLER_KEY.source}$`, 'mu').exec(run.stdout)?.[0] ?? '';
    expect(callerKey).not.toBe('');
    await expectAllApplied(node, 'east.k8s.yaml');
    const objects = distObjects('east.k8s.yaml');
    const deployments = objects.filter((o) => o.kind === 'Deployment').map((o) => o.metadata.name);
    expect(deployments).toEqual(
      expect.arrayContaining(['gossip-operator', 'provider-gateway', 'consumer-gateway', SIM]),
    );
    const pods = (await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE])).items;
    const restarts = pods.flatMap((p) =>
      (p.status.containerStatuses ?? [])
        .filter((c) => c.restartCount > 0)
        .map((c) => `${p.metadata.name}/${c.name}: ${c.restartCount}`),
    );
    process.stderr.write(
      `[node east] whole site rolled out in ${Date.now() - started} ms; restarts: ${restarts.length === 0 ? 'none' : restarts.join(', ')}\n`,
    );
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
    expect(rendered['routing-overlay.json']).toBeDefined();
    const pods = await consumerGatewayPods();
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) await overlayDelivered(pod.metadata.name);
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

  it("enforces dist/east.k8s.yaml's NetworkPolicies (kube-network-policies): a pod they do not admit is dropped, the node's probes pass", async () => {
    const podsOf = async (selector: string): Promise<Pod[]> =>
      (await json<{ items: Pod[] }>(['get', 'pods', '-n', NAMESPACE, '-l', selector])).items.filter(
        (p) => p.metadata.deletionTimestamp === undefined && p.status.podIP !== undefined,
      );
    const ipOf = async (instance: string): Promise<string> => {
      const ip = (await podsOf(`app.kubernetes.io/instance=${instance}`))[0]?.status.podIP;
      if (ip === undefined) throw new Error(`no running ${instance} pod`);
      return ip;
    };
    const restarts = (pods: readonly Pod[]): Record<string, number> =>
      Object.fromEntries(
        pods.flatMap((p) =>
          (p.status.containerStatuses ?? []).map((c) => [`${p.metadata.name}/${c.name}`, c.restartCount]),
        ),
      );
    const before = restarts(await podsOf('app.kubernetes.io/part-of=agn'));
    const [simA, simB, operator, consumer, provider] = await Promise.all(
      [SIM, 'sim-east-llm-b', 'gossip-operator', 'consumer-gateway', 'provider-gateway'].map(ipOf),
    );
    // What the compiled policies say to a pod of the namespace that none of their `from` selects.
    const denied: Record<string, [string, number]> = {
      'sim-east-llm-a:8080 (provider gateway and operator only)': [simA as string, 8080],
      'sim-east-llm-b:8080 (provider gateway and operator only)': [simB as string, 8080],
      'gossip-operator:7951 (the gateways only)': [operator as string, 7951],
      'consumer-gateway:9901 (the operator only)': [consumer as string, 9901],
    };
    const allowed: Record<string, [string, number]> = {
      'consumer-gateway:8080 (any)': [consumer as string, 8080],
      'provider-gateway:8443 (any)': [provider as string, 8443],
      'gossip-operator:7946 TCP (any)': [operator as string, 7946],
    };
    // A TCP connect per target, side by side: the engine drops a denied SYN (no RST), so a denied one times out.
    const script = `import { connect } from 'node:net';
const targets = ${JSON.stringify({ ...denied, ...allowed })};
const out = {};
await Promise.all(Object.entries(targets).map(([name, [host, port]]) => new Promise((resolve) => {
  const socket = connect({ host, port, timeout: 5000 });
  const done = (outcome) => { socket.destroy(); out[name] = outcome; resolve(); };
  socket.once('connect', () => done('connected'));
  socket.once('timeout', () => done('timed out'));
  socket.once('error', (e) => done(e.code ?? e.message));
})));
console.log(JSON.stringify(out));`;
    const { phase, logs } = await runClientPod('node-suite-netpol-client', script);
    expect(phase, logs).toBe('Succeeded');
    const out = JSON.parse(logs.trim().split('\n').at(-1) ?? '{}') as Record<string, string>;
    expect(out).toEqual({
      ...Object.fromEntries(Object.keys(denied).map((k) => [k, 'timed out'])),
      ...Object.fromEntries(Object.keys(allowed).map((k) => [k, 'connected'])),
    });
    // The engine knows the pods the policies select (its set of addresses it queues for), the client not among them.
    const set = await node.inNode(['nft', 'list', 'set', 'inet', NETPOL_TABLE, 'podips-v4']);
    expect(set.code, set.stderr).toBe(0);
    for (const ip of [simA, simB, operator, consumer, provider]) expect(set.stdout).toContain(ip);
    // The node itself reaches the pods (its root-owned sockets pass the engine, as the kubelet's probes do): the sim
    // that admits only the gateways and the operator answers the node on 8080.
    expect((await fetchInNode(`http://${simA}:8080/health`)).status).toBe(200);
    // Every pod still Ready (readiness probes passing under the policies), none restarted while this ran.
    const pods = await podsOf('app.kubernetes.io/part-of=agn');
    expect(pods.length).toBeGreaterThanOrEqual(5);
    for (const pod of pods) expect(ready(pod), pod.metadata.name).toBe(true);
    expect(restarts(pods)).toEqual(before);
  });

  it('rolls out every Deployment of dist/west.k8s.yaml on the west node', async () => {
    const started = Date.now();
    const rollout = await west.kubectl(['-n', NAMESPACE, 'rollout', 'status', 'deployment', '--timeout=420s'], {
      timeoutMs: 440_000,
    });
    process.stderr.write(`[node west] whole site rolled out ${Date.now() - started} ms after east's\n`);
    expect(
      rollout.code,
      `${rollout.stdout}${rollout.stderr}\n${(await west.kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'wide'])).stdout}`,
    ).toBe(0);
    const deployments = distObjects('west.k8s.yaml')
      .filter((o) => o.kind === 'Deployment')
      .map((o) => o.metadata.name);
    expect(deployments).toEqual(expect.arrayContaining(['gossip-operator', 'provider-gateway', 'sim-west-llm']));
  });

  it("gives each site's LoadBalancer Services an address (status.loadBalancer, kube-proxy) and publishes their names to both sites' pods", async () => {
    const expected = new Map<string, string>();
    for (const site of [node, west]) {
      for (const name of ['gossip-operator-public', 'provider-gateway']) {
        const service = await waitFor(
          `${site.site}: ${name} to get a load-balancer address`,
          async () => {
            const s = await json<{
              metadata: { annotations?: Record<string, string> };
              spec: { type: string };
              status?: { loadBalancer?: { ingress?: { ip: string }[] } };
            }>(['get', 'service', name, '-n', NAMESPACE], site);
            return s.status?.loadBalancer?.ingress?.[0]?.ip === undefined ? undefined : s;
          },
          30_000,
        );
        expect(service.spec.type, `${site.site}/${name}`).toBe('LoadBalancer');
        const ip = cloud?.loadBalancerIp(site.site, NAMESPACE, name);
        expect(ip, `${site.site}/${name}`).toMatch(
          new RegExp(`^${site.loadBalancerCidr.split('.').slice(0, 3).join('\\.')}\\.`, 'u'),
        );
        expect(service.status?.loadBalancer?.ingress?.map((i) => i.ip)).toEqual([ip]);
        const hostname = service.metadata.annotations?.['external-dns.alpha.kubernetes.io/hostname'] ?? '';
        expect(hostname, `${site.site}/${name}`).toMatch(new RegExp(`\\.${site.site}\\.grid\\.example\\.com$`, 'u'));
        expected.set(hostname, ip ?? '');
      }
    }
    expect([...expected.keys()].sort()).toEqual([
      'gateway.east.grid.example.com',
      'gateway.west.grid.example.com',
      'gossip.east.grid.example.com',
      'gossip.west.grid.example.com',
    ]);
    // From a pod of each site, through its resolv.conf and its cluster's DNS, as the operators and gateways look them up.
    const lookup = `const dns = require('node:dns').promises; const out = {};
Promise.all(${JSON.stringify([...expected.keys()])}.map(async (h) => { out[h] = (await dns.lookup(h, { family: 4 })).address; }))
  .then(() => process.stdout.write(JSON.stringify(out)));`;
    for (const site of [node, west]) {
      const [operator] = (
        await json<{ items: Pod[] }>(
          ['get', 'pods', '-n', NAMESPACE, '-l', 'app.kubernetes.io/name=gossip-operator'],
          site,
        )
      ).items;
      if (operator === undefined) throw new Error(`${site.site}: no operator pod`);
      const seen = await waitFor(
        `${site.site}: the public names in ${operator.metadata.name}`,
        async () => {
          const r = await inOperator(site, operator.metadata.name, lookup);
          return r.code === 0 ? (JSON.parse(r.stdout) as Record<string, string>) : undefined;
        },
        30_000,
      );
      expect(seen, site.site).toEqual(Object.fromEntries(expected));
    }
  });

  it("has each site verify the other: the peer's GridSite Active on both sides, with the pinned certificate, Ready", async () => {
    for (const [site, file] of [
      [node, 'east.k8s.yaml'],
      [west, 'west.k8s.yaml'],
    ] as const) {
      // The peer's GridSite (pinned in dist/); a site's own GridSite carries no pin of itself and is not probed.
      const gridSites = distObjects(file).filter((o) => o.kind === 'GridSite' && o.metadata.name !== site.site);
      expect(
        gridSites.map((o) => o.metadata.name),
        site.site,
      ).toEqual([`demo-${site === node ? 'west' : 'east'}`]);
      for (const gridSite of gridSites) {
        const status = await waitFor(
          `${site.site}: GridSite ${gridSite.metadata.name} Active`,
          async () => {
            const gs = await json<{
              status?: { phase?: string; reason?: string; conditions?: { type: string; status: string }[] };
            }>(['get', 'gridsite', gridSite.metadata.name], site);
            return gs.status?.phase === 'Active' ? gs.status : undefined;
          },
          180_000,
          async () =>
            `${(await site.kubectl(['get', 'gridsites', '-o', 'yaml'])).stdout}\n${
              (await site.kubectl(['-n', NAMESPACE, 'logs', 'deployment/gossip-operator', '--tail=40'])).stdout
            }`,
        );
        expect(status.reason, `${site.site}/${gridSite.metadata.name}`).toBe('TlsVerified');
        expect(
          status.conditions?.find((c) => c.type === 'Ready')?.status,
          `${site.site}/${gridSite.metadata.name}`,
        ).toBe('True');
      }
    }
  });

  it('has the operators of the two sites form one grid over gossip', async () => {
    for (const site of [node, west]) {
      const service = await json<{ spec: { clusterIP: string } }>(
        ['get', 'service', 'gossip-operator', '-n', NAMESPACE],
        site,
      );
      const members = await waitFor(
        `${site.site}: the operator to see both sites alive`,
        async () => {
          const res = await fetchInNode(`http://${service.spec.clusterIP}:9090/status`, undefined, site);
          const body = JSON.parse(res.body) as { gossip: { members: Record<string, number> } | null };
          return body.gossip !== null && body.gossip.members.alive === 2 ? body.gossip.members : undefined;
        },
        120_000,
      );
      expect(members, site.site).toMatchObject({ alive: 2, dead: 0 });
    }
  });

  it("has overlay-sync write an overlay with both sites' candidates into the east consumer gateway's volume", async () => {
    const pods = await consumerGatewayPods();
    expect(pods.length).toBe(2);
    for (const pod of pods) {
      const candidates = await waitFor(
        `${pod.metadata.name}'s overlay to list both sites`,
        async () => {
          const file = await overlayInPod(pod.metadata.name);
          if (file.code !== 0) return undefined;
          const parsed = JSON.parse(file.stdout) as {
            scope: { local_site: string };
            overlay: { candidates: { site?: string }[] };
          };
          expect(parsed.scope.local_site).toBe('east');
          const sites = new Set(parsed.overlay.candidates.map((c) => c.site));
          return sites.has('east') && sites.has('west') ? parsed.overlay.candidates : undefined;
        },
        120_000,
      );
      expect(candidates.length).toBeGreaterThanOrEqual(3);
    }
  });

  it('loses no chat completion through the consumer gateway Service while `kubectl rollout restart` replaces its pods', async () => {
    const service = await json<{ spec: { clusterIP: string } }>([
      'get',
      'service',
      'consumer-gateway',
      '-n',
      NAMESPACE,
    ]);
    const before = (await consumerGatewayPods()).map((p) => p.metadata.name);
    const stopFile = join(node.workDir, 'load.stop');
    // Closed-loop load from the node (4 clients, each request on a connection of its own), bounded in count and time.
    const load = inNodeScript<{ counts: { ok: number; failed: number }; failures: string[]; ms: number; by: string }>(
      loadScript(`http://${service.spec.clusterIP}:8080/v1/chat/completions`, callerKey, stopFile, 4, 3000, 240_000),
      node,
      260_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await node.kubectlOk(['-n', NAMESPACE, 'rollout', 'restart', 'deployment/consumer-gateway']);
    const rollout = await node.kubectl(
      ['-n', NAMESPACE, 'rollout', 'status', 'deployment/consumer-gateway', '--timeout=200s'],
      { timeoutMs: 210_000 },
    );
    // Until the old pods are gone (their drain included), then a little more load on the new ones.
    await waitFor(
      'the old consumer gateway pods to be gone',
      async () => {
        const names = (
          await json<{ items: Pod[] }>([
            'get',
            'pods',
            '-n',
            NAMESPACE,
            '-l',
            'app.kubernetes.io/name=consumer-gateway',
          ])
        ).items.map((p) => p.metadata.name);
        return names.some((n) => before.includes(n)) ? undefined : names;
      },
      120_000,
    ).finally(() => setTimeout(() => writeFileSync(stopFile, ''), 2_000));
    const { counts, failures, ms, by } = await load;
    process.stderr.write(
      `[node east] load through ${service.spec.clusterIP}:8080 during rollout restart: ${JSON.stringify(counts)} in ${ms} ms\n`,
    );
    expect(rollout.code, rollout.stdout + rollout.stderr).toBe(0);
    expect(failures).toEqual([]);
    expect(by).toBe('stop');
    expect(counts.ok).toBeGreaterThan(20);
  });

  it('takes a caller key revoked in its Secret without a restart: the gateway answers it 401 once the kubelet syncs the volume', async () => {
    // The keys file the deploy page's `agn key mint` wrote in the grid repository.
    const keysFile = join(gridRepository(node), 'caller-keys.json');
    const pods = await consumerGatewayPods();
    expect(pods.length).toBe(2);
    const restarts = (pod: Pod): number =>
      pod.status.containerStatuses?.find((c) => c.name === 'gateway')?.restartCount ?? -1;
    const url = (pod: Pod): string => `http://${pod.status.podIP ?? ''}:8080/v1/chat/completions`;
    for (const pod of pods) expect((await chatInNode(url(pod), callerKey)).status, pod.metadata.name).toBe(200);
    // The rotation docs/tenants.md describes: a new key minted, the old one revoked, the file applied to the Secret.
    const revoked = callerKey;
    const id = /^agn_([0-9a-f]{16})_/u.exec(revoked)?.[1] ?? '';
    expect(id).not.toBe('');
    const minted = (await agn(['key', 'mint', '--tenant', 'team-a', '--keys-file', keysFile])).stdout.trim();
    await agn(['key', 'revoke', '--id', id, '--keys-file', keysFile]);
    const manifest = await node.kubectlOk([
      '-n',
      NAMESPACE,
      'create',
      'secret',
      'generic',
      'consumer-caller-keys',
      `--from-file=caller-keys.json=${keysFile}`,
      '--dry-run=client',
      '-o',
      'yaml',
    ]);
    await node.kubectlOk(['apply', '-f', '-'], { input: manifest });
    const applied = Date.now();
    for (const pod of pods) {
      await waitFor(
        `${pod.metadata.name} to refuse the revoked key and take the new one`,
        async () => {
          const old = await chatInNode(url(pod), revoked);
          if (old.status !== 401) return undefined;
          return (await chatInNode(url(pod), minted)).status === 200 ? true : undefined;
        },
        120_000,
        undefined,
        1_000,
      );
    }
    process.stderr.write(
      `[node east] revoked key refused by both gateways ${Date.now() - applied} ms after the apply\n`,
    );
    callerKey = minted;
    const after = await consumerGatewayPods();
    expect(after.map((p) => p.metadata.uid).sort()).toEqual(pods.map((p) => p.metadata.uid).sort());
    for (const pod of after) {
      const was = pods.find((p) => p.metadata.uid === pod.metadata.uid);
      expect(restarts(pod), pod.metadata.name).toBe(was === undefined ? -2 : restarts(was));
    }
    // Through the Service too: the revoked key refused whichever pod answers.
    const service = await json<{ spec: { clusterIP: string } }>([
      'get',
      'service',
      'consumer-gateway',
      '-n',
      NAMESPACE,
    ]);
    for (let i = 0; i < 4; i++) {
      const refused = await chatInNode(`http://${service.spec.clusterIP}:8080/v1/chat/completions`, revoked);
      expect(refused.status).toBe(401);
      expect(refused.body).toContain('invalid_api_key');
    }
  });

  it("serves a chat completion through east's consumer gateway from west once east's sims are scaled to 0", async () => {
    const eastSims = distObjects('east.k8s.yaml')
      .filter((o) => o.kind === 'Deployment' && o.metadata.name.startsWith('sim-'))
      .map((o) => o.metadata.name);
    expect(eastSims.sort()).toEqual(['sim-east-llm-a', 'sim-east-llm-b']);
    await node.kubectlOk(['-n', NAMESPACE, 'scale', ...eastSims.map((name) => `deployment/${name}`), '--replicas=0']);
    const service = await json<{ spec: { clusterIP: string } }>([
      'get',
      'service',
      'consumer-gateway',
      '-n',
      NAMESPACE,
    ]);
    // Once the operator sees east's backends fail their health checks its overlay routes across sites:
    // east consumer gateway -> gateway.west.grid.example.com (west's load balancer, mTLS, pinned) -> west sim.
    const answered = await waitFor(
      '5 chat completions in a row served by west',
      async () => {
        const fingerprints: string[] = [];
        for (let i = 0; i < 5; i++) {
          const res = await chatInNode(`http://${service.spec.clusterIP}:8080/v1/chat/completions`, callerKey);
          if (res.status !== 200) return undefined;
          fingerprints.push((JSON.parse(res.body) as { system_fingerprint: string }).system_fingerprint);
        }
        return fingerprints.every((f) => f === 'west-llm') ? fingerprints : undefined;
      },
      180_000,
      async () =>
        (await node.kubectl(['-n', NAMESPACE, 'logs', 'deployment/consumer-gateway', '-c', 'gateway', '--tail=30']))
          .stdout,
      1_000,
    );
    expect(answered).toEqual(Array(5).fill('west-llm'));
  });

  describe('dist/ as compiled, the sites apart, stops, signals and usage errors on the real kubelet', () => {
    /** A site's Deployments of dist/, each with its replica count and pod template containers. */
    const deploymentsOf = (file: string) =>
      distObjects(file)
        .filter((o) => o.kind === 'Deployment')
        .map((o) => {
          const spec = o.spec as {
            replicas?: number;
            selector: { matchLabels: Record<string, string> };
            template: { spec: { containers: { name: string; image: string; command?: string[]; args?: string[] }[] } };
          };
          return { name: o.metadata.name, replicas: spec.replicas ?? 1, spec };
        });

    const podsOf = async (site: NodeCluster, labels: Record<string, string>): Promise<PodStatus[]> =>
      (
        await json<{ items: PodStatus[] }>(
          [
            'get',
            'pods',
            '-n',
            NAMESPACE,
            '-l',
            Object.entries(labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(','),
          ],
          site,
        )
      ).items.filter((p) => p.metadata.deletionTimestamp === undefined);

    const podsNamed = (site: NodeCluster, name: string): Promise<PodStatus[]> =>
      podsOf(site, { 'app.kubernetes.io/name': name });

    const consumerUrl = async (): Promise<string> =>
      `http://${(await json<{ spec: { clusterIP: string } }>(['get', 'service', 'consumer-gateway', '-n', NAMESPACE])).spec.clusterIP}:8080/v1/chat/completions`;

    /** Every Deployment of the site rolled out and every pod of it Ready. */
    const rolledOut = async (site: NodeCluster): Promise<void> => {
      const rollout = await site.kubectl(['-n', NAMESPACE, 'rollout', 'status', 'deployment', '--timeout=240s'], {
        timeoutMs: 260_000,
      });
      expect(
        rollout.code,
        `${site.site}: ${rollout.stdout}${rollout.stderr}\n${(await site.kubectl(['get', 'pods', '-n', NAMESPACE, '-o', 'wide'])).stdout}`,
      ).toBe(0);
    };

    /** Chat completions through east's consumer gateway Service, `count` in a row answered 200. */
    const serving = async (count: number, timeoutMs: number): Promise<string[]> => {
      const url = await consumerUrl();
      return await waitFor(
        `${count} chat completions in a row through east's consumer gateway`,
        () => completionsInARow(node, url, callerKey, count),
        timeoutMs,
        async () =>
          (await node.kubectl(['-n', NAMESPACE, 'get', 'pods', '-o', 'wide'])).stdout +
          (await node.kubectl(['-n', NAMESPACE, 'logs', 'deployment/consumer-gateway', '-c', 'gateway', '--tail=20']))
            .stdout,
        1_000,
      );
    };

    it("runs docs/deploy.md's every-site block again, as after a later synth: the replicas `kubectl scale` changed are taken back, nothing of the site pruned", async () => {
      await deploySite(node, {}, { ownSecrets: false });
      await expectAllApplied(node, 'east.k8s.yaml');
      await rolledOut(node);
      await serving(3, 180_000);
    });

    it('runs dist/ exactly as compiled: the API servers hold each GridSite as dist/ says, pins included, changed by no one but the apply', async () => {
      for (const [site, file] of [
        [node, 'east.k8s.yaml'],
        [west, 'west.k8s.yaml'],
      ] as const) {
        const compiled = distObjects(file).filter((o) => o.kind === 'GridSite');
        expect(compiled.length, site.site).toBe(2);
        for (const gridSite of compiled) {
          const stored = await json<{
            spec: unknown;
            metadata: { managedFields?: { manager: string; subresource?: string }[] };
          }>(['get', 'gridsite', gridSite.metadata.name, '--show-managed-fields'], site);
          expect(stored.spec, `${site.site}: GridSite ${gridSite.metadata.name}`).toEqual(gridSite.spec);
          // Only the apply of dist/ wrote the spec; the operator writes status only.
          const specWriters = (stored.metadata.managedFields ?? [])
            .filter((f) => f.subresource !== 'status')
            .map((f) => f.manager);
          // kubectl's client-side apply, as docs/deploy.md applies a site's file (its --prune refuses server-side).
          expect(specWriters, `${site.site}: GridSite ${gridSite.metadata.name}`).toEqual([
            'kubectl-client-side-apply',
          ]);
        }
        const peers = compiled.filter((o) => o.metadata.name !== site.site);
        expect(peers.length, site.site).toBe(1);
        for (const peer of peers)
          expect(
            (peer.spec as { trust?: { canonicalFingerprints?: string[] } }).trust?.canonicalFingerprints?.length,
            `${site.site}: ${peer.metadata.name} is pinned in dist/`,
          ).toBe(1);
      }
    });

    it('runs every container of every Deployment replica as compiled: the process containerd started is the command and args, uid/gid 10001, read-only root', async () => {
      const roles = new Set<string>();
      for (const [site, file] of [
        [node, 'east.k8s.yaml'],
        [west, 'west.k8s.yaml'],
      ] as const) {
        for (const deployment of deploymentsOf(file)) {
          const pods = await podsOf(site, deployment.spec.selector.matchLabels);
          expect(pods.length, `${site.site}: pods of ${deployment.name}`).toBe(deployment.replicas);
          for (const pod of pods) {
            for (const template of deployment.spec.template.spec.containers) {
              const status = pod.status.containerStatuses?.find((c) => c.name === template.name);
              const what = `${site.site}: ${pod.metadata.name}/${template.name}`;
              expect(status?.state, what).toHaveProperty('running');
              // The OCI spec containerd gave runc: the process as PID 1, no shell in between.
              const spec = JSON.parse(
                (await site.ctr(['containers', 'info', '--spec', containerdId(status)])).stdout,
              ) as { process: { args: string[]; user: { uid: number; gid: number } }; root: { readonly?: boolean } };
              expect(spec.process.args, what).toEqual([...(template.command ?? []), ...(template.args ?? [])]);
              expect(spec.process.user, what).toMatchObject({ uid: 10001, gid: 10001 });
              expect(spec.root.readonly, what).toBe(true);
              roles.add(template.command?.[1] ?? '');
            }
          }
        }
      }
      expect([...roles].sort()).toEqual([
        'daemons/gateway/main.ts',
        'daemons/gossip-operator/main.ts',
        'daemons/overlay-sync/main.ts',
        'daemons/sim/main.ts',
      ]);
    });

    it('reaches nothing of the other site by ClusterIP or pod address from a pod, only its load-balancer addresses', async () => {
      const connect = (targets: Record<string, string>) => `const net = require('node:net'); const out = {};
Promise.all(Object.entries(${JSON.stringify(targets)}).map(([what, target]) => new Promise((resolve) => {
  const [host, port] = target.split(':');
  const s = net.connect({ host, port: Number(port), timeout: 3000 });
  const done = (r) => { out[what] = r; s.destroy(); resolve(); };
  s.on('connect', () => done('connected')); s.on('timeout', () => done('timeout')); s.on('error', (e) => done(e.code));
}))).then(() => process.stdout.write(JSON.stringify(out)));`;
      for (const [from, to] of [
        [node, west],
        [west, node],
      ] as const) {
        const service = await json<{ spec: { clusterIP: string } }>(
          ['get', 'service', 'provider-gateway', '-n', NAMESPACE],
          to,
        );
        const [peerPod] = await podsNamed(to, 'provider-gateway');
        const [operator] = await podsNamed(from, 'gossip-operator');
        if (peerPod?.status.podIP === undefined || operator === undefined) throw new Error('missing pods');
        const targets = {
          clusterIp: `${service.spec.clusterIP}:8443`,
          podIp: `${peerPod.status.podIP}:8443`,
          loadBalancer: `${cloud?.loadBalancerIp(to.site, NAMESPACE, 'provider-gateway') ?? ''}:8443`,
        };
        const run = await inOperator(from, operator.metadata.name, connect(targets));
        expect(run.code, run.stderr).toBe(0);
        const seen = JSON.parse(run.stdout) as Record<string, string>;
        expect(seen.loadBalancer, `${from.site} -> ${to.site} ${targets.loadBalancer}`).toBe('connected');
        expect(seen.clusterIp, `${from.site} -> ${to.site} ${targets.clusterIp}`).not.toBe('connected');
        expect(seen.podIp, `${from.site} -> ${to.site} ${targets.podIp}`).not.toBe('connected');
      }
    });

    it("redeems the SiteInvite east signs at east's public address with agn site enroll, from the other side of the internet", async () => {
      const tokenId = await waitFor(
        'the north invite to get a token',
        async () =>
          (await json<{ status?: { tokenId?: string } }>(['get', 'siteinvite', 'north'])).status?.tokenId ?? undefined,
        60_000,
      );
      const secret = await json<{ data: { token: string } }>([
        'get',
        'secret',
        inviteTokenSecretName('north'),
        '-n',
        NAMESPACE,
      ]);
      const out = join(node.workDir, 'enroll-north');
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, 'north.token'), Buffer.from(secret.data.token, 'base64'));
      const address = cloud?.loadBalancerIp('east', NAMESPACE, 'gossip-operator-public');
      expect(address).toBeDefined();
      // The joining site is on the internet: west's namespace routes to east only through the cloud's network, to
      // east's load-balancer addresses.
      const enroll = await west.inNode(
        [
          process.execPath,
          join(REPO_ROOT, 'daemons', 'cli', 'agn.ts'),
          'site',
          'enroll',
          '--url',
          `https://${address ?? ''}:9443`,
          '--ca',
          join(EXAMPLE_PKI, 'ca.crt'),
          '--token-id',
          tokenId,
          '--token-file',
          join(out, 'north.token'),
          '--site',
          'north',
          '--signer',
          'east',
          '--out',
          join(out, 'tls'),
        ],
        { timeoutMs: 60_000 },
      );
      expect(enroll.code, enroll.stderr).toBe(0);
      const issued = new X509Certificate(readFileSync(join(out, 'tls', 'tls.crt')));
      expect(issued.subject.split('\n')).toContain('CN=north');
      expect(issued.verify(new X509Certificate(readFileSync(join(EXAMPLE_PKI, 'ca.crt'))).publicKey)).toBe(true);
      const invite = await json<{ status?: { redeemed?: boolean; redeemedBy?: string } }>([
        'get',
        'siteinvite',
        'north',
      ]);
      expect(invite.status).toMatchObject({ redeemed: true, redeemedBy: 'north' });
    });

    it('deletes a consumer gateway pod under load through its Service: no request fails, gateway and overlay-sync exit 0 within 3 s', async () => {
      // The kubelet stops it as dist/ says: the image's STOPSIGNAL (SIGTERM), then SIGKILL after the pod's
      // terminationGracePeriodSeconds (30 s in dist/), which a stop within 3 s is far inside.
      const template = deploymentsOf('east.k8s.yaml').find((d) => d.name === 'consumer-gateway');
      const grace = (template?.spec.template.spec as { terminationGracePeriodSeconds?: number } | undefined)
        ?.terminationGracePeriodSeconds;
      expect(grace).toBe(30);
      const [target] = await consumerGatewayPods();
      if (target === undefined) throw new Error('no consumer gateway pod');
      const ids = Object.fromEntries(
        ['gateway', 'overlay-sync'].map((name) => [
          name,
          containerdId(target.status.containerStatuses?.find((c) => c.name === name)),
        ]),
      );
      const exits = await watchTaskExits(node);
      const kubelet = await watchTerminations(node, NAMESPACE, target.metadata.name);
      const load = startLoad(node, await consumerUrl(), callerKey, 4);
      try {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        const deleted = Date.now();
        await node.kubectlOk(['-n', NAMESPACE, 'delete', 'pod', target.metadata.name, '--wait=false']);
        const ended = await Promise.all(
          Object.entries(ids).map(async ([name, id]) => ({ name, ...(await exits.exitOf(id, 40_000)) })),
        );
        await waitFor(
          `${target.metadata.name} gone and a new consumer gateway Ready`,
          async () => {
            const pods = (await consumerGatewayPods()).filter((p) => p.metadata.deletionTimestamp === undefined);
            return pods.length === 2 && pods.every(ready) && !pods.some((p) => p.metadata.uid === target.metadata.uid)
              ? true
              : undefined;
          },
          120_000,
        );
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        const { counts, failures, ms } = await load.end();
        process.stderr.write(
          `[node east] ${target.metadata.name} deleted under load: ${ended.map((e) => `${e.name} exit ${e.exitStatus} after ${e.exitedAt - deleted} ms`).join(', ')}; load ${JSON.stringify(counts)} in ${ms} ms\n`,
        );
        expect(failures).toEqual([]);
        expect(counts.ok).toBeGreaterThan(10);
        for (const e of ended) {
          expect(e.exitStatus, e.name).toBe(0);
          expect(e.exitedAt - deleted, `${e.name}: ms from the delete to its exit`).toBeLessThan(3_000);
          expect(kubelet.exitCodes.get(e.name), `${e.name}: exit code the kubelet reported`).toBe(0);
        }
      } finally {
        exits.stop();
        kubelet.stop();
        await load.end().catch(() => undefined);
      }
    });

    it('stops one container of each other kind (operator, provider gateway, sim, overlay-sync) within 3 s, exit 0, serving on; the grid recovers', {
      timeout: 600_000,
    }, async () => {
      await serving(5, 60_000);
      const exits = await watchTaskExits(node);
      const times: string[] = [];
      try {
        // The operator, a provider gateway and a sim as the kubelet stops them: their pods deleted and recreated.
        for (const [instance, container] of [
          ['gossip-operator', 'gossip-operator'],
          ['provider-gateway', 'gateway'],
          [SIM, 'sim'],
        ] as const) {
          const [pod] = await podsOf(node, { 'app.kubernetes.io/instance': instance });
          if (pod === undefined) throw new Error(`no ${instance} pod`);
          const id = containerdId(pod.status.containerStatuses?.find((c) => c.name === container));
          const kubelet = await watchTerminations(node, NAMESPACE, pod.metadata.name);
          try {
            const deleted = Date.now();
            await node.kubectlOk(['-n', NAMESPACE, 'delete', 'pod', pod.metadata.name, '--wait=false']);
            const exit = await exits.exitOf(id, 40_000);
            times.push(`${pod.metadata.name} exit ${exit.exitStatus} after ${exit.exitedAt - deleted} ms`);
            expect(exit.exitStatus, pod.metadata.name).toBe(0);
            expect(exit.exitedAt - deleted, `${pod.metadata.name}: ms from the delete to its exit`).toBeLessThan(3_000);
            const reported = await waitFor(
              `the kubelet to report ${pod.metadata.name}'s exit`,
              async () => kubelet.exitCodes.get(container),
              20_000,
            );
            expect(reported, `${pod.metadata.name}: exit code the kubelet reported`).toBe(0);
          } finally {
            kubelet.stop();
          }
          // The grid serves on; with a sim gone, once the operator's health checks route around it.
          await serving(10, 120_000);
        }
        // overlay-sync stopped alone (SIGTERM to its task, as the kubelet would send it): restarted in place.
        const [pod] = await consumerGatewayPods();
        const before = pod?.status.containerStatuses?.find((c) => c.name === 'overlay-sync');
        if (pod === undefined || before === undefined) throw new Error('no overlay-sync');
        const stopped = Date.now();
        const kill = await node.ctr(['tasks', 'kill', '--signal=SIGTERM', containerdId(before)]);
        expect(kill.code, kill.stderr).toBe(0);
        const exit = await exits.exitOf(containerdId(before), 40_000);
        times.push(`${pod.metadata.name}/overlay-sync exit ${exit.exitStatus} after ${exit.exitedAt - stopped} ms`);
        expect(exit.exitStatus).toBe(0);
        expect(exit.exitedAt - stopped).toBeLessThan(3_000);
        await serving(10, 30_000);
        const restarted = await waitFor(
          'overlay-sync restarted by the kubelet',
          async () => {
            const p = await json<PodStatus>(['get', 'pod', pod.metadata.name, '-n', NAMESPACE]);
            const s = p.status.containerStatuses?.find((c) => c.name === 'overlay-sync');
            return s !== undefined && s.restartCount === before.restartCount + 1 && s.ready ? s : undefined;
          },
          120_000,
        );
        expect(restarted.lastState?.terminated?.exitCode).toBe(0);
      } finally {
        exits.stop();
        process.stderr.write(`[node east] stops: ${times.join('; ')}\n`);
      }
      // Recovered: every Deployment back, the new operator in the gossip grid, the overlay delivered, completions.
      await rolledOut(node);
      const operatorService = await json<{ spec: { clusterIP: string } }>([
        'get',
        'service',
        'gossip-operator',
        '-n',
        NAMESPACE,
      ]);
      await waitFor(
        'the new east operator to see both sites alive',
        async () => {
          const res = await fetchInNode(`http://${operatorService.spec.clusterIP}:9090/status`);
          const body = JSON.parse(res.body) as { gossip: { members: Record<string, number> } | null };
          return body.gossip?.members.alive === 2 && body.gossip.members.dead === 0 ? true : undefined;
        },
        120_000,
      );
      for (const pod of await consumerGatewayPods()) await overlayDelivered(pod.metadata.name);
      await serving(10, 60_000);
    });

    it('makes every daemon exit 0 as PID 1 on SIGINT (operator, overlay-sync, gateways, sims), restarted by the kubelet', {
      timeout: 600_000,
    }, async () => {
      await rolledOut(node);
      const pods = (await json<{ items: PodStatus[] }>(['get', 'pods', '-n', NAMESPACE])).items.filter(
        (p) => p.metadata.deletionTimestamp === undefined && p.status.phase === 'Running',
      );
      const targets = pods.flatMap((p) =>
        (p.status.containerStatuses ?? []).map((s) => ({ pod: p.metadata.name, status: s })),
      );
      expect(new Set(targets.map((t) => t.status.name))).toEqual(
        new Set(['gossip-operator', 'overlay-sync', 'gateway', 'sim']),
      );
      const exits = await watchTaskExits(node);
      try {
        for (const t of targets) {
          const kill = await node.ctr(['tasks', 'kill', '--signal=SIGINT', containerdId(t.status)]);
          expect(kill.code, `${t.pod}/${t.status.name}: ${kill.stderr}`).toBe(0);
        }
        const codes = await Promise.all(
          targets.map(
            async (t) => `${t.pod}/${t.status.name} ${(await exits.exitOf(containerdId(t.status), 30_000)).exitStatus}`,
          ),
        );
        expect(codes).toEqual(targets.map((t) => `${t.pod}/${t.status.name} 0`));
      } finally {
        exits.stop();
      }
      // What the kubelet saw: each container restarted once, its last state terminated with exit code 0.
      for (const t of targets) {
        const seen = await waitFor(
          `${t.pod}/${t.status.name} restarted`,
          async () => {
            const p = await json<PodStatus>(['get', 'pod', t.pod, '-n', NAMESPACE]);
            const s = p.status.containerStatuses?.find((c) => c.name === t.status.name);
            return s !== undefined && s.restartCount === t.status.restartCount + 1 ? s : undefined;
          },
          120_000,
        );
        expect(seen.lastState?.terminated?.exitCode, `${t.pod}/${t.status.name}`).toBe(0);
      }
      await rolledOut(node);
      await serving(5, 120_000);
    });

    it.each(['gossip-operator', 'overlay-sync', 'gateway', 'sim'])(
      '%s from the image on the node with an unknown flag exits 2 with one stderr line naming it',
      async (daemon) => {
        const pod = `usage-${daemon}`;
        await node.kubectlOk(['apply', '-f', '-'], {
          input: oneShotPod(pod, daemon, ['node', `daemons/${daemon}/main.ts`, '--no-such-flag']),
        });
        const terminated = await waitFor(
          `pod ${pod} to end`,
          async () => {
            const p = await json<PodStatus>(['get', 'pod', pod, '-n', NAMESPACE]);
            return p.status.containerStatuses?.[0]?.state.terminated;
          },
          120_000,
          async () => (await node.kubectl(['describe', 'pod', pod, '-n', NAMESPACE])).stdout,
        );
        const logs = await node.kubectlOk(['logs', pod, '-n', NAMESPACE]);
        expect(terminated.exitCode, logs).toBe(2);
        // The CRI log keeps the streams apart: one stderr line naming the flag, nothing on stdout.
        const log = criLog(node, NAMESPACE, pod, daemon);
        const lines = log.filter((l) => l.stream === 'stderr');
        expect(
          log.filter((l) => l.stream === 'stdout'),
          logs,
        ).toEqual([]);
        expect(lines, logs).toHaveLength(1);
        expect(lines[0]?.text).toMatch(new RegExp(`^${daemon}: Unknown option '--no-such-flag'`, 'u'));
        await node.kubectlOk(['delete', 'pod', pod, '-n', NAMESPACE, '--wait=false']);
      },
    );
  });

  it('stops both nodes without leaving a process, mount, cgroup, network namespace, route or sysctl behind', async () => {
    const sites = [node, west];
    const pids = sites.flatMap((n) => Object.values(n.pids()));
    expect(pids.length).toBeGreaterThanOrEqual(16);
    stopped = true;
    await cloud?.stop();
    cloud = undefined;
    for (const n of sites) await n.stop();
    const alive = pids.filter((pid) => existsSync(`/proc/${pid}`));
    expect(alive).toEqual([]);
    const routes = execFileSync('ip', ['-4', 'route'], { encoding: 'utf8' });
    const rules = execFileSync('iptables-save', { encoding: 'utf8' });
    const processes = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n');
    for (const n of sites) {
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(n.workDir);
      expect(existsSync(`/run/netns/${n.netns}`)).toBe(false);
      expect(existsSync(n.workDir)).toBe(false);
      for (const hierarchy of ['memory', 'cpu', 'pids', 'unified'])
        expect(existsSync(`/sys/fs/cgroup/${hierarchy}${n.cgroupRoot}`)).toBe(false);
      for (const cidr of [n.podCidr, n.serviceCidr, n.loadBalancerCidr]) {
        expect(routes).not.toContain(cidr);
        expect(rules).not.toContain(cidr);
      }
      // The veth, and with it its forwarding setting, is gone.
      expect(existsSync(`/proc/sys/net/ipv4/conf/${n.vethHost}`)).toBe(false);
      expect(processes.filter((l) => l.includes(n.containerdSocket))).toEqual([]);
    }
  });
});
