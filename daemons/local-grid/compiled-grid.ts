/**
 * The compiled grid as the local runner sees it: dist/ read back into sites (one manifest file per site, named by
 * its operator's GRID_SITE_NAME), and each site's Deployments expanded into pods (one per replica) with their
 * containers, volumes and declared ports, and its Services with the pods they select. Pure over parsed objects.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../shared/resource-store/types.ts';

export interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath?: string } };
}

export interface ContainerSpec {
  readonly name: string;
  readonly command?: readonly string[];
  readonly args?: readonly string[];
  readonly env?: readonly EnvVar[];
  readonly ports?: readonly { readonly containerPort: number; readonly name?: string; readonly protocol?: string }[];
  readonly volumeMounts?: readonly { readonly name: string; readonly mountPath: string; readonly readOnly?: boolean }[];
}

export interface KeyToPath {
  readonly key: string;
  readonly path: string;
}

export interface VolumeSource {
  readonly secret?: { readonly name: string; readonly items?: readonly KeyToPath[] };
  readonly configMap?: { readonly name: string; readonly items?: readonly KeyToPath[] };
  readonly serviceAccountToken?: { readonly path: string };
  readonly downwardAPI?: {
    readonly items?: readonly { readonly path: string; readonly fieldRef?: { readonly fieldPath?: string } }[];
  };
}

export interface VolumeSpec {
  readonly name: string;
  readonly emptyDir?: unknown;
  readonly secret?: { readonly secretName: string; readonly items?: readonly KeyToPath[] };
  readonly configMap?: { readonly name: string; readonly items?: readonly KeyToPath[] };
  readonly projected?: { readonly sources?: readonly VolumeSource[] };
}

/** One replica of a Deployment: containers share its ports and volumes, as in a Kubernetes pod. */
export interface PodPlan {
  readonly site: string;
  readonly namespace: string;
  readonly deployment: string;
  readonly replica: number;
  /** "sim-east-llm-a" for a single replica, "consumer-gateway-1" otherwise. */
  readonly id: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly initContainers: readonly ContainerSpec[];
  readonly containers: readonly ContainerSpec[];
  readonly volumes: readonly VolumeSpec[];
}

export interface ServicePlan {
  readonly name: string;
  readonly namespace: string;
  /** ClusterIP (the default), NodePort or LoadBalancer: whether other sites can reach it at all. */
  readonly type: string;
  /** The annotations a load-balancer controller or external-dns reads. */
  readonly annotations: Readonly<Record<string, string>>;
  readonly ports: readonly {
    readonly port: number;
    readonly targetPort: number | string;
    readonly protocol?: string;
    readonly nodePort?: number;
  }[];
  readonly selector: Readonly<Record<string, string>>;
}

export interface CompiledSite {
  readonly site: string;
  readonly file: string;
  readonly objects: readonly KubeObject[];
  readonly pods: readonly PodPlan[];
  readonly services: readonly ServicePlan[];
}

export class CompiledGridError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CompiledGridError';
  }
}

export const OPERATOR_SCRIPT = 'daemons/gossip-operator/main.ts';
export const GATEWAY_SCRIPT = 'daemons/gateway/main.ts';
export const SIM_SCRIPT = 'daemons/sim/main.ts';
export const OVERLAY_SYNC_SCRIPT = 'daemons/overlay-sync/main.ts';

/**
 * The file a daemon script of the manifests runs from on this machine: the .ts source in this repository, its
 * compiled .js in the installed package (Node does not strip types under node_modules).
 */
export function daemonScriptPath(root: string, script: string): string {
  return resolve(root, import.meta.url.endsWith('.ts') ? script : script.replace(/\.ts$/u, '.js'));
}

/** Reads every *.yaml of the compiled grid; files without a gossip-operator (the CRDs) are not sites. */
export function loadCompiledGrid(distDir: string): CompiledSite[] {
  let files: string[];
  try {
    files = readdirSync(distDir)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort();
  } catch {
    throw new CompiledGridError(`cannot read ${distDir}/: run "npx cdk8s synth" to compile the grid first`);
  }
  const sites: CompiledSite[] = [];
  for (const file of files) {
    const objects: KubeObject[] = [];
    parseAllDocuments(readFileSync(join(distDir, file), 'utf8')).forEach((doc, index) => {
      if (doc.errors.length > 0)
        throw new CompiledGridError(
          `${join(distDir, file)} document ${index}: ${doc.errors[0]?.message.split('\n')[0]}`,
        );
      const value = doc.toJS() as KubeObject | null;
      if (value !== null && typeof value === 'object' && typeof value.kind === 'string') objects.push(value);
    });
    const site = siteNameOf(objects);
    if (site === undefined) continue;
    sites.push(compileSite(site, join(distDir, file), objects));
  }
  if (sites.length === 0)
    throw new CompiledGridError(`${distDir}/ holds no site (no gossip-operator Deployment): run "npx cdk8s synth"`);
  const names = sites.map((s) => s.site);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) throw new CompiledGridError(`two manifest files declare site "${duplicate}"`);
  return sites;
}

function deploymentsOf(objects: readonly KubeObject[]): KubeObject[] {
  return objects.filter((o) => o.kind === 'Deployment');
}

function podSpecOf(deployment: KubeObject): { labels: Record<string, string>; spec: Record<string, unknown> } {
  const template = (
    deployment['spec'] as
      | { template?: { metadata?: { labels?: Record<string, string> }; spec?: Record<string, unknown> } }
      | undefined
  )?.template;
  return { labels: template?.metadata?.labels ?? {}, spec: template?.spec ?? {} };
}

export function scriptOf(container: ContainerSpec): string | undefined {
  const [binary, script] = container.command ?? [];
  return binary === 'node' ? script : undefined;
}

function siteNameOf(objects: readonly KubeObject[]): string | undefined {
  for (const deployment of deploymentsOf(objects)) {
    for (const container of (podSpecOf(deployment).spec['containers'] ?? []) as ContainerSpec[]) {
      if (scriptOf(container) !== OPERATOR_SCRIPT) continue;
      const site = container.env?.find((e) => e.name === 'GRID_SITE_NAME')?.value;
      if (site !== undefined && site !== '') return site;
    }
  }
  return undefined;
}

export function compileSite(site: string, file: string, objects: readonly KubeObject[]): CompiledSite {
  const pods: PodPlan[] = [];
  for (const deployment of deploymentsOf(objects)) {
    const { labels, spec } = podSpecOf(deployment);
    const replicas = Math.max(1, Number((deployment['spec'] as { replicas?: number } | undefined)?.replicas ?? 1));
    const name = deployment.metadata.name;
    for (let replica = 0; replica < replicas; replica++) {
      pods.push({
        site,
        namespace: deployment.metadata.namespace ?? 'default',
        deployment: name,
        replica,
        id: replicas === 1 ? name : `${name}-${replica}`,
        labels,
        initContainers: (spec['initContainers'] ?? []) as ContainerSpec[],
        containers: (spec['containers'] ?? []) as ContainerSpec[],
        volumes: (spec['volumes'] ?? []) as VolumeSpec[],
      });
    }
  }
  const services: ServicePlan[] = objects
    .filter((o) => o.kind === 'Service')
    .map((o) => {
      const spec = (o['spec'] ?? {}) as {
        type?: string;
        ports?: ServicePlan['ports'];
        selector?: Record<string, string>;
      };
      const annotations = (o.metadata as { annotations?: Record<string, string> }).annotations ?? {};
      return {
        name: o.metadata.name,
        namespace: o.metadata.namespace ?? 'default',
        type: spec.type ?? 'ClusterIP',
        annotations,
        ports: spec.ports ?? [],
        selector: spec.selector ?? {},
      };
    });
  return { site, file, objects, pods, services };
}

/** Whether a Service is reachable from outside its cluster: a LoadBalancer or NodePort one. */
export function isExposed(service: ServicePlan): boolean {
  return service.type === 'LoadBalancer' || service.type === 'NodePort';
}

export function selects(service: ServicePlan, pod: PodPlan): boolean {
  const entries = Object.entries(service.selector);
  return entries.length > 0 && pod.namespace === service.namespace && entries.every(([k, v]) => pod.labels[k] === v);
}

/** The container port a Service port targets on a pod (a named targetPort is looked up in the containers). */
export function targetContainerPort(pod: PodPlan, targetPort: number | string): number | undefined {
  if (typeof targetPort === 'number') return targetPort;
  if (/^\d+$/.test(targetPort)) return Number(targetPort);
  for (const container of pod.containers) {
    const match = container.ports?.find((p) => p.name === targetPort);
    if (match !== undefined) return match.containerPort;
  }
  return undefined;
}

export function configMapData(site: CompiledSite, namespace: string, name: string): Record<string, string> | undefined {
  const object = site.objects.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name === name && (o.metadata.namespace ?? 'default') === namespace,
  );
  return object?.['data'] as Record<string, string> | undefined;
}
