// A test double for what a cloud gives the node suite's sites, which a single node built here does not have: the
// network between them, a load-balancer controller and public DNS.
//
// - Network ("the internet"): each node's namespace gets routes to the other nodes' addresses and load-balancer
//   ranges through its host end of the veth, and the host forwards what arrives on those veths (forwarding is turned
//   on per interface, for this run's veths only; the machine's net.ipv4.ip_forward is left as it is). A pod reaches
//   another site only as the internet would: its node masquerades it (the bridge plugin's ipMasq) to the node's
//   address, and the other node's kube-proxy takes it in at a load-balancer address. Pod and Service ranges are not
//   routed between sites.
// - Load balancers: every Service of `type: LoadBalancer` gets an address from its site's range (10.203.<n>.0/24,
//   routed by the host to the node), written to `status.loadBalancer.ingress` as a cloud controller writes it;
//   kube-proxy then programs that address (KUBE-SERVICES, as for any cloud's VIP), so nothing of ours forwards a
//   packet.
// - Public DNS: the `external-dns.alpha.kubernetes.io/hostname` names of those Services, published as `IP NAME` in
//   every node's public hosts file, which each site's CoreDNS answers from (hosts plugin): the names resolve from the
//   pods of every site, as external-dns and public DNS make them resolve.
//
// Everything it changes goes with the namespaces and veths (routes, per-interface sysctls); stop() also undoes it.
import { writeFileSync, renameSync, readFileSync, existsSync } from 'node:fs';
import { request } from 'node:https';
import { must, run } from './daemon.ts';
import type { NodeCluster } from './node-cluster.ts';

const EXTERNAL_DNS_HOSTNAME = 'external-dns.alpha.kubernetes.io/hostname';
const POLL_MS = 1_000;
/** The first host address handed out in a site's range. */
const FIRST_HOST = 10;

interface ServiceObject {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec: { type?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

export interface CloudDouble {
  /** The address given to a site's LoadBalancer Service, once given. */
  loadBalancerIp(site: string, namespace: string, name: string): string | undefined;
  /** The published names and their addresses. */
  publicNames(): ReadonlyMap<string, string>;
  stop(): Promise<void>;
}

function api(
  node: NodeCluster,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      `${node.server}${path}`,
      {
        method,
        ca: node.adminTls.ca,
        cert: node.adminTls.cert,
        key: node.adminTls.key,
        agent: false,
        timeout: 10_000,
        headers:
          payload === undefined
            ? { accept: 'application/json' }
            : {
                accept: 'application/json',
                'content-type': 'application/merge-patch+json',
                'content-length': Buffer.byteLength(payload),
              },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) });
          } catch (err) {
            reject(err as Error);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Joins the nodes as the internet would, then runs the load-balancer controller and public DNS until stop(). */
export async function startCloudDouble(
  nodes: readonly NodeCluster[],
  log: (line: string) => void = (line) => process.stderr.write(`[cloud double] ${line}\n`),
): Promise<CloudDouble> {
  const routes: { node: NodeCluster; cidr: string }[] = [];
  const forwarding = new Map<string, string>();
  for (const node of nodes) {
    const sysctl = `/proc/sys/net/ipv4/conf/${node.vethHost}/forwarding`;
    forwarding.set(sysctl, readFileSync(sysctl, 'utf8').trim());
    writeFileSync(sysctl, '1');
    for (const peer of nodes.filter((p) => p !== node)) {
      for (const cidr of [`${peer.nodeIp}/32`, peer.loadBalancerCidr]) {
        await must(['ip', 'route', 'add', cidr, 'via', node.hostIp], { netns: node.netns });
        routes.push({ node, cidr });
      }
    }
  }

  /** site/namespace/name -> address */
  const assigned = new Map<string, string>();
  const names = new Map<string, string>();
  let published = '';
  const nextHost = new Map<string, number>();

  const allocate = (node: NodeCluster, key: string): string => {
    const existing = assigned.get(key);
    if (existing !== undefined) return existing;
    const host = nextHost.get(node.site) ?? FIRST_HOST;
    nextHost.set(node.site, host + 1);
    const ip = `${node.loadBalancerCidr.split('.').slice(0, 3).join('.')}.${host}`;
    assigned.set(key, ip);
    log(`${key}: load balancer ${ip}`);
    return ip;
  };

  const reconcile = async (): Promise<void> => {
    for (const node of nodes) {
      const list = await api(node, 'GET', '/api/v1/services');
      if (list.status !== 200) throw new Error(`${node.site}: list Services: HTTP ${list.status}`);
      for (const service of (list.body as { items: ServiceObject[] }).items) {
        if (service.spec.type !== 'LoadBalancer') continue;
        const { namespace, name } = service.metadata;
        const ip = allocate(node, `${node.site}/${namespace}/${name}`);
        const ingress = service.status?.loadBalancer?.ingress ?? [];
        if (ingress.length !== 1 || ingress[0]?.ip !== ip) {
          const patched = await api(node, 'PATCH', `/api/v1/namespaces/${namespace}/services/${name}/status`, {
            status: { loadBalancer: { ingress: [{ ip }] } },
          });
          if (patched.status !== 200)
            throw new Error(`${node.site}: status of Service ${namespace}/${name}: HTTP ${patched.status}`);
        }
        for (const hostname of (service.metadata.annotations?.[EXTERNAL_DNS_HOSTNAME] ?? '')
          .split(',')
          .map((h) => h.trim())
          .filter((h) => h !== ''))
          names.set(hostname, ip);
      }
    }
    const hosts = [...names].map(([hostname, ip]) => `${ip} ${hostname}\n`).join('');
    if (hosts !== published) {
      for (const node of nodes) {
        // Whole or not at all: CoreDNS re-reads the file when its mtime or size changes.
        writeFileSync(`${node.publicHostsPath}.tmp`, hosts);
        renameSync(`${node.publicHostsPath}.tmp`, node.publicHostsPath);
      }
      published = hosts;
      log(`public DNS: ${[...names].map(([h, ip]) => `${h}=${ip}`).join(' ')}`);
    }
  };

  let stopped = false;
  let lastError = '';
  const loop = (async () => {
    while (!stopped) {
      try {
        await reconcile();
        lastError = '';
      } catch (err) {
        const message = (err as Error).message;
        if (message !== lastError) log(`reconcile: ${message}`);
        lastError = message;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  })();

  return {
    loadBalancerIp: (site, namespace, name) => assigned.get(`${site}/${namespace}/${name}`),
    publicNames: () => new Map(names),
    stop: async () => {
      stopped = true;
      await loop;
      // Best effort: all of it also goes with the namespaces and veths.
      for (const { node, cidr } of routes) await run(['ip', 'route', 'del', cidr], { netns: node.netns });
      for (const [sysctl, value] of forwarding) if (existsSync(sysctl)) writeFileSync(sysctl, value);
    },
  };
}
