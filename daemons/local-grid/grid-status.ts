/**
 * A live view of a running local grid, read the way an operator would look at clusters: GridSite phases and
 * InferenceProvider status from each site's store, gossip members from each operator's /status, each consumer's
 * accepted revision from its admin /status, admission from the overlay it serves, the engine's waiting and running
 * requests, KV-cache use and requests from each backend's /metrics. Every read is bounded and a failed read shows as
 * "-", never as an error.
 */
import { CONFIG_MAP } from '../shared/resource-store/index.ts';
import type { KubeObject, ResourceKind } from '../shared/resource-store/types.ts';
import { describeRestartPolicy, seconds } from './restart-policy.ts';
import type { LocalGrid } from './runner.ts';
import type { ExitStatus, ProcessState } from './supervisor.ts';

const GRID_API = 'grid.praxis.fast/v1alpha1';
export const GRID_SITE: ResourceKind = {
  apiVersion: GRID_API,
  kind: 'GridSite',
  plural: 'gridsites',
  namespaced: false,
};
export const GRID_NETWORK: ResourceKind = {
  apiVersion: GRID_API,
  kind: 'GridNetwork',
  plural: 'gridnetworks',
  namespaced: false,
};
export const INFERENCE_PROVIDER: ResourceKind = {
  apiVersion: GRID_API,
  kind: 'InferenceProvider',
  plural: 'inferenceproviders',
  namespaced: false,
};

export interface OverlayCandidate {
  readonly kind: string;
  readonly name: string;
  readonly site: string;
  readonly cluster: string;
  readonly fresh: boolean;
  readonly admission_state: string;
  readonly rank: number;
  readonly selection_group: number;
  readonly score: number;
}

export interface OverlayView {
  readonly configMap: string;
  readonly site: string;
  readonly revision: string;
  readonly candidates: readonly OverlayCandidate[];
}

export interface SiteView {
  readonly site: string;
  readonly networkPhase: string;
  readonly gridSites: readonly { readonly name: string; readonly phase: string; readonly reason: string }[];
  readonly members: string;
}

export interface ProviderView {
  readonly site: string;
  readonly name: string;
  readonly phase: string;
  readonly ready: string;
  readonly admission: string;
  /** The backend's own queue and batch, as its engine reports them: `waiting/running` requests. */
  readonly queue: string;
  /** Its KV-cache use, a percentage. */
  readonly kvCache: string;
  readonly requests: number;
  readonly running: boolean;
  readonly standIn?: string;
}

export interface ConsumerView {
  readonly name: string;
  readonly listen: string;
  readonly ready: boolean;
  readonly acceptedRevision: string | null;
  readonly running: boolean;
}

export interface ProcessView {
  readonly name: string;
  readonly state: ProcessState;
  readonly restarts: number;
  readonly lastExit?: ExitStatus & { readonly agoMs: number };
  /** Until the pending restart (state backoff). */
  readonly nextRestartInMs?: number;
}

export interface GridSnapshot {
  readonly sites: readonly SiteView[];
  readonly providers: readonly ProviderView[];
  readonly consumers: readonly ConsumerView[];
  readonly overlays: readonly OverlayView[];
  readonly processes: readonly ProcessView[];
  /** The restart policy in words, for the table's heading. */
  readonly restartPolicy?: string;
}

/** Each long-running process's state and restarts, as the supervisor sees them now. */
export function processViews(grid: LocalGrid, now = Date.now()): ProcessView[] {
  return grid.processes.map((p) => {
    const status = grid.status(p.name);
    return {
      name: p.name,
      state: status?.state ?? 'stopped',
      restarts: status?.restarts ?? 0,
      ...(status?.lastExit !== undefined
        ? { lastExit: { code: status.lastExit.code, signal: status.lastExit.signal, agoMs: now - status.lastExit.at } }
        : {}),
      ...(status?.nextRestartAt !== undefined ? { nextRestartInMs: Math.max(0, status.nextRestartAt - now) } : {}),
    };
  });
}

async function getJson(url: string): Promise<Record<string, unknown> | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1500) });
    return response.ok ? ((await response.json()) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function getText(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1500) });
    return response.ok ? await response.text() : undefined;
  } catch {
    return undefined;
  }
}

/** Sum of a Prometheus sample family, optionally only samples whose labels contain `labelFilter`. */
export function metricSum(text: string, name: string, labelFilter?: string): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== ' ' && line[name.length] !== '{')) continue;
    if (labelFilter !== undefined && !line.includes(labelFilter)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) total = (total ?? 0) + value;
  }
  return total;
}

/** The overlays the operators rendered, read from each site's store. */
export async function readOverlays(grid: LocalGrid): Promise<OverlayView[]> {
  const out: OverlayView[] = [];
  for (const site of grid.sites) {
    let items: KubeObject[] = [];
    try {
      items = (await site.store.list(CONFIG_MAP, { labelSelector: 'app.kubernetes.io/managed-by=grid-operator' }))
        .items;
    } catch {
      continue;
    }
    for (const cm of items) {
      const text = (cm['data'] as Record<string, string> | undefined)?.['routing-overlay.json'];
      if (text === undefined) continue;
      try {
        const envelope = JSON.parse(text) as {
          revision?: { value?: string };
          overlay?: { candidates?: OverlayCandidate[] };
        };
        out.push({
          configMap: `${cm.metadata.namespace}/${cm.metadata.name}`,
          site: site.site,
          revision: envelope.revision?.value ?? '',
          candidates: envelope.overlay?.candidates ?? [],
        });
      } catch {
        // A half-written object is not possible (atomic writes); an invalid one is the operator's to report.
      }
    }
  }
  return out;
}

export async function snapshot(grid: LocalGrid): Promise<GridSnapshot> {
  const overlays = await readOverlays(grid);
  const sites: SiteView[] = [];
  const providers: ProviderView[] = [];
  for (const site of grid.sites) {
    const [gridSites, networks, inference] = await Promise.all([
      site.store.list(GRID_SITE).then(
        (r) => r.items,
        () => [] as KubeObject[],
      ),
      site.store.list(GRID_NETWORK).then(
        (r) => r.items,
        () => [] as KubeObject[],
      ),
      site.store.list(INFERENCE_PROVIDER).then(
        (r) => r.items,
        () => [] as KubeObject[],
      ),
    ]);
    const operator = grid.byRole('operator', site.site)[0];
    const status =
      operator?.adminAddress === undefined ? undefined : await getJson(`http://${operator.adminAddress}/status`);
    const members = (status?.['gossip'] as { members?: Record<string, number> } | null | undefined)?.members;
    sites.push({
      site: site.site,
      networkPhase: String((networks[0]?.['status'] as { phase?: string } | undefined)?.phase ?? '-'),
      gridSites: gridSites.map((g) => {
        const s = (g['status'] ?? {}) as { phase?: string; reason?: string };
        return { name: g.metadata.name, phase: s.phase ?? '-', reason: s.reason ?? '' };
      }),
      members:
        members === undefined
          ? '-'
          : Object.entries(members)
              .filter(([, n]) => n > 0)
              .map(([state, n]) => `${n} ${state}`)
              .join(', ') || '0',
    });
    for (const provider of inference) {
      const status = (provider['status'] ?? {}) as { phase?: string; conditions?: { type: string; status: string }[] };
      const name = provider.metadata.name;
      const sim = grid.processes.find((p) => p.role === 'sim' && p.simName === name);
      const metrics =
        sim?.listenAddress === undefined ? undefined : await getText(`http://${sim.listenAddress}/metrics`);
      const admissions = new Set(
        overlays.flatMap((o) =>
          o.candidates
            .filter((c) => c.site === site.site && c.cluster === name)
            .map((c) => `${c.admission_state}${c.fresh ? '' : ' (stale)'}`),
        ),
      );
      const waiting = metrics === undefined ? undefined : metricSum(metrics, 'vllm:num_requests_waiting');
      const running = metrics === undefined ? undefined : metricSum(metrics, 'vllm:num_requests_running');
      const kv = metrics === undefined ? undefined : metricSum(metrics, 'vllm:kv_cache_usage_perc');
      providers.push({
        site: site.site,
        name,
        phase: status.phase ?? '-',
        ready: status.conditions?.find((c) => c.type === 'Ready')?.status ?? '-',
        admission: admissions.size === 0 ? 'not in overlay' : [...admissions].join(' / '),
        queue: waiting === undefined || running === undefined ? '-' : `${waiting}/${running}`,
        kvCache: kv === undefined ? '-' : `${(kv * 100).toFixed(1)}%`,
        requests:
          (metrics === undefined
            ? undefined
            : metricSum(metrics, 'sim_requests_total', 'path="/v1/chat/completions"')) ?? 0,
        running: sim !== undefined && grid.running(sim.name) !== undefined,
        ...(sim?.standInFor !== undefined ? { standIn: sim.standInFor } : {}),
      });
    }
  }
  const consumers: ConsumerView[] = [];
  for (const consumer of grid.byRole('consumer-gateway')) {
    const status =
      consumer.adminAddress === undefined ? undefined : await getJson(`http://${consumer.adminAddress}/status`);
    consumers.push({
      name: consumer.name,
      listen: consumer.listenAddress ?? '-',
      ready: status?.['ready'] === true,
      acceptedRevision: typeof status?.['accepted_revision'] === 'string' ? status['accepted_revision'] : null,
      running: grid.running(consumer.name) !== undefined,
    });
  }
  const policy = grid.supervisor.restartPolicy;
  return {
    sites,
    providers,
    consumers,
    overlays,
    processes: processViews(grid),
    ...(policy !== undefined ? { restartPolicy: describeRestartPolicy(policy) } : {}),
  };
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ')}`.trimEnd();
  return [line(headers), ...rows.map(line)];
}

/** Where everything listens: the address table (names the manifests use) and each process's ports and log. */
export function formatAddresses(grid: LocalGrid): string {
  const lines = ['Addresses (compiled name -> loopback)'];
  lines.push(
    ...table(
      ['SCOPE', 'ADDRESS', 'LOOPBACK', 'NOTE'],
      grid.table.rows().map((r) => [r.scope, r.address, r.target, r.note ?? '']),
    ),
  );
  lines.push('Processes');
  lines.push(
    ...table(
      ['PROCESS', 'LISTEN', 'ADMIN', 'PID', 'LOG'],
      grid.processes.map((p) => [
        p.name,
        p.listenAddress ?? '-',
        p.adminAddress ?? '-',
        String(grid.running(p.name)?.pid ?? '-'),
        grid.specOf(p.name).logFile,
      ]),
    ),
  );
  return `${lines.join('\n')}\n`;
}

export function formatSnapshot(view: GridSnapshot): string {
  const lines: string[] = [];
  lines.push('Sites');
  lines.push(
    ...table(
      ['SITE', 'NETWORK', 'GOSSIP MEMBERS', 'GRIDSITES (phase)'],
      view.sites.map((s) => [
        s.site,
        s.networkPhase,
        s.members,
        s.gridSites
          .map((g) => `${g.name}=${g.phase}${g.phase !== 'Active' && g.reason !== '' ? ` (${g.reason})` : ''}`)
          .join(', '),
      ]),
    ),
  );
  lines.push('Providers');
  lines.push(
    ...table(
      ['SITE', 'PROVIDER', 'PHASE', 'READY', 'ADMISSION', 'WAIT/RUN', 'KV', 'REQUESTS', 'NOTE'],
      view.providers.map((p) => [
        p.site,
        p.name,
        p.phase,
        p.ready,
        p.admission,
        p.queue,
        p.kvCache,
        String(p.requests),
        p.standIn !== undefined ? `local sim standing in for ${p.standIn}` : p.running ? '' : 'backend stopped',
      ]),
    ),
  );
  lines.push('Consumer gateways');
  lines.push(
    ...table(
      ['GATEWAY', 'LISTEN', 'READY', 'ACCEPTED REVISION'],
      view.consumers.map((c) => [
        c.name,
        c.listen,
        c.running ? (c.ready ? 'yes' : 'no') : 'stopped',
        c.acceptedRevision === null ? '-' : c.acceptedRevision.slice(0, 12),
      ]),
    ),
  );
  lines.push(...formatProcesses(view));
  return `${lines.join('\n')}\n`;
}

/**
 * The processes section: one line while every process runs and none has restarted; otherwise a row for each process
 * that restarted or is not running (kubectl's RESTARTS column, with the pending restart of one in backoff).
 */
function formatProcesses(view: GridSnapshot): string[] {
  const heading = `Processes${view.restartPolicy !== undefined ? ` (${view.restartPolicy})` : ''}`;
  const running = view.processes.filter((p) => p.state === 'running').length;
  const restarts = view.processes.reduce((sum, p) => sum + p.restarts, 0);
  const summary = `  ${running} of ${view.processes.length} running, ${restarts} ${restarts === 1 ? 'restart' : 'restarts'}`;
  const notable = view.processes.filter((p) => p.restarts > 0 || p.state !== 'running');
  if (notable.length === 0) return [heading, summary];
  return [
    heading,
    summary,
    ...table(
      ['PROCESS', 'STATE', 'RESTARTS', 'LAST EXIT', 'NEXT RESTART'],
      notable.map((p) => [
        p.name,
        p.state,
        String(p.restarts),
        p.lastExit === undefined
          ? '-'
          : `${p.lastExit.signal ?? `status ${p.lastExit.code}`}, ${seconds(p.lastExit.agoMs)} ago`,
        p.nextRestartInMs === undefined ? '-' : `in ${seconds(p.nextRestartInMs)}`,
      ]),
    ),
  ];
}
