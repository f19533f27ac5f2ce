/**
 * What goes into the project image and how its OCI metadata reads: the pure half of `npm run image` (the build
 * script and the Dockerfile equivalence test both read it). One image carries every daemon; a compiled workload
 * picks its daemon by its command (`node daemons/<daemon>/main.ts`), run from APP_DIR.
 */
import { createHash } from 'node:crypto';

/** The unprivileged identity of every container; constructs/workload-defaults.ts runs pods as the same ids. */
export const IMAGE_UID = 10001;
export const IMAGE_GID = 10001;

/** Where the app lives; the compiled commands use paths relative to it. */
export const APP_DIR = '/app';
export const NODE_PATH = '/usr/local/bin/node';

/** Uncompressed size the image must stay within: 150 MB (decimal, as registries and `podman images` count). */
export const SIZE_BUDGET_BYTES = 150_000_000;

/** The Debian packages of the root filesystem: what the Node binary links against, and the CA roots. */
export const DEBIAN_SUITE = 'bookworm';
export const DEBIAN_PACKAGES = ['libc6', 'libstdc++6', 'libgcc-s1', 'ca-certificates'] as const;

/**
 * Paths of the extracted Debian tree no daemon uses. Extract mode pulls dependencies (openssl, debconf) that only
 * maintainer scripts would run; Node carries its own OpenSSL, so their libraries go too. Nothing here runs a
 * shell or a tool, so the packages' programs go as well.
 */
export const DEBIAN_PRUNE = [
  // Device nodes: every runtime mounts its own /dev.
  'dev',
  'bin',
  'sbin',
  'usr/bin',
  'usr/sbin',
  'usr/share/doc',
  'usr/share/man',
  'usr/share/info',
  'usr/share/locale',
  'usr/share/lintian',
  'usr/share/gdb',
  'usr/share/perl5',
  'usr/share/debconf',
  'usr/share/gcc',
  'usr/lib/ssl',
  'usr/lib/x86_64-linux-gnu/gconv',
  'usr/lib/x86_64-linux-gnu/engines-3',
  'usr/lib/x86_64-linux-gnu/ossl-modules',
  'usr/lib/x86_64-linux-gnu/libssl.so.3',
  'usr/lib/x86_64-linux-gnu/libcrypto.so.3',
  'etc/ssl/openssl.cnf',
  // Extract mode leaves dpkg's database empty (nothing was installed), so it goes too.
  'var/cache',
  'var/lib/apt',
  'var/lib/dpkg',
  'var/log',
] as const;

/** The app sources the daemons run, relative to the repository root. Test and build-time code stays out. */
export const APP_PATHS = [
  'package.json',
  'daemons/gateway',
  'daemons/gossip-operator',
  'daemons/overlay-sync',
  'daemons/routing',
  'daemons/shared',
  'daemons/sim',
  'schemas/crds',
  'schemas/engines',
  'schemas/enrollment',
  'schemas/gateway',
  'schemas/generated',
  'schemas/gossip',
  'schemas/overlay',
  'schemas/serving',
  'schemas/signals',
  'schemas/canonical-json.ts',
  'schemas/durations.ts',
  'schemas/fnv1a.ts',
  'schemas/generated-config.ts',
  'schemas/object-names.ts',
  'schemas/workload-labels.ts',
] as const;

/** The daemons the image runs, each `node daemons/<name>/main.ts`. */
export const IMAGE_DAEMONS = ['gossip-operator', 'overlay-sync', 'gateway', 'sim'] as const;

/** One package-lock.json entry (the fields the dependency walk reads). */
export interface LockEntry {
  readonly version?: string;
  readonly dev?: boolean;
  readonly optional?: boolean;
  readonly dependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
}

/**
 * The installed packages (lock paths such as `node_modules/a/node_modules/b`) the given packages need at run time,
 * resolved the way Node resolves them: nearest `node_modules` first, then each ancestor. Optional dependencies
 * count only when installed. Throws when a required dependency is missing, so an image never ships half a tree.
 */
export function runtimePackages(
  lock: Readonly<Record<string, LockEntry>>,
  roots: readonly string[],
  installed: (lockPath: string) => boolean,
): string[] {
  const resolve = (from: string, name: string): string | undefined => {
    let dir = from;
    for (;;) {
      const candidate = `${dir === '' ? '' : `${dir}/`}node_modules/${name}`;
      if (lock[candidate] !== undefined && installed(candidate)) return candidate;
      if (dir === '') return undefined;
      const parent = dir.lastIndexOf('/node_modules/');
      dir = parent < 0 ? '' : dir.slice(0, parent);
    }
  };
  const seen = new Set<string>();
  const queue: { from: string; name: string; optional: boolean }[] = roots.map((name) => ({
    from: '',
    name,
    optional: false,
  }));
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    const found = resolve(next.from, next.name);
    if (found === undefined) {
      if (next.optional) continue;
      throw new Error(
        `${next.name} (needed by ${next.from === '' ? 'the daemons' : next.from}) is not installed; run npm ci first`,
      );
    }
    if (seen.has(found)) continue;
    seen.add(found);
    const entry = lock[found] ?? {};
    for (const name of Object.keys(entry.dependencies ?? {})) queue.push({ from: found, name, optional: false });
    for (const name of Object.keys(entry.optionalDependencies ?? {})) queue.push({ from: found, name, optional: true });
  }
  return [...seen].sort();
}

/**
 * The bare package names the daemons import: the roots of the dependency walk. Kept as a list (not parsed from
 * sources) so a new import shows up in review; test/image/layout.test.ts checks it against the sources.
 */
export const RUNTIME_IMPORTS = [
  '@marcbachmann/cel-js',
  // Traces (daemons/shared/otel-env.ts, daemons/gateway/tracing/): the API, the SDK, the OTLP protobuf exporter.
  '@opentelemetry/api',
  '@opentelemetry/core',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-trace',
  '@peculiar/x509',
  'ajv',
  'pino',
  'prom-client',
  'reflect-metadata',
  'undici',
  'yaml',
] as const;

/**
 * Files inside installed packages that Node never loads: type declarations, source maps, TypeScript sources (Node
 * refuses to strip types under node_modules), docs, tests, C sources and prebuilt addons of other runtimes (`bare-*`).
 */
export function isPrunedPackageFile(relativePath: string): boolean {
  const parts = relativePath.split('/');
  const base = parts[parts.length - 1] ?? '';
  if (parts.slice(0, -1).some((dir) => PRUNED_PACKAGE_DIRS.has(dir))) return true;
  return (
    /\.(d\.[cm]?ts|map|ts|md|markdown|c|h|tsbuildinfo)$/u.test(base) ||
    /^(CHANGELOG|CMakeLists\.txt|Makefile)/u.test(base)
  );
}
const PRUNED_PACKAGE_DIRS = new Set(['test', 'tests', '__tests__', 'example', 'examples', 'prebuilds', 'docs']);

/** The OCI labels of the image (org.opencontainers.image.*). */
export interface ImageLabels {
  readonly source: string;
  readonly revision: string;
  readonly version: string;
  readonly created: string;
}

/** The image config: numeric non-root user, exec-form entrypoint, no shell anywhere. */
export function imageConfig(labels: ImageLabels, layerDiffIds: readonly string[]): Record<string, unknown> {
  return {
    created: labels.created,
    architecture: 'amd64',
    os: 'linux',
    config: {
      User: `${IMAGE_UID}:${IMAGE_GID}`,
      Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'],
      Entrypoint: [NODE_PATH],
      Cmd: ['daemons/gateway/main.ts', '--help'],
      WorkingDir: APP_DIR,
      Labels: ociLabels(labels),
      StopSignal: 'SIGTERM',
    },
    rootfs: { type: 'layers', diff_ids: [...layerDiffIds] },
    history: layerDiffIds.map(() => ({ created: labels.created, created_by: 'npm run image' })),
  };
}

export function ociLabels(labels: ImageLabels): Record<string, string> {
  return {
    'org.opencontainers.image.source': labels.source,
    'org.opencontainers.image.revision': labels.revision,
    'org.opencontainers.image.version': labels.version,
    'org.opencontainers.image.created': labels.created,
    'org.opencontainers.image.title': 'agn',
    'org.opencontainers.image.licenses': 'Apache-2.0',
  };
}

export function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations?: Record<string, string>;
}

export function imageManifest(
  config: Descriptor,
  layers: readonly Descriptor[],
  labels: ImageLabels,
): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config,
    layers,
    annotations: ociLabels(labels),
  };
}

export function imageIndex(manifest: Descriptor, refName: string): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [{ ...manifest, annotations: { 'org.opencontainers.image.ref.name': refName } }],
  };
}

/** The /etc files a root filesystem without base-files still needs (the user by name, host lookups). */
export function etcFiles(): Record<string, string> {
  return {
    'etc/passwd': `root:x:0:0:root:/root:/usr/sbin/nologin\nagn:x:${IMAGE_UID}:${IMAGE_GID}:agn:/nonexistent:/usr/sbin/nologin\n`,
    'etc/group': `root:x:0:\nagn:x:${IMAGE_GID}:\n`,
    'etc/nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
  };
}
