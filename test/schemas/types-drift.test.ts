// The generated types must be exactly what `npm run gen:types` produces from the schemas (DESIGN.md: one source of
// truth per contract). The check runs the real script as a child process, as CI and developers do.
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  GENERATED_HEADER,
  checkDrift,
  findSchemaFiles,
  generateTypes,
  writeTypes,
} from '../../schemas/codegen/generate-types.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = join(ROOT, 'schemas/codegen/generate-types.ts');

async function gen(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [SCRIPT, ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('generated types', () => {
  it('are up to date with every schemas/**/*.schema.json (node schemas/codegen/generate-types.ts --check)', async () => {
    const result = await gen(['--check']);
    expect(result.stdout + result.stderr).toContain('generated types are up to date');
    expect(result.code).toBe(0);
  });

  it('include the CRD types under readable names', async () => {
    const text = await readFile(join(ROOT, 'schemas/generated/gridnetworks.ts'), 'utf8');
    expect(text.split('\n')[0]).toContain(GENERATED_HEADER);
    for (const name of [
      'GridNetwork',
      'GridNetworkSpec',
      'GridNetworkStatus',
      'GatewayRef',
      'PraxisConfig',
      'PressurePolicy',
      'Condition',
    ]) {
      expect(text).toMatch(new RegExp(`^export interface ${name} \\{`, 'm'));
    }
    // One SecretRef type for the four Secret references, not SecretRef1..3.
    expect(text).not.toMatch(/SecretRef\d/);
  });
});

describe('gen:types on a scratch tree', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  async function scratch(): Promise<string> {
    dir = await mkdtemp(join(tmpdir(), 'gen-types-'));
    await mkdir(join(dir, 'schemas', 'widgets'), { recursive: true });
    await writeFile(
      join(dir, 'schemas', 'widgets', 'widget.schema.json'),
      JSON.stringify({
        title: 'Widget',
        type: 'object',
        required: ['size'],
        properties: {
          size: { type: 'integer', maxItems: 3 },
          port: { 'x-kubernetes-int-or-string': true },
          extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          tags: { type: 'array', maxItems: 2, items: { type: 'string' } },
        },
      }),
    );
    return dir;
  }

  it('writes schemas/generated/<basename>.ts with the header, and is deterministic', async () => {
    const root = await scratch();
    const first = await generateTypes(root, await findSchemaFiles(root));
    const second = await generateTypes(root, await findSchemaFiles(root));
    expect(second).toEqual(first);
    expect(first.map((f) => f.path)).toEqual(['schemas/generated/widget.ts']);
    const text = first[0]!.content;
    expect(text).toContain(`${GENERATED_HEADER} (source: schemas/widgets/widget.schema.json)`);
    expect(text).toContain('export interface Widget {');
    expect(text).toContain('size: number;');
    expect(text).toContain('port?: number | string;');
    expect(text).toMatch(/extra\?: \{\s+\[k: string\]: unknown/);
    expect(text).toContain('tags?: string[];');
  });

  it('--check exits 1 listing a drifted and a stale file, and writes nothing', async () => {
    const root = await scratch();
    expect((await checkDrift(root)).drifted).toEqual(['schemas/generated/widget.ts']); // missing
    await writeTypes(root);
    expect(await checkDrift(root)).toEqual({ drifted: [], stale: [] });

    const generated = join(root, 'schemas/generated/widget.ts');
    await writeFile(generated, `${await readFile(generated, 'utf8')}// hand edit\n`);
    await writeFile(
      join(root, 'schemas/generated/gone.ts'),
      `/* ${GENERATED_HEADER} (source: schemas/gone.schema.json) */\n`,
    );
    const result = await gen([`--root=${root}`, '--check']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('drifted: schemas/generated/widget.ts');
    expect(result.stdout).toContain('stale (schema removed): schemas/generated/gone.ts');
    expect(await readFile(generated, 'utf8')).toContain('// hand edit');

    expect(await writeTypes(root)).toEqual({
      written: ['schemas/generated/widget.ts'],
      removed: ['schemas/generated/gone.ts'],
    });
    expect(await checkDrift(root)).toEqual({ drifted: [], stale: [] });
  });

  it('fails with a message naming the file when a schema is not JSON', async () => {
    const root = await scratch();
    await writeFile(join(root, 'schemas', 'widgets', 'broken.schema.json'), '{ not json');
    await expect(checkDrift(root)).rejects.toThrow(/^schemas\/widgets\/broken\.schema\.json: not valid JSON/);
  });

  it('refuses two schemas that would generate the same file', async () => {
    const root = await scratch();
    await mkdir(join(root, 'schemas', 'other'));
    await writeFile(
      join(root, 'schemas', 'other', 'widget.schema.json'),
      JSON.stringify({ title: 'Other', type: 'object' }),
    );
    await expect(generateTypes(root, await findSchemaFiles(root))).rejects.toThrow(
      /would both generate schemas\/generated\/widget\.ts/,
    );
  });
});
