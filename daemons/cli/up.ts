import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { CliError, usageError } from './cli-error.ts';
import type { CommandResult } from './overlay-commands.ts';

/**
 * `agn up` for now summarizes the compiled grid: per manifest file in dist/, how many objects of each kind. The local
 * grid runner (issue 9) starts the daemons from the same manifests.
 */
export function upCommand(args: readonly string[]): CommandResult {
  let dist = 'dist';
  try {
    const { values } = parseArgs({ args: [...args], options: { dist: { type: 'string' }, demo: { type: 'boolean' } }, strict: true });
    if (values.dist !== undefined) dist = values.dist;
  } catch (error) {
    throw usageError(String((error as Error).message).split('\n')[0] ?? 'invalid arguments');
  }
  let files: string[];
  try {
    files = readdirSync(dist).filter((f) => /\.ya?ml$/.test(f)).sort();
  } catch {
    throw new CliError(`cannot read ${dist}/: run "npx cdk8s synth" to compile the grid first`, 2);
  }
  if (files.length === 0) {
    return { stdout: `${dist}/ holds no manifests yet: run "npx cdk8s synth" to compile the example grid.\n`, exitCode: 0 };
  }
  const lines = [`Compiled grid in ${dist}/:`];
  for (const file of files) {
    const counts = new Map<string, number>();
    for (const doc of parseAllDocuments(readFileSync(join(dist, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new CliError(`${join(dist, file)}: ${doc.errors[0]?.message.split('\n')[0]}`, 1);
      const kind = (doc.toJS() as { kind?: unknown } | null)?.kind;
      if (typeof kind === 'string') counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    const summary = [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([kind, n]) => `${n} ${kind}`).join(', ');
    lines.push(`  ${file}: ${summary || 'no objects'}`);
  }
  return { stdout: `${lines.join('\n')}\n`, exitCode: 0 };
}
