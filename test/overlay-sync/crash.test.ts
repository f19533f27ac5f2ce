// A writer killed at a random moment (SIGKILL: no cleanup runs) never leaves a partial or invalid overlay
// file: the output is always exactly one of the complete documents, and what a kill between write and
// rename leaves behind is a temp file that the next start removes.

import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { stripTypeScriptTypes } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeStaleTempFiles } from '../../daemons/shared/resource-store/atomic-write.ts';
import { validateOverlay } from '../../schemas/overlay/validate.ts';
import { makeTempDir, REPO_ROOT } from './helpers.ts';
import { seededRandom as mulberry32 } from '../../daemons/shared/seeded-random.ts';
import { makeOverlay } from './overlays.ts';

const ITERATIONS = 200;
const LANES = 2;
const MAX_KILL_DELAY_MS = 25;
const WRITER_SOURCE = join(REPO_ROOT, 'daemons/shared/resource-store/atomic-write.ts');

// The child replaces the file with the real writer in a tight loop, alternating two valid documents, until
// it is killed. The writer's own source is type-stripped here once (what Node does on every start) so each
// of the 200 children starts as plain JavaScript: the TypeScript loader would triple the CPU per spawn.
const CHILD_SOURCE = `
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from './atomic-write.mjs';
const [output, first, second] = process.argv.slice(2);
const payloads = [await readFile(first), await readFile(second)];
process.stdout.write('ready\\n');
for (let i = 0; ; i += 1) await writeFileAtomic(output, payloads[i % 2]);
`;

describe('atomic overlay write under SIGKILL', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  const docs: string[] = [];

  beforeAll(async () => {
    dir = await makeTempDir('sync-crash');
    // ~130 KB each, so a good share of the loop is spent between open and rename.
    docs.push(makeOverlay(1, 400), makeOverlay(2, 400));
    await writeFile(join(dir.path, 'a.json'), docs[0]!);
    await writeFile(join(dir.path, 'b.json'), docs[1]!);
    await writeFile(join(dir.path, 'atomic-write.mjs'), stripTypeScriptTypes(await readFile(WRITER_SOURCE, 'utf8')));
    await writeFile(join(dir.path, 'write-loop.mjs'), CHILD_SOURCE);
  });
  afterAll(async () => {
    await dir.remove();
  });

  it(`output is always one complete valid document across ${ITERATIONS} random kills`, {
    timeout: 240_000,
  }, async () => {
    const seed = Date.now() % 1_000_000;
    const random = mulberry32(seed);
    let tempFilesLeft = 0;
    let killsBeforeFirstWrite = 0;

    const lane = async (laneIndex: number): Promise<void> => {
      const output = join(dir.path, `lane-${laneIndex}`, 'routing-overlay.json');
      await import('node:fs/promises').then((fs) => fs.mkdir(join(dir.path, `lane-${laneIndex}`), { recursive: true }));
      await writeFile(output, docs[0]!);
      for (let i = laneIndex; i < ITERATIONS; i += LANES) {
        const delay = Math.floor(random() * MAX_KILL_DELAY_MS);
        const child = spawn(
          process.execPath,
          [join(dir.path, 'write-loop.mjs'), output, join(dir.path, 'a.json'), join(dir.path, 'b.json')],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        try {
          await new Promise<void>((resolve, reject) => {
            child.stdout.once('data', () => resolve());
            child.once('exit', (code) => reject(new Error(`writer exited early with ${code}`)));
          });
          await new Promise((r) => setTimeout(r, delay));
        } finally {
          child.kill('SIGKILL');
          await exited;
        }
        const bytes = await readFile(output, 'utf8');
        const which = docs.indexOf(bytes);
        expect(
          which,
          `iteration ${i} (seed ${seed}, delay ${delay} ms): output is not one of the complete documents`,
        ).toBeGreaterThanOrEqual(0);
        const verdict = validateOverlay(bytes, { maxBytes: 1 << 20, allowLegacy: false });
        expect(verdict.ok, `iteration ${i} (seed ${seed}): output does not validate`).toBe(true);
        if (delay === 0) killsBeforeFirstWrite += 1;
        tempFilesLeft += await removeStaleTempFiles(output);
        expect(await readdir(join(dir.path, `lane-${laneIndex}`))).toEqual(['routing-overlay.json']);
      }
    };
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)));
    // The kills really landed between write and rename (a temp file was left) at least once.
    expect(tempFilesLeft, `seed ${seed}`).toBeGreaterThan(0);
    expect(killsBeforeFirstWrite).toBeLessThan(ITERATIONS);
  });
});
