// Shared fixtures for the gateway tests: a temp directory with real certificates, overlays built with the
// contract's buildEnvelope, gateway/sim processes with their ports read from the JSON "listening" log lines,
// and a small HTTP client over undici (plain, TLS and mTLS).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Agent, request } from 'undici';
import { stableId } from '../../schemas/fnv1a.ts';
import { buildEnvelope, serializeOverlay } from '../../schemas/overlay/envelope.ts';
import type { OverlayCandidate, OverlayPayload } from '../../schemas/overlay/types.ts';
import {
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
} from '../../daemons/shared/tls.ts';
import type { LeafCertificate } from '../../daemons/shared/tls.ts';
import { waitFor as pollUntil } from '../../daemons/shared/wait-for.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `agn-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export interface Pki {
  caPath: string;
  providerCertPath: string;
  providerKeyPath: string;
  edgeCertPath: string;
  edgeKeyPath: string;
  edge: LeafCertificate;
  /** Signed by the same CA but not in trusted_peers. */
  strangerCertPath: string;
  strangerKeyPath: string;
  stranger: LeafCertificate;
  /** Signed by another CA: fails the TLS handshake. */
  rogueCertPath: string;
  rogueKeyPath: string;
  caPem: string;
  edgePem: { cert: string; key: string };
  strangerPem: { cert: string; key: string };
  roguePem: { cert: string; key: string };
}

export const PROVIDER_SNI = 'east1-provider.grid.internal';
export const EDGE_ORG = 'agn-edge-west';

export async function makePki(dir: string): Promise<Pki> {
  const ca = await createCertificateAuthority({ commonName: 'agn test ca', organization: 'agn' });
  const other = await createCertificateAuthority({ commonName: 'rogue ca' });
  const provider = await createServerCertificate(ca, {
    commonName: 'provider',
    organization: 'agn-provider',
    sans: [PROVIDER_SNI, 'localhost', '127.0.0.1'],
  });
  const edge = await createClientCertificate(ca, { commonName: 'edge', organization: EDGE_ORG });
  const stranger = await createClientCertificate(ca, { commonName: 'stranger', organization: 'someone-else' });
  const rogue = await createClientCertificate(other, { commonName: 'edge', organization: EDGE_ORG });
  const files: Record<string, string> = {
    'ca.crt': ca.certPem,
    'provider.crt': provider.certPem,
    'provider.key': provider.keyPem,
    'edge.crt': edge.certPem,
    'edge.key': edge.keyPem,
    'stranger.crt': stranger.certPem,
    'stranger.key': stranger.keyPem,
    'rogue.crt': rogue.certPem,
    'rogue.key': rogue.keyPem,
  };
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content, { mode: 0o600 });
  return {
    caPath: join(dir, 'ca.crt'),
    providerCertPath: join(dir, 'provider.crt'),
    providerKeyPath: join(dir, 'provider.key'),
    edgeCertPath: join(dir, 'edge.crt'),
    edgeKeyPath: join(dir, 'edge.key'),
    edge,
    strangerCertPath: join(dir, 'stranger.crt'),
    strangerKeyPath: join(dir, 'stranger.key'),
    stranger,
    rogueCertPath: join(dir, 'rogue.crt'),
    rogueKeyPath: join(dir, 'rogue.key'),
    caPem: ca.certPem,
    edgePem: { cert: edge.certPem, key: edge.keyPem },
    strangerPem: { cert: stranger.certPem, key: stranger.keyPem },
    roguePem: { cert: rogue.certPem, key: rogue.keyPem },
  };
}

export function candidate(
  name: string,
  site: string,
  cluster: string,
  extra: Partial<OverlayCandidate> = {},
): OverlayCandidate {
  return {
    kind: 'inference_model',
    name,
    site,
    cluster,
    fresh: true,
    stable_id: stableId('inference_model', name, site, cluster),
    admission_state: 'new_and_existing',
    selection_tier: 'same_site',
    ...extra,
  };
}

export function payload(
  candidates: OverlayCandidate[],
  mode?: 'deterministic' | 'roundRobin' | 'random' | 'weightedRandom',
): OverlayPayload {
  return {
    network: 'grid',
    local_site: 'west',
    candidates,
    ...(mode === undefined ? {} : { selection_policy: { mode } }),
    generated_at: new Date().toISOString(),
  };
}

export const SCOPE = { network: 'grid', gateway: 'edge', namespace: 'grid-system', local_site: 'west' };

/** Writes the envelope atomically (temp file + rename), as overlay-sync does; returns its revision. */
export async function writeOverlay(path: string, body: OverlayPayload): Promise<string> {
  const envelope = buildEnvelope({
    payload: body,
    scope: { gateway: SCOPE.gateway, namespace: SCOPE.namespace },
    provenance: {
      producer_version: 'test',
      source_uid: 'uid-1',
      source_generation: 1,
      rendered_at: new Date().toISOString(),
    },
  });
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(16).slice(2)}`;
  await writeFile(tmp, serializeOverlay(envelope));
  await rename(tmp, path);
  return envelope.revision.value;
}

export async function writeRaw(path: string, content: string): Promise<void> {
  const tmp = `${path}.tmp-${Math.random().toString(16).slice(2)}`;
  await writeFile(tmp, content);
  await rename(tmp, path);
}

/** The value of one sample line of a Prometheus text page (`name{labels}` exactly as written), or undefined if absent. */
export function metricSample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

export function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  return pollUntil(what, probe, timeoutMs, 25);
}

export interface Daemon {
  readonly proc: ChildProcess;
  readonly lines: Record<string, unknown>[];
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Ports by listener name ("admin" for the admin port, "sim" for a sim). */
  readonly ports: Map<string, number>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function spawnDaemon(script: string, args: string[], env: Record<string, string> = {}): Daemon {
  const proc = spawn(process.execPath, [join(ROOT, script), ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const lines: Record<string, unknown>[] = [];
  const ports = new Map<string, number>();
  let pending = '';
  proc.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    pending += chunk.toString();
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        lines.push(parsed);
        if (parsed['msg'] === 'listening' && typeof parsed['port'] === 'number')
          ports.set(String(parsed['listener'] ?? 'sim'), parsed['port']);
        if (parsed['msg'] === 'admin listening' && typeof parsed['admin_port'] === 'number')
          ports.set('admin', parsed['admin_port']);
      } catch {
        // not JSON: kept in stdout()
      }
    }
  });
  proc.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    proc,
    lines,
    ports,
    stdout: () => out,
    stderr: () => err,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

export async function waitForPort(daemon: Daemon, name: string, timeoutMs = 20_000): Promise<number> {
  return waitFor(
    `${name} port (stderr: ${daemon.stderr().slice(0, 400)})`,
    () => {
      if (daemon.proc.exitCode !== null) throw new Error(`process exited ${daemon.proc.exitCode}: ${daemon.stderr()}`);
      return daemon.ports.get(name);
    },
    timeoutMs,
  );
}

/** A consumer gateway started on `configPath` and ready (/readyz 200): its edge and admin base URLs. */
export async function startConsumer(
  configPath: string,
  env: Record<string, string> = {},
): Promise<{ daemon: Daemon; base: string; admin: string }> {
  const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', configPath], env);
  const base = `http://127.0.0.1:${await waitForPort(daemon, 'edge')}`;
  const admin = `http://127.0.0.1:${await waitForPort(daemon, 'admin')}`;
  await waitFor(
    'the consumer ready',
    async () => ((await call(`${admin}/readyz`)).status === 200 ? true : undefined),
    20_000,
  );
  return { daemon, base, admin };
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => any;
}

export async function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: unknown; dispatcher?: Agent } = {},
): Promise<Reply> {
  const body =
    options.body === undefined
      ? undefined
      : typeof options.body === 'string'
        ? options.body
        : JSON.stringify(options.body);
  const res = await request(url, {
    method: (options.method ?? (body === undefined ? 'GET' : 'POST')) as 'GET',
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
    ...(body === undefined ? {} : { body }),
    ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) };
}

export function chatBody(model: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'hello' }], ...extra };
}

export interface ClusterSpec {
  name: string;
  endpoints: string[];
  tls?: Record<string, unknown>;
  [key: string]: unknown;
}

export function consumerConfig(options: {
  overlayPath: string;
  clusters: ClusterSpec[];
  hops?: string[];
  scope?: Record<string, string> | null;
  affinity?: Record<string, unknown>;
  credentials?: Record<string, unknown>[];
  listener?: Record<string, unknown>;
  debounceMs?: number;
  /** intelligent_route.local_load (an extension): steer by the gateway's own in-flight requests. */
  localLoad?: boolean;
}): Record<string, unknown> {
  const filters: Record<string, unknown>[] = [
    {
      filter: 'intelligent_route',
      overlay_file: options.overlayPath,
      provider_hop_clusters: options.hops ?? [],
      ...(options.scope === null ? {} : { expected_overlay_scope: options.scope ?? SCOPE }),
      reload: { enabled: true, debounce_ms: options.debounceMs ?? 20 },
      ...(options.affinity === undefined ? {} : { session_affinity: options.affinity }),
      ...(options.localLoad === true ? { local_load: { mode: 'two_choices' } } : {}),
    },
  ];
  if (options.credentials !== undefined)
    filters.push({ filter: 'credential_inject', credentials: options.credentials });
  filters.push({ filter: 'load_balancer', clusters: options.clusters });
  return {
    listeners: [{ name: 'edge', address: '127.0.0.1:0', filter_chains: ['main'], ...options.listener }],
    filter_chains: [{ name: 'main', filters }],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
  };
}

export function providerConfig(options: {
  pki: Pki;
  routes: Record<string, unknown>[];
  credentials: Record<string, unknown>[];
  clusters: ClusterSpec[];
  trusted?: Record<string, unknown>[];
  providerId?: string;
}): Record<string, unknown> {
  const { pki } = options;
  return {
    listeners: [
      {
        name: 'provider',
        address: '127.0.0.1:0',
        filter_chains: ['provider-inference'],
        tls: {
          certificates: [{ cert_path: pki.providerCertPath, key_path: pki.providerKeyPath }],
          client_ca: { ca_path: pki.caPath },
          client_cert_mode: 'require',
        },
      },
    ],
    filter_chains: [
      {
        name: 'provider-inference',
        filters: [
          {
            filter: 'peer_identity_trust',
            trusted_peers: options.trusted ?? [{ cert_digest: pki.edge.fingerprint, organization: EDGE_ORG }],
          },
          { filter: 'provider_route', provider_id: options.providerId ?? 'east1', routes: options.routes },
          { filter: 'credential_inject', credentials: options.credentials },
          { filter: 'load_balancer', clusters: options.clusters },
        ],
      },
    ],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
  };
}
