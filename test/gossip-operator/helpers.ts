// Shared parts of the operator suites: a real backend (Prometheus metrics with a settable queue depth, /health,
// /v1/models, an MCP tools/list endpoint), manifest templates rendered into temp directories, state-file readers
// for the local store, a poll-with-timeout that says what it waited for, and in-process operator start.
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../daemons/shared/log.ts';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import type { OperatorConfig } from '../../daemons/gossip-operator/config.ts';
import { startOperator, type OperatorHandle, type OperatorOptions } from '../../daemons/gossip-operator/operator.ts';
import { validateCustomResource } from '../../schemas/crds/validate.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { waitFor as pollUntil } from '../../daemons/shared/wait-for.ts';

export const OPERATOR_FIXTURES = join(REPO_ROOT, 'test/fixtures/operator');

export interface Backend {
  readonly url: string;
  queueDepth: number;
  healthStatus: number;
  models: string[];
  tools: string[];
  mcpStatus: number;
  /** Authorization headers seen, per path. */
  readonly authorizations: Map<string, string | undefined>;
  close(): Promise<void>;
}

export async function startBackend(): Promise<Backend> {
  const state = { queueDepth: 0.1, healthStatus: 200, models: ['qwen3'], tools: ['database-query'], mcpStatus: 200 };
  const authorizations = new Map<string, string | undefined>();
  const body = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => resolve(text));
    });
  const server: Server = createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    authorizations.set(path, req.headers.authorization);
    if (path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(`# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting ${backend.queueDepth}\n`);
    } else if (path === '/health') {
      res.writeHead(backend.healthStatus);
      res.end('ok');
    } else if (path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: backend.models.map((id) => ({ id, object: 'model' })) }));
    } else if (path === '/mcp' && req.method === 'POST') {
      // A session-less MCP server of the 2025-06-18 revision: refuses server/discover, answers the handshake.
      const request = JSON.parse(await body(req)) as { id?: number; method?: string };
      if (backend.mcpStatus !== 200) {
        res.writeHead(backend.mcpStatus);
        res.end();
        return;
      }
      if (request.method === 'server/discover') {
        res.writeHead(400);
        res.end();
        return;
      }
      if (request.id === undefined) {
        res.writeHead(202);
        res.end();
        return;
      }
      const result =
        request.method === 'initialize'
          ? {
              protocolVersion: '2025-06-18',
              capabilities: { tools: {} },
              serverInfo: { name: 'fake-backend', version: '0' },
            }
          : { tools: backend.tools.map((name) => ({ name })) };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: request.id, result }));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const backend: Backend = {
    url: `http://127.0.0.1:${port}`,
    ...state,
    authorizations,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return backend;
}

export function renderTemplate(template: string, vars: Record<string, string>): string {
  return template.replace(/\$\{([A-Z_]+)\}/g, (_whole, name: string) => {
    const value = vars[name];
    if (value === undefined) throw new Error(`template variable ${name} has no value`);
    return value;
  });
}

export async function renderFixture(fixture: string, vars: Record<string, string>, destDir: string): Promise<void> {
  await mkdir(destDir, { recursive: true });
  const text = await readFile(join(OPERATOR_FIXTURES, fixture), 'utf8');
  await writeFile(join(destDir, fixture.replace(/\//g, '_')), renderTemplate(text, vars));
}

export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `agn-${prefix}-`));
  // Retries cover a write the local store may still finish after close (an in-flight manifest import).
  return { path, remove: () => rm(path, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }) };
}

export function statePath(
  stateDir: string,
  group: string,
  kind: string,
  namespace: string | undefined,
  name: string,
): string {
  return join(stateDir, 'objects', group, kind, namespace ?? '_cluster', `${name}.json`);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function readStateObject(
  stateDir: string,
  group: string,
  kind: string,
  namespace: string | undefined,
  name: string,
): Promise<any> {
  try {
    return JSON.parse(await readFile(statePath(stateDir, group, kind, namespace, name), 'utf8'));
  } catch {
    return undefined;
  }
}

export const grid = (stateDir: string, kind: string, name: string) =>
  readStateObject(stateDir, 'grid.praxis.fast', kind, undefined, name);
export const configMap = (stateDir: string, namespace: string, name: string) =>
  readStateObject(stateDir, 'core', 'ConfigMap', namespace, name);

export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
): Promise<T> {
  return pollUntil(what, probe, timeoutMs, 50);
}

/** A logger that keeps every line, so tests can assert what was (and was not) logged. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  });
  return { logger: createLogger({ name: 'gossip-operator-test', level: 'debug', destination }), lines };
}

export function testConfig(
  overrides: Partial<OperatorConfig> & Pick<OperatorConfig, 'site' | 'store'>,
): OperatorConfig {
  return {
    namespace: 'grid-system',
    identity: `${overrides.site}-op`,
    gossipBind: { host: '127.0.0.1', port: 0 },
    seeds: [],
    gatewayAddress: '',
    adminAddress: '127.0.0.1:0',
    swimProfile: 'loopback',
    leaderElection: false,
    leaseDurationMs: 3_000,
    leaseName: 'gossip-operator-leader',
    sitePollIntervalMs: 1_000,
    providerPollIntervalMs: 1_000,
    modelDiscoveryIntervalMs: 500,
    modelDiscoveryTtlMs: 5_000,
    discoveryVerificationWindowMs: 0,
    logLevel: 'debug',
    dashboard: { access: 'open' },
    dashboardTargets: [],
    ...overrides,
  };
}

export interface LocalOperator {
  readonly operator: OperatorHandle;
  readonly store: LocalStore;
  readonly lines: string[];
  stop(): Promise<void>;
}

/** An in-process operator on its own local store (stateDir, optionally importing manifestsDir). */
export async function startLocalOperator(
  config: OperatorConfig,
  dirs: { stateDir: string; manifestsDir?: string },
  extra: Partial<OperatorOptions> = {},
): Promise<LocalOperator> {
  const store = await openLocalStore({
    stateDir: dirs.stateDir,
    ...(dirs.manifestsDir !== undefined ? { manifestsDir: dirs.manifestsDir } : {}),
    coalesceMs: 5,
    rescanIntervalMs: 1_000,
  });
  const { logger, lines } = capturingLogger();
  const operator = await startOperator({ config, logger, store, retryPeriodMs: 200, ...extra });
  return {
    operator,
    store,
    lines,
    async stop() {
      await operator.stop();
      await store.close();
    },
  };
}

/**
 * Every Grid object in a state directory, status included, checked against its CRD schema: what the operator
 * wrote must be what an API server would accept. Returns "Kind/name path: message" lines (empty when all pass).
 */
export async function schemaProblems(stateDir: string): Promise<string[]> {
  const base = join(stateDir, 'objects', 'grid.praxis.fast');
  const problems: string[] = [];
  for (const kind of await readdir(base).catch(() => [] as string[])) {
    for (const file of await readdir(join(base, kind, '_cluster')).catch(() => [] as string[])) {
      // The store writes a hidden temp file and renames it over the object: one seen mid-write is not an object.
      if (file.startsWith('.')) continue;
      const text = await readFile(join(base, kind, '_cluster', file), 'utf8').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
      if (text === undefined) continue;
      const object = JSON.parse(text) as { metadata: Record<string, unknown> };
      const {
        managedFields: _m,
        resourceVersion: _r,
        uid: _u,
        creationTimestamp: _c,
        generation: _g,
        ...metadata
      } = object.metadata;
      for (const issue of validateCustomResource({ ...object, metadata }))
        problems.push(`${kind}/${file} ${issue.path}: ${issue.message}`);
    }
  }
  return problems;
}

/** A loopback TCP port that was free a moment ago (for listeners a test must name before the process starts). */
export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
