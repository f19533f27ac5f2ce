/**
 * The one translation table of the local grid: every address the compiled manifests use, mapped to loopback.
 * - each Service DNS name (`svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.cluster.local`) and port, inside its own site
 *   (each site is its own cluster, with its own DNS), to the ports of the pods it selects;
 * - each address a site's operator advertises (GRID_GOSSIP_ADVERTISE, GRID_GATEWAY_ADDRESS, GRID_SIGNALS_ADVERTISE)
 *   to that site's Service with the same port, grid-wide, like the external load balancers of real clusters;
 * - each external API endpoint no Service serves (api.openai.com:443) to a local sim standing in for it;
 * - per pod, every `0.0.0.0:<containerPort>` bind to 127.0.0.1 and a free port.
 */
import { URL } from 'node:url';
import {
  type CompiledSite,
  configMapData,
  isExposed,
  OPERATOR_SCRIPT,
  type PodPlan,
  scriptOf,
  selects,
  targetContainerPort,
} from './compiled-grid.ts';

export const LOOPBACK = '127.0.0.1';

export interface AddressTarget {
  readonly endpoints: readonly string[];
  /** The site whose Service answers (undefined for a stand-in). */
  readonly site?: string;
  readonly service?: string;
  /** Set when a local sim stands in for an unreachable external API: the InferenceProvider it serves. */
  readonly standIn?: string;
}

export interface StandIn {
  readonly site: string;
  readonly provider: string;
  /** host:port of the external API it replaces. */
  readonly replaces: string;
  readonly models: readonly string[];
  readonly secretRef: { readonly name: string; readonly namespace: string; readonly key: string };
  readonly port: number;
}

export interface AddressRow {
  readonly scope: string;
  readonly address: string;
  readonly target: string;
  readonly note?: string;
}

export interface PortAllocator {
  tcp(): Promise<number>;
  /** Free for UDP and TCP at once (SWIM packets and push-pull share the number). */
  gossip(): Promise<number>;
}

export class AddressTable {
  readonly #site = new Map<string, AddressTarget>();
  readonly #global = new Map<string, AddressTarget>();
  readonly #podPorts = new Map<string, Map<number, number>>();
  readonly standIns: StandIn[] = [];

  static key(host: string, port: number | string): string {
    return `${host.toLowerCase()}:${port}`;
  }

  setPodPort(pod: PodPlan, containerPort: number, hostPort: number): void {
    const key = `${pod.site}/${pod.id}`;
    let ports = this.#podPorts.get(key);
    if (ports === undefined) this.#podPorts.set(key, (ports = new Map()));
    ports.set(containerPort, hostPort);
  }

  /** The loopback port a pod's container port is published on; throws when the pod never declared or bound it. */
  podPort(pod: PodPlan, containerPort: number): number {
    const port = this.#podPorts.get(`${pod.site}/${pod.id}`)?.get(containerPort);
    if (port === undefined) throw new Error(`${pod.site}/${pod.id}: container port ${containerPort} has no local port`);
    return port;
  }

  podPorts(pod: PodPlan): ReadonlyMap<number, number> {
    return this.#podPorts.get(`${pod.site}/${pod.id}`) ?? new Map();
  }

  addService(site: string, hostPort: string, target: AddressTarget): void {
    this.#site.set(`${site}|${hostPort.toLowerCase()}`, target);
  }

  addExternal(hostPort: string, target: AddressTarget): void {
    this.#global.set(hostPort.toLowerCase(), target);
  }

  /** What `host:port` means to a process of `site`: its own cluster's Services first, then the outside world. */
  resolve(site: string, hostPort: string): AddressTarget | undefined {
    const key = hostPort.toLowerCase();
    return this.#site.get(`${site}|${key}`) ?? this.#global.get(key);
  }

  rows(): AddressRow[] {
    const rows: AddressRow[] = [];
    for (const [key, target] of this.#global) {
      rows.push({
        scope: 'grid',
        address: key,
        target: target.endpoints.join(', '),
        ...(target.standIn !== undefined
          ? { note: `external API, unreachable here: a local sim stands in for provider ${target.standIn}` }
          : { note: `site ${target.site} Service ${target.service}` }),
      });
    }
    for (const [key, target] of this.#site) {
      const [site, address] = key.split('|') as [string, string];
      if (!address.endsWith(`.svc.cluster.local:${address.split(':').pop()}`)) continue; // one row per Service port
      rows.push({ scope: site, address, target: target.endpoints.join(', ') });
    }
    return rows;
  }
}

const BIND = /0\.0\.0\.0:(\d{1,5})/g;

/** Container ports a pod uses: declared ones, `0.0.0.0:N` binds in env, args and its config files, `--port N`. */
function podContainerPorts(site: CompiledSite, pod: PodPlan): Map<number, 'tcp' | 'gossip'> {
  const ports = new Map<number, 'tcp' | 'gossip'>();
  const add = (port: number, kind: 'tcp' | 'gossip') => {
    if (ports.get(port) !== 'gossip') ports.set(port, kind);
  };
  for (const container of [...pod.initContainers, ...pod.containers]) {
    for (const p of container.ports ?? []) add(p.containerPort, p.protocol === 'UDP' ? 'gossip' : 'tcp');
    const text = JSON.stringify({ env: container.env, args: container.args, command: container.command });
    for (const match of text.matchAll(BIND)) add(Number(match[1]), 'tcp');
    const argv = [...(container.command ?? []), ...(container.args ?? [])];
    argv.forEach((arg, i) => {
      if (arg === '--port' && /^\d+$/.test(argv[i + 1] ?? '')) add(Number(argv[i + 1]), 'tcp');
    });
  }
  for (const volume of pod.volumes) {
    const refs = [volume.configMap?.name, ...(volume.projected?.sources ?? []).map((s) => s.configMap?.name)].filter(
      (n): n is string => n !== undefined,
    );
    for (const name of refs) {
      for (const match of JSON.stringify(configMapData(site, pod.namespace, name) ?? {}).matchAll(BIND))
        add(Number(match[1]), 'tcp');
    }
  }
  return ports;
}

function serviceNames(name: string, namespace: string): string[] {
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}

/** host:port of a URL, with the scheme's default port. */
export function urlHostPort(text: string): string | undefined {
  try {
    const url = new URL(text);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return AddressTable.key(url.hostname, url.port !== '' ? url.port : url.protocol === 'https:' ? 443 : 80);
  } catch {
    return undefined;
  }
}

/** Allocates every port of the grid and fills the table. */
export async function buildAddressTable(
  sites: readonly CompiledSite[],
  allocate: PortAllocator,
): Promise<AddressTable> {
  const table = new AddressTable();
  for (const site of sites) {
    for (const pod of site.pods) {
      for (const [containerPort, kind] of podContainerPorts(site, pod)) {
        table.setPodPort(pod, containerPort, kind === 'gossip' ? await allocate.gossip() : await allocate.tcp());
      }
    }
    for (const service of site.services) {
      const pods = site.pods.filter((pod) => selects(service, pod));
      for (const port of service.ports) {
        const endpoints = pods.flatMap((pod) => {
          const target = targetContainerPort(pod, port.targetPort);
          const local = target === undefined ? undefined : table.podPorts(pod).get(target);
          return local === undefined ? [] : [`${LOOPBACK}:${local}`];
        });
        if (endpoints.length === 0) continue;
        for (const host of serviceNames(service.name, service.namespace)) {
          table.addService(site.site, AddressTable.key(host, port.port), {
            endpoints,
            site: site.site,
            service: service.name,
          });
        }
      }
    }
  }
  // Advertised addresses: the external names other sites use for this site's gossip and gateway.
  for (const site of sites) {
    for (const pod of site.pods) {
      for (const container of pod.containers) {
        if (scriptOf(container) !== OPERATOR_SCRIPT) continue;
        for (const variable of ['GRID_GOSSIP_ADVERTISE', 'GRID_GATEWAY_ADDRESS', 'GRID_SIGNALS_ADVERTISE']) {
          const value = container.env?.find((e) => e.name === variable)?.value;
          const match = value === undefined ? null : /^(.+):(\d{1,5})$/.exec(value);
          if (match === null) continue;
          const port = Number(match[2]);
          const serving = site.services.filter((s) => s.ports.some((p) => p.port === port));
          // Another site reaches the advertised address through the Service exposed outside the cluster, when one is.
          const exposed = serving.filter(isExposed);
          const candidates = exposed.length > 0 ? exposed : serving;
          if (candidates.length !== 1) {
            throw new Error(
              `site ${site.site}: ${variable}=${value} matches ${candidates.length} Services with port ${port}; cannot tell which one it fronts`,
            );
          }
          const target = table.resolve(
            site.site,
            AddressTable.key(`${candidates[0]!.name}.${candidates[0]!.namespace}.svc.cluster.local`, port),
          );
          if (target !== undefined) table.addExternal(AddressTable.key(match[1]!, port), target);
        }
      }
    }
  }
  // External APIs: an InferenceProvider endpoint nothing here serves gets a sim standing in for it.
  for (const site of sites) {
    for (const provider of site.objects.filter((o) => o.kind === 'InferenceProvider')) {
      const spec = (provider['spec'] ?? {}) as {
        endpoint?: string;
        models?: { name: string }[];
        auth?: { secretRef?: { name: string; namespace?: string; key?: string } };
      };
      const hostPort = spec.endpoint === undefined ? undefined : urlHostPort(spec.endpoint);
      if (hostPort === undefined || table.resolve(site.site, hostPort) !== undefined) continue;
      if (/\.svc(\.cluster\.local)?:\d+$/.test(hostPort)) continue; // an in-cluster name without a Service: reported, not replaced
      const secret = spec.auth?.secretRef;
      if (secret === undefined) continue;
      const port = await allocate.tcp();
      const standIn: StandIn = {
        site: site.site,
        provider: provider.metadata.name,
        replaces: hostPort,
        models: (spec.models ?? []).map((m) => m.name),
        secretRef: { name: secret.name, namespace: secret.namespace ?? 'grid-system', key: secret.key ?? 'token' },
        port,
      };
      table.standIns.push(standIn);
      table.addExternal(hostPort, { endpoints: [`${LOOPBACK}:${port}`], standIn: provider.metadata.name });
    }
  }
  return table;
}
