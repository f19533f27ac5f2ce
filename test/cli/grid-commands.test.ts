// agn init / validate / synth run from this repository, as a child process like `npx agn`. The scaffold's grid.ts
// imports only types from the package, so it loads and compiles here without an install (the installed-package
// run is test/package/package.test.ts).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import starterGrid from '../../constructs/starter-grid.ts';
import { synthGrid } from '../../constructs/grid.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { MISTAKES, withMistakes, withSecondSite } from '../package/declarations.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function agn(cwd: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args],
      { cwd, env: { ...process.env, CDK8S_OUTDIR: '' } },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      },
    );
  });
}

/** The scaffold imports its values from the package; without an install, from this repository's constructs. */
const CONSTRUCTS = join(REPO_ROOT, 'constructs', 'index.ts');
const tmp = mkdtempSync(join(tmpdir(), 'agn-grid-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function files(dir: string): Record<string, string> {
  return Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((file) => [file, readFileSync(join(dir, file), 'utf8')]),
  );
}

describe('agn init', () => {
  it('scaffolds a grid repository that depends on this version and prints the next steps', async () => {
    const dir = join(tmp, 'my-grid');
    const run = await agn(tmp, 'init', 'my-grid');
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain(
      `created my-grid: package.json, cdk8s.yaml, grid.ts, tsconfig.json, .gitignore, README.md (agn-ts ${version})`,
    );
    expect(run.stdout).toContain('  npm install\n  npm run synth');
    expect(readdirSync(dir).sort()).toEqual([
      '.gitignore',
      'README.md',
      'cdk8s.yaml',
      'grid.ts',
      'package.json',
      'tsconfig.json',
    ]);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string>
    >;
    expect(manifest['dependencies']).toEqual({ 'agn-ts': version });
    expect(Object.keys(manifest['devDependencies'] ?? {}).sort()).toEqual(['cdk8s-cli', 'node']);
    // Validation before cdk8s synth, which empties dist/ first.
    expect(manifest['scripts']?.['synth']).toBe('agn validate grid.ts && cdk8s synth');
    expect(readFileSync(join(dir, 'cdk8s.yaml'), 'utf8')).toBe(
      'language: typescript\napp: agn synth grid.ts\noutput: dist\n',
    );
    const grid = readFileSync(join(dir, 'grid.ts'), 'utf8');
    expect(grid).toContain("import type { GridDeclaration } from 'agn-ts';");
    expect(grid).not.toContain('index.ts');
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('npm run synth');
  });

  it('writes the dependency spec it is given (a packed tarball for a test, a range for a user)', async () => {
    expect((await agn(tmp, 'init', 'pinned', '--package', 'file:/somewhere/agn-ts-9.9.9.tgz')).code).toBe(0);
    expect(JSON.parse(readFileSync(join(tmp, 'pinned', 'package.json'), 'utf8')).dependencies).toEqual({
      'agn-ts': 'file:/somewhere/agn-ts-9.9.9.tgz',
    });
  });

  it('refuses a non-empty directory unless --force, and leaves it untouched', async () => {
    const dir = join(tmp, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'grid.ts'), 'mine');
    const refused = await agn(tmp, 'init', 'taken');
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toBe(
      'agn: init: taken is not empty; choose an empty or new directory, or pass --force to write the scaffold files into it\n',
    );
    expect(readdirSync(dir)).toEqual(['grid.ts']);
    expect(readFileSync(join(dir, 'grid.ts'), 'utf8')).toBe('mine');
    expect((await agn(tmp, 'init', 'taken', '--force')).code).toBe(0);
    expect(readFileSync(join(dir, 'grid.ts'), 'utf8')).toContain('GridDeclaration');
  });

  it('answers usage mistakes with one line and exit 2', async () => {
    for (const args of [['init'], ['init', 'a', 'b'], ['init', 'a', '--frobnicate'], ['synth', 'grid.ts', '--out']]) {
      const run = await agn(tmp, ...args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
    const help = await agn(tmp, 'init', '--help');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage: agn init DIR/u);
  });
});

describe('agn validate and agn synth', () => {
  const dir = join(tmp, 'grid');

  it('validates and compiles the scaffold unedited, to what synthGrid gives for the starter declaration', async () => {
    expect((await agn(tmp, 'init', 'grid')).code).toBe(0);
    expect(await agn(dir, 'validate')).toEqual({
      code: 0,
      stdout: 'ok: grid.ts: network my-grid, 1 site (east)\n',
      stderr: '',
    });
    const run = await agn(dir, 'synth', '--out', 'out');
    expect(run).toEqual({
      code: 0,
      stdout: 'synthesized grid.ts into out: crds.k8s.yaml, east.k8s.yaml\n',
      stderr: '',
    });
    synthGrid(starterGrid, join(tmp, 'expected'));
    expect(files(join(dir, 'out'))).toEqual(files(join(tmp, 'expected')));
  });

  it('compiles an edited declaration with a second site and providers, once agn pki init made its pins', async () => {
    writeFileSync(join(dir, 'two.ts'), withSecondSite(readFileSync(join(dir, 'grid.ts'), 'utf8'), CONSTRUCTS));
    const unpinned = await agn(dir, 'validate', 'two.ts');
    expect(unpinned.code).toBe(1);
    expect(unpinned.stderr).toContain(
      "west: trust: no certificate pin for site west's provider gateway (gateway.west.example.com:8443)",
    );
    const init = await agn(dir, 'pki', 'init', 'two.ts');
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toContain('wrote grid-trust.json (pins: east 1, west 1;');
    expect((await agn(dir, 'validate', 'two.ts')).stdout).toBe('ok: two.ts: network my-grid, 2 sites (east, west)\n');
    expect((await agn(dir, 'synth', 'two.ts', '--out', 'two')).code).toBe(0);
    expect(readdirSync(join(dir, 'two')).sort()).toEqual(['crds.k8s.yaml', 'east.k8s.yaml', 'west.k8s.yaml']);
    expect(readFileSync(join(dir, 'two', 'west.k8s.yaml'), 'utf8')).toContain('https://api.openai.com');
  });

  it('reports every mistake of every site at once, naming site, provider, field and rule, and writes nothing', async () => {
    writeFileSync(join(dir, 'broken.ts'), withMistakes(readFileSync(join(dir, 'grid.ts'), 'utf8'), CONSTRUCTS));
    const expected = ['broken.ts: 4 problems, nothing written:', ...MISTAKES, ''].join('\n');
    expect(await agn(dir, 'validate', 'broken.ts')).toEqual({ code: 1, stdout: '', stderr: expected });
    expect(await agn(dir, 'synth', 'broken.ts', '--out', 'broken')).toEqual({ code: 1, stdout: '', stderr: expected });
    expect(existsSync(join(dir, 'broken'))).toBe(false);
  });

  it('names the file when it is missing, does not load, or exports no declaration', async () => {
    expect(await agn(tmp, 'validate')).toEqual({
      code: 2,
      stdout: '',
      stderr: 'agn: grid.ts: no such file (run in a grid repository, or name the declaration file)\n',
    });
    writeFileSync(join(dir, 'nodefault.ts'), 'export const grid = {};\n');
    expect((await agn(dir, 'validate', 'nodefault.ts')).stderr).toBe(
      'agn: nodefault.ts: has no default export (end it with `export default grid;`, grid being a GridDeclaration)\n',
    );
    writeFileSync(join(dir, 'nosites.ts'), "export default { network: { name: 'n' } };\n");
    expect((await agn(dir, 'validate', 'nosites.ts')).stderr).toBe(
      'agn: nosites.ts: sites: a GridDeclaration needs sites: [ ... ] (a list of sites)\n',
    );
    writeFileSync(join(dir, 'syntax.ts'), 'export default {\n');
    const syntax = await agn(dir, 'validate', 'syntax.ts');
    expect(syntax.code).toBe(1);
    expect(syntax.stderr).toMatch(/^agn: syntax\.ts: could not load the declaration: .+\n$/u);
  });
});
