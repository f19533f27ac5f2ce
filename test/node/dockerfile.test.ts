// The Dockerfile kept equivalent to `npm run image`. Building it needs its base image pulled from a registry, which
// this machine cannot reach, so what can be compared without that is compared: the final stage's configuration
// against image/layout.ts (user, workdir, entrypoint, cmd, env, stop signal, labels), and the file list its build
// stage copies (`node image/build.ts --stage`, the same staging the Dockerfile runs) against the layers of the OCI
// archive `npm run image` wrote (paths, types, modes, sizes, link targets). When the base image happens to be in
// local storage, the Dockerfile is built with podman and its config is compared too.
import { execFile, execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { imageConfig, ociLabels } from '../../image/layout.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ARCHIVE = join(ROOT, 'build/image', `agn-${pkg.version}.oci.tar`);
const BUILDER_BASE = 'docker.io/library/node:24-bookworm-slim';
const scratch = mkdtempSync(join(tmpdir(), 'agn-dockerfile-'));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The final stage's instructions, continuation lines joined. */
function finalStage(): { op: string; rest: string }[] {
  const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .replace(/\\\n\s*/gu, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const last = lines.map((l) => l.split(/\s+/u)[0]?.toUpperCase()).lastIndexOf('FROM');
  return lines
    .slice(last)
    .map((l) => ({ op: (l.split(/\s+/u)[0] ?? '').toUpperCase(), rest: l.slice(l.indexOf(' ') + 1).trim() }));
}

function pairs(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/(\S+?)=(\S+)/gu)].map((m) => [m[1] as string, m[2] as string]));
}

/** path -> "type mode size|target" for every entry under `root`. */
function listing(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string, rel: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const key = rel === '' ? name : `${rel}/${name}`;
      const stat = lstatSync(path);
      const mode = (stat.mode & 0o7777).toString(8);
      if (stat.isSymbolicLink()) out.set(key, `link ${readlinkSync(path)}`);
      else if (stat.isDirectory()) {
        out.set(key, `dir ${mode}`);
        walk(path, key);
      } else out.set(key, `file ${mode} ${stat.size}`);
    }
  };
  walk(root, '');
  return out;
}

/** The OCI archive's layers extracted in order into one tree. */
function archiveTree(): string {
  const layout = join(scratch, 'oci');
  const tree = join(scratch, 'from-archive');
  execFileSync('mkdir', ['-p', layout, tree]);
  execFileSync('tar', ['-xf', ARCHIVE, '-C', layout]);
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
  const blob = (digest: string) => join(layout, 'blobs/sha256', digest.slice('sha256:'.length));
  const manifest = JSON.parse(readFileSync(blob(index.manifests[0]?.digest ?? ''), 'utf8')) as {
    layers: { digest: string }[];
  };
  for (const layer of manifest.layers) execFileSync('tar', ['-xpf', blob(layer.digest), '-C', tree, '--numeric-owner']);
  return tree;
}

describe('Dockerfile equivalence with npm run image', () => {
  it('configures the final stage exactly as the image config: user, workdir, entrypoint, cmd, env, stop signal, labels', () => {
    const expected = (
      imageConfig({ source: 's', revision: 'r', version: 'v', created: 'c' }, []) as { config: Record<string, unknown> }
    ).config;
    const stage = finalStage();
    const one = (op: string) => stage.filter((i) => i.op === op).map((i) => i.rest);
    expect(one('FROM')).toEqual(['scratch']);
    expect(one('USER')).toEqual([expected['User']]);
    expect(one('WORKDIR')).toEqual([expected['WorkingDir']]);
    expect(one('STOPSIGNAL')).toEqual([expected['StopSignal']]);
    expect(one('ENTRYPOINT').map((j) => JSON.parse(j) as unknown)).toEqual([expected['Entrypoint']]);
    expect(one('CMD').map((j) => JSON.parse(j) as unknown)).toEqual([expected['Cmd']]);
    expect(one('ENV').map(pairs)).toEqual([
      Object.fromEntries((expected['Env'] as string[]).map((e) => e.split('=') as [string, string])),
    ]);
    // `created` is the one label a Docker build sets on its own (the image's Created field).
    const labelKeys = Object.keys(ociLabels({ source: 's', revision: 'r', version: 'v', created: 'c' })).filter(
      (k) => !k.endsWith('.created'),
    );
    expect(Object.keys(pairs(one('LABEL').join(' '))).sort()).toEqual(labelKeys.sort());
    expect(one('COPY')).toEqual(['--from=build /rootfs/ /']);
  });

  it('copies the same files with the same modes as the archive npm run image wrote', () => {
    const staged = join(scratch, 'staged');
    execFileSync(process.execPath, [join(ROOT, 'image/build.ts'), '--stage', staged], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const fromStage = listing(staged);
    const fromArchive = listing(archiveTree());
    const onlyArchive = [...fromArchive.keys()].filter((k) => !fromStage.has(k));
    const onlyStage = [...fromStage.keys()].filter((k) => !fromArchive.has(k));
    const differ = [...fromStage]
      .filter(([k, v]) => fromArchive.has(k) && fromArchive.get(k) !== v)
      .map(([k, v]) => `${k}: stage ${v}, archive ${fromArchive.get(k)}`);
    expect({ onlyArchive, onlyStage, differ }).toEqual({ onlyArchive: [], onlyStage: [], differ: [] });
    expect(fromStage.size).toBeGreaterThan(1000);
    expect(fromStage.get('tmp')).toBe('dir 1777');
    expect(fromStage.get('usr/local/bin/node')).toMatch(/^file 755 /u);
  });

  // Skipped on machines without the builder's base image in local storage (this one: no registry to pull it from).
  it.skipIf(!podmanHasBase())(
    `builds with podman from a local ${BUILDER_BASE} to the same user, entrypoint and workdir`,
    async () => {
      const tag = 'localhost/agn-dockerfile-test:latest';
      const built = await podman(['build', '--pull=never', '-t', tag, ROOT], 600_000);
      expect(built.code, built.stderr).toBe(0);
      const inspect = JSON.parse((await podman(['image', 'inspect', tag], 60_000)).stdout) as {
        Config: { User: string; Entrypoint: string[]; WorkingDir: string };
      }[];
      expect(inspect[0]?.Config.User).toBe('10001:10001');
      expect(inspect[0]?.Config.Entrypoint).toEqual(['/usr/local/bin/node']);
      expect(inspect[0]?.Config.WorkingDir).toBe('/app');
    },
  );
});

/** podman with the project's containers.conf (runc, cgroupfs, fixed ulimits: what this machine kind allows). */
function podman(args: readonly string[], timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, CONTAINERS_CONF: join(ROOT, 'image', 'containers.conf') };
  return new Promise((resolve) => {
    execFile('podman', args, { env, timeout: timeoutMs, maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

function podmanHasBase(): boolean {
  try {
    execFileSync('podman', ['image', 'exists', BUILDER_BASE], {
      stdio: 'ignore',
      env: { ...process.env, CONTAINERS_CONF: join(ROOT, 'image', 'containers.conf') },
    });
    return true;
  } catch {
    return false;
  }
}
