/**
 * How a site's public ports are reached from other sites: the Service type (LoadBalancer, NodePort, or ClusterIP on
 * a network the sites share), fixed node ports, the annotations a load-balancer controller or external-dns reads,
 * the source ranges a cloud load balancer admits. One shape for the operator's public Service (SWIM UDP+TCP, peer
 * signals, enrollment) and the provider gateway's Service, checked at synth against the address the site
 * advertises, so a compiled site never advertises a port nothing exposes.
 */
import type { Construct } from 'constructs';
import { ApiObject, JsonPatch } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import { issueAt, type SynthIssue } from './synth-error.ts';

export type ServiceExposureType = 'LoadBalancer' | 'NodePort' | 'ClusterIP';

export interface ServiceExposure<PortName extends string = string> {
  /**
   * `LoadBalancer`: the cloud (or MetalLB) gives the Service an external address; advertise that address or a DNS
   * name for it (external-dns reads `annotations`). `NodePort`: every node answers on `nodePorts`; advertise a
   * node's address with that port. `ClusterIP`: only for sites that share one routed network (the same cluster, or
   * a multi-cluster mesh that routes Service addresses); said explicitly, never assumed.
   */
  readonly type: ServiceExposureType;
  /**
   * NodePort only: the node port of each exposed port (30000-32767, the API server's default range). Required for
   * every port the site advertises, so the address is known at synth.
   * @default - none
   */
  readonly nodePorts?: Partial<Readonly<Record<PortName, number>>>;
  /**
   * Service annotations: the load-balancer controller's (e.g. `service.beta.kubernetes.io/aws-load-balancer-type`)
   * or external-dns's `external-dns.alpha.kubernetes.io/hostname`, which publishes the advertised name.
   * @default - none
   */
  readonly annotations?: Readonly<Record<string, string>>;
  /** LoadBalancer only: client CIDRs the cloud load balancer admits. @default - every source */
  readonly loadBalancerSourceRanges?: readonly string[];
  /**
   * `Local` keeps the client's source address and sends only to nodes with a ready pod; `Cluster` spreads over
   * every node (one more hop, source address rewritten).
   * @default - the API server's default (Cluster)
   */
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
}

/** Ports the operator's public Service can carry; each is there only when its listener is on. */
export type OperatorPortName = 'gossip' | 'signals' | 'enrollment';
/** The provider gateway's one public port. */
export type ProviderGatewayPortName = 'listener';

const TYPES: readonly ServiceExposureType[] = ['LoadBalancer', 'NodePort', 'ClusterIP'];
const NODE_PORT_MIN = 30000;
const NODE_PORT_MAX = 32767;
const CIDR = /^(?:(?:\d{1,3}\.){3}\d{1,3}\/\d{1,2}|[0-9a-fA-F:]+\/\d{1,3})$/u;
const HOST_PORT = /^(?:\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d{1,5})$/u;

export function kplusServiceType(type: ServiceExposureType): kplus.ServiceType {
  return type === 'LoadBalancer'
    ? kplus.ServiceType.LOAD_BALANCER
    : type === 'NodePort'
      ? kplus.ServiceType.NODE_PORT
      : kplus.ServiceType.CLUSTER_IP;
}

/** The port other sites reach `name` at through this exposure: the node port for NodePort, else the Service port. */
export function exposedPort<P extends string>(
  exposure: ServiceExposure<P>,
  name: P,
  servicePort: number,
): number | undefined {
  return exposure.type === 'NodePort' ? exposure.nodePorts?.[name] : servicePort;
}

/** The port of a `host:port` address, or undefined when it is not one. */
export function addressPort(address: string): number | undefined {
  const match = HOST_PORT.exec(address);
  if (match === null) return undefined;
  const port = Number(match[1]);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/**
 * The shape problems of one exposure: a known type, node ports only with NodePort and only for `ports`, each in the
 * node-port range and distinct, source ranges only with LoadBalancer and each a CIDR.
 */
export function exposureIssues<P extends string>(
  scope: Construct | string,
  field: string,
  exposure: ServiceExposure<P>,
  ports: readonly P[],
): SynthIssue[] {
  const at = (f: string, problem: string, fix: string): SynthIssue =>
    typeof scope === 'string' ? { path: scope, field: f, problem, fix } : issueAt(scope, f, problem, fix);
  const issues: SynthIssue[] = [];
  if (!TYPES.includes(exposure.type)) {
    return [
      at(
        `${field}.type`,
        `"${String(exposure.type).slice(0, 40)}" is not a Service type`,
        `use one of ${TYPES.join(', ')}`,
      ),
    ];
  }
  const nodePorts = Object.entries(exposure.nodePorts ?? {}) as [string, unknown][];
  if (nodePorts.length > 0 && exposure.type !== 'NodePort') {
    issues.push(
      at(
        `${field}.nodePorts`,
        `node ports are set on a ${exposure.type} Service`,
        'set type: NodePort, or drop nodePorts',
      ),
    );
  }
  const seen = new Map<number, string>();
  for (const [name, port] of nodePorts) {
    if (!(ports as readonly string[]).includes(name)) {
      issues.push(
        at(
          `${field}.nodePorts.${name}`,
          `this Service has no ${name} port (it carries ${ports.join(', ') || 'none'})`,
          'set node ports only for the ports the Service carries',
        ),
      );
      continue;
    }
    if (typeof port !== 'number' || !Number.isInteger(port) || port < NODE_PORT_MIN || port > NODE_PORT_MAX) {
      issues.push(
        at(
          `${field}.nodePorts.${name}`,
          `${String(port)} is outside the node-port range ${NODE_PORT_MIN}-${NODE_PORT_MAX}`,
          `pick a port from ${NODE_PORT_MIN} to ${NODE_PORT_MAX} that no other Service of the cluster uses`,
        ),
      );
      continue;
    }
    const other = seen.get(port);
    if (other !== undefined)
      issues.push(
        at(
          `${field}.nodePorts.${name}`,
          `node port ${port} is also the ${other} port`,
          'give every port a node port of its own',
        ),
      );
    seen.set(port, name);
  }
  const ranges = exposure.loadBalancerSourceRanges ?? [];
  if (ranges.length > 0 && exposure.type !== 'LoadBalancer') {
    issues.push(
      at(
        `${field}.loadBalancerSourceRanges`,
        `source ranges are set on a ${exposure.type} Service, which ignores them`,
        'set type: LoadBalancer, or limit sources with a NetworkPolicy',
      ),
    );
  }
  for (const range of ranges) {
    if (!CIDR.test(range))
      issues.push(
        at(
          `${field}.loadBalancerSourceRanges`,
          `"${range.slice(0, 60)}" is not a CIDR`,
          'use CIDRs such as 203.0.113.0/24',
        ),
      );
  }
  if (exposure.externalTrafficPolicy !== undefined && exposure.type === 'ClusterIP') {
    issues.push(
      at(
        `${field}.externalTrafficPolicy`,
        'a ClusterIP Service has no external traffic to route',
        'drop externalTrafficPolicy, or use LoadBalancer or NodePort',
      ),
    );
  }
  return issues;
}

/**
 * The problem when `address` (what the site advertises for `name`) does not name the port the exposure opens: a
 * NodePort without that node port, or a port other than the one other sites can reach.
 */
export function advertisedPortIssues<P extends string>(
  path: string,
  field: string,
  address: string,
  exposureField: string,
  exposure: ServiceExposure<P>,
  name: P,
  servicePort: number,
): SynthIssue[] {
  const advertised = addressPort(address);
  if (advertised === undefined) {
    return [
      {
        path,
        field,
        problem: `"${address.slice(0, 80)}" is not HOST:PORT`,
        fix: 'set the host:port other sites reach this port at',
      },
    ];
  }
  const reachable = exposedPort(exposure, name, servicePort);
  if (reachable === undefined) {
    return [
      {
        path,
        field: `${exposureField}.nodePorts.${name}`,
        problem: `a NodePort Service without a node port for ${name}, so ${address} names a port nothing opens`,
        fix: `set ${exposureField}.nodePorts.${name} to the port in ${address}`,
      },
    ];
  }
  if (reachable !== advertised) {
    const what = exposure.type === 'NodePort' ? `node port ${reachable}` : `Service port ${reachable}`;
    return [
      {
        path,
        field,
        problem: `${address} names port ${advertised}, but the ${exposure.type} Service opens ${name} on ${what}`,
        fix: `advertise port ${reachable}${exposure.type === 'NodePort' ? `, or set ${exposureField}.nodePorts.${name} to ${advertised}` : ''}`,
      },
    ];
  }
  return [];
}

/** The kplus Service ports with their node ports filled in. */
export function exposedPorts<P extends string>(
  exposure: ServiceExposure<P>,
  ports: readonly (kplus.ServicePort & { readonly exposureName: P })[],
): kplus.ServicePort[] {
  return ports.map(({ exposureName, ...port }) => {
    const nodePort = exposure.type === 'NodePort' ? exposure.nodePorts?.[exposureName] : undefined;
    return nodePort === undefined ? port : { ...port, nodePort };
  });
}

/** What kplus.Service takes no prop for: externalTrafficPolicy, set on the rendered object. */
export function applyExposureExtras(service: kplus.Service, exposure: ServiceExposure): void {
  if (exposure.externalTrafficPolicy !== undefined) {
    ApiObject.of(service).addJsonPatch(JsonPatch.add('/spec/externalTrafficPolicy', exposure.externalTrafficPolicy));
  }
}
