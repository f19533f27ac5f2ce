// A grid repository's declaration file (`grid.ts`, `export default` a GridDeclaration): loaded, checked, compiled.
// `agn validate` and `agn synth` (the cdk8s app of a grid repository) are thin shells over these.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { GridDeclaration } from './grid-declaration.ts';
import { gridProblems, synthGrid } from './grid.ts';

/** The declaration file could not be used: not found, failed to load, or exports no declaration. */
export class GridFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GridFileError';
  }
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

/**
 * Imports `file` (TypeScript runs directly on Node 24: erasable syntax only) and returns its default export, which
 * must be a GridDeclaration (`{ network: { name }, sites: [...] }`); the fields themselves are checked by compiling.
 */
export async function loadGridDeclaration(file: string): Promise<GridDeclaration> {
  const path = resolve(file);
  if (!existsSync(path)) throw new GridFileError(`${file}: no such file`);
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(path).href)) as { default?: unknown };
  } catch (error) {
    throw new GridFileError(`${file}: could not load the declaration: ${firstLine(error)}`);
  }
  const declaration = module.default as Partial<GridDeclaration> | undefined;
  const problem =
    typeof declaration !== 'object' || declaration === null
      ? 'has no default export (end it with `export default grid;`, grid being a GridDeclaration)'
      : typeof declaration.network?.name !== 'string' || declaration.network.name === ''
        ? 'network.name: a GridDeclaration needs network: { name }'
        : !Array.isArray(declaration.sites)
          ? 'sites: a GridDeclaration needs sites: [ ... ] (a list of sites)'
          : undefined;
  if (problem !== undefined) throw new GridFileError(`${file}: ${problem}`);
  return declaration as GridDeclaration;
}

/** Every problem of the declaration in `file`, one line each; empty when it compiles. Writes nothing. */
export async function validateGridFile(
  file: string,
): Promise<{ readonly declaration: GridDeclaration; readonly problems: readonly string[] }> {
  const declaration = await loadGridDeclaration(file);
  return { declaration, problems: gridProblems(declaration) };
}

/** Compiles the declaration in `file` into `outdir`, or throws GridSynthError with every problem (nothing written). */
export async function synthGridFile(file: string, outdir: string): Promise<GridDeclaration> {
  const declaration = await loadGridDeclaration(file);
  synthGrid(declaration, outdir);
  return declaration;
}
