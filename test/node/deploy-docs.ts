// The commands of docs/deploy.md "4. Apply, per cluster", as the node suite runs them: the suite deploys each site
// with the blocks the page shows, not with a sequence of its own, so the page cannot drift from what works.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The marked blocks of the page: the one every site runs (`site=east` on its first line), and each site's own. */
export interface DeployBlocks {
  readonly everySite: string;
  readonly bySite: ReadonlyMap<string, string>;
}

const MARKED_BLOCK = /<!-- test\/node runs this block ([^>]*?) ?-->\n```sh\n([\s\S]*?)```/gu;

export function deployBlocks(markdown: string): DeployBlocks {
  let everySite: string | undefined;
  const bySite = new Map<string, string>();
  for (const [, says = '', body = ''] of markdown.matchAll(MARKED_BLOCK)) {
    const site = /^on (\w+)$/u.exec(says)?.[1];
    if (site !== undefined) bySite.set(site, body);
    else if (says.startsWith('as it stands')) everySite = body;
    else
      throw new Error(
        `docs/deploy.md: a block marked for test/node says "${says}": expected "on <site>" or "as it stands"`,
      );
  }
  if (everySite === undefined)
    throw new Error('docs/deploy.md: no block marked "test/node runs this block as it stands"');
  if (!/^site=east$/mu.test(everySite))
    throw new Error('docs/deploy.md: the every-site block does not start with site=east');
  return { everySite, bySite };
}

/** The every-site block for SITE: only its `site=` line changes, as the page tells the reader to change it. */
export function blockForSite(blocks: DeployBlocks, site: string): string {
  return blocks.everySite.replace(/^site=east$/mu, `site=${site}`);
}

/**
 * A grid repository as `agn init` lays it out and the page assumes: grid.ts (the example declaration), .pki (the
 * example PKI), dist/ (this repository's compiled manifests) and `npx agn` resolving to this repository's CLI.
 */
export function makeGridRepository(dir: string, repoRoot: string): string {
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'node-suite-grid', private: true, type: 'module' })}\n`,
  );
  writeFileSync(
    join(dir, 'grid.ts'),
    `export { default } from ${JSON.stringify(join(repoRoot, 'constructs', 'example-grid.ts'))};\n`,
  );
  symlinkSync(join(repoRoot, 'constructs', 'example-pki'), join(dir, '.pki'));
  symlinkSync(join(repoRoot, 'dist'), join(dir, 'dist'));
  symlinkSync(join(repoRoot, 'daemons', 'cli', 'agn.ts'), join(dir, 'node_modules', '.bin', 'agn'));
  return dir;
}

export interface BlockRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a block with bash -euo pipefail in the grid repository, kubectl on PATH pointed at one cluster. */
export function runBlock(
  script: string,
  options: { cwd: string; kubectlDir: string; kubeconfig: string; env?: Record<string, string>; timeoutMs: number },
): Promise<BlockRun> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-euo', 'pipefail', '-c', script],
      {
        cwd: options.cwd,
        encoding: 'utf8',
        timeout: options.timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          ...process.env,
          ...options.env,
          PATH: `${options.kubectlDir}:${process.env.PATH ?? ''}`,
          KUBECONFIG: options.kubeconfig,
          // npx must take the grid repository's agn, never ask the registry for a package of that name.
          npm_config_yes: 'false',
          npm_config_offline: 'true',
        },
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The deploy page as it is in the repository. */
export function readDeployPage(repoRoot: string): string {
  return readFileSync(join(repoRoot, 'docs', 'deploy.md'), 'utf8');
}
