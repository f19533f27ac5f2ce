// The node suite's view of a container's end, for the stop, signal and usage checks: containerd's task exit events
// (exit status and the nanosecond exit time, which the kubelet's status rounds to the second), the kubelet's own
// report of a pod's containers while it is being deleted (a watch on the API server; the pod is gone right after), a
// closed-loop load run in a node's network namespace, and the raw CRI log the kubelet writes (which keeps stdout and
// stderr apart; `kubectl logs` merges them).
import { type ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:https';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inNetns } from '../child-daemon.ts';
import type { NodeCluster } from './node-cluster.ts';

export interface ContainerStatus {
  name: string;
  ready: boolean;
  restartCount: number;
  containerID?: string;
  image?: string;
  imageID?: string;
  state: { running?: unknown; terminated?: { exitCode: number; reason?: string } };
  lastState?: { terminated?: { exitCode: number; reason?: string; startedAt?: string; finishedAt?: string } };
}

export interface PodStatus {
  metadata: { name: string; uid: string; deletionTimestamp?: string; labels?: Record<string, string> };
  spec: { containers: { name: string; image: string; command?: string[]; args?: string[] }[] };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: ContainerStatus[];
  };
}

/** The id containerd knows a container by (pod status: `containerd://<id>`). */
export function containerdId(status: ContainerStatus | undefined): string {
  const id = status?.containerID?.replace(/^containerd:\/\//u, '') ?? '';
  if (id === '') throw new Error(`container ${status?.name ?? '?'} has no containerID`);
  return id;
}

/** Lines of a long-running command's stdout, as they come, until stop(). */
function stream(argv: readonly string[], onLine: (line: string) => void): { stop(): void; child: ChildProcess } {
  const [command = '', ...args] = argv;
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let rest = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    rest += chunk;
    const lines = rest.split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  });
  return {
    child,
    stop: () => {
      if (child.exitCode === null && child.pid !== undefined) child.kill('SIGTERM');
    },
  };
}

export interface TaskExit {
  readonly containerId: string;
  readonly exitStatus: number;
  /** ms since the epoch (containerd's clock is this machine's). */
  readonly exitedAt: number;
}

export interface TaskExits {
  /** The exit of a container's init process (PID 1), once containerd reports it. */
  exitOf(containerId: string, timeoutMs: number): Promise<TaskExit>;
  stop(): void;
}

/**
 * containerd's `/tasks/exit` events of a node from now on (`ctr events`). `ctr` prints each event as Go's JSON of
 * the protobuf message, which omits a zero exit_status: absent means 0.
 */
export async function watchTaskExits(site: NodeCluster): Promise<TaskExits> {
  const exits = new Map<string, TaskExit>();
  const waiters = new Map<string, () => void>();
  const watcher = stream(
    inNetns(site.netns, ['ctr', `--address=${site.containerdSocket}`, '--namespace=k8s.io', 'events']),
    (line) => {
      if (!line.includes(' /tasks/exit ')) return;
      const event = JSON.parse(line.slice(line.indexOf('{'))) as {
        container_id: string;
        id: string;
        exit_status?: number;
        exited_at: string;
      };
      // An exec'd process (kubectl exec) exits with its own id; the container's PID 1 has the container's.
      if (event.id !== event.container_id) return;
      exits.set(event.container_id, {
        containerId: event.container_id,
        exitStatus: event.exit_status ?? 0,
        exitedAt: Date.parse(event.exited_at),
      });
      waiters.get(event.container_id)?.();
    },
  );
  // `ctr events` subscribes as it starts; give it that moment so no exit is missed.
  await new Promise((resolve) => setTimeout(resolve, 500));
  if (watcher.child.exitCode !== null) throw new Error(`ctr events exited: ${String(watcher.child.exitCode)}`);
  return {
    exitOf: (containerId, timeoutMs) =>
      new Promise((resolve, reject) => {
        const settle = (): boolean => {
          const exit = exits.get(containerId);
          if (exit === undefined) return false;
          clearTimeout(timer);
          waiters.delete(containerId);
          resolve(exit);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(containerId);
          reject(new Error(`no exit of container ${containerId} from containerd in ${timeoutMs} ms`));
        }, timeoutMs);
        if (!settle()) waiters.set(containerId, () => void settle());
      }),
    stop: watcher.stop,
  };
}

/**
 * What the kubelet reports of a pod's containers' ends while the pod is deleted: a watch of the pod on the API server
 * sees every update, among them the kubelet's status with each container `terminated` (exit code), written just
 * before the kubelet removes the pod. Resolves once the watch has its first event (the pod as it is now).
 */
export function watchTerminations(
  site: NodeCluster,
  namespace: string,
  pod: string,
): Promise<{ exitCodes: Map<string, number>; stop(): void }> {
  const exitCodes = new Map<string, number>();
  const path = `/api/v1/namespaces/${namespace}/pods?watch=true&fieldSelector=${encodeURIComponent(`metadata.name=${pod}`)}`;
  return new Promise((resolve, reject) => {
    const req = request(
      `${site.server}${path}`,
      { ca: site.adminTls.ca, cert: site.adminTls.cert, key: site.adminTls.key, agent: false },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`watch of pod ${namespace}/${pod}: HTTP ${String(res.statusCode)}`));
          res.resume();
          return;
        }
        let rest = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          rest += chunk;
          const lines = rest.split('\n');
          rest = lines.pop() ?? '';
          for (const line of lines) {
            if (line.trim() === '') continue;
            const event = JSON.parse(line) as { object?: { status?: { containerStatuses?: ContainerStatus[] } } };
            for (const status of event.object?.status?.containerStatuses ?? [])
              if (status.state.terminated !== undefined) exitCodes.set(status.name, status.state.terminated.exitCode);
            resolve(watch);
          }
        });
        res.on('error', () => undefined);
      },
    );
    const watch = { exitCodes, stop: () => req.destroy() };
    req.on('error', reject);
    req.end();
  });
}

export interface LoadOutcome {
  counts: { ok: number; failed: number };
  failures: string[];
  ms: number;
  /** What ended it: the stop file, or a bound on count or time. */
  by: 'stop' | 'bound';
}

/**
 * Chat completions in a closed loop from the node's network namespace (`clients` loops, each request on a connection
 * of its own, so a request the gateway accepted and then dropped counts as a failure), until end() (or 240 s).
 */
export function startLoad(
  site: NodeCluster,
  url: string,
  key: string,
  clients: number,
): { end(): Promise<LoadOutcome> } {
  const stopFile = join(site.workDir, `load-${Date.now()}.stop`);
  const script = loadScript(url, key, stopFile, clients, Number.MAX_SAFE_INTEGER, 240_000);
  const done = site.inNode([process.execPath, '--input-type=module', '-e', script], { timeoutMs: 260_000 });
  return {
    end: async () => {
      writeFileSync(stopFile, '');
      const result = await done;
      if (result.code !== 0) throw new Error(`load in ${site.netns}: exit ${String(result.code)}: ${result.stderr}`);
      return JSON.parse(result.stdout) as LoadOutcome;
    },
  };
}

/** `count` chat completions in a row from the node's namespace; the answering sims, or undefined at the first non-200. */
export async function completionsInARow(
  site: NodeCluster,
  url: string,
  key: string,
  count: number,
): Promise<string[] | undefined> {
  const body = JSON.stringify({ model: 'sim-model-v1', messages: [{ role: 'user', content: 'hello' }] });
  const result = await site.inNode(
    [
      process.execPath,
      '--input-type=module',
      '-e',
      `const out = [];
for (let i = 0; i < ${count}; i++) {
  const r = await fetch(${JSON.stringify(url)}, { method: 'POST', body: ${JSON.stringify(body)},
    signal: AbortSignal.timeout(20000),
    headers: { authorization: ${JSON.stringify(`Bearer ${key}`)}, 'content-type': 'application/json' } });
  if (r.status !== 200) { process.stdout.write('null'); process.exit(0); }
  out.push((await r.json()).system_fingerprint);
}
process.stdout.write(JSON.stringify(out));`,
    ],
    { timeoutMs: 60_000 },
  );
  if (result.code !== 0) return undefined;
  return (JSON.parse(result.stdout) as string[] | null) ?? undefined;
}

/** The lines of a container's CRI log file (`<time> <stdout|stderr> <F|P> <text>`), with their stream. */
export function criLog(
  site: NodeCluster,
  namespace: string,
  pod: string,
  container: string,
): { stream: string; text: string }[] {
  const podLogs = join(site.workDir, 'pod-logs');
  const dir = readdirSync(podLogs).find((d) => d.startsWith(`${namespace}_${pod}_`));
  if (dir === undefined) throw new Error(`no log directory of ${namespace}/${pod} in ${podLogs}`);
  const file = join(podLogs, dir, container, '0.log');
  if (!existsSync(file)) throw new Error(`${file} is missing`);
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const [, stream = '', , ...text] = l.split(' ');
      return { stream, text: text.join(' ') };
    });
}

const LOAD_BODY = JSON.stringify({
  model: 'sim-model-v1',
  messages: [{ role: 'user', content: 'hello under load' }],
});

/**
 * A closed-loop load of chat completions: `clients` loops, each request on a connection of its own (so a request
 * the gateway accepted and then dropped shows as a failure, not as a retry on another connection), until
 * `stopFile` exists, `maxRequests` were sent or `maxMs` passed. Prints the outcome as JSON.
 */
export function loadScript(
  url: string,
  key: string,
  stopFile: string,
  clients: number,
  maxRequests: number,
  maxMs: number,
): string {
  return `import { request } from 'node:http';
import { existsSync } from 'node:fs';
const body = ${JSON.stringify(LOAD_BODY)};
const counts = { ok: 0, failed: 0 };
const failures = [];
const started = Date.now();
let sent = 0;
const chat = () => new Promise((resolve) => {
  const req = request(${JSON.stringify(url)}, { method: 'POST', agent: false, timeout: 20000, headers: {
    authorization: ${JSON.stringify(`Bearer ${key}`)}, 'content-type': 'application/json',
    'content-length': Buffer.byteLength(body), connection: 'close' } }, (res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (c) => (text += c));
    res.on('end', () => resolve(res.statusCode === 200 ? null : 'HTTP ' + res.statusCode + ': ' + text.slice(0, 160)));
    res.on('error', (e) => resolve('response: ' + (e.code ?? '') + ' ' + e.message));
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => resolve((e.code ?? '') + ' ' + e.message + ' after ' + (Date.now() - started) + ' ms'));
  req.end(body);
});
const loop = async () => {
  while (!existsSync(${JSON.stringify(stopFile)}) && sent < ${maxRequests} && Date.now() - started < ${maxMs}) {
    sent++;
    const failure = await chat();
    if (failure === null) counts.ok++;
    else { counts.failed++; failures.push(failure); }
  }
};
await Promise.all(Array.from({ length: ${clients} }, loop));
process.stdout.write(JSON.stringify({ counts, failures: failures.slice(0, 20), ms: Date.now() - started,
  by: existsSync(${JSON.stringify(stopFile)}) ? 'stop' : 'bound' }));`;
}
