// No module of the daemons, the schemas or the constructs imports itself back through others: each room can be read
// (and moved) from its own imports down. Type-only imports count too: they tie the files together as much for a
// reader. The detector is checked on a graph with a known circle first, so an empty answer means something.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';

const ROOMS = ['daemons', 'schemas', 'constructs'];
// Static `import ... from '...'`, `import '...'` and `export ... from '...'` of a relative module.
const SPECIFIER = /^\s*(?:import|export)\b[^'"]*?(?:from\s*)?['"](\.{1,2}\/[^'"]+)['"]/gmu;

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory())
      return entry.name === 'node_modules' || entry.name === 'generated-dist' ? [] : tsFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function importGraph(root: string): Map<string, string[]> {
  const files = ROOMS.flatMap((room) => tsFiles(join(root, room)));
  const known = new Set(files);
  return new Map(
    files.map((file) => {
      const text = readFileSync(file, 'utf8');
      const deps = [...text.matchAll(SPECIFIER)]
        .map((m) => normalize(join(dirname(file), m[1]!)))
        .filter((dep) => known.has(dep));
      return [file, [...new Set(deps)]];
    }),
  );
}

/** The strongly connected components of more than one module, and modules importing themselves (Tarjan). */
function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return circles;
}

describe('import circles', () => {
  it('finds a circle where there is one (the detector itself)', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['e', ['e']],
    ]);
    expect(importCircles(graph)).toEqual([['a', 'b', 'c'], ['e']]);
    expect(
      importCircles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('reads every kind of relative import', () => {
    const text =
      "import type { A } from './a.ts';\nimport { B } from \"../b.ts\";\nexport { C } from './c.ts';\nexport * from './d.ts';\nimport './e.ts';\nconst x = 'not ./f.ts';";
    expect([...text.matchAll(SPECIFIER)].map((m) => m[1])).toEqual(['./a.ts', '../b.ts', './c.ts', './d.ts', './e.ts']);
  });

  it('has none in daemons/, schemas/ and constructs/', () => {
    const graph = importGraph(REPO_ROOT);
    expect(graph.size).toBeGreaterThan(300);
    expect(importCircles(graph).map((c) => c.map((f) => relative(REPO_ROOT, f)))).toEqual([]);
  });
});

/**
 * Each daemon's room holds that daemon: what two of them use lives in daemons/shared/, daemons/routing/ or, as a
 * contract, schemas/. The agn command and the local grid runner start the daemons, so they may import them.
 */
const SHARED_ROOMS = new Set(['shared', 'routing']);
const LAUNCHERS = new Set(['cli', 'local-grid']);

function crossRoomImports(graph: ReadonlyMap<string, readonly string[]>, root: string): string[] {
  const roomOf = (file: string): string | undefined => {
    const [top, room] = relative(root, file).split('/');
    return top === 'daemons' ? room : top;
  };
  return [...graph].flatMap(([file, deps]) => {
    const from = roomOf(file);
    if (from === undefined || LAUNCHERS.has(from)) return [];
    return deps
      .filter((dep) => {
        const to = roomOf(dep);
        const inDaemons = relative(root, dep).startsWith('daemons/');
        // The contracts and the compiler stand on their own: neither reaches into the runtime.
        if (from === 'schemas' || from === 'constructs') return inDaemons;
        if (to === 'constructs') return true;
        return inDaemons && to !== from && !SHARED_ROOMS.has(to ?? '');
      })
      .map((dep) => `${relative(root, file)} -> ${relative(root, dep)}`);
  });
}

describe('rooms', () => {
  it('finds a daemon reaching into another (the detector itself)', () => {
    const root = '/r';
    const graph = new Map([
      ['/r/daemons/gateway/a.ts', ['/r/daemons/gossip-operator/b.ts', '/r/daemons/shared/c.ts', '/r/schemas/d.ts']],
      ['/r/daemons/cli/e.ts', ['/r/daemons/gateway/a.ts']],
      ['/r/schemas/d.ts', ['/r/daemons/shared/c.ts']],
      ['/r/constructs/f.ts', ['/r/schemas/d.ts', '/r/daemons/routing/g.ts']],
      ['/r/daemons/sim/h.ts', ['/r/constructs/f.ts', '/r/daemons/routing/g.ts']],
    ]);
    expect(crossRoomImports(graph, root)).toEqual([
      'daemons/gateway/a.ts -> daemons/gossip-operator/b.ts',
      'schemas/d.ts -> daemons/shared/c.ts',
      'constructs/f.ts -> daemons/routing/g.ts',
      'daemons/sim/h.ts -> constructs/f.ts',
    ]);
  });

  it('no daemon imports another daemon or the compiler, and neither schemas/ nor constructs/ imports a daemon', () => {
    expect(crossRoomImports(importGraph(REPO_ROOT), REPO_ROOT)).toEqual([]);
  });
});
