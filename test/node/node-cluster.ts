// One site's single-node Kubernetes for the node suite, built here (build-node.sh) and run as plain processes:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (Debian's, with runc and the CNI
// plugins), kubelet, kube-proxy (iptables mode), CoreDNS and kube-network-policies (the NetworkPolicy engine: an
// nftables table of its own, `inet kube-network-policies`, that hands the first packets of connections from and to
// the pods a policy selects to it over nfqueue), all inside a network namespace of the site's own
// (`agn-node-<site>-<n>`), reached from the host over a veth pair on 10.200.<n>.0/24:
//
//   host  agnn<n>h 10.200.<n>.1  <-veth->  eth0 10.200.<n>.2  node (every daemon listens here or on its loopback)
//   pods  cni0 bridge 10.201.<n>.0/24 (bridge + host-local + portmap, loopback)   Services 10.202.<n>.0/24
//   kubernetes Service 10.202.<n>.1 -> 10.200.<n>.2:6443      kube-dns 10.202.<n>.10 -> CoreDNS on 10.200.<n>.2:53
//   load-balancer addresses 10.203.<n>.0/24 (handed out by the suite's cloud double, cloud-double.ts)
//
// The namespace has no default route: a pod reaches its node, the other pods and the Services, nothing outside
// (the cloud double adds routes to the other sites' node and load-balancer addresses, nothing else).
// The host has routes to the site's pod, Service and load-balancer ranges through the node (they go with the veth).
// CoreDNS also answers the public names in `public-hosts` of the work directory (hosts plugin, re-read every
// second): the cloud double writes the external-dns names of every site's load balancers there, as public DNS.
// Every daemon runs in the host's mount namespace (nsenter --net only: `ip netns exec` would remount /sys and hide
// the cgroup hierarchies), so the kubelet's volume mounts are the ones containerd and runc see. The kubelet's pods
// live under a cgroup root of the site's own (/agn-node-<site>-<n> in each cgroup v1 hierarchy, cgroupfs driver).
//
// stop() undoes everything, also after a failed start: daemons by pid, pod containers and their shims, mounts under
// the work directory, the cgroups, the namespace (and with it its veth, bridge, iptables rules and nftables tables),
// the global kernel settings the kubelet insists on (restored to what they were). It checks that the engine took
// its nftables table with it on SIGTERM (it deletes it only on a clean stop; a killed engine leaves it, and its
// queue rules then drop the selected pods' new connections until the namespace goes).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { must, run, type RunResult, waitFor } from './daemon.ts';
import { type Daemon, launch, tail, terminate, waitHttp } from '../child-daemon.ts';
import { processAlive as isAlive } from '../process-alive.ts';
import { binaryImageArchive } from './oci.ts';
import { generateNodePki, type NodePki } from './pki.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const PAUSE_IMAGE = 'localhost/agn-node/pause:1';
const CLUSTER_DOMAIN = 'cluster.local';
const WORK_PREFIX = 'agn-node-';
/** The nftables table (family inet) kube-network-policies keeps its rules in. */
export const NETPOL_TABLE = 'kube-network-policies';

/** Resolves the node binaries: AGN_NODE_BIN, or build-node.sh's cache (a no-op once built). */
export function resolveNodeBinDir(): string {
  const fromEnv = process.env.AGN_NODE_BIN;
  if (fromEnv) return fromEnv;
  const script = join(here, 'build-node.sh');
  const result = spawnSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = (result.stdout ?? '').trim().split('\n');
  const dir = lines[lines.length - 1] ?? '';
  if (result.status !== 0 || dir === '')
    throw new Error(`${script} failed (exit ${String(result.status)}); run it by hand to see why`);
  return dir;
}

export interface NodeClusterOptions {
  readonly site: string;
  readonly binDir?: string;
  /** n in 10.200.<n>.0/24; default: the lowest not in use on this machine. */
  readonly index?: number;
  readonly keepWorkDir?: boolean;
  readonly log?: (line: string) => void;
}

export interface NodeCluster {
  readonly site: string;
  readonly nodeName: string;
  readonly netns: string;
  readonly index: number;
  readonly hostIp: string;
  readonly nodeIp: string;
  readonly podCidr: string;
  readonly serviceCidr: string;
  readonly kubernetesServiceIp: string;
  readonly dnsIp: string;
  /** The range the cloud double hands this site's LoadBalancer Services addresses from (routed to the node). */
  readonly loadBalancerCidr: string;
  /** The host's end of the veth (the cloud double turns forwarding on for it). */
  readonly vethHost: string;
  /** The hosts file CoreDNS answers public names from (`IP NAME` lines; re-read every second). */
  readonly publicHostsPath: string;
  /** The admin's client credentials and the cluster CA (PEM), for API calls without kubectl. */
  readonly adminTls: { readonly ca: string; readonly cert: string; readonly key: string };
  readonly server: string;
  readonly kubeconfigPath: string;
  readonly caPem: string;
  readonly workDir: string;
  readonly binDir: string;
  readonly containerdSocket: string;
  readonly cgroupRoot: string;
  /** Milliseconds each start phase took. */
  readonly timings: Readonly<Record<string, number>>;
  /** kubectl from the build, as the admin, from the host. */
  kubectl(args: readonly string[], options?: { input?: string; timeoutMs?: number }): Promise<RunResult>;
  /** kubectl that throws on a non-zero exit; returns stdout. */
  kubectlOk(args: readonly string[], options?: { input?: string; timeoutMs?: number }): Promise<string>;
  /** A command in the site's network namespace (host mount namespace and filesystem). */
  inNode(argv: readonly string[], options?: { input?: string; timeoutMs?: number }): Promise<RunResult>;
  /** `ctr` against the node's containerd, in the CRI namespace k8s.io (where the kubelet's containers are). */
  ctr(args: readonly string[], timeoutMs?: number): Promise<RunResult>;
  /** `ctr images import` of an OCI archive into the node's containerd (namespace k8s.io, where the kubelet looks). */
  importImage(archive: string): Promise<void>;
  /** The daemons' pids by name (to kill one, or to check that none is left). */
  pids(): Record<string, number>;
  logPath(daemon: string): string;
  stop(): Promise<void>;
}

// The settings the kubelet's container manager requires and, unless protectKernelDefaults is set (then it refuses to
// start), writes itself: they are global to the machine. The first node to start (in any process) records the
// machine's values in SYSCTL_FILE and sets the kubelet's; the last one to stop (no other node work directory with a
// live owner left) puts the recorded values back. A sweep of a killed run does the same.
const KUBELET_SYSCTLS: Record<string, string> = {
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};
const SYSCTL_FILE = '/run/agn-node-sysctls.json';

function readSysctl(key: string): string {
  return readFileSync(`/proc/sys/${key}`, 'utf8').trim();
}

function setKubeletSysctls(): void {
  if (!existsSync(SYSCTL_FILE)) {
    writeFileSync(
      SYSCTL_FILE,
      JSON.stringify(Object.fromEntries(Object.keys(KUBELET_SYSCTLS).map((k) => [k, readSysctl(k)]))),
    );
  }
  for (const [k, v] of Object.entries(KUBELET_SYSCTLS)) if (readSysctl(k) !== v) writeFileSync(`/proc/sys/${k}`, v);
}

/** Puts the recorded values back unless another node run (other than `except`) is still alive. */
function restoreSysctlsIfLast(except: string): void {
  if (!existsSync(SYSCTL_FILE)) return;
  if (liveWorkDirs().some((dir) => dir !== except)) return;
  const values = JSON.parse(readFileSync(SYSCTL_FILE, 'utf8')) as Record<string, string>;
  for (const [k, v] of Object.entries(values)) {
    try {
      if (readSysctl(k) !== v) writeFileSync(`/proc/sys/${k}`, v);
    } catch {
      // best effort: a key this kernel lacks
    }
  }
  rmSync(SYSCTL_FILE, { force: true });
}

interface Owner {
  readonly pid: number;
  readonly netns: string;
  readonly cgroupRoot: string;
  readonly vethHost: string;
}

function readOwner(dir: string): Owner | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, 'owner.json'), 'utf8')) as Owner;
  } catch {
    return undefined;
  }
}

function workDirs(): string[] {
  return readdirSync(tmpdir())
    .filter((name) => name.startsWith(WORK_PREFIX))
    .map((name) => join(tmpdir(), name));
}

/** Node work directories whose owning process is still running. */
function liveWorkDirs(): string[] {
  return workDirs().filter((dir) => {
    const owner = readOwner(dir);
    return owner !== undefined && isAlive(owner.pid);
  });
}

/**
 * Cleans up after node runs whose process died without a teardown (killed, or the machine's limit hit): for each
 * work directory whose owner is gone, its processes (found by the directory in their command line: every daemon's
 * flags and every shim's socket name it), mounts, cgroups, network namespace (a killed NetworkPolicy engine's nftables
 * table goes with it), then the directory; and the kernel
 * settings when no node run is left. Returns what it cleaned, for the log.
 */
export async function sweepStaleNodes(): Promise<string[]> {
  const cleaned: string[] = [];
  for (const dir of workDirs()) {
    // Only a directory this module made (it writes owner.json first thing) whose owner is gone.
    const owner = readOwner(dir);
    if (owner === undefined || isAlive(owner.pid)) continue;
    // The pods' processes first (found by the run's cgroup root: their command lines name nothing of ours), then the
    // daemons and shims (every one names the directory in its command line), then whatever a dying kubelet started.
    await killCgroupMembers(owner.cgroupRoot);
    for (const pid of processesMentioning(dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    const deadline = Date.now() + 5_000;
    while (processesMentioning(dir).length > 0 && Date.now() < deadline) await sleep(100);
    await killCgroupMembers(owner.cgroupRoot);
    await unmountAll(dir);
    removeCgroupRoot(owner.cgroupRoot);
    await run(['ip', 'netns', 'delete', owner.netns]);
    if (existsSync(`/sys/class/net/${owner.vethHost}`)) await run(['ip', 'link', 'delete', owner.vethHost]);
    await rm(dir, { recursive: true, force: true });
    cleaned.push(dir);
  }
  restoreSysctlsIfLast('');
  return cleaned;
}

/** The cgroup v1 hierarchies mounted on this machine (mount points), plus the cgroup2 one of a hybrid layout. */
function cgroupMounts(): { v1: string[]; v2: string[] } {
  const v1: string[] = [];
  const v2: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (left === undefined || right === undefined) continue;
    const mountPoint = left.split(' ')[4] ?? '';
    const fsType = right.split(' ')[0];
    if (fsType === 'cgroup') v1.push(mountPoint);
    else if (fsType === 'cgroup2') v2.push(mountPoint);
  }
  return { v1, v2 };
}

function createCgroupRoot(root: string): void {
  const { v1 } = cgroupMounts();
  if (v1.length === 0)
    throw new Error(
      'no cgroup v1 hierarchy is mounted: this suite runs the kubelet with cgroupfs on cgroup v1 (a cgroup v2-only host needs another setup)',
    );
  for (const mount of v1) {
    const dir = join(mount, root);
    mkdirSync(dir, { recursive: true });
    // A new cpuset cgroup starts with no CPUs and no memory nodes: copy the parent's, or nothing can join it.
    if (existsSync(join(dir, 'cpuset.cpus'))) {
      for (const file of ['cpuset.cpus', 'cpuset.mems']) {
        if (readFileSync(join(dir, file), 'utf8').trim() === '')
          writeFileSync(join(dir, file), readFileSync(join(mount, file), 'utf8').trim());
      }
    }
  }
}

/** Pids in a cgroup tree (any hierarchy): the pods' processes, whatever became of their shims. */
function cgroupMembers(root: string): number[] {
  const { v1, v2 } = cgroupMounts();
  const pids = new Set<number>();
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    try {
      for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n'))
        if (line.trim() !== '') pids.add(Number(line));
    } catch {
      // removed meanwhile
    }
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) walk(join(dir, entry.name));
  };
  for (const mount of [...v1, ...v2]) walk(join(mount, root));
  pids.delete(process.pid);
  return [...pids];
}

/** SIGKILLs every process of a cgroup tree until none is left (or 10 s pass); returns the ones left. */
async function killCgroupMembers(root: string): Promise<number[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const pids = cgroupMembers(root);
    if (pids.length === 0 || Date.now() > deadline) return pids;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await sleep(100);
  }
}

/** Removes a cgroup tree (deepest first) in every hierarchy; returns the directories that would not go. */
function removeCgroupRoot(root: string): string[] {
  const { v1, v2 } = cgroupMounts();
  const left: string[] = [];
  const removeTree = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true }))
      if (entry.isDirectory()) removeTree(join(dir, entry.name));
    for (let attempt = 0; ; attempt++) {
      try {
        rmdirSync(dir);
        return;
      } catch (err) {
        if (attempt >= 20) {
          left.push(`${dir}: ${(err as Error).message}`);
          return;
        }
        // A process that just died may linger in the cgroup for a moment.
        spawnSync('sleep', ['0.05']);
      }
    }
  };
  for (const mount of [...v1, ...v2]) removeTree(join(mount, root));
  return left;
}

/** Mount points at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  const points: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mountPoint = line.split(' ')[4];
    if (mountPoint === undefined) continue;
    const decoded = mountPoint.replace(/\\(\d{3})/gu, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
    if (decoded === dir || decoded.startsWith(`${dir}/`)) points.push(decoded);
  }
  return points.sort((a, b) => b.length - a.length);
}

async function unmountAll(dir: string): Promise<string[]> {
  for (let round = 0; round < 5; round++) {
    const points = mountsUnder(dir);
    if (points.length === 0) return [];
    for (const point of points) await run(['umount', '--lazy', point]);
  }
  return mountsUnder(dir);
}

/** Processes whose command line mentions `needle` (the work directory: containerd's shims name its socket). */
function processesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/u.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(needle)) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

function usedIndexes(): Set<number> {
  const used = new Set<number>();
  const addresses = spawnSync('ip', ['-4', '-o', 'addr'], { encoding: 'utf8' }).stdout ?? '';
  for (const m of addresses.matchAll(/inet 10\.20[0-3]\.(\d+)\./gu)) used.add(Number(m[1]));
  const routes = spawnSync('ip', ['-4', 'route'], { encoding: 'utf8' }).stdout ?? '';
  for (const m of routes.matchAll(/10\.20[0-3]\.(\d+)\./gu)) used.add(Number(m[1]));
  for (const ns of spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout?.split('\n') ?? []) {
    const m = /^agn-node-.*-(\d+)\b/u.exec(ns);
    if (m !== null) used.add(Number(m[1]));
  }
  return used;
}

/**
 * The `count` lowest indexes no node on this machine uses, for nodes started together (each start picks the lowest
 * free one itself, which two starts in one tick would both take).
 */
export function freeNodeIndexes(count: number): number[] {
  const used = usedIndexes();
  const free = [...Array(250).keys()].map((i) => i + 1).filter((i) => !used.has(i));
  if (free.length < count) throw new Error(`fewer than ${count} free node indexes`);
  return free.slice(0, count);
}

function yamlish(value: unknown): string {
  // JSON is YAML: every component here reads its config file as YAML.
  return `${JSON.stringify(value, null, 2)}\n`;
}

interface Paths {
  readonly work: string;
  readonly pki: string;
  readonly logs: string;
  readonly etcd: string;
  readonly containerd: string;
  readonly cni: string;
  readonly kubelet: string;
  readonly podLogs: string;
}

export async function startNodeCluster(options: NodeClusterOptions): Promise<NodeCluster> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[node ${options.site}] ${line}\n`));
  const binDir = options.binDir ?? resolveNodeBinDir();
  const bin = (name: string): string => join(binDir, name);
  const index = options.index ?? [...Array(250).keys()].map((i) => i + 1).find((i) => !usedIndexes().has(i)) ?? 1;
  const site = options.site;
  const nodeName = `agn-${site}`;
  const netns = `${WORK_PREFIX}${site}-${index}`;
  const vethHost = `agnn${index}h`;
  const vethNode = `agnn${index}n`;
  const hostIp = `10.200.${index}.1`;
  const nodeIp = `10.200.${index}.2`;
  const podCidr = `10.201.${index}.0/24`;
  const serviceCidr = `10.202.${index}.0/24`;
  const kubernetesServiceIp = `10.202.${index}.1`;
  const dnsIp = `10.202.${index}.10`;
  const loadBalancerCidr = `10.203.${index}.0/24`;
  const server = `https://${nodeIp}:6443`;
  const cgroupRoot = `/${WORK_PREFIX}${site}-${index}`;

  const work = await mkdtemp(join(tmpdir(), `${WORK_PREFIX}${site}-`));
  const paths: Paths = {
    work,
    pki: join(work, 'pki'),
    logs: join(work, 'logs'),
    etcd: join(work, 'etcd'),
    containerd: join(work, 'containerd'),
    cni: join(work, 'cni'),
    kubelet: join(work, 'kubelet'),
    podLogs: join(work, 'pod-logs'),
  };
  for (const dir of [paths.pki, paths.logs, paths.containerd, join(paths.cni, 'net.d'), paths.kubelet, paths.podLogs])
    mkdirSync(dir, { recursive: true });
  const containerdSocket = join(paths.containerd, 'containerd.sock');
  const publicHostsPath = join(work, 'public-hosts');
  writeFileSync(publicHostsPath, '');
  // Who owns this directory, and what it made outside it: a sweep of a run that was killed reads this.
  writeFileSync(join(work, 'owner.json'), JSON.stringify({ pid: process.pid, netns, cgroupRoot, vethHost }));

  const daemons: Daemon[] = [];
  const timings: Record<string, number> = {};
  let phaseStart = Date.now();
  const phase = (name: string): void => {
    const now = Date.now();
    timings[name] = now - phaseStart;
    log(`${name}: ${timings[name]} ms`);
    phaseStart = now;
  };
  const start = (name: string, argv: readonly string[]): Daemon => {
    const d = launch(name, argv, join(paths.logs, `${name}.log`), {
      netns,
      missingHint: 'run test/node/build-node.sh',
    });
    daemons.push(d);
    return d;
  };
  let pki: NodePki | undefined;
  let adminTls: { ca: string; cert: string; key: string } | undefined;

  const kubeconfigPath = join(paths.pki, 'admin.kubeconfig');
  const kubectl = (args: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<RunResult> =>
    run([bin('kubectl'), `--kubeconfig=${kubeconfigPath}`, ...args], opts);
  const kubectlOk = async (
    args: readonly string[],
    opts: { input?: string; timeoutMs?: number } = {},
  ): Promise<string> => {
    const result = await kubectl(args, opts);
    if (result.code !== 0)
      throw new Error(
        `kubectl ${args.join(' ')}: exit ${String(result.code)}: ${(result.stderr || result.stdout).trim().slice(-2000)}`,
      );
    return result.stdout;
  };
  const ctr = (args: readonly string[], timeoutMs = 120_000): Promise<RunResult> =>
    run(['ctr', `--address=${containerdSocket}`, '--namespace=k8s.io', ...args], { timeoutMs });

  const stop = async (): Promise<void> => {
    const errors: string[] = [];
    const attempt = async (what: string, fn: () => Promise<void> | void): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        errors.push(`${what}: ${(err as Error).message}`);
      }
    };
    const byName = (name: string): Daemon | undefined => daemons.find((d) => d.name === name);
    // The control loops first, so nothing restarts what is being taken down; then the kubelet; then the pods.
    for (const name of [
      'kube-network-policies',
      'coredns',
      'kube-proxy',
      'kube-scheduler',
      'kube-controller-manager',
      'kubelet',
    ]) {
      const d = byName(name);
      if (d !== undefined) await attempt(`stop ${name}`, () => terminate(d));
    }
    if (byName('kube-network-policies') !== undefined)
      await attempt('nftables', async () => {
        if ((await run(['nft', 'list', 'table', 'inet', NETPOL_TABLE], { netns })).code !== 0) return;
        await run(['nft', 'delete', 'table', 'inet', NETPOL_TABLE], { netns });
        throw new Error(`kube-network-policies left its nftables table inet ${NETPOL_TABLE} behind`);
      });
    const containerd = byName('containerd');
    if (containerd !== undefined && !containerd.exited) {
      await attempt('remove pod containers', async () => {
        const ids = (await ctr(['tasks', 'list', '--quiet'])).stdout.split('\n').filter((l) => l.trim() !== '');
        for (const id of ids) await ctr(['tasks', 'kill', '--all', '--signal=SIGKILL', id]);
        for (const id of ids) {
          for (let i = 0; i < 50; i++) {
            const deleted = await ctr(['tasks', 'delete', '--force', id]);
            if (deleted.code === 0 || /not found/u.test(deleted.stderr)) break;
            await sleep(100);
          }
        }
        const containers = (await ctr(['containers', 'list', '--quiet'])).stdout
          .split('\n')
          .filter((l) => l.trim() !== '');
        for (const id of containers) await ctr(['containers', 'delete', id]);
      });
      await attempt('stop containerd', () => terminate(containerd));
    }
    for (const d of [...daemons].reverse()) await attempt(`stop ${d.name}`, () => terminate(d));
    // Shims whose container was gone exit by themselves; any left (containerd died first) name our socket.
    await attempt('shims', async () => {
      let pids = processesMentioning(paths.containerd);
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      const deadline = Date.now() + 5_000;
      while ((pids = pids.filter(isAlive)).length > 0 && Date.now() < deadline) await sleep(100);
      if (pids.length > 0) throw new Error(`processes still running: ${pids.join(' ')}`);
    });
    await attempt('pod processes', async () => {
      const left = await killCgroupMembers(cgroupRoot);
      if (left.length > 0) throw new Error(`processes left in ${cgroupRoot}: ${left.join(' ')}`);
    });
    await attempt('unmount', async () => {
      const left = await unmountAll(work);
      if (left.length > 0) throw new Error(`still mounted: ${left.join(' ')}`);
    });
    await attempt('cgroups', () => {
      const left = removeCgroupRoot(cgroupRoot);
      if (left.length > 0) throw new Error(`not removed: ${left.join('; ')}`);
    });
    await attempt('netns', async () => {
      if (
        spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
          .stdout.split('\n')
          .some((l) => l.split(' ')[0] === netns)
      )
        await must(['ip', 'netns', 'delete', netns]);
      // The host end of the veth goes with its peer, once the kernel has finished tearing the namespace down.
      const deadline = Date.now() + 5_000;
      while (existsSync(`/sys/class/net/${vethHost}`) && Date.now() < deadline) await sleep(50);
      if (existsSync(`/sys/class/net/${vethHost}`)) {
        const deleted = await run(['ip', 'link', 'delete', vethHost]);
        if (deleted.code !== 0 && !/Cannot find device/u.test(deleted.stderr))
          throw new Error(`ip link delete ${vethHost}: ${deleted.stderr.trim()}`);
      }
    });
    await attempt('kernel settings', () => restoreSysctlsIfLast(work));
    if (!options.keepWorkDir) await attempt('work dir', () => rm(work, { recursive: true, force: true }));
    if (errors.length > 0) throw new Error(`node ${site} teardown: ${errors.join('; ')}`);
  };

  try {
    // --- network namespace and veth ---------------------------------------------------------------------------
    await must(['ip', 'netns', 'add', netns]);
    await must(['ip', 'link', 'add', vethHost, 'type', 'veth', 'peer', 'name', vethNode]);
    await must(['ip', 'link', 'set', vethNode, 'netns', netns]);
    await must(['ip', 'addr', 'add', `${hostIp}/24`, 'dev', vethHost]);
    await must(['ip', 'link', 'set', vethHost, 'up']);
    for (const argv of [
      ['ip', 'link', 'set', vethNode, 'name', 'eth0'],
      ['ip', 'addr', 'add', `${nodeIp}/24`, 'dev', 'eth0'],
      ['ip', 'link', 'set', 'eth0', 'up'],
      ['ip', 'link', 'set', 'lo', 'up'],
      // The namespace has no default route, so a connection from the node itself to a ClusterIP would fail its
      // first routing decision before kube-proxy's DNAT could rewrite it: route the Service range to an empty bridge
      // (this kernel has no dummy device), where whatever no Service rule rewrote is dropped.
      ['ip', 'link', 'add', 'svc0', 'type', 'bridge'],
      ['ip', 'link', 'set', 'svc0', 'up'],
      ['ip', 'route', 'add', serviceCidr, 'dev', 'svc0'],
      ['sysctl', '-q', '-w', 'net.ipv4.ip_forward=1'],
      // Pod-to-Service-to-pod on one bridge: bridged replies must pass iptables to be un-NATed.
      ['sysctl', '-q', '-w', 'net.bridge.bridge-nf-call-iptables=1'],
    ]) {
      await must(argv, { netns });
    }
    // The host reaches the site's pods and Services through the node (routes that go with the veth).
    await must(['ip', 'route', 'add', podCidr, 'via', nodeIp, 'dev', vethHost]);
    await must(['ip', 'route', 'add', serviceCidr, 'via', nodeIp, 'dev', vethHost]);
    await must(['ip', 'route', 'add', loadBalancerCidr, 'via', nodeIp, 'dev', vethHost]);
    createCgroupRoot(cgroupRoot);
    phase('netns');

    // --- PKI and kubeconfigs ----------------------------------------------------------------------------------
    pki = await generateNodePki(paths.pki, nodeName, [nodeIp, kubernetesServiceIp]);
    adminTls = {
      ca: readFileSync(pki.caCert, 'utf8'),
      cert: readFileSync(pki.cert('admin'), 'utf8'),
      key: readFileSync(pki.key('admin'), 'utf8'),
    };
    await pki.kubeconfig('admin', server);
    const kubeconfigs = {
      kcm: await pki.kubeconfig('kube-controller-manager', server),
      scheduler: await pki.kubeconfig('kube-scheduler', server),
      proxy: await pki.kubeconfig('kube-proxy', server),
      kubelet: await pki.kubeconfig('kubelet', server),
      coredns: await pki.kubeconfig('coredns', server),
      netpol: await pki.kubeconfig('kube-network-policies', server),
    };
    phase('pki');

    // --- etcd, kube-apiserver -----------------------------------------------------------------------------------
    const etcd = start('etcd', [
      bin('etcd'),
      '--name=node',
      `--data-dir=${paths.etcd}`,
      `--listen-client-urls=http://127.0.0.1:2379,http://${nodeIp}:2379`,
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=node=http://127.0.0.1:2380',
      '--initial-cluster-state=new',
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    await waitHttp(etcd, { url: `http://${nodeIp}:2379/health` }, 60_000);
    phase('etcd');
    const apiserver = start('kube-apiserver', [
      bin('kube-apiserver'),
      '--etcd-servers=http://127.0.0.1:2379',
      '--bind-address=0.0.0.0',
      `--advertise-address=${nodeIp}`,
      '--secure-port=6443',
      `--cert-dir=${join(paths.pki, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.serverCert}`,
      `--tls-private-key-file=${pki.serverKey}`,
      `--client-ca-file=${pki.caCert}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--anonymous-auth=false',
      `--service-account-issuer=https://kubernetes.default.svc.${CLUSTER_DOMAIN}`,
      `--service-account-key-file=${pki.serviceAccountPub}`,
      `--service-account-signing-key-file=${pki.serviceAccountKey}`,
      `--service-cluster-ip-range=${serviceCidr}`,
      // The node's name resolves nowhere (no DNS for nodes here): reach the kubelet by its InternalIP.
      '--kubelet-preferred-address-types=InternalIP',
      `--kubelet-client-certificate=${pki.cert('apiserver-kubelet-client')}`,
      `--kubelet-client-key=${pki.key('apiserver-kubelet-client')}`,
      '--shutdown-watch-termination-grace-period=2s',
      '--allow-privileged=false',
      '--profiling=false',
      '--v=1',
    ]);
    await waitHttp(apiserver, { url: `${server}/readyz`, tls: adminTls }, 120_000);
    phase('kube-apiserver');

    // --- controller-manager, scheduler, containerd (together) ------------------------------------------------
    const kcm = start('kube-controller-manager', [
      bin('kube-controller-manager'),
      `--kubeconfig=${kubeconfigs.kcm}`,
      `--authentication-kubeconfig=${kubeconfigs.kcm}`,
      `--authorization-kubeconfig=${kubeconfigs.kcm}`,
      `--bind-address=${nodeIp}`,
      '--leader-elect=false',
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.serviceAccountKey}`,
      `--root-ca-file=${pki.caCert}`,
      `--cluster-signing-cert-file=${pki.caCert}`,
      `--cluster-signing-key-file=${pki.caKey}`,
      `--service-cluster-ip-range=${serviceCidr}`,
      '--allocate-node-cidrs=false',
      '--profiling=false',
      '--v=1',
    ]);
    const scheduler = start('kube-scheduler', [
      bin('kube-scheduler'),
      `--kubeconfig=${kubeconfigs.scheduler}`,
      `--authentication-kubeconfig=${kubeconfigs.scheduler}`,
      `--authorization-kubeconfig=${kubeconfigs.scheduler}`,
      `--bind-address=${nodeIp}`,
      '--leader-elect=false',
      '--profiling=false',
      '--v=1',
    ]);

    writeFileSync(
      join(paths.cni, 'net.d', '10-agn-node.conflist'),
      JSON.stringify(
        {
          cniVersion: '1.0.0',
          name: `agn-node-${site}`,
          plugins: [
            {
              type: 'bridge',
              bridge: 'cni0',
              isGateway: true,
              ipMasq: true,
              hairpinMode: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: podCidr }]],
                routes: [{ dst: '0.0.0.0/0' }],
                dataDir: join(paths.cni, 'ipam'),
              },
            },
            { type: 'portmap', capabilities: { portMappings: true } },
          ],
        },
        null,
        2,
      ),
    );
    writeFileSync(join(paths.containerd, 'config.toml'), containerdConfig(paths, containerdSocket));
    const containerd = start('containerd', ['containerd', `--config=${join(paths.containerd, 'config.toml')}`]);
    await waitFor(
      'containerd',
      async () => {
        if (containerd.exited) throw new Error(`containerd exited: ${tail(containerd.logPath)}`);
        return (await run(['ctr', `--address=${containerdSocket}`, 'version'], { timeoutMs: 5_000 })).code === 0
          ? true
          : undefined;
      },
      60_000,
      () => tail(containerd.logPath),
      200,
    );
    const pauseArchive = join(work, 'pause.oci.tar');
    binaryImageArchive(bin('pause'), 'pause', PAUSE_IMAGE, pauseArchive);
    await importArchive(ctr, pauseArchive);
    await waitHttp(kcm, { url: `https://${nodeIp}:10257/healthz`, tls: { insecure: true } }, 120_000);
    await waitHttp(scheduler, { url: `https://${nodeIp}:10259/healthz`, tls: { insecure: true } }, 120_000);
    phase('controller-manager, scheduler, containerd');

    // --- kubelet --------------------------------------------------------------------------------------------------
    const resolvConf = join(work, 'resolv.conf');
    // Pods get the cluster's DNS only (dnsPolicy ClusterFirst); no upstream resolver exists in the namespace.
    writeFileSync(resolvConf, '# agn-node: no upstream resolver\n');
    writeFileSync(
      join(work, 'kubelet.yaml'),
      yamlish({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        address: nodeIp,
        port: 10250,
        readOnlyPort: 0,
        healthzBindAddress: nodeIp,
        healthzPort: 10248,
        authentication: {
          anonymous: { enabled: false },
          webhook: { enabled: true },
          x509: { clientCAFile: pki.caCert },
        },
        authorization: { mode: 'Webhook' },
        cgroupDriver: 'cgroupfs',
        cgroupRoot,
        cgroupsPerQOS: true,
        failSwapOn: false,
        clusterDomain: CLUSTER_DOMAIN,
        clusterDNS: [dnsIp],
        resolvConf,
        containerRuntimeEndpoint: `unix://${containerdSocket}`,
        podLogsDir: paths.podLogs,
        rotateCertificates: false,
        serverTLSBootstrap: false,
        registerNode: true,
        // A shared test machine: evict for nothing short of a full disk, never collect the imported images.
        evictionHard: {
          'memory.available': '100Mi',
          'nodefs.available': '1%',
          'nodefs.inodesFree': '1%',
          'imagefs.available': '1%',
          'imagefs.inodesFree': '1%',
        },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        // Status and probes a little quicker than the defaults, so the suite waits less.
        nodeStatusUpdateFrequency: '4s',
        syncFrequency: '10s',
        fileCheckFrequency: '10s',
        protectKernelDefaults: false,
        makeIPTablesUtilChains: true,
        maxPods: 110,
        // 0, not -999: see restrict_oom_score_adj in the containerd config.
        oomScoreAdj: 0,
      }),
    );
    setKubeletSysctls();
    const kubelet = start('kubelet', [
      bin('kubelet'),
      `--config=${join(work, 'kubelet.yaml')}`,
      `--kubeconfig=${kubeconfigs.kubelet}`,
      `--root-dir=${paths.kubelet}`,
      `--hostname-override=${nodeName}`,
      `--node-ip=${nodeIp}`,
      `--pod-infra-container-image=${PAUSE_IMAGE}`,
      '--v=1',
    ]);
    await waitHttp(kubelet, { url: `http://${nodeIp}:10248/healthz` }, 120_000);
    phase('kubelet');

    // --- kube-proxy ---------------------------------------------------------------------------------------------
    writeFileSync(
      join(work, 'kube-proxy.yaml'),
      yamlish({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        kind: 'KubeProxyConfiguration',
        clientConnection: { kubeconfig: kubeconfigs.proxy },
        hostnameOverride: nodeName,
        mode: 'iptables',
        clusterCIDR: podCidr,
        detectLocalMode: 'ClusterCIDR',
        healthzBindAddress: `${nodeIp}:10256`,
        metricsBindAddress: '127.0.0.1:10249',
        // The conntrack table size is global (not writable from a network namespace): leave it, and the timeouts.
        conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
        // kube-proxy's own defaults: the rules follow an endpoint change at most once a second, as on a stock node, so
        // the rolling-restart test sees the delay a terminating gateway's accept window must cover.
        iptables: { syncPeriod: '30s', minSyncPeriod: '1s' },
        oomScoreAdj: 0,
      }),
    );
    const proxy = start('kube-proxy', [bin('kube-proxy'), `--config=${join(work, 'kube-proxy.yaml')}`, '--v=1']);
    await waitHttp(proxy, { url: `http://${nodeIp}:10256/healthz` }, 120_000).catch(async (err: unknown) => {
      // kube-proxy answers 503 on /healthz until it has synced rules once; only a dead process is fatal here.
      if (proxy.exited) throw err;
    });
    phase('kube-proxy');

    // --- CoreDNS as a process on the node, behind the kube-dns Service --------------------------------------
    writeFileSync(
      join(work, 'Corefile'),
      [
        '.:53 {',
        '    errors',
        '    health :8080',
        '    ready :8181',
        // Public DNS for the suite: the names the cloud double publishes (external-dns's job in a cloud).
        `    hosts ${publicHostsPath} {`,
        '        ttl 5',
        '        reload 1s',
        '        fallthrough',
        '    }',
        `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
        `        kubeconfig ${kubeconfigs.coredns} coredns`,
        '        pods insecure',
        '        fallthrough in-addr.arpa ip6.arpa',
        '        ttl 5',
        '    }',
        '    cache 5',
        '    loadbalance',
        '}',
        '',
      ].join('\n'),
    );
    const coredns = start('coredns', [bin('coredns'), `-conf=${join(work, 'Corefile')}`]);
    await kubectlOk(['apply', '--server-side', '--field-manager=agn-node-test', '-f', '-'], {
      input: yamlish({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: {
              name: 'kube-dns',
              namespace: 'kube-system',
              labels: { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' },
            },
            spec: {
              clusterIP: dnsIp,
              ports: [
                { name: 'dns', port: 53, protocol: 'UDP' },
                { name: 'dns-tcp', port: 53, protocol: 'TCP' },
              ],
            },
          },
          {
            apiVersion: 'discovery.k8s.io/v1',
            kind: 'EndpointSlice',
            metadata: {
              name: 'kube-dns-node',
              namespace: 'kube-system',
              labels: { 'kubernetes.io/service-name': 'kube-dns' },
            },
            addressType: 'IPv4',
            endpoints: [{ addresses: [nodeIp], conditions: { ready: true }, nodeName }],
            ports: [
              { name: 'dns', port: 53, protocol: 'UDP' },
              { name: 'dns-tcp', port: 53, protocol: 'TCP' },
            ],
          },
        ],
      }),
    });
    await waitHttp(coredns, { url: `http://${nodeIp}:8181/ready` }, 120_000);
    phase('coredns');

    // --- kube-network-policies: enforces the NetworkPolicies of the pods on this node -----------------------------
    // The RBAC of upstream's install.yaml, bound to the engine's certificate identity instead of its ServiceAccount.
    await kubectlOk(['apply', '--server-side', '--field-manager=agn-node-test', '-f', '-'], {
      input: yamlish({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRole',
            metadata: { name: 'kube-network-policies' },
            rules: [
              { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['list', 'watch'] },
              { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['list', 'watch'] },
            ],
          },
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRoleBinding',
            metadata: { name: 'kube-network-policies' },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kube-network-policies' },
            subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'agn-node-kube-network-policies' }],
          },
        ],
      }),
    });
    const netpol = start('kube-network-policies', [
      bin('kube-network-policies'),
      `--kubeconfig=${kubeconfigs.netpol}`,
      // The policies it enforces are those of the pods scheduled to this Node.
      `--hostname-override=${nodeName}`,
      '--metrics-bind-address=127.0.0.1:9080',
      '--v=1',
    ]);
    // The engine writes its table once its informers have synced: from then on it enforces.
    await waitFor(
      `kube-network-policies' nftables table`,
      async () => {
        if (netpol.exited) throw new Error(`kube-network-policies exited: ${tail(netpol.logPath)}`);
        return (await run(['nft', 'list', 'table', 'inet', NETPOL_TABLE], { netns })).code === 0 ? true : undefined;
      },
      60_000,
      () => tail(netpol.logPath),
      200,
    );
    phase('kube-network-policies');

    // --- the node Ready, the controllers' first work done ----------------------------------------------------
    await waitFor(
      `node ${nodeName} Ready`,
      async () => {
        const out = await kubectlOk([
          'get',
          'node',
          nodeName,
          '-o',
          "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        ]);
        return out.trim() === 'True' ? true : undefined;
      },
      180_000,
      async () => `${(await kubectl(['describe', 'node', nodeName])).stdout}\nkubelet log:\n${tail(kubelet.logPath)}`,
      500,
    );
    await waitFor(
      'the default ServiceAccount and kube-root-ca.crt',
      async () => {
        const sa = await kubectl(['get', 'serviceaccount', 'default', '-n', 'default', '-o', 'name']);
        const cm = await kubectl(['get', 'configmap', 'kube-root-ca.crt', '-n', 'default', '-o', 'name']);
        return sa.code === 0 && cm.code === 0 ? true : undefined;
      },
      120_000,
      () => tail(kcm.logPath),
    );
    await waitHttp(proxy, { url: `http://${nodeIp}:10256/healthz` }, 60_000);
    phase('node Ready');

    const caPem = adminTls.ca;
    return {
      site,
      nodeName,
      netns,
      index,
      hostIp,
      nodeIp,
      podCidr,
      serviceCidr,
      kubernetesServiceIp,
      dnsIp,
      loadBalancerCidr,
      vethHost,
      publicHostsPath,
      adminTls,
      server,
      kubeconfigPath,
      caPem,
      workDir: work,
      binDir,
      containerdSocket,
      cgroupRoot,
      timings,
      kubectl,
      kubectlOk,
      inNode: (argv, opts = {}) => run(argv, { ...opts, netns }),
      ctr,
      importImage: (archive) => importArchive(ctr, archive),
      pids: () => Object.fromEntries(daemons.filter((d) => !d.exited).map((d) => [d.name, d.pid])),
      logPath: (name) => join(paths.logs, `${name}.log`),
      stop,
    };
  } catch (err) {
    const logs = readdirSync(paths.logs)
      .map((f) => `--- ${f}\n${tail(join(paths.logs, f), 1500)}`)
      .join('\n');
    await stop().catch((stopErr: unknown) => log(`teardown after a failed start: ${(stopErr as Error).message}`));
    throw new Error(`node ${site} did not start: ${(err as Error).message}${options.keepWorkDir ? '' : `\n${logs}`}`);
  }
}

async function importArchive(
  ctr: (args: readonly string[], timeoutMs?: number) => Promise<RunResult>,
  archive: string,
): Promise<void> {
  if (!existsSync(archive) || statSync(archive).size === 0)
    throw new Error(`image archive ${archive} is missing (npm run image)`);
  const result = await ctr(['images', 'import', archive], 300_000);
  if (result.code !== 0) throw new Error(`ctr images import ${archive}: ${result.stderr.trim()}`);
}

function containerdConfig(paths: Paths, socket: string): string {
  const c = paths.containerd;
  return `# containerd for one node of the node suite (test/node/node-cluster.ts): its own root, state and socket.
version = 2
root = "${c}/root"
state = "${c}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "${socket}"

[ttrpc]
  address = "${socket}.ttrpc"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "${c}/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "${PAUSE_IMAGE}"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    # Pod network namespaces under the state directory, not /run/netns beside the sites'.
    netns_mounts_under_state_dir = true
    # This machine withholds CAP_SYS_RESOURCE, so no process may lower its oom_score_adj below 0: the kubelet asks
    # -998 for a pod sandbox (-997 for a Guaranteed container) and runc would fail to start it. Clamp to containerd's.
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "${c}/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "${paths.cni}/net.d"
      max_conf_num = 1
`;
}

export { waitFor };
