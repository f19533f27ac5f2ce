// Reads a directory of Kubernetes manifests (for example `dist/`): `.yaml`/`.yml` files with any number of
// documents, `.json` files with one object or a `List`. A bad file or document is reported with its path
// and position and skipped; it never stops the others from loading.

import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from './types.ts';

export interface ManifestProblem {
  readonly file: string;
  /** 0-based document index inside a multi-document YAML file. */
  readonly document: number;
  readonly message: string;
}

export interface ManifestSet {
  readonly objects: KubeObject[];
  readonly problems: ManifestProblem[];
}

const MANIFEST_FILE = /\.(ya?ml|json)$/i;

async function manifestFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && MANIFEST_FILE.test(entry.name) && !entry.name.startsWith('.'))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

function checkObject(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'is not a mapping';
  const object = value as Record<string, unknown>;
  if (typeof object['apiVersion'] !== 'string' || object['apiVersion'] === '') return 'has no apiVersion';
  if (typeof object['kind'] !== 'string' || object['kind'] === '') return 'has no kind';
  const metadata = object['metadata'];
  if (typeof metadata !== 'object' || metadata === null) return 'has no metadata';
  const name = (metadata as Record<string, unknown>)['name'];
  if (typeof name !== 'string' || name === '') return 'has no metadata.name';
  return undefined;
}

function collect(value: unknown, file: string, document: number, out: ManifestSet): void {
  if (value === null || value === undefined) return; // an empty document between `---` separators
  const list = value as Record<string, unknown>;
  if (typeof list['kind'] === 'string' && list['kind'].endsWith('List') && Array.isArray(list['items'])) {
    for (const item of list['items']) collect(item, file, document, out);
    return;
  }
  const problem = checkObject(value);
  if (problem !== undefined) {
    out.problems.push({ file, document, message: `${file} document ${document}: object ${problem}; skipped` });
    return;
  }
  out.objects.push(value as KubeObject);
}

export async function loadManifests(directory: string): Promise<ManifestSet> {
  const out: ManifestSet = { objects: [], problems: [] };
  for (const path of await manifestFiles(directory)) {
    const file = relative(directory, path) || path;
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      out.problems.push({ file, document: 0, message: `${file}: cannot read (${(error as Error).message}); skipped` });
      continue;
    }
    if (/\.json$/i.test(path)) {
      try {
        collect(JSON.parse(text), file, 0, out);
      } catch (error) {
        out.problems.push({
          file,
          document: 0,
          message: `${file}: invalid JSON (${(error as Error).message}); skipped`,
        });
      }
      continue;
    }
    parseAllDocuments(text).forEach((doc, index) => {
      if ('errors' in doc && doc.errors.length > 0) {
        const first = doc.errors[0];
        out.problems.push({
          file,
          document: index,
          message: `${file} document ${index}: invalid YAML (${first?.message ?? 'parse error'}); skipped`,
        });
        return;
      }
      collect(doc.toJS({ maxAliasCount: 100 }), file, index, out);
    });
  }
  return out;
}
