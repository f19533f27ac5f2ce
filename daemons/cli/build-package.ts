// `npm run build:package`: compiles the installable package into .package/agn-ts/ and packs it with `npm pack`.
//
// The package mirrors the repository's layout (constructs/, schemas/, daemons/ and package.json at its root, each
// .ts compiled to .js beside its .d.ts), so every path a module resolves relative to itself — the JSON Schemas and
// CRD files, the starter declaration `agn init` copies, package.json for the version — is the same in the package
// as in the repository. Node refuses to strip types under node_modules, hence JavaScript; tsc rewrites the `.ts`
// import specifiers (rewriteRelativeImportExtensions) and writes the doc comments into the .d.ts files.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Where the package is staged and packed; gitignored. */
const PACKAGE_STAGE = join(root, '.package');
const packageDir = join(PACKAGE_STAGE, 'agn-ts');

/** Sources that belong to the repository only: the example app `cdk8s synth` runs here, and the type generator. */
const REPO_ONLY = [
  'constructs/main.ts',
  'constructs/example-grid.ts',
  'schemas/codegen/',
  'daemons/cli/build-package.ts',
];
/** TypeScript sources shipped as text: `agn init` copies the starter declaration into a new grid repository. */
const SHIPPED_AS_SOURCE = ['constructs/starter-grid.ts'];

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

function repoPath(path: string): string {
  return relative(root, path).split('\\').join('/');
}

/** The package manifest: the repository's name, version, license and runtime dependencies, plus the entry points. */
export function packageManifest(repo: Record<string, unknown>): Record<string, unknown> {
  const types = (path: string) => ({ types: `./${path}.d.ts`, default: `./${path}.js` });
  return {
    name: repo['name'],
    version: repo['version'],
    description: repo['description'],
    license: repo['license'],
    type: 'module',
    engines: { node: '>=24' },
    bin: { agn: './daemons/cli/agn.js' },
    exports: {
      '.': types('constructs/index'),
      // The types generated from the JSON Schemas (specs of the six grid kinds, gateway config, overlay envelope).
      './schemas/*': types('schemas/generated/*'),
      './package.json': './package.json',
    },
    types: './constructs/index.d.ts',
    dependencies: repo['dependencies'],
    // Not installed with the package; `agn init` reads the cdk8s-cli and node ranges a grid repository needs here.
    devDependencies: repo['devDependencies'],
  };
}

function build(): void {
  rmSync(PACKAGE_STAGE, { recursive: true, force: true });
  mkdirSync(packageDir, { recursive: true });
  const sources = ['constructs', 'schemas', 'daemons']
    .flatMap((dir) => walk(join(root, dir)))
    .map(repoPath)
    .filter(
      (path) =>
        path.endsWith('.ts') &&
        !SHIPPED_AS_SOURCE.includes(path) &&
        !REPO_ONLY.some((excluded) => path === excluded || path.startsWith(excluded)),
    );
  const tsconfig = {
    extends: '../tsconfig.json',
    compilerOptions: {
      noEmit: false,
      declaration: true,
      rewriteRelativeImportExtensions: true,
      rootDir: '..',
      outDir: './agn-ts',
      sourceMap: false,
    },
    files: sources.map((path) => `../${path}`),
    include: [],
  };
  writeFileSync(join(PACKAGE_STAGE, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
  execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(PACKAGE_STAGE, 'tsconfig.json')], {
    stdio: 'inherit',
  });

  // Data the compiled modules read at run time, relative to themselves.
  for (const path of walk(join(root, 'schemas'))
    .map(repoPath)
    .filter((p) => p.endsWith('.json'))) {
    cpSync(join(root, path), join(packageDir, path));
  }
  // The fleet dashboard's page and assets, served by the operator's admin listener (daemons/shared/dashboard-routes.ts).
  for (const path of walk(join(root, 'daemons', 'shared', 'dashboard')).map(repoPath)) {
    cpSync(join(root, path), join(packageDir, path));
  }
  for (const path of SHIPPED_AS_SOURCE) cpSync(join(root, path), join(packageDir, path));
  const repo = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(packageDir, 'package.json'), `${JSON.stringify(packageManifest(repo), null, 2)}\n`);
  // The README and the docs/ pages it links to, so its links work in the installed package too.
  cpSync(join(root, 'README.md'), join(packageDir, 'README.md'));
  cpSync(join(root, 'docs'), join(packageDir, 'docs'), { recursive: true });

  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', PACKAGE_STAGE], {
      cwd: packageDir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  ) as { filename: string; size: number; unpackedSize: number; entryCount: number }[];
  const [result] = packed;
  if (result === undefined) throw new Error('npm pack reported no package');
  const tarball = join(PACKAGE_STAGE, result.filename);
  process.stdout.write(
    `package: ${repoPath(tarball)}: ${(result.size / 1024).toFixed(1)} KiB packed, ${(result.unpackedSize / 1024).toFixed(1)} KiB unpacked, ${result.entryCount} files\n`,
  );
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) build();
