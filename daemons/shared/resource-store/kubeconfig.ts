// Where the daemons find the API server and how they authenticate to it: the in-cluster ServiceAccount, or a
// kubeconfig (the file kubectl reads). Our own reader instead of @kubernetes/client-node's KubeConfig: that class
// statically imports the library's 50 MB of generated API clients, 21 MB of which the image had to carry for three
// methods. What kubectl supports for a server-side daemon is here: certificate authority (file or data), client
// certificates (file or data), bearer tokens (inline or a file re-read as it rotates), basic auth, exec credential
// plugins (client.authentication.k8s.io v1 and v1beta1), tls-server-name and insecure-skip-tls-verify. The legacy
// `auth-provider` plugins (gcp, azure, oidc) and `proxy-url` are refused by name, never silently ignored.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ResourceStoreError } from './errors.ts';

/** What KubeHttp needs from a configuration: the server and per-request credentials. */
export interface KubeAuthSource {
  getCurrentCluster(): { readonly server: string } | null;
  /** Sets TLS trust, client certificate and Authorization on one request's options (credentials may rotate). */
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** A rotated token file is re-read at most this often (the kubelet refreshes it well before expiry). */
const TOKEN_FILE_REREAD_MS = 10_000;
const EXEC_TIMEOUT_MS = 30_000;
/** An exec credential is refreshed this long before its expirationTimestamp. */
const EXEC_EXPIRY_MARGIN_MS = 10_000;
const EXEC_API_VERSIONS = new Set(['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']);

interface ExecConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly apiVersion: string;
  readonly provideClusterInfo: boolean;
  readonly installHint?: string;
}

/** The resolved current context: one cluster and one user, every file path already made absolute. */
export interface ResolvedKubeContext {
  readonly contextName: string;
  readonly namespace?: string;
  readonly server: string;
  readonly ca?: Buffer;
  readonly tlsServerName?: string;
  readonly insecureSkipTlsVerify: boolean;
  readonly clientCert?: Buffer;
  readonly clientKey?: Buffer;
  readonly token?: string;
  readonly tokenFile?: string;
  readonly basic?: { readonly username: string; readonly password: string };
  readonly exec?: ExecConfig;
}

function invalid(message: string): ResourceStoreError {
  return new ResourceStoreError('invalid', message);
}

function record(value: unknown, where: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${where} is not a mapping`);
  return value as Record<string, unknown>;
}

function optionalString(o: Record<string, unknown>, key: string, where: string): string | undefined {
  const value = o[key];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw invalid(`${where}.${key} is not a string`);
  return value;
}

/** kubectl's merge of several kubeconfig files: the first file to set current-context or a named entry wins. */
interface KubeconfigFile {
  readonly path: string;
  readonly currentContext?: string;
  readonly clusters: ReadonlyMap<string, Record<string, unknown>>;
  readonly users: ReadonlyMap<string, Record<string, unknown>>;
  readonly contexts: ReadonlyMap<string, Record<string, unknown>>;
}

function namedEntries(
  doc: Record<string, unknown>,
  list: string,
  field: string,
  path: string,
): Map<string, Record<string, unknown> & { readonly $dir: string }> {
  const out = new Map<string, Record<string, unknown> & { readonly $dir: string }>();
  const items = doc[list];
  if (items === undefined || items === null) return out;
  if (!Array.isArray(items)) throw invalid(`${path}: ${list} is not a list`);
  items.forEach((item, i) => {
    const entry = record(item, `${path}: ${list}[${i}]`);
    const name = entry['name'];
    if (typeof name !== 'string' || name === '') throw invalid(`${path}: ${list}[${i}].name is missing`);
    // File paths inside an entry are relative to the file that declared it.
    if (!out.has(name))
      out.set(name, { ...record(entry[field] ?? {}, `${path}: ${list}[${i}].${field}`), $dir: dirname(path) });
  });
  return out;
}

export function parseKubeconfig(text: string, path: string): KubeconfigFile {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw invalid(`${path}: not YAML (${(error as Error).message.split('\n')[0]})`);
  }
  if (doc === null || doc === undefined) doc = {};
  const o = record(doc, path);
  return {
    path,
    currentContext: optionalString(o, 'current-context', path),
    clusters: namedEntries(o, 'clusters', 'cluster', path),
    users: namedEntries(o, 'users', 'user', path),
    contexts: namedEntries(o, 'contexts', 'context', path),
  };
}

function mergeFiles(files: readonly KubeconfigFile[]): KubeconfigFile {
  const pick = (key: 'clusters' | 'users' | 'contexts') => {
    const merged = new Map<string, Record<string, unknown>>();
    for (const file of files) for (const [name, entry] of file[key]) if (!merged.has(name)) merged.set(name, entry);
    return merged;
  };
  return {
    path: files.map((f) => f.path).join(delimiter),
    currentContext: files.find((f) => f.currentContext !== undefined)?.currentContext,
    clusters: pick('clusters'),
    users: pick('users'),
    contexts: pick('contexts'),
  };
}

function fileOrData(
  entry: Record<string, unknown>,
  fileKey: string,
  dataKey: string,
  where: string,
): Buffer | undefined {
  const data = optionalString(entry, dataKey, where);
  if (data !== undefined) return Buffer.from(data, 'base64');
  const file = optionalString(entry, fileKey, where);
  if (file === undefined) return undefined;
  const path = isAbsolute(file) ? file : join(entry['$dir'] as string, file);
  try {
    return readFileSync(path);
  } catch (error) {
    throw invalid(
      `${where}.${fileKey}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
}

function execConfig(value: unknown, where: string): ExecConfig {
  const o = record(value, where);
  const command = optionalString(o, 'command', where);
  if (command === undefined) throw invalid(`${where}.command is missing`);
  const apiVersion = optionalString(o, 'apiVersion', where) ?? 'client.authentication.k8s.io/v1';
  if (!EXEC_API_VERSIONS.has(apiVersion))
    throw invalid(
      `${where}.apiVersion "${apiVersion}" is not supported (use client.authentication.k8s.io/v1 or v1beta1)`,
    );
  const args = o['args'] ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
    throw invalid(`${where}.args is not a list of strings`);
  const env = o['env'] ?? [];
  if (!Array.isArray(env)) throw invalid(`${where}.env is not a list`);
  const pairs = env.map((e, i) => {
    const pair = record(e, `${where}.env[${i}]`);
    if (typeof pair['name'] !== 'string' || typeof pair['value'] !== 'string')
      throw invalid(`${where}.env[${i}] needs a string name and value`);
    return { name: pair['name'], value: pair['value'] };
  });
  return {
    command: isAbsolute(command) || !command.includes('/') ? command : join(o['$dir'] as string, command),
    args: args as string[],
    env: pairs,
    apiVersion,
    provideClusterInfo: o['provideClusterInfo'] === true,
    installHint: optionalString(o, 'installHint', where),
  };
}

/** Resolves one context of merged kubeconfig files (`context` overrides current-context). */
export function resolveContext(config: KubeconfigFile, context?: string): ResolvedKubeContext {
  const contextName = context ?? config.currentContext;
  if (contextName === undefined) throw invalid(`${config.path}: no current-context (set one, or pass --context)`);
  const ctx = config.contexts.get(contextName);
  if (ctx === undefined) throw invalid(`${config.path}: context "${contextName}" is not defined`);
  const clusterName = optionalString(ctx, 'cluster', `context "${contextName}"`);
  if (clusterName === undefined) throw invalid(`${config.path}: context "${contextName}" names no cluster`);
  const cluster = config.clusters.get(clusterName);
  if (cluster === undefined)
    throw invalid(`${config.path}: cluster "${clusterName}" of context "${contextName}" is not defined`);
  const where = `cluster "${clusterName}"`;
  const server = optionalString(cluster, 'server', where);
  if (server === undefined) throw invalid(`${config.path}: ${where} has no server`);
  try {
    const url = new URL(server);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('not http(s)');
  } catch {
    throw invalid(`${config.path}: ${where}.server "${server}" is not an http(s) URL`);
  }
  if (optionalString(cluster, 'proxy-url', where) !== undefined)
    throw invalid(`${config.path}: ${where}.proxy-url is not supported`);
  const userName = optionalString(ctx, 'user', `context "${contextName}"`);
  const user = userName === undefined ? { $dir: '' } : config.users.get(userName);
  if (user === undefined)
    throw invalid(`${config.path}: user "${userName}" of context "${contextName}" is not defined`);
  const userWhere = `user "${userName ?? ''}"`;
  if (user['auth-provider'] !== undefined && user['auth-provider'] !== null) {
    const provider = (user['auth-provider'] as { name?: unknown }).name;
    throw invalid(
      `${config.path}: ${userWhere} uses auth-provider "${String(provider)}", which is not supported (use an exec credential plugin, as kubectl does since 1.26)`,
    );
  }
  const clientCert = fileOrData(user, 'client-certificate', 'client-certificate-data', `${config.path}: ${userWhere}`);
  const clientKey = fileOrData(user, 'client-key', 'client-key-data', `${config.path}: ${userWhere}`);
  if ((clientCert === undefined) !== (clientKey === undefined))
    throw invalid(
      `${config.path}: ${userWhere} has a client certificate without its key, or a key without its certificate`,
    );
  const tokenFile = optionalString(user, 'tokenFile', userWhere);
  const username = optionalString(user, 'username', userWhere);
  const password = optionalString(user, 'password', userWhere);
  return {
    contextName,
    namespace: optionalString(ctx, 'namespace', `context "${contextName}"`),
    server,
    ca: fileOrData(cluster, 'certificate-authority', 'certificate-authority-data', `${config.path}: ${where}`),
    tlsServerName: optionalString(cluster, 'tls-server-name', where),
    insecureSkipTlsVerify: cluster['insecure-skip-tls-verify'] === true,
    clientCert,
    clientKey,
    token: optionalString(user, 'token', userWhere),
    tokenFile:
      tokenFile === undefined ? undefined : isAbsolute(tokenFile) ? tokenFile : join(user['$dir'] as string, tokenFile),
    basic: username !== undefined && password !== undefined ? { username, password } : undefined,
    exec:
      user['exec'] === undefined || user['exec'] === null
        ? undefined
        : execConfig(
            { ...record(user['exec'], `${config.path}: ${userWhere}.exec`), $dir: user['$dir'] },
            `${config.path}: ${userWhere}.exec`,
          ),
  };
}

interface ExecCredential {
  readonly token?: string;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly expiresAtMs: number;
}

/** Runs an exec credential plugin the way kubectl does and reads its ExecCredential. */
function runExecPlugin(exec: ExecConfig, context: ResolvedKubeContext): Promise<ExecCredential> {
  const spec: Record<string, unknown> = { interactive: false };
  if (exec.provideClusterInfo) {
    spec['cluster'] = {
      server: context.server,
      ...(context.tlsServerName === undefined ? {} : { 'tls-server-name': context.tlsServerName }),
      ...(context.ca === undefined ? {} : { 'certificate-authority-data': context.ca.toString('base64') }),
      'insecure-skip-tls-verify': context.insecureSkipTlsVerify,
    };
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion: exec.apiVersion, kind: 'ExecCredential', spec }),
  };
  for (const { name, value } of exec.env) env[name] = value;
  const named = `exec credential plugin "${exec.command}"`;
  return new Promise((resolve, reject) => {
    execFile(
      exec.command,
      [...exec.args],
      { env, timeout: EXEC_TIMEOUT_MS, maxBuffer: 1024 * 1024, encoding: 'utf8' },
      (error, stdout) => {
        // Neither stdout nor stderr goes into the error: a plugin's output may carry the credential itself.
        if (error !== null) {
          const code = (error as NodeJS.ErrnoException).code;
          const why =
            code === 'ENOENT'
              ? `not found${exec.installHint === undefined ? '' : ` (${exec.installHint.trim()})`}`
              : error.killed
                ? `gave no answer within ${EXEC_TIMEOUT_MS} ms`
                : `failed (exit ${String(code ?? error.signal)})`;
          reject(new ResourceStoreError('forbidden', `${named} ${why}`));
          return;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(stdout);
        } catch {
          reject(new ResourceStoreError('forbidden', `${named} printed no ExecCredential JSON`));
          return;
        }
        const doc = parsed as { apiVersion?: unknown; kind?: unknown; status?: Record<string, unknown> };
        if (doc?.kind !== 'ExecCredential' || doc.apiVersion !== exec.apiVersion) {
          reject(
            new ResourceStoreError(
              'forbidden',
              `${named} answered kind ${String(doc?.kind)} apiVersion ${String(doc?.apiVersion)}, not ExecCredential ${exec.apiVersion}`,
            ),
          );
          return;
        }
        const status = doc.status ?? {};
        const token = typeof status['token'] === 'string' && status['token'] !== '' ? status['token'] : undefined;
        const certText =
          typeof status['clientCertificateData'] === 'string' ? status['clientCertificateData'] : undefined;
        const keyText = typeof status['clientKeyData'] === 'string' ? status['clientKeyData'] : undefined;
        if (token === undefined && (certText === undefined || keyText === undefined)) {
          reject(
            new ResourceStoreError('forbidden', `${named} answered neither a token nor a client certificate and key`),
          );
          return;
        }
        const expiry =
          typeof status['expirationTimestamp'] === 'string' ? Date.parse(status['expirationTimestamp']) : Number.NaN;
        resolve({
          token,
          cert: certText === undefined ? undefined : Buffer.from(certText),
          key: keyText === undefined ? undefined : Buffer.from(keyText),
          expiresAtMs: Number.isFinite(expiry) ? expiry - EXEC_EXPIRY_MARGIN_MS : Number.POSITIVE_INFINITY,
        });
      },
    );
  });
}

/** One resolved context with its credential caches; the object KubeHttp asks for each request's options. */
export class KubeConnection implements KubeAuthSource {
  readonly context: ResolvedKubeContext;
  readonly #now: () => number;
  #tokenFileValue: { token: string; readAtMs: number } | undefined;
  #exec: Promise<ExecCredential> | undefined;

  constructor(context: ResolvedKubeContext, now: () => number = Date.now) {
    this.context = context;
    this.#now = now;
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.context.server };
  }

  #fileToken(path: string): string {
    const cached = this.#tokenFileValue;
    if (cached !== undefined && this.#now() - cached.readAtMs < TOKEN_FILE_REREAD_MS) return cached.token;
    let token: string;
    try {
      token = readFileSync(path, 'utf8').trim();
    } catch (error) {
      // A failed re-read keeps the last token: the kubelet swaps the file atomically, so this is a passing moment.
      if (cached !== undefined) return cached.token;
      throw new ResourceStoreError(
        'forbidden',
        `token file ${path}: cannot read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      );
    }
    if (token === '') throw new ResourceStoreError('forbidden', `token file ${path} is empty`);
    this.#tokenFileValue = { token, readAtMs: this.#now() };
    return token;
  }

  async #execCredential(exec: ExecConfig): Promise<ExecCredential> {
    const pending = this.#exec;
    if (pending !== undefined) {
      const credential = await pending.catch(() => undefined);
      if (credential !== undefined && credential.expiresAtMs > this.#now()) return credential;
      if (this.#exec !== pending) return this.#execCredential(exec);
    }
    const next = runExecPlugin(exec, this.context);
    this.#exec = next;
    // A failure is not cached: the next request runs the plugin again.
    next.catch(() => {
      if (this.#exec === next) this.#exec = undefined;
    });
    return next;
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    const c = this.context;
    if (c.ca !== undefined) options.ca = c.ca;
    if (c.tlsServerName !== undefined) options.servername = c.tlsServerName;
    if (c.insecureSkipTlsVerify) options.rejectUnauthorized = false;
    if (c.clientCert !== undefined) {
      options.cert = c.clientCert;
      options.key = c.clientKey;
    }
    const headers = (options.headers ??= {}) as Record<string, string | string[] | number>;
    if (c.exec !== undefined) {
      const credential = await this.#execCredential(c.exec);
      if (credential.cert !== undefined) {
        options.cert = credential.cert;
        options.key = credential.key;
      }
      if (credential.token !== undefined) headers['authorization'] = `Bearer ${credential.token}`;
    } else if (c.token !== undefined) {
      headers['authorization'] = `Bearer ${c.token}`;
    } else if (c.tokenFile !== undefined) {
      headers['authorization'] = `Bearer ${this.#fileToken(c.tokenFile)}`;
    } else if (c.basic !== undefined) {
      headers['authorization'] = `Basic ${Buffer.from(`${c.basic.username}:${c.basic.password}`).toString('base64')}`;
    }
  }
}

/** The in-cluster configuration: the Service's environment, the mounted CA and the rotating ServiceAccount token. */
export function inClusterContext(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): ResolvedKubeContext {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (host === undefined || host === '' || port === undefined || port === '') {
    throw invalid('in-cluster configuration needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT');
  }
  const tokenFile = join(dir, 'token');
  if (!existsSync(tokenFile))
    throw invalid(
      `in-cluster configuration: no ServiceAccount token at ${tokenFile} (automountServiceAccountToken off?)`,
    );
  let ca: Buffer;
  try {
    ca = readFileSync(join(dir, 'ca.crt'));
  } catch {
    throw invalid(`in-cluster configuration: cannot read ${join(dir, 'ca.crt')}`);
  }
  return {
    contextName: 'in-cluster',
    namespace: existsSync(join(dir, 'namespace')) ? readFileSync(join(dir, 'namespace'), 'utf8').trim() : undefined,
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca,
    insecureSkipTlsVerify: false,
    tokenFile,
  };
}

/** Reads kubeconfig files (kubectl's $KUBECONFIG list, merged) and resolves a context. */
export function kubeconfigContext(paths: readonly string[], context?: string): ResolvedKubeContext {
  const files: KubeconfigFile[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw invalid(
        `kubeconfig ${path}: cannot read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      );
    }
    files.push(parseKubeconfig(text, path));
  }
  return resolveContext(mergeFiles(files), context);
}

export interface KubeConfigSource {
  /** Path of a kubeconfig file; absent: in-cluster when running in a pod, else $KUBECONFIG / ~/.kube/config. */
  readonly kubeconfigPath?: string;
  /** Overrides the kubeconfig's current context. */
  readonly context?: string;
}

/** kubectl's order: an explicit file, else in-cluster in a pod without $KUBECONFIG, else $KUBECONFIG, else ~/.kube/config. */
export function loadKubeConfig(source: KubeConfigSource = {}, env: NodeJS.ProcessEnv = process.env): KubeConnection {
  // --kubeconfig may carry a $KUBECONFIG-style list (the daemons read it from that variable too).
  if (source.kubeconfigPath !== undefined)
    return new KubeConnection(
      kubeconfigContext(
        source.kubeconfigPath.split(delimiter).filter((p) => p !== ''),
        source.context,
      ),
    );
  const listed = (env['KUBECONFIG'] ?? '').split(delimiter).filter((p) => p !== '');
  if (listed.length === 0 && env['KUBERNETES_SERVICE_HOST'] !== undefined && source.context === undefined) {
    return new KubeConnection(inClusterContext(env));
  }
  // Like kubectl, files of $KUBECONFIG that do not exist are skipped; none at all is an error.
  const paths =
    listed.length > 0
      ? listed.filter((p) => existsSync(p))
      : [join(homedir(), '.kube', 'config')].filter((p) => existsSync(p));
  if (paths.length === 0)
    throw invalid('no Kubernetes cluster configured: set --kubeconfig, $KUBECONFIG, or run in a pod');
  return new KubeConnection(kubeconfigContext(paths, source.context));
}
