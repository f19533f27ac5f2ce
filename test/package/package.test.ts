// The installable package as a user gets it: `npm run build:package` packs it; in a fresh directory outside the
// repository `agn init` scaffolds a grid repository that depends on the tarball; `npm install`, `npx cdk8s synth`
// compile the scaffold with the installed (compiled JavaScript) package to exactly what this repository's compiler
// gives; an edited declaration (a second site, providers) compiles too; a broken one names every mistake and
// writes nothing. Run by `npm run test:package` (needs the npm cache `npm ci` fills; installs with --prefer-offline).
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../fixtures-path.ts';
import { MISTAKES, withMistakes, withSecondSite } from './declarations.ts';

const MAX_PACKED_BYTES = 2 * 1024 * 1024;
const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const work = mkdtempSync(join(tmpdir(), 'agn-package-'));
const grid = join(work, 'my-grid');
const timings: string[] = [];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command and records how long it took under `step`. */
function run(
  step: string,
  cwd: string,
  command: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Run {
  const started = performance.now();
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, CDK8S_CHECK_UPGRADE: 'false', CDK8S_OUTDIR: '', ...env },
    maxBuffer: 64 << 20,
  });
  timings.push(`${step}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (result.error !== undefined) throw result.error;
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function ok(result: Run, what: string): Run {
  expect(result.code, `${what}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result;
}

/** This repository's `agn`, on its TypeScript sources. */
function repoAgn(step: string, cwd: string, ...args: string[]): Run {
  return run(step, cwd, process.execPath, [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args]);
}

function files(dir: string): Record<string, string> {
  return Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((file) => [file, readFileSync(join(dir, file), 'utf8')]),
  );
}

/** The manifests this repository's compiler gives for the grid repository's current grid.ts. */
function repoSynth(name: string): Record<string, string> {
  const out = join(work, name);
  ok(repoAgn(`repo compiler (${name})`, grid, 'synth', 'grid.ts', '--out', out), 'repo synth');
  return files(out);
}

let tarball = '';
let packedBytes = 0;

beforeAll(() => {
  const built = ok(
    run('npm run build:package', REPO_ROOT, process.execPath, [join(REPO_ROOT, 'daemons/cli/build-package.ts')]),
    'build:package',
  );
  const match = /^package: (\S+\.tgz): /mu.exec(built.stdout);
  expect(match, built.stdout).not.toBeNull();
  tarball = join(REPO_ROOT, match?.[1] ?? '');
  packedBytes = statSync(tarball).size;
}, 120_000);

afterAll(() => {
  process.stdout.write(
    `\npackage ${tarball}: ${packedBytes} bytes (${(packedBytes / 1024).toFixed(1)} KiB packed)\n${timings.map((t) => `  ${t}`).join('\n')}\n`,
  );
  rmSync(work, { recursive: true, force: true });
});

describe('the packed package', () => {
  it(`is under 2 MiB and holds compiled modules, types and the data they read, and nothing from test/`, () => {
    expect(packedBytes).toBeLessThan(MAX_PACKED_BYTES);
    const entries = ok(run('tar -tzf', work, 'tar', ['-tzf', tarball]), 'tar')
      .stdout.trim()
      .split('\n')
      .map((entry) => entry.replace(/^package\//u, ''));
    expect(
      entries.filter((entry) => /(^|\/)(test|fixtures|\.state|\.package|dist|node_modules)\//u.test(entry)),
    ).toEqual([]);
    expect(entries.filter((entry) => entry.endsWith('.ts') && !entry.endsWith('.d.ts'))).toEqual([
      'constructs/starter-grid.ts',
    ]);
    expect(entries.filter((entry) => /\.test\.|bench/u.test(entry))).toEqual([]);
    for (const needed of [
      'package.json',
      'constructs/index.js',
      'constructs/index.d.ts',
      'daemons/cli/agn.js',
      'schemas/gateway/gateway-config.schema.json',
      'schemas/overlay/overlay-envelope.schema.json',
      ...[
        'gridnetworks',
        'gridsites',
        'inferenceproviders',
        'agenttoolproviders',
        'agenttoagentproviders',
        'siteinvites',
      ].map((plural) => `schemas/crds/${plural}.schema.json`),
    ]) {
      expect(entries, needed).toContain(needed);
    }
    // The README's links to docs/ pages resolve inside the package as in the repository.
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    const linkedPages = [...readme.matchAll(/\]\((docs\/[^)#\s]+)/gu)].map((m) => m[1] ?? '');
    expect(linkedPages.length).toBeGreaterThan(0);
    expect(linkedPages.filter((page) => !entries.includes(page))).toEqual([]);
  });
});

describe('a grid repository on the installed package', () => {
  let first: Record<string, string> = {};
  let second: Record<string, string> = {};
  /** grid.ts as agn init wrote it; every edit starts from it. */
  let starter = '';

  it('is scaffolded by agn init, installs from the tarball and synthesizes, unedited, what this repository compiles', () => {
    ok(repoAgn('agn init', work, 'init', 'my-grid', '--package', `file:${tarball}`), 'init');
    starter = readFileSync(join(grid, 'grid.ts'), 'utf8');
    ok(run('npm install', grid, 'npm', ['install', '--prefer-offline', '--no-audit', '--no-fund']), 'npm install');
    const installed = join(grid, 'node_modules', 'agn-ts');
    expect(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version).toBe(version);
    // Compiled JavaScript: Node refuses to strip types under node_modules.
    expect(existsSync(join(installed, 'constructs', 'grid.js'))).toBe(true);
    expect(existsSync(join(installed, 'constructs', 'grid.ts'))).toBe(false);
    ok(run('npx cdk8s synth', grid, 'npx', ['cdk8s', 'synth']), 'cdk8s synth');
    first = files(join(grid, 'dist'));
    expect(Object.keys(first)).toEqual(['crds.k8s.yaml', 'east.k8s.yaml']);
    expect(first).toEqual(repoSynth('expected-1'));
  });

  it("runs the compiled grid on this machine with the installed package's agn up", () => {
    const up = ok(run('npx agn up --check', grid, 'npx', ['agn', 'up', '--check'], { CI: 'true' }), 'agn up');
    expect(up.stdout).toMatch(/^agn up --check: ok, first routed chat completion [\d.]+ s after start$/mu);
    expect(up.stdout).toMatch(/served by east-llm/u);
    expect(existsSync(join(grid, '.state'))).toBe(true);
  });

  it('types the declaration with the doc comments, and the type checker catches a misspelt field', () => {
    const declarations = readFileSync(
      join(grid, 'node_modules', 'agn-ts', 'constructs', 'grid-declaration.d.ts'),
      'utf8',
    );
    expect(declarations).toContain('Site name: the SWIM identity');
    const tsc = join(REPO_ROOT, 'node_modules', '.bin', 'tsc');
    const text = readFileSync(join(grid, 'grid.ts'), 'utf8');
    // The exports map: the entry point and a generated schema type by its subpath.
    const imports =
      "import type { GridSiteStack, InferenceProviderSpec } from 'agn-ts';\nimport type { GatewayConfig } from 'agn-ts/schemas/gateway-config';\nexport type Used = [GridSiteStack, InferenceProviderSpec, GatewayConfig];\n";
    writeFileSync(join(grid, 'grid.ts'), `${imports}${text}`);
    ok(run('tsc (scaffold)', grid, tsc, ['-p', 'tsconfig.json']), 'tsc');
    writeFileSync(
      join(grid, 'grid.ts'),
      text.replace("zone: 'us-east-1a',", "zone: 'us-east-1a',\n      zoen: 'typo',"),
    );
    const typo = run('tsc (misspelt field)', grid, tsc, ['-p', 'tsconfig.json']);
    writeFileSync(join(grid, 'grid.ts'), text);
    expect(typo.code).not.toBe(0);
    expect(typo.stdout).toMatch(
      /grid\.ts\(\d+,\d+\): error TS2353: Object literal may only specify known properties, and 'zoen' does not exist in type 'SiteDeclaration'/u,
    );
  });

  it('synthesizes an edited declaration with a second site and providers', () => {
    writeFileSync(join(grid, 'grid.ts'), withSecondSite(starter));
    // The installed package's agn makes the grid's PKI and the trust file the declaration reads.
    const init = ok(run('npx agn pki init', grid, 'npx', ['agn', 'pki', 'init']), 'agn pki init');
    expect(init.stdout).toContain('wrote grid-trust.json (pins: east 1, west 1;');
    ok(run('npm run synth (two sites)', grid, 'npm', ['run', 'synth']), 'npm run synth');
    second = files(join(grid, 'dist'));
    expect(Object.keys(second)).toEqual(['crds.k8s.yaml', 'east.k8s.yaml', 'west.k8s.yaml']);
    expect(second).toEqual(repoSynth('expected-2'));
    expect(second['east.k8s.yaml']).not.toBe(first['east.k8s.yaml']);
  });

  it('ships one version: the package, the CRD version label and the image tag of every workload', () => {
    const objects = Object.values(second).flatMap((text) =>
      YAML.parseAllDocuments(text).map(
        (doc) => doc.toJS() as { kind: string; metadata: { labels?: Record<string, string> }; spec?: unknown },
      ),
    );
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds).toHaveLength(6);
    expect(crds.map((crd) => crd.metadata.labels?.['app.kubernetes.io/version'])).toEqual(Array(6).fill(version));
    const images = [
      ...new Set(JSON.stringify(objects.filter((o) => o.kind === 'Deployment')).match(/"image":"[^"]+"/gu) ?? []),
    ];
    expect(images.length).toBeGreaterThan(0);
    for (const image of images) expect(image).toMatch(new RegExp(`:${version.replaceAll('.', '\\.')}"$`, 'u'));
  });

  it('refuses a broken declaration with every mistake at once and keeps dist/ as it was', () => {
    writeFileSync(join(grid, 'grid.ts'), withMistakes(starter));
    const validate = run('npm run validate (broken)', grid, 'npm', ['run', '--silent', 'validate']);
    expect(validate.code).toBe(1);
    expect(validate.stderr).toBe(['grid.ts: 4 problems, nothing written:', ...MISTAKES, ''].join('\n'));
    const synth = run('npm run synth (broken)', grid, 'npm', ['run', 'synth']);
    expect(synth.code).not.toBe(0);
    expect(synth.stderr).toContain(MISTAKES.join('\n'));
    expect(files(join(grid, 'dist'))).toEqual(second);
    // A bare `cdk8s synth` empties dist/ before it runs the app (docs/own-grid.md says why `npm run synth` validates
    // first): the app still names every mistake and writes nothing.
    const bare = run('npx cdk8s synth (broken)', grid, 'npx', ['cdk8s', 'synth']);
    expect(bare.code).not.toBe(0);
    expect(`${bare.stdout}${bare.stderr}`).toContain(MISTAKES.join('\n'));
    expect(existsSync(join(grid, 'dist'))).toBe(false);
  });

  it("scaffolds with the installed package's agn exactly as with this repository's", () => {
    mkdirSync(join(work, 'installed'));
    mkdirSync(join(work, 'repo'));
    ok(
      run('agn init (installed bin)', join(work, 'installed'), join(grid, 'node_modules', '.bin', 'agn'), [
        'init',
        'again',
      ]),
      'installed init',
    );
    ok(repoAgn('agn init (repo)', join(work, 'repo'), 'init', 'again'), 'repo init');
    expect(files(join(work, 'installed', 'again'))).toEqual(files(join(work, 'repo', 'again')));
    expect(JSON.parse(readFileSync(join(work, 'installed', 'again', 'package.json'), 'utf8')).dependencies).toEqual({
      'agn-ts': version,
    });
  });
});
