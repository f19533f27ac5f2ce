// The compiled grid of dist/ run from the project image under podman, one real kube-apiserver + etcd per site,
// deployed the way docs/deploy.md tells a user to: per site the CRDs and the site's manifests
// server-side applied exactly as compiled, the Secrets `agn pki secrets` prints for the site (from the example's PKI)
// applied, and the ones it says the user makes (caller keys from `agn key mint`, a provider API key) created. Nothing
// in a manifest is changed or patched afterwards: the peers' pins, the advertised names and the keys all come from
// dist/ and the PKI. kube-root-ca.crt is published (no controller-manager runs here); then every Deployment replica
// starts as a podman pod with the containers of its template (pod-spec.ts), its volumes filled from the Secrets and
// ConfigMaps the API server holds, as a kubelet does. Networking: one podman bridge; each pod has its own IP; each
// Service a ClusterIP on the bridge with a userspace proxy (service-proxy.ts), named only in its own site's pods'
// /etc/hosts (cluster DNS). This suite is also each site's cloud: a LoadBalancer Service gets an external address on
// the bridge (TCP proxies, a UDP forwarder), written to its status.loadBalancer like a cloud controller does, and
// its external-dns hostname annotation resolves to that address in every pod of the grid, like public DNS. A
// ClusterIP Service is never reachable by name from the other site.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import {
  type CompiledSite,
  loadCompiledGrid,
  selects,
  targetContainerPort,
  type PodPlan,
  type ServicePlan,
} from '../../daemons/local-grid/compiled-grid.ts';
import { demoTenants } from '../../daemons/local-grid/demo-keys.ts';
import { type ControlPlane, resolveBinDir, startControlPlane } from '../cluster/control-plane.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { applyManifests, DIST_DIR, RawClient, waitUntil } from '../cluster/manifests.ts';

export { waitUntil };
import { podman, podmanOk } from './podman.ts';
import { type ContainerTemplate, type PodTemplateSpec, podmanRunArgs } from './pod-spec.ts';
import { type Endpoint, type ServiceProxy, startServiceProxy, startUdpForwarder } from './service-proxy.ts';

const PREFIX = 'agnct';
const NETWORK = `${PREFIX}-net`;
const SUBNET = '10.213.0';
export const CONTAINER_FIELD_MANAGER = 'agn-container-test';
const FIELD_MANAGER = CONTAINER_FIELD_MANAGER;
/** What `kubectl apply --server-side` calls itself: the Secrets are applied as a user would. */
const USER_FIELD_MANAGER = 'kubectl';
/** The declaration dist/ is compiled from and the PKI its pins name (the example's public demo keys). */
export const EXAMPLE_DECLARATION = join(REPO_ROOT, 'constructs', 'example-grid.ts');
export const EXAMPLE_PKI = join(REPO_ROOT, 'constructs', 'example-pki');
const EXTERNAL_DNS_HOSTNAME = 'external-dns.alpha.kubernetes.io/hostname';
const PROBE_PERIOD_MS = 200;
/** Locally administered (02:...), fixed for the bridge: see start(). */
const BRIDGE_MAC = '02:a6:4e:00:00:01';

export type Role = 'gossip-operator' | 'sim' | 'provider-gateway' | 'consumer-gateway' | 'overlay-sync';

export interface RunningContainer {
  /** podman container name: agnct-<site>-<pod>-<container>. */
  readonly name: string;
  readonly site: string;
  readonly pod: RunningPod;
  readonly template: ContainerTemplate;
  readonly role: Role;
  readonly init: boolean;
}

export interface RunningPod {
  readonly site: string;
  readonly plan: PodPlan;
  readonly spec: PodTemplateSpec;
  readonly podName: string;
  readonly ip: string;
  readonly dir: string;
  readonly containers: RunningContainer[];
  volumeDir(volume: string): string;
}

export interface SiteCluster {
  readonly site: string;
  readonly compiled: CompiledSite;
  readonly plane: ControlPlane;
  readonly client: RawClient;
  /** The site's Secrets as the API server holds them, by namespace/name: what the kubelet mounts. */
  secrets: ReadonlyMap<string, Record<string, Buffer>>;
  readonly pods: RunningPod[];
}

/** A caller key minted with `agn key mint` for one of the example's tenants. */
export interface CallerKey {
  readonly tenant: string;
  readonly key: string;
}

export interface AgnResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * One `agn` command as a user runs it (this repository's agn, on the Node running the suite). Asynchronous on
 * purpose: this process is the cloud's load balancer and the kubernetes Service proxy, and a synchronous child
 * would stop them forwarding (an operator then loses its Lease, and a CLI dialling the LB waits on itself).
 */
export async function runAgn(args: readonly string[], timeoutMs = 120_000): Promise<AgnResult> {
  return await new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons', 'cli', 'agn.ts'), ...args],
      { encoding: 'utf8', cwd: REPO_ROOT, timeout: timeoutMs },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ status: code, stdout, stderr });
      },
    );
  });
}

async function agnCommand(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  const result = await runAgn(args);
  if (result.status !== 0)
    throw new Error(`agn ${args.join(' ')}: exit ${String(result.status)}: ${result.stderr.trim()}`);
  return { stdout: result.stdout, stderr: result.stderr };
}

export interface StopResult {
  readonly ms: number;
  readonly exitCode: number;
}

function roleOf(container: ContainerTemplate, plan: PodPlan): Role | undefined {
  const script = container.command?.[1] ?? '';
  if (script === 'daemons/gossip-operator/main.ts') return 'gossip-operator';
  if (script === 'daemons/sim/main.ts') return 'sim';
  if (script === 'daemons/overlay-sync/main.ts') return 'overlay-sync';
  if (script === 'daemons/gateway/main.ts')
    return plan.labels['app.kubernetes.io/name'] === 'provider-gateway' ? 'provider-gateway' : 'consumer-gateway';
  return undefined;
}

/** Start order: operators, backends, provider gateways, then consumer pods (their init waits for an overlay). */
function tierOf(pod: RunningPod): number {
  const roles = pod.containers.map((c) => c.role);
  if (roles.includes('gossip-operator')) return 0;
  if (roles.includes('sim')) return 1;
  if (roles.includes('provider-gateway')) return 2;
  return 3;
}

function writeVolumeFile(path: string, content: string | Buffer, mode: number, gid: number): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
  chownSync(path, 0, gid);
}

async function httpGet(url: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: await res.text() };
}

export class ContainerGrid {
  readonly sites: SiteCluster[] = [];
  readonly #proxies: ServiceProxy[] = [];
  /** Pods whose containers all pass their readiness probes, refreshed every PROBE_PERIOD_MS: a Service's endpoints. */
  readonly #ready = new Set<string>();
  readonly #started = new Set<string>();
  /** Containers `podman run` was called for (init ones included): those have logs. */
  readonly #ran = new Set<string>();
  #prober: NodeJS.Timeout | undefined;
  readonly #serviceIps = new Map<string, string>();
  readonly #clusterIps: string[] = [];
  #bridge = '';
  #nextPodIp = 10;
  #nextClusterIp = 200;
  readonly workDir: string;
  readonly log: (line: string) => void;
  /** Caller keys minted with `agn key mint`, one per budgetPolicy tenant, when a consumer requires caller keys. */
  demoKeys: readonly CallerKey[] = [];
  /** Each LoadBalancer Service's external address, by site/namespace/name. */
  readonly #loadBalancers = new Map<string, string>();
  /** The tokens this suite made for the Secrets `agn pki secrets` leaves to the user: what the leak checks look for. */
  readonly userTokens: string[] = [];

  constructor(workDir: string, log: (line: string) => void) {
    this.workDir = workDir;
    this.log = log;
  }

  get pods(): RunningPod[] {
    return this.sites.flatMap((s) => s.pods);
  }

  get containers(): RunningContainer[] {
    return this.pods.flatMap((p) => p.containers);
  }

  byRole(role: Role, site?: string): RunningContainer[] {
    return this.containers.filter((c) => c.role === role && !c.init && (site === undefined || c.site === site));
  }

  /** Removes what an earlier, interrupted run of this suite left (its pods and network, by their prefix). */
  static async clean(): Promise<void> {
    const pods = (await podman(['pod', 'ls', '--format', '{{.Name}}'])).stdout
      .split('\n')
      .filter((n) => n.startsWith(`${PREFIX}-`));
    for (const pod of pods) await podman(['pod', 'rm', '-f', '-t', '0', pod]);
    await podman(['network', 'rm', '-f', NETWORK]);
  }

  async start(): Promise<void> {
    await ContainerGrid.clean();
    rmSync(this.workDir, { recursive: true, force: true });
    mkdirSync(this.workDir, { recursive: true });
    const compiled = loadCompiledGrid(DIST_DIR);
    await podmanOk([
      'network',
      'create',
      '--disable-dns',
      '--subnet',
      `${SUBNET}.0/24`,
      '--gateway',
      `${SUBNET}.1`,
      NETWORK,
    ]);
    // netavark creates the bridge when the first pod joins; ClusterIPs are added to it before any real pod exists.
    await podmanOk(['pod', 'create', '--name', `${PREFIX}-bridge`, '--network', NETWORK, '--ip', `${SUBNET}.2`]);
    await podmanOk(['pod', 'start', `${PREFIX}-bridge`]);
    this.#bridge = (await podmanOk(['network', 'inspect', NETWORK, '--format', '{{.NetworkInterface}}'])).trim();
    // A Linux bridge without an assigned MAC takes the lowest MAC of its ports, so it changes whenever a pod whose
    // veth has a lower one joins (netavark 1.4 does not pin it). Pods that already resolved the gateway or a ClusterIP
    // then send to the old MAC, which the host drops as not its own until their ARP entry expires (30-60 s): the
    // operators' API connections went silent, they lost their Lease and exited (measured with `ip monitor`). An
    // assigned MAC is never recalculated.
    execFileSync('ip', ['link', 'set', 'dev', this.#bridge, 'address', BRIDGE_MAC]);

    for (const site of compiled) {
      this.log(`${site.site}: starting kube-apiserver + etcd`);
      const plane = await startControlPlane({
        binDir: resolveBinDir(),
        keepWorkDir: process.env['AGN_CONTAINERS_KEEP_WORKDIR'] === '1',
      });
      const kc = new KubeConfig();
      kc.loadFromFile(plane.kubeconfigPath);
      const client = new RawClient(kc);
      await applyManifests(client, ['crds.k8s.yaml', site.file.split('/').pop() as string], FIELD_MANAGER);
      await this.#applySiteSecrets(client, site);
      for (const namespace of new Set(site.pods.map((p) => p.namespace))) {
        await this.#applyOk(client, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'kube-root-ca.crt', namespace },
          data: { 'ca.crt': plane.caPem },
        });
      }
      const cluster: SiteCluster = { site: site.site, compiled: site, plane, client, secrets: new Map(), pods: [] };
      cluster.secrets = await this.#readSecrets(cluster);
      this.sites.push(cluster);
    }

    // Pod IPs first: Services, /etc/hosts and the public names all point at them.
    for (const cluster of this.sites) {
      for (const plan of cluster.compiled.pods) cluster.pods.push(this.#planPod(cluster, plan));
    }
    const hosts = new Map<string, [string, string][]>();
    const publicNames: [string, string][] = [];
    for (const cluster of this.sites) {
      const names = await this.#siteNames(cluster);
      hosts.set(cluster.site, names.cluster);
      publicNames.push(...names.public);
    }
    for (const cluster of this.sites) {
      for (const pod of cluster.pods)
        await this.#createPod(cluster, pod, [...(hosts.get(cluster.site) ?? []), ...publicNames]);
    }
    this.#prober = setInterval(() => void this.#probeAll(), PROBE_PERIOD_MS);
    for (const tier of [0, 1, 2, 3]) {
      const pods = this.pods.filter((p) => tierOf(p) === tier);
      for (const pod of pods) await this.#startPod(pod);
      for (const pod of pods) await this.waitReady(pod, 120_000);
    }
  }

  /** The ClusterIP of a site's Service (reachable from the host, as from every pod of that site). */
  serviceIp(site: string, namespace: string, name: string): string {
    const ip = this.#serviceIps.get(`${site}/${namespace}/${name}`);
    if (ip === undefined) throw new Error(`no Service ${namespace}/${name} in site ${site}`);
    return ip;
  }

  #probing = false;
  async #probeAll(): Promise<void> {
    if (this.#probing) return;
    this.#probing = true;
    try {
      await Promise.all(
        this.pods
          .filter((p) => this.#started.has(p.podName))
          .map(async (pod) => {
            const results = await Promise.all(
              pod.containers
                .filter((c) => !c.init)
                .map(async (c) => {
                  const probe = c.template.readinessProbe?.httpGet;
                  if (probe === undefined) return true;
                  try {
                    return (
                      (await httpGet(`http://${pod.ip}:${String(probe.port)}${probe.path ?? '/'}`, 500)).status === 200
                    );
                  } catch {
                    return false;
                  }
                }),
            );
            if (results.every(Boolean)) this.#ready.add(pod.podName);
            else this.#ready.delete(pod.podName);
          }),
      );
    } finally {
      this.#probing = false;
    }
  }

  async #applyOk(
    client: RawClient,
    object: {
      apiVersion: string;
      kind: string;
      metadata: { name: string; namespace?: string };
      [field: string]: unknown;
    },
    manager = FIELD_MANAGER,
  ): Promise<void> {
    const res = await client.apply(object as never, manager);
    if (res.status !== 200 && res.status !== 201)
      throw new Error(
        `apply ${object.kind} ${object.metadata.name}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`,
      );
  }

  async #clusterIp(): Promise<string> {
    const ip = `${SUBNET}.${this.#nextClusterIp++}`;
    execFileSync('ip', ['addr', 'add', `${ip}/32`, 'dev', this.#bridge]);
    this.#clusterIps.push(ip);
    return ip;
  }

  #planPod(cluster: SiteCluster, plan: PodPlan): RunningPod {
    const deployment = cluster.compiled.objects.find(
      (o) =>
        o.kind === 'Deployment' &&
        o.metadata.name === plan.deployment &&
        (o.metadata.namespace ?? 'default') === plan.namespace,
    );
    const spec = (deployment!['spec'] as { template: { spec: PodTemplateSpec } }).template.spec;
    const podName = `${PREFIX}-${cluster.site}-${plan.id}`;
    const dir = join(this.workDir, 'pods', cluster.site, plan.id);
    const pod: RunningPod = {
      site: cluster.site,
      plan,
      spec,
      podName,
      ip: `${SUBNET}.${this.#nextPodIp++}`,
      dir,
      containers: [],
      volumeDir: (volume) => join(dir, 'volumes', volume),
    };
    for (const [init, list] of [
      [true, spec.initContainers ?? []],
      [false, spec.containers],
    ] as const) {
      for (const template of list) {
        const role = roleOf(template, plan);
        if (role === undefined)
          throw new Error(
            `${podName}/${template.name}: command ${JSON.stringify(template.command)} runs no AGN daemon`,
          );
        pod.containers.push({ name: `${podName}-${template.name}`, site: cluster.site, pod, template, role, init });
      }
    }
    return pod;
  }

  /**
   * The site's cluster DNS as /etc/hosts lines (every Service name form, and the API server), and the public names
   * of its LoadBalancer Services: each gets an external address with a proxy per port, the address in its status
   * (as a cloud controller writes it), and its external-dns hostname pointing at that address grid-wide.
   */
  async #siteNames(cluster: SiteCluster): Promise<{ cluster: [string, string][]; public: [string, string][] }> {
    const names: [string, string][] = [];
    const publicNames: [string, string][] = [];
    const forms = (name: string, namespace: string) => [
      name,
      `${name}.${namespace}`,
      `${name}.${namespace}.svc`,
      `${name}.${namespace}.svc.cluster.local`,
    ];
    const apiIp = await this.#clusterIp();
    const api = new URL(cluster.plane.server);
    this.#proxies.push(await startServiceProxy(apiIp, 443, () => [{ host: api.hostname, port: Number(api.port) }]));
    for (const name of forms('kubernetes', 'default')) names.push([name, apiIp]);
    for (const service of cluster.compiled.services) {
      if (service.type === 'NodePort')
        throw new Error(
          `${cluster.site}: Service ${service.namespace}/${service.name} is a NodePort; this suite plays a cloud with load balancers only`,
        );
      const endpointsOf = (port: ServicePlan['ports'][number]) => (): Endpoint[] =>
        cluster.pods
          .filter((p) => selects(service, p.plan) && this.#ready.has(p.podName))
          .flatMap((p) => {
            const target = targetContainerPort(p.plan, port.targetPort);
            return target === undefined ? [] : [{ host: p.ip, port: target }];
          });
      const ip = await this.#clusterIp();
      for (const port of service.ports) {
        if ((port.protocol ?? 'TCP') !== 'TCP') continue;
        this.#proxies.push(await startServiceProxy(ip, port.port, endpointsOf(port)));
      }
      for (const name of forms(service.name, service.namespace)) names.push([name, ip]);
      this.#serviceIps.set(`${cluster.site}/${service.namespace}/${service.name}`, ip);
      if (service.type !== 'LoadBalancer') continue;
      const external = await this.#clusterIp();
      for (const port of service.ports) {
        const start = (port.protocol ?? 'TCP') === 'UDP' ? startUdpForwarder : startServiceProxy;
        this.#proxies.push(await start(external, port.port, endpointsOf(port)));
      }
      this.#loadBalancers.set(`${cluster.site}/${service.namespace}/${service.name}`, external);
      const status = await cluster.client.request(
        'PATCH',
        `/api/v1/namespaces/${service.namespace}/services/${service.name}/status`,
        { status: { loadBalancer: { ingress: [{ ip: external }] } } },
        { contentType: 'application/merge-patch+json' },
      );
      if (status.status !== 200)
        throw new Error(
          `${cluster.site}: status of Service ${service.namespace}/${service.name}: HTTP ${status.status}`,
        );
      for (const hostname of (service.annotations[EXTERNAL_DNS_HOSTNAME] ?? '')
        .split(',')
        .map((h) => h.trim())
        .filter((h) => h !== ''))
        publicNames.push([hostname, external]);
    }
    return { cluster: names, public: publicNames };
  }

  /** The external address this suite gave a LoadBalancer Service. */
  loadBalancerIp(site: string, namespace: string, name: string): string {
    const ip = this.#loadBalancers.get(`${site}/${namespace}/${name}`);
    if (ip === undefined) throw new Error(`no LoadBalancer Service ${namespace}/${name} in site ${site}`);
    return ip;
  }

  /**
   * The site's Secrets as docs/deploy.md makes them: what `agn pki secrets` prints, applied; then the
   * ones it lists for the user: caller keys minted with `agn key mint` (one per budget tenant), and a token for a
   * provider credential (the external API's key, which no request here reaches).
   */
  async #applySiteSecrets(client: RawClient, site: CompiledSite): Promise<void> {
    const printed = await agnCommand([
      'pki',
      'secrets',
      EXAMPLE_DECLARATION,
      '--site',
      site.site,
      '--dir',
      EXAMPLE_PKI,
    ]);
    for (const doc of parseAllDocuments(printed.stdout))
      await this.#applyOk(client, doc.toJS() as never, USER_FIELD_MANAGER);
    for (const line of printed.stderr.split('\n')) {
      const listed = /^ {2}([a-z0-9-]+)\/([a-z0-9.-]+): (.+)$/u.exec(line);
      if (listed === null) continue;
      const [, namespace = '', name = '', how = ''] = listed;
      const fromFile = /--from-file=([^=\s]+)=/u.exec(how);
      const fromLiteral = /--from-literal=([^=\s]+)=/u.exec(how);
      let data: Record<string, string>;
      if (fromFile !== null && how.includes('agn key mint')) {
        const keysFile = join(this.workDir, `${site.site}-${name}.json`);
        const keys: CallerKey[] = [];
        for (const tenant of demoTenants([site]))
          keys.push({
            tenant,
            key: (await agnCommand(['key', 'mint', '--tenant', tenant, '--keys-file', keysFile])).stdout.trim(),
          });
        this.demoKeys = [...this.demoKeys, ...keys];
        data = { [fromFile[1] as string]: readFileSync(keysFile).toString('base64') };
      } else if (fromLiteral !== null) {
        const token = randomBytes(24).toString('base64url');
        this.userTokens.push(token);
        data = { [fromLiteral[1] as string]: Buffer.from(token).toString('base64') };
      } else {
        throw new Error(`agn pki secrets --site ${site.site}: cannot tell how to make ${namespace}/${name}: ${how}`);
      }
      await this.#applyOk(
        client,
        { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, type: 'Opaque', data } as never,
        USER_FIELD_MANAGER,
      );
    }
  }

  /** Every Secret of the site's namespaces, read back from its API server (the kubelet's source). */
  async #readSecrets(cluster: SiteCluster): Promise<Map<string, Record<string, Buffer>>> {
    const out = new Map<string, Record<string, Buffer>>();
    for (const namespace of new Set(cluster.compiled.pods.map((p) => p.namespace))) {
      const res = await cluster.client.request('GET', `/api/v1/namespaces/${namespace}/secrets`);
      if (res.status !== 200) throw new Error(`${cluster.site}: list Secrets in ${namespace}: HTTP ${res.status}`);
      for (const item of (res.body as { items: { metadata: { name: string }; data?: Record<string, string> }[] })
        .items) {
        out.set(
          `${namespace}/${item.metadata.name}`,
          Object.fromEntries(Object.entries(item.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
        );
      }
    }
    return out;
  }

  async #serviceAccountToken(cluster: SiteCluster, namespace: string, account: string): Promise<string> {
    const res = await cluster.client.request(
      'POST',
      `/api/v1/namespaces/${namespace}/serviceaccounts/${account}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    );
    const token = (res.body as { status?: { token?: string } }).status?.token;
    if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${account}: HTTP ${res.status}`);
    return token;
  }

  /** Volumes as a kubelet fills them (fsGroup owns the files), and the pod with its IP and /etc/hosts. */
  async #createPod(cluster: SiteCluster, pod: RunningPod, hosts: readonly [string, string][]): Promise<void> {
    const gid = pod.spec.securityContext?.fsGroup ?? 0;
    const configMap = (name: string) =>
      cluster.compiled.objects.find(
        (o) =>
          o.kind === 'ConfigMap' &&
          o.metadata.name === name &&
          (o.metadata.namespace ?? 'default') === pod.plan.namespace,
      )?.['data'] as Record<string, string> | undefined;
    const kubeRoot = (name: string) =>
      name === 'kube-root-ca.crt' ? { 'ca.crt': cluster.plane.caPem } : configMap(name);
    const secret = (name: string) => cluster.secrets.get(`${pod.plan.namespace}/${name}`);
    const items = (list: readonly { key: string; path: string }[] | undefined, keys: readonly string[]) =>
      list !== undefined && list.length > 0 ? list : keys.map((key) => ({ key, path: key }));
    const account = pod.spec.serviceAccountName ?? 'default';
    let token: string | undefined;
    const tokenOf = async () => (token ??= await this.#serviceAccountToken(cluster, pod.plan.namespace, account));

    for (const volume of pod.spec.volumes ?? []) {
      const dir = pod.volumeDir(volume.name);
      mkdirSync(dir, { recursive: true });
      const source = volume as Record<string, any>;
      if (source['emptyDir'] !== undefined) {
        chmodSync(dir, 0o777);
        continue;
      }
      chmodSync(dir, 0o755);
      const write = (path: string, content: string | Buffer, mode: number) =>
        writeVolumeFile(join(dir, path), content, mode, gid);
      const fromConfigMap = (ref: { name: string; items?: { key: string; path: string }[] }, mode: number) => {
        const data = kubeRoot(ref.name);
        if (data === undefined)
          throw new Error(
            `${pod.podName}: volume ${volume.name} names ConfigMap ${ref.name}, which the site does not have`,
          );
        for (const item of items(ref.items, Object.keys(data))) write(item.path, data[item.key] ?? '', mode);
      };
      const fromSecret = (name: string, list: { key: string; path: string }[] | undefined, mode: number) => {
        const data = secret(name);
        if (data === undefined)
          throw new Error(`${pod.podName}: volume ${volume.name} names Secret ${name}, which was not created`);
        for (const item of items(list, Object.keys(data))) write(item.path, data[item.key] ?? Buffer.alloc(0), mode);
      };
      if (source['configMap'] !== undefined)
        fromConfigMap(source['configMap'], source['configMap'].defaultMode ?? 0o644);
      else if (source['secret'] !== undefined)
        fromSecret(source['secret'].secretName, source['secret'].items, source['secret'].defaultMode ?? 0o644);
      else if (source['projected'] !== undefined) {
        const mode = source['projected'].defaultMode ?? 0o644;
        for (const part of source['projected'].sources ?? []) {
          if (part.configMap !== undefined) fromConfigMap(part.configMap, mode);
          else if (part.secret !== undefined) fromSecret(part.secret.name, part.secret.items, mode);
          else if (part.serviceAccountToken !== undefined) write(part.serviceAccountToken.path, await tokenOf(), mode);
          else if (part.downwardAPI !== undefined) {
            for (const item of part.downwardAPI.items ?? []) {
              const value = { 'metadata.namespace': pod.plan.namespace, 'metadata.name': pod.plan.id }[
                item.fieldRef?.fieldPath as string
              ];
              if (value === undefined)
                throw new Error(`${pod.podName}: downwardAPI ${item.fieldRef?.fieldPath} is not translated`);
              write(item.path, value, mode);
            }
          } else throw new Error(`${pod.podName}: projected source ${Object.keys(part).join(',')} is not translated`);
        }
      } else
        throw new Error(
          `${pod.podName}: volume ${volume.name} of type ${Object.keys(source)
            .filter((k) => k !== 'name')
            .join(',')} is not translated`,
        );
    }
    if (pod.spec.automountServiceAccountToken === true) {
      const dir = join(pod.dir, 'serviceaccount');
      mkdirSync(dir, { recursive: true });
      writeVolumeFile(join(dir, 'token'), await tokenOf(), 0o644, gid);
      writeVolumeFile(join(dir, 'ca.crt'), cluster.plane.caPem, 0o644, gid);
      writeVolumeFile(join(dir, 'namespace'), pod.plan.namespace, 0o644, gid);
    }
    const addHosts = hosts.flatMap(([name, ip]) => ['--add-host', `${name}:${ip}`]);
    await podmanOk([
      'pod',
      'create',
      '--name',
      pod.podName,
      '--hostname',
      pod.plan.id,
      '--network',
      NETWORK,
      '--ip',
      pod.ip,
      ...addHosts,
    ]);
  }

  runArgs(container: RunningContainer): string[] {
    const pod = container.pod;
    const serviceAccountDir =
      pod.spec.automountServiceAccountToken === true ? join(pod.dir, 'serviceaccount') : undefined;
    return podmanRunArgs(
      pod.spec,
      container.template,
      {
        podName: pod.podName,
        name: pod.plan.id,
        namespace: pod.plan.namespace,
        podIP: pod.ip,
        volumeDir: pod.volumeDir,
        ...(serviceAccountDir === undefined ? {} : { serviceAccountDir }),
        // The kubelet's env; the host is the name the API server's certificate carries (it has no ClusterIP SAN here).
        clusterEnv: { KUBERNETES_SERVICE_HOST: 'kubernetes.default.svc', KUBERNETES_SERVICE_PORT: '443' },
      },
      container.name,
    );
  }

  async #startPod(pod: RunningPod): Promise<void> {
    for (const container of pod.containers.filter((c) => c.init)) {
      this.log(`${container.name}: init container`);
      this.#ran.add(container.name);
      const result = await podman(['run', ...this.runArgs(container)], 180_000);
      if (result.code !== 0)
        throw new Error(
          `init container ${container.name} exited ${result.code}: ${result.stderr.trim().split('\n').slice(-5).join(' | ')}`,
        );
    }
    for (const container of pod.containers.filter((c) => !c.init)) {
      this.log(`${container.name}: start`);
      this.#ran.add(container.name);
      await podmanOk(['run', '-d', ...this.runArgs(container)]);
    }
    this.#started.add(pod.podName);
  }

  /** Every container's readiness probe answers 200 (probed from the host at the pod IP, as a kubelet does). */
  async waitReady(pod: RunningPod, timeoutMs: number): Promise<void> {
    for (const container of pod.containers.filter((c) => !c.init)) {
      const probe = container.template.readinessProbe?.httpGet ?? container.template.livenessProbe?.httpGet;
      if (probe === undefined) continue;
      const url = `http://${pod.ip}:${String(probe.port)}${probe.path ?? '/'}`;
      try {
        await waitUntil(
          `${container.name} ready at ${url}`,
          async () => ((await httpGet(url)).status === 200 ? true : undefined),
          timeoutMs,
        );
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${await this.logs(container)}`);
      }
    }
  }

  /**
   * What a failed start needs to be understood: the last lines of every started container and of each site's
   * kube-apiserver log (the pods are removed by stop(), their logs with them).
   */
  async diagnostics(lines = 30): Promise<string> {
    const parts: string[] = [];
    for (const container of this.containers.filter((c) => this.#ran.has(c.name)))
      parts.push(await this.logs(container, lines));
    for (const cluster of this.sites) {
      const log = join(cluster.plane.workDir, 'kube-apiserver.log');
      try {
        parts.push(
          `--- ${cluster.site} kube-apiserver (last ${lines} lines)\n${readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`,
        );
      } catch (error) {
        parts.push(`--- ${cluster.site} kube-apiserver: ${(error as Error).message}`);
      }
    }
    return parts.join('\n');
  }

  async logs(container: RunningContainer, lines = 20): Promise<string> {
    const result = await podman(['logs', '--tail', String(lines), container.name]);
    return `--- ${container.name} (last ${lines} lines)\n${result.stdout}${result.stderr}`;
  }

  /** `podman stop` with the pod's grace period, timed; the exit code the daemon itself returned. */
  async stopContainer(container: RunningContainer): Promise<StopResult> {
    const grace = container.pod.spec.terminationGracePeriodSeconds ?? 30;
    const started = process.hrtime.bigint();
    await podmanOk(['stop', '-t', String(grace), container.name], (grace + 10) * 1000);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const exitCode = Number((await podmanOk(['inspect', '--format', '{{.State.ExitCode}}', container.name])).trim());
    return { ms, exitCode };
  }

  async stop(): Promise<void> {
    clearInterval(this.#prober);
    for (const pod of this.pods) await podman(['pod', 'rm', '-f', '-t', '2', pod.podName]);
    await podman(['pod', 'rm', '-f', '-t', '0', `${PREFIX}-bridge`]);
    await Promise.all(this.#proxies.map((p) => p.close()));
    for (const ip of this.#clusterIps) {
      try {
        execFileSync('ip', ['addr', 'del', `${ip}/32`, 'dev', this.#bridge], { stdio: 'ignore' });
      } catch {
        // The bridge went with the network already.
      }
    }
    await podman(['network', 'rm', '-f', NETWORK]);
    for (const cluster of this.sites) await cluster.plane.stop();
    if (process.env['AGN_CONTAINERS_KEEP_WORKDIR'] !== '1') rmSync(this.workDir, { recursive: true, force: true });
  }

  readFileIn(pod: RunningPod, volume: string, path: string): string {
    return readFileSync(join(pod.volumeDir(volume), path), 'utf8');
  }
}

export { httpGet };
