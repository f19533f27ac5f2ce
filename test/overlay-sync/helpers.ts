// Shared by the overlay-sync suites: fixture paths, a real local store on a temp directory, an in-process
// daemon with its real HTTP health server on 127.0.0.1:0, and polling with a reason on timeout.

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { startOverlaySync, type RunningOverlaySync } from '../../daemons/overlay-sync/main.ts';
import type { OverlaySyncConfig } from '../../daemons/overlay-sync/config.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { CONFIG_MAP } from '../../daemons/shared/resource-store/index.ts';
import type { KubeObject, ResourceStore } from '../../daemons/shared/resource-store/types.ts';
import { REPO_ROOT, SHARED_FIXTURES } from '../fixtures-path.ts';

export { REPO_ROOT };
/** The shared conformance fixtures, read in place beside the repository (`../shared/fixtures`). */
export const FIXTURES_DIR = join(SHARED_FIXTURES, 'overlay-contract-v1');

export const NAMESPACE = 'grid-system';
export const CONFIGMAP = 'grid-overlay-glb-demo-glb-demo-edge-gateway';
export const DATA_KEY = 'routing-overlay.json';

export async function fixtureText(name: string): Promise<string> {
  return readFile(join(FIXTURES_DIR, name), 'utf8');
}

export async function makeTempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `agn-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

export async function poll<T>(
  read: () => Promise<T> | T,
  accept: (value: T) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await read();
    if (accept(last)) return last;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)?.slice(0, 500)}`,
      );
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function configMapObject(data: Record<string, string>, name = CONFIGMAP, namespace = NAMESPACE): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
}

/** Applies the overlay text as the operator would; returns the ConfigMap's new resourceVersion. */
export async function publish(store: ResourceStore, text: string): Promise<string> {
  const applied = await store.apply(CONFIG_MAP, configMapObject({ [DATA_KEY]: text }), {
    fieldManager: 'grid-operator',
    force: true,
  });
  return applied.metadata.resourceVersion ?? '';
}

/** Waits until the daemon has processed the ConfigMap at `resourceVersion`. */
export async function processed(daemon: TestDaemon, resourceVersion: string): Promise<Record<string, any>> {
  return poll(
    () => daemon.status(),
    (s) => s['observed']?.['resource_version'] === resourceVersion,
    `observation of resourceVersion ${resourceVersion}`,
  );
}

export interface TestDaemon {
  readonly running: RunningOverlaySync;
  readonly output: string;
  readonly logLines: string[];
  readonly base: string;
  status(): Promise<Record<string, any>>;
  metrics(): Promise<string>;
  readyz(): Promise<number>;
  close(): Promise<void>;
}

export function daemonConfig(
  stateDir: string,
  output: string,
  overrides: Partial<OverlaySyncConfig> = {},
): OverlaySyncConfig {
  return {
    contract: 'overlay',
    namespace: NAMESPACE,
    configMap: CONFIGMAP,
    dataKey: DATA_KEY,
    output,
    expectedScope: {},
    maxBytes: 1024 * 1024,
    healthAddr: '127.0.0.1:0',
    once: false,
    store: { backend: 'local', stateDir },
    ...overrides,
  };
}

export async function startTestDaemon(config: OverlaySyncConfig): Promise<TestDaemon> {
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      logLines.push(
        ...String(chunk)
          .split('\n')
          .filter((l) => l !== ''),
      );
      callback();
    },
  });
  const log = createLogger({ name: 'overlay-sync', level: 'debug', destination: sink });
  const running = await startOverlaySync(config, log);
  const base = `http://127.0.0.1:${running.admin?.port ?? 0}`;
  return {
    running,
    output: config.output,
    logLines,
    base,
    status: async () => (await (await fetch(`${base}/status`)).json()) as Record<string, any>,
    metrics: async () => (await fetch(`${base}/metrics`)).text(),
    readyz: async () => {
      const response = await fetch(`${base}/readyz`);
      await response.arrayBuffer();
      return response.status;
    },
    close: () => running.stop(),
  };
}

/** Value of one sample in Prometheus text, 0 when absent. Labels must be given in exposition order. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  const labelText = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  const prefix = labelText === '' ? `${name} ` : `${name}{${labelText}} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? 0 : Number(line.slice(prefix.length));
}
