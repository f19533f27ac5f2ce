// Benchmark: ConfigMap change -> overlay file renamed into place, on the local store or (--store kubernetes) on a
// real kube-apiserver + etcd (test/cluster/control-plane.ts starts one on loopback unless --kubeconfig names one).
//
// The overlay-sync daemon runs as a real child process (`daemons/overlay-sync/main.ts --store local`); this
// process plays the operator: it applies each new overlay revision to the shared state directory through
// its own LocalStore and times until the output file holds exactly those bytes (seen through a watch on
// the output directory, then read back and compared). Each sample therefore includes the store write
// (lock, fsyncs), the daemon's fs-event coalescing window, the read, full contract validation, the atomic
// write (fsync, rename, directory fsync) and this process's own file-watch wake-up.
//
//   npm run bench:sync -- [--updates 200] [--candidates 100] [--warmup 10] [--store local|kubernetes] [--kubeconfig PATH]
//
// With --store kubernetes the operator side is a KubernetesStore (server-side apply, admin credentials) and the
// daemon runs `--store kubernetes --kubeconfig …`: each sample adds the API server's apply, etcd and the watch
// delivery to the daemon in place of the local store's file write and fs-event wake-up.
//
// Bounded: at most 10 s per update and 180 s in total; it stops early and says so.

import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './bench-args.ts';
import { CONFIG_MAP, KubernetesStore, openLocalStore } from '../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../daemons/shared/resource-store/types.ts';
import { resolveBinDir, startControlPlane } from '../cluster/control-plane.ts';
import type { ControlPlane } from '../cluster/control-plane.ts';
import { makeOverlay, SCOPE } from '../overlay-sync/overlays.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CONFIGMAP = 'grid-overlay-glb-demo-glb-demo-edge-gateway';
const PER_UPDATE_TIMEOUT_MS = 10_000;
const TOTAL_BUDGET_MS = 180_000;

const cli = benchArgs(
  'bench:sync',
  'usage: npm run bench:sync -- [--updates 200] [--candidates 100 (0..1024)] [--warmup 10] [--store local|kubernetes] [--kubeconfig FILE]',
  {
    updates: { type: 'string' },
    candidates: { type: 'string' },
    warmup: { type: 'string' },
    store: { type: 'string' },
    kubeconfig: { type: 'string' },
  },
);
const values = { updates: '200', candidates: '100', warmup: '10', store: 'local', ...cli.values };
const storeBackend = values.store;
if (storeBackend !== 'local' && storeBackend !== 'kubernetes')
  cli.fail(`--store must be local or kubernetes, got "${storeBackend}"`);
const updates = Number(values.updates);
const candidates = Number(values.candidates);
const warmup = Number(values.warmup);
if (![updates, candidates, warmup].every((n) => Number.isInteger(n) && n >= 0) || updates < 1 || candidates > 1024) {
  cli.fail(
    `--updates is a whole number of at least 1, --candidates 0 to 1024 and --warmup a whole number, got ${updates}, ${candidates}, ${warmup}`,
  );
}

function percentile(sorted: number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

const dir = await mkdtemp(join(tmpdir(), 'agn-sync-bench-'));
const stateDir = join(dir, 'state');
const output = join(dir, 'run', 'routing-overlay.json');
let plane: ControlPlane | undefined;
let operator: ResourceStore;
let storeArgs: string[];
if (storeBackend === 'kubernetes') {
  let kubeconfigPath = values.kubeconfig;
  if (kubeconfigPath === undefined) {
    const planeStarted = performance.now();
    plane = await startControlPlane({ binDir: resolveBinDir() });
    kubeconfigPath = plane.kubeconfigPath;
    console.log(
      `control plane (kube-apiserver + etcd on loopback) ready in ${((performance.now() - planeStarted) / 1000).toFixed(1)} s`,
    );
  }
  operator = new KubernetesStore({ kubeconfigPath });
  const NAMESPACE_KIND = { apiVersion: 'v1', kind: 'Namespace', plural: 'namespaces', namespaced: false };
  await operator.apply(
    NAMESPACE_KIND,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: SCOPE.namespace } },
    { fieldManager: 'sync-bench' },
  );
  storeArgs = ['--store', 'kubernetes', '--kubeconfig', kubeconfigPath];
} else {
  operator = await openLocalStore({ stateDir });
  storeArgs = ['--store', 'local', '--state', stateDir];
}
const daemon = spawn(
  process.execPath,
  [
    join(REPO_ROOT, 'daemons/overlay-sync/main.ts'),
    ...storeArgs,
    '--namespace',
    SCOPE.namespace,
    '--configmap',
    CONFIGMAP,
    '--output',
    output,
    '--expected-network',
    SCOPE.network,
    '--expected-gateway',
    SCOPE.gateway,
    '--expected-namespace',
    SCOPE.namespace,
    '--expected-local-site',
    SCOPE.local_site,
    '--health-addr',
    '127.0.0.1:0',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'info' } },
);
let daemonLog = '';
daemon.stdout.setEncoding('utf8').on('data', (chunk: string) => {
  // Keep only the tail: the daemon logs one line per write.
  daemonLog = (daemonLog + chunk).slice(-20_000);
});

async function waitFor(condition: () => Promise<boolean> | boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Resolves when the output file holds exactly `expected`, woken by renames in its directory. */
function fileBecomes(expected: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (error?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      watcher.close();
      if (error === undefined) resolve();
      else reject(error);
    };
    const check = (): void => {
      readFile(output, 'utf8').then(
        (text) => {
          if (text === expected) finish();
        },
        () => undefined,
      );
    };
    const watcher = watch(dirname(output), (_event, name) => {
      if (name === 'routing-overlay.json') check();
    });
    const timer = setTimeout(() => finish(new Error(`file not updated within ${timeoutMs} ms`)), timeoutMs);
    check();
  });
}

const startedAt = Date.now();
const loadBefore = loadavg();
const samples: number[] = [];
const applySamples: number[] = [];
let stoppedEarly: string | undefined;
try {
  await waitFor(() => daemonLog.includes('"msg":"overlay-sync started"'), 'daemon start', 30_000);
  await import('node:fs/promises').then((fs) => fs.mkdir(dirname(output), { recursive: true }));
  const documents = Array.from({ length: warmup + updates }, (_, i) => makeOverlay(i, candidates));
  for (let i = 0; i < documents.length; i += 1) {
    if (Date.now() - startedAt > TOTAL_BUDGET_MS) {
      stoppedEarly = `total budget of ${TOTAL_BUDGET_MS} ms reached after ${samples.length} measured updates`;
      break;
    }
    const text = documents[i]!;
    const arrived = fileBecomes(text, PER_UPDATE_TIMEOUT_MS);
    const t0 = performance.now();
    await operator.apply(
      CONFIG_MAP,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: CONFIGMAP, namespace: SCOPE.namespace },
        data: { 'routing-overlay.json': text },
      },
      { fieldManager: 'grid-operator', force: true },
    );
    const t1 = performance.now();
    await arrived;
    const t2 = performance.now();
    if (i >= warmup) {
      samples.push(t2 - t0);
      applySamples.push(t1 - t0);
    }
  }
} finally {
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  await operator.close();
  await plane?.stop();
  await rm(dir, { recursive: true, force: true });
}

const sorted = [...samples].sort((a, b) => a - b);
const applySorted = [...applySamples].sort((a, b) => a - b);
const fmt = (ms: number): string => ms.toFixed(1);
const bytes = Buffer.byteLength(makeOverlay(0, candidates));
console.log(
  `overlay-sync benchmark: ConfigMap change -> file renamed (${storeBackend === 'kubernetes' ? `kubernetes store, ${plane ? 'kube-apiserver v1.31.14 + etcd v3.5.14 started on loopback' : `cluster of ${values.kubeconfig}`}` : 'local store'}, daemon in a child process)`,
);
console.log(
  `node ${process.version}, ${cpus().length} cores, load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(
  `updates measured: ${samples.length} (after ${warmup} warm-up), overlay size ${bytes} bytes (${candidates} candidates)`,
);
if (sorted.length > 0) {
  console.log(
    `change -> file renamed  p50 ${fmt(percentile(sorted, 50))} ms  p90 ${fmt(percentile(sorted, 90))} ms  p99 ${fmt(percentile(sorted, 99))} ms  max ${fmt(sorted[sorted.length - 1]!)} ms  mean ${fmt(sorted.reduce((a, b) => a + b, 0) / sorted.length)} ms`,
  );
  console.log(
    `  of which store apply  p50 ${fmt(percentile(applySorted, 50))} ms  p99 ${fmt(percentile(applySorted, 99))} ms`,
  );
}
if (stoppedEarly !== undefined) console.log(`stopped early: ${stoppedEarly}`);
console.log(`wall time ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
