/**
 * A compiled pod made runnable: its volumes materialized as directories (Secrets and ConfigMaps as files, gateway
 * configs rewritten for this pod's ports and paths, emptyDirs shared by its containers) and each container turned
 * into a process spec (`node` becomes this Node, args rewritten, env built as the kubelet would (container-env.ts),
 * the local store wired in, readiness from its liveness probe).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { type AddressTable, LOOPBACK } from './address-table.ts';
import {
  type CompiledSite,
  configMapData,
  type ContainerSpec,
  GATEWAY_SCRIPT,
  OPERATOR_SCRIPT,
  OVERLAY_SYNC_SCRIPT,
  type PodPlan,
  scriptOf,
  SIM_SCRIPT,
  daemonScriptPath,
  type KeyToPath,
} from './compiled-grid.ts';
import { writePrivateFileSync } from '../shared/private-files.ts';
import {
  isGatewayConfig,
  isProviderGatewayConfig,
  type Mount,
  rewriteArgs,
  rewriteGatewayConfig,
  sortMounts,
  type RewriteContext,
} from './rewrite.ts';
import { containerEnv } from './container-env.ts';
import type { SiteSecret } from './secrets.ts';

export type ProcessRole = 'operator' | 'sim' | 'provider-gateway' | 'consumer-gateway' | 'overlay-sync' | 'other';

export interface ContainerProcess {
  /** "east/consumer-gateway-0/gateway". */
  readonly name: string;
  readonly site: string;
  readonly pod: string;
  readonly container: string;
  readonly role: ProcessRole;
  readonly init: boolean;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** http://127.0.0.1:port/path of its liveness probe; undefined for init containers. */
  readonly healthUrl?: string;
  /** Main listener (gateways: first listener; sims: their port). */
  readonly listenAddress?: string;
  /** Admin address (gateways, operator, overlay-sync). */
  readonly adminAddress?: string;
  /** For sims: the provider name (--name) and the token file it reads. */
  readonly simName?: string;
  readonly tokenFile?: string;
}

export interface PodRuntime {
  readonly site: string;
  readonly pod: PodPlan;
  readonly dir: string;
  readonly processes: readonly ContainerProcess[];
  /** Problems found while translating (an address nothing serves): reported at start. */
  readonly problems: readonly string[];
}

export interface PodEnvironment {
  readonly repoRoot: string;
  readonly table: AddressTable;
  /** The site's local store: state directory, and the manifests the operator imports. */
  readonly storeDir: string;
  readonly manifestsDir: string;
  readonly secrets: readonly SiteSecret[];
  /** Extra operator env of the runner's timing profile. */
  readonly operatorEnv: Readonly<Record<string, string>>;
}

function writeFile(path: string, content: string | Buffer, secret: boolean): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  if (secret) writePrivateFileSync(path, content);
  else writeFileSync(path, content, { mode: 0o644 });
}

function itemsOf(items: readonly KeyToPath[] | undefined, keys: readonly string[]): KeyToPath[] {
  return items !== undefined && items.length > 0 ? [...items] : keys.map((key) => ({ key, path: key }));
}

function roleOf(container: ContainerSpec, providerPod: boolean): ProcessRole {
  switch (scriptOf(container)) {
    case OPERATOR_SCRIPT:
      return 'operator';
    case SIM_SCRIPT:
      return 'sim';
    case GATEWAY_SCRIPT:
      return providerPod ? 'provider-gateway' : 'consumer-gateway';
    case OVERLAY_SYNC_SCRIPT:
      return 'overlay-sync';
    default:
      return 'other';
  }
}

export function materializePod(site: CompiledSite, pod: PodPlan, root: string, env: PodEnvironment): PodRuntime {
  const dir = join(root, 'sites', site.site, 'pods', pod.id);
  // An emptyDir starts empty with every pod, and config files carry this start's ports: begin from nothing.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const problems: string[] = [];
  const volumeDir = (name: string) => join(dir, 'volumes', name);
  const allMounts = sortMounts(
    [...pod.initContainers, ...pod.containers].flatMap((c) =>
      (c.volumeMounts ?? []).map((m) => ({ mountPath: m.mountPath, dir: volumeDir(m.name) })),
    ),
  );
  const podCtx: RewriteContext = { site: site.site, table: env.table, pod, mounts: allMounts, problems };
  const secret = (name: string) => env.secrets.find((s) => s.name === name && s.namespace === pod.namespace);
  let providerPod = false;

  const writeConfigMap = (target: string, name: string, items: readonly KeyToPath[] | undefined) => {
    const data = configMapData(site, pod.namespace, name);
    if (data === undefined) {
      // kube-root-ca.crt and friends: cluster-provided, meaningless on loopback.
      return;
    }
    for (const item of itemsOf(items, Object.keys(data))) {
      let text = data[item.key];
      if (text === undefined) continue;
      if (/\.ya?ml$/.test(item.key)) {
        const doc: unknown = parseYaml(text);
        if (isGatewayConfig(doc)) {
          providerPod ||= isProviderGatewayConfig(doc);
          text = stringifyYaml(rewriteGatewayConfig(doc, podCtx));
        }
      }
      writeFile(join(target, item.path), text, false);
    }
  };
  const writeSecret = (target: string, name: string, items: readonly KeyToPath[] | undefined) => {
    const values = secret(name);
    if (values === undefined) {
      problems.push(`Secret ${pod.namespace}/${name} has no value`);
      return;
    }
    for (const item of itemsOf(items, Object.keys(values.data))) {
      const value = values.data[item.key];
      if (value !== undefined) writeFile(join(target, item.path), value, true);
    }
  };

  for (const volume of pod.volumes) {
    const target = volumeDir(volume.name);
    mkdirSync(target, { recursive: true, mode: 0o700 });
    if (volume.configMap !== undefined) writeConfigMap(target, volume.configMap.name, volume.configMap.items);
    if (volume.secret !== undefined) writeSecret(target, volume.secret.secretName, volume.secret.items);
    for (const source of volume.projected?.sources ?? []) {
      if (source.configMap !== undefined) writeConfigMap(target, source.configMap.name, source.configMap.items);
      if (source.secret !== undefined) writeSecret(target, source.secret.name, source.secret.items);
      for (const item of source.downwardAPI?.items ?? []) {
        if (item.fieldRef?.fieldPath === 'metadata.namespace') writeFile(join(target, item.path), pod.namespace, false);
      }
      // serviceAccountToken: the local store needs no API token, so none is minted.
    }
  }

  const processes: ContainerProcess[] = [];
  const containers = [
    ...pod.initContainers.map((c) => ({ c, init: true })),
    ...pod.containers.map((c) => ({ c, init: false })),
  ];
  for (const { c: container, init } of containers) {
    const mounts: Mount[] = sortMounts(
      (container.volumeMounts ?? []).map((m) => ({ mountPath: m.mountPath, dir: volumeDir(m.name) })),
    );
    const ctx: RewriteContext = { site: site.site, table: env.table, pod, mounts, problems };
    const [binary, ...rest] = [...(container.command ?? []), ...(container.args ?? [])];
    const argv = rewriteArgs(rest, ctx);
    const script = scriptOf(container);
    if (binary === 'node' && script !== undefined) argv[0] = daemonScriptPath(env.repoRoot, script);
    const { vars, problems: envProblems } = containerEnv(container, pod, ctx);
    problems.push(...envProblems);
    const role = roleOf(container, providerPod);
    if (role === 'operator') {
      Object.assign(
        vars,
        { GRID_STORE: 'local', GRID_STATE_DIR: env.storeDir, GRID_MANIFESTS_DIR: env.manifestsDir, POD_NAME: pod.id },
        env.operatorEnv,
      );
    }
    if (role === 'overlay-sync')
      Object.assign(vars, { OVERLAY_SYNC_STORE: 'local', OVERLAY_SYNC_STATE_DIR: env.storeDir });
    const probe = (container as { livenessProbe?: { httpGet?: { path?: string; port?: number | string } } })
      .livenessProbe?.httpGet;
    const probePort = typeof probe?.port === 'number' ? probe.port : Number(probe?.port);
    const healthUrl =
      !init && probe !== undefined && Number.isInteger(probePort)
        ? `http://${LOOPBACK}:${env.table.podPort(pod, probePort)}${probe.path ?? '/'}`
        : undefined;
    const flag = (name: string) => {
      const i = argv.indexOf(name);
      return i < 0 ? undefined : argv[i + 1];
    };
    let listenAddress: string | undefined;
    let adminAddress: string | undefined;
    if (role === 'sim') listenAddress = `${LOOPBACK}:${flag('--port') ?? ''}`;
    if (role === 'operator') adminAddress = vars['GRID_ADMIN_ADDRESS'];
    if (role === 'overlay-sync') adminAddress = vars['OVERLAY_SYNC_HEALTH_ADDR'];
    if (role === 'provider-gateway' || role === 'consumer-gateway') {
      const configPath = flag('--config');
      const gatewayPort = (name: string) => (container.ports ?? []).find((p) => p.name === name)?.containerPort;
      const listener = gatewayPort('listener');
      const admin = gatewayPort('admin');
      if (listener !== undefined) listenAddress = `${LOOPBACK}:${env.table.podPort(pod, listener)}`;
      if (admin !== undefined) adminAddress = `${LOOPBACK}:${env.table.podPort(pod, admin)}`;
      if (configPath === undefined) problems.push(`${pod.id}/${container.name}: gateway without --config`);
    }
    processes.push({
      name: `${site.site}/${pod.id}/${container.name}`,
      site: site.site,
      pod: pod.id,
      container: container.name,
      role,
      init,
      command: binary === 'node' ? process.execPath : (binary ?? ''),
      args: argv,
      env: vars,
      ...(healthUrl !== undefined ? { healthUrl } : {}),
      ...(listenAddress !== undefined ? { listenAddress } : {}),
      ...(adminAddress !== undefined ? { adminAddress } : {}),
      ...(role === 'sim'
        ? {
            simName: flag('--name') ?? pod.id,
            ...(flag('--token-file') !== undefined ? { tokenFile: flag('--token-file') as string } : {}),
          }
        : {}),
    });
  }
  return { site: site.site, pod, dir, processes, problems };
}

/** Start order inside a site: operator, backends, provider gateways, then the consumer pods (their init waits for an overlay). */
export function startTier(runtime: PodRuntime): number {
  const roles = runtime.processes.map((p) => p.role);
  if (roles.includes('operator')) return 0;
  if (roles.includes('sim')) return 1;
  if (roles.includes('provider-gateway')) return 2;
  return 3;
}
