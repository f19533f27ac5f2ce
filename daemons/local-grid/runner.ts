/**
 * The local grid runner: the compiled grid in dist/ started as real processes on loopback, one "cluster" per site.
 * Per site: a local store (state directory) holding the site's translated manifests and the Secrets they
 * reference, pod directories with the materialized volumes, and one process per container; sites talk to each
 * other only through what the address table maps (UDP gossip, the provider gateways' mTLS listeners).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ensurePrivateDirSync, writePrivateFileSync } from '../shared/private-files.ts';
import { openLocalStore, SECRET, type LocalStore } from '../shared/resource-store/index.ts';
import type { KubeObject } from '../shared/resource-store/types.ts';
import { AddressTable, buildAddressTable, LOOPBACK, type StandIn } from './address-table.ts';
import { type CompiledSite, SIM_SCRIPT, daemonScriptPath, loadCompiledGrid } from './compiled-grid.ts';
import { ensureGridPki, type GridPki } from './pki.ts';
import { type ContainerProcess, materializePod, type PodRuntime, startTier } from './pods.ts';
import { PortPool } from './ports.ts';
import { isGatewayConfig, isProviderGatewayConfig, rewriteDeep, trustedOrganizations } from './rewrite.ts';
import {
  type DemoCallerKey,
  demoKeysFile,
  demoTenants,
  ensureDemoCallerKeys,
  requiresCallerKeys,
} from './demo-keys.ts';
import { ensureSwimKey, secretDataOf, secretObject, siteSecrets, type SiteSecret } from './secrets.ts';
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from './restart-policy.ts';
import {
  type ManagedProcess,
  ProcessStartError,
  type ProcessSpec,
  type ProcessStatus,
  Supervisor,
} from './supervisor.ts';
import { dashboardUrl } from './traffic.ts';

export const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/**
 * Where `agn up` reads dist/ and keeps .state/ by default: this repository when it runs from its sources, the current
 * directory (a grid repository) when it runs from the installed package.
 */
export const DEFAULT_GRID_HOME = import.meta.url.endsWith('.ts') ? REPO_ROOT : process.cwd();
export const RUNNER_FIELD_MANAGER = 'agn-local-grid';

/**
 * compiled: the manifests' own timers (10 s metrics refresh, 5 s SWIM probes, 30 s suspicion).
 * fast: the qualification suite's profile; the runner patches the GridNetwork to a 2 s refresh, 1 s probes and a
 * 3 s suspicion timeout, and polls GridSites and providers every second, so failures show within seconds.
 */
export type GridProfile = 'compiled' | 'fast';

export interface LocalGridOptions {
  readonly distDir: string;
  readonly stateDir: string;
  readonly profile?: GridProfile;
  /** One line per long step. */
  readonly progress?: (message: string) => void;
  readonly readyTimeoutMs?: number;
  /** Called with the grid before its first process starts, so a caller can stop it even mid-start (Ctrl-C). */
  readonly onCreated?: (grid: LocalGrid) => void;
  /** When a process that exited on its own is started again (default DEFAULT_RESTART_POLICY). */
  readonly restartPolicy?: RestartPolicy;
  /**
   * In-cluster backends the compiled grid names but does not run (an AgentToolProvider's MCP server, an
   * AgentToAgentProvider's agent), served by the caller on loopback: `address` is the host:port as compiled (its
   * site's Service DNS name), `endpoint` where it listens here. Without one such a backend stays unreachable.
   */
  readonly backends?: readonly { readonly site: string; readonly address: string; readonly endpoint: string }[];
}

export interface GridProcess extends ContainerProcess {
  /** Set for a sim standing in for an external API. */
  readonly standInFor?: string;
}

export interface SiteRuntime {
  readonly site: string;
  readonly storeDir: string;
  readonly manifestsDir: string;
  readonly store: LocalStore;
}

export class LocalGrid {
  readonly stateDir: string;
  readonly logDir: string;
  readonly profile: GridProfile;
  readonly sites: readonly SiteRuntime[];
  readonly table: AddressTable;
  readonly pods: readonly PodRuntime[];
  readonly standIns: readonly StandIn[];
  readonly pki: GridPki;
  /** Restarts what exits on its own; its onEvent reports exits and restarts (set it in onCreated to see them all). */
  readonly supervisor: Supervisor;
  /** Every long-running process of the grid (init containers excluded). */
  readonly processes: readonly GridProcess[];
  /**
   * The demo caller keys (one per tenant) when a compiled consumer requires caller keys, else empty. Only `agn up`'s
   * curl line and the runner's own traffic use them; they are never logged.
   */
  readonly demoKeys: readonly DemoCallerKey[];
  readonly #secrets: readonly SiteSecret[];
  readonly #specs = new Map<string, ProcessSpec>();
  readonly #progress: (message: string) => void;

  constructor(parts: {
    stateDir: string;
    profile: GridProfile;
    sites: SiteRuntime[];
    table: AddressTable;
    pods: PodRuntime[];
    pki: GridPki;
    secrets: SiteSecret[];
    demoKeys: DemoCallerKey[];
    standInProcesses: GridProcess[];
    progress: (message: string) => void;
    restartPolicy: RestartPolicy;
  }) {
    this.supervisor = new Supervisor({ restartPolicy: parts.restartPolicy });
    this.stateDir = parts.stateDir;
    this.logDir = join(parts.stateDir, 'logs');
    this.profile = parts.profile;
    this.sites = parts.sites;
    this.table = parts.table;
    this.pods = parts.pods;
    this.standIns = parts.table.standIns;
    this.pki = parts.pki;
    this.#secrets = parts.secrets;
    this.demoKeys = parts.demoKeys;
    this.#progress = parts.progress;
    this.processes = [...parts.standInProcesses, ...parts.pods.flatMap((p) => p.processes.filter((c) => !c.init))];
  }

  site(name: string): SiteRuntime {
    const site = this.sites.find((s) => s.site === name);
    if (site === undefined) throw new Error(`no site "${name}" in this grid`);
    return site;
  }

  process(name: string): GridProcess {
    const found = this.processes.find((p) => p.name === name);
    if (found === undefined) throw new Error(`no process "${name}" in this grid`);
    return found;
  }

  byRole(role: GridProcess['role'], site?: string): GridProcess[] {
    return this.processes.filter((p) => p.role === role && (site === undefined || p.site === site));
  }

  sim(provider: string): GridProcess {
    const found = this.processes.find((p) => p.role === 'sim' && p.simName === provider);
    if (found === undefined) throw new Error(`no sim for provider "${provider}"`);
    return found;
  }

  running(name: string): ManagedProcess | undefined {
    return this.supervisor.current(name);
  }

  /** State, restart count, last exit and pending restart of one process. */
  status(name: string): ProcessStatus | undefined {
    return this.supervisor.status(name);
  }

  /** Every credential token of the grid: what must never show up in a log, status, overlay or error body. */
  /** The demo caller keys count: they belong only in the state directory's caller-keys/demo-keys.json. */
  /** The provider credentials' tokens: what no consumer gateway may ever hold. */
  providerCredentialTokens(): Buffer[] {
    return this.#secrets
      .filter((s) => s.providerCredential === true)
      .flatMap((s) => s.tokenKeys.map((k) => s.data[k]).filter((v): v is Buffer => v !== undefined));
  }

  tokens(): Buffer[] {
    return [
      ...this.#secrets.flatMap((s) => s.tokenKeys.map((k) => s.data[k]).filter((v): v is Buffer => v !== undefined)),
      ...this.demoKeys.map((k) => Buffer.from(k.key)),
    ];
  }

  /**
   * The fleet dashboard of `site`'s operator as the compiled manifests chose it: undefined when it is off; with token
   * access, the token (read from the file the operator reads, which the runner generated like any Secret) for the
   * local user's browser, and `openUrl`, the URL that carries it. Never logged.
   */
  dashboard(site: string): { url: string; token?: string; openUrl: string } | undefined {
    const operator = this.byRole('operator', site)[0];
    if (operator?.adminAddress === undefined) return undefined;
    const access = operator.env['GRID_DASHBOARD'];
    const url = dashboardUrl(operator.adminAddress);
    if (access === 'off') return undefined;
    if (access !== 'token') return { url, openUrl: url };
    const token = readFileSync(operator.env['GRID_DASHBOARD_TOKEN_FILE'] ?? '', 'utf8').trim();
    return { url, token, openUrl: dashboardUrl(operator.adminAddress, token) };
  }

  /** The demo key of `tenant` (the first tenant's when omitted); undefined when no consumer requires caller keys. */
  demoKey(tenant?: string): string | undefined {
    return (tenant === undefined ? this.demoKeys[0] : this.demoKeys.find((k) => k.tenant === tenant))?.key;
  }

  specOf(name: string): ProcessSpec {
    const spec = this.#specs.get(name);
    if (spec === undefined) throw new Error(`no process "${name}" in this grid`);
    return spec;
  }

  startProcess(name: string, readyTimeoutMs = 30_000): Promise<ManagedProcess> {
    return this.supervisor.start(this.specOf(name), readyTimeoutMs);
  }

  /** Stops a process on purpose (SIGTERM): it stays down, not restarted, until startProcess. */
  stopProcess(name: string): Promise<void> {
    return this.supervisor.stop(name);
  }

  /**
   * Kills a process with SIGKILL on purpose: no graceful leave, no drain, as when a machine or cluster is lost. It
   * stays down (the loss is the point); a crash nobody caused is what the restart policy answers.
   */
  killProcess(name: string): Promise<void> {
    return this.supervisor.stop(name, { kill: true });
  }

  /** Sets a sim's state through its admin endpoint (queue depth, health, faults); the token stays in this process. */
  async setSimState(provider: string, update: Record<string, unknown>): Promise<Record<string, unknown>> {
    const sim = this.sim(provider);
    const token = readFileSync(sim.tokenFile ?? '', 'utf8').trim();
    const response = await fetch(`http://${sim.listenAddress}/admin/state`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(update),
      signal: AbortSignal.timeout(5000),
    });
    const body = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`sim ${provider} refused the state update (${response.status})`);
    return body;
  }

  /** Requests a sim recorded (x-ai-* headers, never the credential). */
  async simRequests(provider: string): Promise<{ path: string; model?: string; headers: Record<string, string> }[]> {
    const sim = this.sim(provider);
    const token = readFileSync(sim.tokenFile ?? '', 'utf8').trim();
    const response = await fetch(`http://${sim.listenAddress}/admin/requests`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(5000),
    });
    return (
      (await response.json()) as { requests: { path: string; model?: string; headers: Record<string, string> }[] }
    ).requests;
  }

  async #startAll(readyTimeoutMs: number): Promise<void> {
    const tiers = new Map<number, GridProcess[]>();
    const initByPod = new Map<string, GridProcess[]>();
    for (const pod of this.pods) {
      const tier = startTier(pod);
      for (const process of pod.processes) {
        if (process.init) {
          initByPod.set(`${pod.site}/${pod.pod.id}`, [...(initByPod.get(`${pod.site}/${pod.pod.id}`) ?? []), process]);
          continue;
        }
        tiers.set(tier, [...(tiers.get(tier) ?? []), process]);
      }
    }
    for (const standIn of this.processes.filter((p) => p.standInFor !== undefined))
      tiers.set(1, [...(tiers.get(1) ?? []), standIn]);
    // Operators, backends and provider gateways need nothing from each other to start; consumer pods need an
    // overlay (their init container waits for it), so they go last.
    const early = [0, 1, 2].flatMap((tier) => tiers.get(tier) ?? []);
    this.#progress(`starting ${early.length} processes: operators, backends, provider gateways`);
    await Promise.all(early.map((p) => this.startProcess(p.name, readyTimeoutMs)));
    const consumers = tiers.get(3) ?? [];
    const pods = [...new Set(consumers.map((p) => `${p.site}/${p.pod}`))];
    await Promise.all(
      pods.map(async (pod) => {
        for (const init of initByPod.get(pod) ?? []) {
          this.#progress(`${init.name}: waiting for the operator's first overlay (init container)`);
          try {
            await this.supervisor.run(this.specOf(init.name), readyTimeoutMs);
          } catch (error) {
            const operator = this.processes.find((p) => p.role === 'operator' && p.site === init.site);
            const hint =
              operator === undefined
                ? ''
                : `\n  the overlay comes from ${operator.name}: see ${this.specOf(operator.name).logFile}`;
            throw new ProcessStartError(
              init.name,
              this.specOf(init.name).logFile,
              `${(error as Error).message.split(' (log:')[0]?.replace(`${init.name} failed to start: `, '')}${hint}`,
            );
          }
        }
        const group = consumers.filter((p) => `${p.site}/${p.pod}` === pod);
        this.#progress(`starting ${group.map((p) => p.name).join(', ')}`);
        await Promise.all(group.map((p) => this.startProcess(p.name, readyTimeoutMs)));
      }),
    );
  }

  /** Registers every process spec (called once by startLocalGrid). */
  register(process: GridProcess, init: boolean): void {
    mkdirSync(this.logDir, { recursive: true });
    this.#specs.set(process.name, {
      name: process.name,
      command: process.command,
      args: process.args,
      env: process.env,
      cwd: REPO_ROOT,
      logFile: join(this.logDir, `${process.name.replace(/\//g, '.')}.log`),
      ...(init || process.healthUrl === undefined ? {} : { ready: () => httpOk(process.healthUrl as string) }),
    });
  }

  async start(readyTimeoutMs: number): Promise<void> {
    await this.#startAll(readyTimeoutMs);
  }

  #stopped: Promise<void> | undefined;

  /** Stops everything (consumers first, operators last) and closes the stores; safe to call more than once. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      await this.supervisor.stopAll();
      await Promise.all(this.sites.map((s) => s.store.close()));
    })();
    return this.#stopped;
  }
}

async function httpOk(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

const GRID_GROUP = 'grid.praxis.fast/';
const STORE_KINDS = new Set(['ConfigMap', 'Namespace']);

/** The objects a site's operator reads, with addresses translated and the GridSite pins the runner's PKI implies. */
function translatedManifests(
  site: CompiledSite,
  table: AddressTable,
  pki: GridPki,
  profile: GridProfile,
): KubeObject[] {
  const out: KubeObject[] = [];
  for (const object of site.objects) {
    if (!object.apiVersion.startsWith(GRID_GROUP) && !STORE_KINDS.has(object.kind)) continue;
    if (!object.apiVersion.startsWith(GRID_GROUP)) {
      out.push(object);
      continue;
    }
    const copy = rewriteDeep(object, { site: site.site, table, mounts: [], problems: [] });
    const spec = (copy['spec'] ?? {}) as Record<string, unknown>;
    if (object.kind === 'GridSite') {
      const address =
        (object['spec'] as { gatewayEndpoint?: { address?: string } } | undefined)?.gatewayEndpoint?.address ?? '';
      const target = table.resolve(site.site, address);
      const fingerprint = pki.sites.find((s) => s.site === target?.site)?.providerGateway.fingerprint;
      // This machine runs every gateway on a certificate its own PKI issued (the compiled grid's keys are not
      // here), so a compiled pin names a certificate no process here serves: the pin becomes this PKI's, like an
      // address becomes a loopback port.
      if (fingerprint !== undefined) spec['trust'] = { canonicalFingerprints: [fingerprint] };
    }
    if (object.kind === 'GridNetwork' && profile === 'fast') {
      spec['metricsRefreshInterval'] = '2s';
      spec['swim'] = { ...((spec['swim'] as object | undefined) ?? {}), probeInterval: '1s', suspicionTimeout: '3s' };
    }
    copy['spec'] = spec;
    out.push(copy);
  }
  return out;
}

function gatewayConfigs(site: CompiledSite): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const object of site.objects.filter((o) => o.kind === 'ConfigMap')) {
    for (const text of Object.values((object['data'] ?? {}) as Record<string, string>)) {
      try {
        const doc: unknown = parseYaml(text);
        if (isGatewayConfig(doc)) out.push(doc);
      } catch {
        // Not YAML.
      }
    }
  }
  return out;
}

/** Names each site's provider gateway certificate must carry: SNI of the consumers' hops and the GridSites' serverName. */
function providerSans(sites: readonly CompiledSite[], table: AddressTable): Record<string, string[]> {
  const sans: Record<string, string[]> = {};
  const add = (site: string | undefined, name: string | undefined) => {
    if (site === undefined || name === undefined) return;
    (sans[site] ??= []).push(name);
  };
  for (const site of sites) {
    for (const config of gatewayConfigs(site)) {
      if (isProviderGatewayConfig(config)) continue;
      for (const chain of config['filter_chains'] as {
        filters?: { filter?: string; clusters?: { endpoints?: string[]; tls?: { sni?: string } }[] }[];
      }[]) {
        for (const filter of chain.filters ?? []) {
          for (const cluster of filter.filter === 'load_balancer' ? (filter.clusters ?? []) : []) {
            const first = cluster.endpoints?.[0];
            if (first !== undefined) add(table.resolve(site.site, first)?.site, cluster.tls?.sni);
          }
        }
      }
    }
    for (const gridSite of site.objects.filter((o) => o.kind === 'GridSite')) {
      const endpoint = (
        gridSite['spec'] as { gatewayEndpoint?: { address?: string; tls?: { serverName?: string } } } | undefined
      )?.gatewayEndpoint;
      if (endpoint?.address !== undefined)
        add(table.resolve(site.site, endpoint.address)?.site, endpoint.tls?.serverName);
    }
  }
  return sans;
}

/**
 * Points each operator's dashboard at its site's consumer gateway pods (gateway and overlay-sync admin endpoints),
 * which the manifests cannot name: in a cluster those are per-pod addresses, here they are fixed loopback ports.
 */
function withDashboardTargets(sitePods: readonly PodRuntime[]): PodRuntime[] {
  const targets = sitePods.flatMap((pod) =>
    pod.processes.flatMap((p) => {
      if (p.adminAddress === undefined || p.init) return [];
      if (p.role === 'consumer-gateway') return [`${pod.pod.id}/gateway=${p.adminAddress}`];
      // The dashboard reads the overlay's sync; a gridServing pod's serving-sync container is not one of its targets.
      if (p.role === 'overlay-sync' && p.container === 'overlay-sync')
        return [`${pod.pod.id}/overlay-sync=${p.adminAddress}`];
      return [];
    }),
  );
  if (targets.length === 0) return [...sitePods];
  return sitePods.map((pod) => ({
    ...pod,
    processes: pod.processes.map((p) =>
      p.role === 'operator' ? { ...p, env: { ...p.env, GRID_DASHBOARD_TARGETS: targets.join(',') } } : p,
    ),
  }));
}

function splitHostPort(address: string): [string, string] {
  const colon = address.lastIndexOf(':');
  if (colon <= 0) throw new Error(`backend address ${address} is not host:port`);
  return [address.slice(0, colon), address.slice(colon + 1)];
}

export async function startLocalGrid(options: LocalGridOptions): Promise<LocalGrid> {
  const progress = options.progress ?? (() => undefined);
  const profile = options.profile ?? 'compiled';
  const stateDir = resolve(options.stateDir);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const compiled = loadCompiledGrid(options.distDir);
  progress(`compiled grid ${options.distDir}/: sites ${compiled.map((s) => s.site).join(', ')}`);
  const ports = new PortPool(LOOPBACK);
  const table = await buildAddressTable(compiled, { tcp: () => ports.tcp(), gossip: () => ports.gossip() });
  for (const backend of options.backends ?? []) {
    if (!compiled.some((s) => s.site === backend.site))
      throw new Error(
        `backend ${backend.address}: no site "${backend.site}" in ${options.distDir} (sites: ${compiled.map((s) => s.site).join(', ')})`,
      );
    table.addService(backend.site, AddressTable.key(...splitHostPort(backend.address)), {
      endpoints: [backend.endpoint],
      site: backend.site,
      service: backend.address,
    });
    progress(`${backend.address} (site ${backend.site}) is served by this run on ${backend.endpoint}`);
  }
  for (const standIn of table.standIns) {
    progress(
      `${standIn.replaces} (provider ${standIn.provider}, site ${standIn.site}) cannot be reached from here: a local sim stands in for it on ${LOOPBACK}:${standIn.port}`,
    );
  }

  const organizations = [
    ...new Set(
      compiled.flatMap((s) => gatewayConfigs(s).filter(isProviderGatewayConfig).flatMap(trustedOrganizations)),
    ),
  ];
  if (organizations.length > 1)
    progress(
      `provider gateways trust several organizations (${organizations.join(', ')}); consumer certificates carry ${organizations[0]}`,
    );
  progress(`grid PKI in ${join(stateDir, 'pki')} (reused when present)`);
  const pki = await ensureGridPki(
    join(stateDir, 'pki'),
    compiled.map((s) => s.site),
    {
      ...(organizations[0] !== undefined ? { consumerOrganization: organizations[0] } : {}),
      providerSans: providerSans(compiled, table),
    },
  );
  const swimKey = ensureSwimKey(join(stateDir, 'pki'));
  const needsKeys = requiresCallerKeys(compiled.flatMap(gatewayConfigs));
  const demoKeys = needsKeys ? ensureDemoCallerKeys(stateDir, demoTenants(compiled)) : [];
  if (needsKeys)
    progress(
      `caller keys: a demo key per tenant (${demoKeys.map((k) => k.tenant).join(', ')}) in ${join(stateDir, 'caller-keys')} (reused when present); the consumers' keys Secret holds only their hashes`,
    );

  const sites: SiteRuntime[] = [];
  const pods: PodRuntime[] = [];
  const allSecrets: SiteSecret[] = [];
  const standInProcesses: GridProcess[] = [];
  const operatorEnv: Record<string, string> =
    profile === 'fast'
      ? {
          GRID_SWIM_PROFILE: 'loopback',
          GRID_SITE_POLL_INTERVAL: '1s',
          GRID_PROVIDER_POLL_INTERVAL: '1s',
          GRID_MODEL_DISCOVERY_INTERVAL: '5s',
        }
      : { GRID_SWIM_PROFILE: 'loopback', GRID_SITE_POLL_INTERVAL: '5s', GRID_PROVIDER_POLL_INTERVAL: '5s' };
  try {
    for (const site of compiled) {
      const siteDir = join(stateDir, 'sites', site.site);
      const storeDir = join(siteDir, 'store');
      const manifestsDir = join(siteDir, 'manifests');
      mkdirSync(manifestsDir, { recursive: true, mode: 0o700 });
      const store = await openLocalStore({ stateDir: storeDir });
      sites.push({ site: site.site, storeDir, manifestsDir, store });
      const existing = new Map<string, KubeObject>();
      for (const object of (await store.list(SECRET)).items)
        existing.set(`${object.metadata.namespace}/${object.metadata.name}`, object);
      const secrets = siteSecrets(
        site,
        pki,
        swimKey,
        (namespace, name) => secretDataOf(existing.get(`${namespace}/${name}`)),
        demoKeysFile(demoKeys),
      );
      for (const secret of secrets)
        await store.apply(SECRET, secretObject(secret), { fieldManager: RUNNER_FIELD_MANAGER, force: true });
      allSecrets.push(...secrets);
      progress(`site ${site.site}: ${secrets.length} Secrets applied to its local store (${storeDir})`);
      const manifests = translatedManifests(site, table, pki, profile);
      writeFileSync(join(manifestsDir, `${site.site}.yaml`), manifests.map((o) => stringifyYaml(o)).join('---\n'));
      const sitePods = site.pods.map((pod) =>
        materializePod(site, pod, stateDir, {
          repoRoot: REPO_ROOT,
          table,
          storeDir,
          manifestsDir,
          secrets,
          operatorEnv,
        }),
      );
      pods.push(...withDashboardTargets(sitePods));
      for (const standIn of table.standIns.filter((s) => s.site === site.site)) {
        const secret = secrets.find(
          (s) => s.name === standIn.secretRef.name && s.namespace === standIn.secretRef.namespace,
        );
        const dir = join(siteDir, 'standins', standIn.provider);
        ensurePrivateDirSync(dir);
        const tokenFile = join(dir, 'token');
        writePrivateFileSync(tokenFile, secret?.data[standIn.secretRef.key] ?? '');
        standInProcesses.push({
          name: `${site.site}/standin-${standIn.provider}/sim`,
          site: site.site,
          pod: `standin-${standIn.provider}`,
          container: 'sim',
          role: 'sim',
          init: false,
          command: process.execPath,
          args: [
            daemonScriptPath(REPO_ROOT, SIM_SCRIPT),
            '--name',
            standIn.provider,
            '--models',
            standIn.models.join(','),
            '--token-file',
            tokenFile,
            '--host',
            LOOPBACK,
            '--port',
            String(standIn.port),
          ],
          env: {},
          healthUrl: `http://${LOOPBACK}:${standIn.port}/health`,
          listenAddress: `${LOOPBACK}:${standIn.port}`,
          simName: standIn.provider,
          tokenFile,
          standInFor: standIn.replaces,
        });
      }
    }
  } catch (error) {
    await Promise.all(sites.map((s) => s.store.close()));
    throw error;
  }
  for (const pod of pods) for (const problem of pod.problems) progress(`note: ${pod.site}/${pod.pod.id}: ${problem}`);
  const restartPolicy = options.restartPolicy ?? DEFAULT_RESTART_POLICY;
  const grid = new LocalGrid({
    stateDir,
    profile,
    sites,
    table,
    pods,
    pki,
    secrets: allSecrets,
    demoKeys,
    standInProcesses,
    progress,
    restartPolicy,
  });
  for (const pod of pods) for (const process of pod.processes) grid.register(process, process.init);
  for (const process of standInProcesses) grid.register(process, false);
  options.onCreated?.(grid);
  try {
    await grid.start(options.readyTimeoutMs ?? 60_000);
  } catch (error) {
    await grid.stop();
    throw error;
  }
  return grid;
}
