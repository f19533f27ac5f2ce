import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  APP_PATHS,
  IMAGE_DAEMONS,
  IMAGE_UID,
  RUNTIME_IMPORTS,
  imageConfig,
  isPrunedPackageFile,
  runtimePackages,
  type LockEntry,
} from '../../image/layout.ts';
import { CONTAINER_SECURITY, POD_SECURITY } from '../../constructs/workload-defaults.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const IMPORT =
  /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s*['"]([^'"]+)['"]/gmu;

/** Every file the daemons load (following relative imports from each main.ts) and the bare packages they import. */
function daemonImports(): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const walk = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    if (!file.endsWith('.ts')) return;
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2] ?? match[3] ?? '';
      if (specifier.startsWith('.')) walk(resolve(dirname(file), specifier));
      else if (!specifier.startsWith('node:'))
        packages.add(
          specifier
            .split('/')
            .slice(0, specifier.startsWith('@') ? 2 : 1)
            .join('/'),
        );
    }
  };
  for (const daemon of IMAGE_DAEMONS) walk(join(ROOT, 'daemons', daemon, 'main.ts'));
  return { files, packages };
}

describe('image contents', () => {
  it('ships every file the daemons import and names every package they import', () => {
    const { files, packages } = daemonImports();
    const outside = [...files]
      .map((f) => relative(ROOT, f))
      .filter((f) => !APP_PATHS.some((p) => f === p || f.startsWith(`${p}/`)));
    expect(outside).toEqual([]);
    expect([...packages].sort()).toEqual([...RUNTIME_IMPORTS].sort());
  });

  it('runs as the user the compiled pods run as', () => {
    expect(CONTAINER_SECURITY.user).toBe(IMAGE_UID);
    expect(POD_SECURITY.user).toBe(IMAGE_UID);
    const config = imageConfig({ source: 's', revision: 'r', version: 'v', created: 'c' }, []).config as {
      User: string;
      Entrypoint: string[];
    };
    expect(config.User).toBe('10001:10001');
    expect(config.Entrypoint[0]?.startsWith('/')).toBe(true);
  });
});

describe('runtimePackages', () => {
  const lock: Record<string, LockEntry> = {
    'node_modules/a': { dependencies: { b: '1', c: '1' }, optionalDependencies: { gone: '1' } },
    'node_modules/b': { dependencies: { c: '2' } },
    'node_modules/b/node_modules/c': {},
    'node_modules/c': {},
    'node_modules/dev-only': { dev: true },
  };
  const all = (): boolean => true;

  it('resolves nested copies before hoisted ones, as Node does', () => {
    expect(runtimePackages(lock, ['a'], (p) => p !== 'node_modules/gone')).toEqual([
      'node_modules/a',
      'node_modules/b',
      'node_modules/b/node_modules/c',
      'node_modules/c',
    ]);
  });

  it('refuses a tree with a required package missing, naming who needs it', () => {
    expect(() => runtimePackages(lock, ['a'], (p) => p !== 'node_modules/c')).toThrow(
      /^c \(needed by node_modules\/a\) is not installed/u,
    );
    expect(() => runtimePackages(lock, ['nope'], all)).toThrow(/nope \(needed by the daemons\)/u);
  });
});

describe('isPrunedPackageFile', () => {
  it('drops what Node never loads and keeps what it does', () => {
    for (const path of [
      'dist/index.d.ts',
      'dist/index.js.map',
      'src/index.ts',
      'README.md',
      'test/a.js',
      'prebuilds/linux-x64/x.bare',
      'CHANGELOG',
    ]) {
      expect(isPrunedPackageFile(path), path).toBe(true);
    }
    for (const path of ['dist/index.js', 'index.mjs', 'lib/x.cjs', 'package.json', 'LICENSE', 'data/mime.json']) {
      expect(isPrunedPackageFile(path), path).toBe(false);
    }
  });
});
