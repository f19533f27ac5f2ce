// `agn init`, `agn validate`, `agn synth`: the commands of a grid repository (the platform team's GitOps repository
// that depends on this package, declares its grid in grid.ts and commits the manifests `npm run synth` writes).
// The compiler is loaded on use, so the overlay and site commands do not pay for cdk8s.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CliError, usageError } from './cli-error.ts';
import type { CommandResult } from './overlay-commands.ts';

export const INIT_USAGE = 'init DIR [--package SPEC] [--force]';
export const VALIDATE_USAGE = 'validate [FILE]';
export const SYNTH_USAGE = 'synth [FILE] [--out DIR]';
/** The declaration file of a grid repository. */
export const GRID_FILE = 'grid.ts';

interface PackageManifest {
  readonly name: string;
  readonly version: string;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

/** This package's manifest; the same relative path in the repository and in the installed package. */
export function ownManifest(): PackageManifest {
  return JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as PackageManifest;
}

export function parse<T extends Record<string, { type: 'string' | 'boolean' }>>(
  args: readonly string[],
  usage: string,
  options: T,
  positionals: number,
) {
  try {
    const parsed = parseArgs({ args: [...args], options, strict: true, allowPositionals: true });
    if (parsed.positionals.length > positionals)
      throw new Error(`unexpected argument "${parsed.positionals[positionals]}"`);
    return parsed;
  } catch (error) {
    throw usageError(`usage: agn ${usage}: ${String((error as Error).message).split('\n')[0]}`);
  }
}

/** An npm package name from a directory name (lowercase, URL-safe), for the scaffold's package.json. */
export function projectName(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/gu, '-')
    .replace(/^[._-]+|[-]+$/gu, '');
  return name === '' ? 'my-grid' : name;
}

/** The files of a new grid repository, by path. `dependency` is the npm spec of this package (version or tarball). */
export function scaffoldFiles(name: string, dependency: string): Record<string, string> {
  const own = ownManifest();
  const tool = (pkg: string): string => {
    const range = own.devDependencies?.[pkg];
    if (range === undefined) throw new Error(`package.json of ${own.name} lists no ${pkg} devDependency`);
    return range;
  };
  const starter = readFileSync(new URL('../../constructs/starter-grid.ts', import.meta.url), 'utf8')
    .replace(/^\/\/ `agn init` copies this file.*\n/mu, '')
    .replace("from './index.ts'", `from '${own.name}'`);
  const manifest = {
    name,
    private: true,
    type: 'module',
    description: `The ${name} grid: its declaration (grid.ts) and the manifests compiled from it (dist/)`,
    scripts: {
      // Validation runs first because `cdk8s synth` empties dist/ before it runs the app.
      validate: `agn validate ${GRID_FILE}`,
      synth: `agn validate ${GRID_FILE} && cdk8s synth`,
    },
    dependencies: { [own.name]: dependency },
    // node@24 makes every script run on Node 24 (type stripping) whatever Node runs npm; cdk8s-cli is `cdk8s`.
    devDependencies: { 'cdk8s-cli': tool('cdk8s-cli'), node: tool('node') },
    // npm 11 asks before running install scripts; node@24's fetches the Node binary.
    allowScripts: { node: true },
  };
  const tsconfig = {
    // For editors and `npx tsc` only: Node runs grid.ts directly.
    compilerOptions: {
      target: 'es2024',
      module: 'nodenext',
      moduleResolution: 'nodenext',
      strict: true,
      noEmit: true,
      allowImportingTsExtensions: true,
      verbatimModuleSyntax: true,
      erasableSyntaxOnly: true,
      skipLibCheck: true,
      types: [],
    },
    include: [GRID_FILE],
  };
  const readme = [
    `# ${name}`,
    '',
    `The declaration of this grid is \`${GRID_FILE}\` (sites, their providers and gateways, typed by ${own.name}).`,
    'The manifests compiled from it live in `dist/` and are committed: your GitOps tool applies them.',
    '',
    '```sh',
    'npm install      # once: the compiler, cdk8s and Node 24 (only npm is needed on this machine)',
    `npm run synth    # checks ${GRID_FILE} (every mistake at once, nothing written), then writes dist/`,
    'npx agn up       # optional: runs the compiled grid on this machine (real processes on loopback, simulated backends)',
    '```',
    '',
    "`dist/crds.k8s.yaml` is applied once per cluster, `dist/<site>.k8s.yaml` in that site's cluster. The",
    'manifests name Secrets (the grid CA, site certificate, SWIM key, gateway TLS, provider credentials) only by name.',
    "`npx agn pki init` makes the grid's PKI in `.pki/` (never commit it; back it up) and `grid-trust.json` (commit it;",
    `a grid of several sites passes it as the declaration's \`trust\`, so every site pins its peers), then per site:`,
    '',
    '```sh',
    'kubectl apply --server-side -f dist/crds.k8s.yaml',
    'kubectl wait --for=condition=Established -f dist/crds.k8s.yaml',
    'kubectl apply -f dist/east.k8s.yaml     # the docs add --prune, which removes what a later synth drops',
    'npx agn pki secrets --site east | kubectl apply --server-side -f -   # and the Secrets it lists for you to make',
    '```',
    '',
    `\`npm run synth\` runs \`agn validate ${GRID_FILE}\` before \`cdk8s synth\`, because \`cdk8s synth\` empties`,
    '`dist/` before it runs the app: a declaration with a mistake stops at validation and `dist/` keeps the last good',
    'output. (After a bare `npx cdk8s synth` that failed, `git checkout dist` restores it.)',
    '',
    '## Upgrade',
    '',
    `Bump \`${own.name}\` in package.json (its version is also the image tag of every daemon and the version label`,
    'of the CRDs), `npm install`, `npm run synth`, review `git diff dist/` (CRDs first: apply them before the sites),',
    'commit.',
    '',
  ].join('\n');
  return {
    'package.json': `${JSON.stringify(manifest, null, 2)}\n`,
    'cdk8s.yaml': `language: typescript\napp: agn synth ${GRID_FILE}\noutput: dist\n`,
    [GRID_FILE]: starter,
    'tsconfig.json': `${JSON.stringify(tsconfig, null, 2)}\n`,
    '.gitignore': 'node_modules/\ncdk.out/\n.state/\n.pki/\n',
    'README.md': readme,
  };
}

export function initCommand(args: readonly string[]): CommandResult {
  const { values, positionals } = parse(
    args,
    INIT_USAGE,
    { package: { type: 'string' }, force: { type: 'boolean' } },
    1,
  );
  const [dir] = positionals;
  if (dir === undefined) throw usageError(`usage: agn ${INIT_USAGE}: DIR is required`);
  const own = ownManifest();
  const dependency = values.package ?? own.version;
  if (existsSync(dir) && readdirSync(dir).length > 0 && values.force !== true) {
    throw new CliError(
      `init: ${dir} is not empty; choose an empty or new directory, or pass --force to write the scaffold files into it`,
      1,
    );
  }
  mkdirSync(dir, { recursive: true });
  const files = scaffoldFiles(projectName(dir), dependency);
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  const stdout = [
    `created ${dir}: ${Object.keys(files).join(', ')} (${own.name} ${dependency})`,
    'next:',
    `  cd ${dir}`,
    '  npm install',
    `  npm run synth        # validates ${GRID_FILE}, then writes dist/`,
    '  git init && git add . && git commit -m "grid: initial declaration and manifests"',
    `then edit ${GRID_FILE} (your editor explains each field), npm run synth, review the diff, commit.`,
    '',
  ].join('\n');
  return { stdout, exitCode: 0 };
}

export function declarationFile(positionals: readonly string[]): string {
  const file = positionals[0] ?? GRID_FILE;
  if (!existsSync(file))
    throw new CliError(`${file}: no such file (run in a grid repository, or name the declaration file)`, 2);
  return file;
}

export function problemsResult(file: string, problems: readonly string[]): CommandResult {
  const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
  return { stdout: '', stderr: [`${file}: ${count}, nothing written:`, ...problems].join('\n'), exitCode: 1 };
}

async function compiler() {
  const [file, errors] = await Promise.all([
    import('../../constructs/grid-file.ts'),
    import('../../constructs/synth-error.ts'),
  ]);
  return { ...file, ...errors };
}

async function guarded<T>(run: () => Promise<T>, GridFileError: new (message: string) => Error): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof GridFileError) throw new CliError(error.message, 1);
    throw error;
  }
}

export async function validateCommand(args: readonly string[]): Promise<CommandResult> {
  const { positionals } = parse(args, VALIDATE_USAGE, {}, 1);
  const file = declarationFile(positionals);
  const { validateGridFile, GridFileError } = await compiler();
  const { declaration, problems } = await guarded(() => validateGridFile(file), GridFileError);
  if (problems.length > 0) return problemsResult(file, problems);
  const sites = declaration.sites.map((site) => site.name);
  return {
    stdout: `ok: ${file}: network ${declaration.network.name}, ${sites.length === 1 ? '1 site' : `${sites.length} sites`} (${sites.join(', ')})\n`,
    exitCode: 0,
  };
}

export async function synthCommand(args: readonly string[]): Promise<CommandResult> {
  const { values, positionals } = parse(args, SYNTH_USAGE, { out: { type: 'string' } }, 1);
  const file = declarationFile(positionals);
  // cdk8s synth passes its output directory in CDK8S_OUTDIR.
  const outdir = values.out ?? process.env['CDK8S_OUTDIR'] ?? 'dist';
  const { synthGridFile, GridFileError, GridSynthError } = await compiler();
  try {
    const declaration = await guarded(() => synthGridFile(file, outdir), GridFileError);
    const files = ['crds', ...declaration.sites.map((site) => site.name)].map((name) => `${name}.k8s.yaml`);
    return { stdout: `synthesized ${file} into ${outdir}: ${files.join(', ')}\n`, exitCode: 0 };
  } catch (error) {
    if (error instanceof GridSynthError) return problemsResult(file, error.lines);
    throw error;
  }
}
