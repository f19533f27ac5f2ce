import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REFERENCE_REASON_ALIASES } from '../../schemas/overlay/reasons.ts';
import { REPO_ROOT, SHARED_FIXTURES } from '../fixtures-path.ts';
import { readNumberVectors } from '../schemas/number-vectors.ts';

interface Run {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** Runs the real `agn` entry point in a child process, as `npx agn` would. */
function agn(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args],
      { cwd: REPO_ROOT, encoding: 'buffer', maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr: stderr.toString('utf8') });
      },
    );
  });
}

const tmp = mkdtempSync(join(tmpdir(), 'agn-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
function tempFile(name: string, content: string | Buffer): string {
  const path = join(tmp, name);
  writeFileSync(path, content);
  return path;
}

/** One clear line on stderr: no stack frame, no multi-line dump. */
function expectOneLine(stderr: string): void {
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(stderr).not.toMatch(/\n\s+at /);
  expect(stderr).not.toMatch(/Error:/);
}

const RFC = join(SHARED_FIXTURES, 'rfc8785');
const CONTRACT = join(SHARED_FIXTURES, 'overlay-contract-v1');

describe('agn canonical', () => {
  it.each(readdirSync(join(RFC, 'input')))(
    'prints the official canonical bytes of %s with no newline added',
    async (file) => {
      const run = await agn('canonical', join(RFC, 'input', file));
      expect(run.code).toBe(0);
      expect(run.stdout.equals(readFileSync(join(RFC, 'output', file)))).toBe(true);
    },
  );

  it('formats all 10 000 number vectors as ECMAScript does', async () => {
    const vectors = readNumberVectors();
    // 17 significant digits round-trip every double, so the input text is independent of the expected text.
    const input = tempFile(
      'numbers.json',
      `[${vectors.map((v) => (Object.is(v.value, -0) ? '-0' : v.value.toPrecision(17))).join(',\n')}]`,
    );
    const run = await agn('canonical', input);
    expect(run.code).toBe(0);
    const printed = run.stdout.toString('utf8').slice(1, -1).split(',');
    expect(printed).toHaveLength(10_000);
    const wrong = vectors.filter((v, i) => printed[i] !== v.expected).map((v) => v.bits);
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it.each([
    ['a number too large for a double', '[1e400]', /Infinity is not a finite number/],
    ['a lone surrogate', '{"k":"\\udead"}', /lone surrogate U\+DEAD/],
    ['invalid JSON', '{"a":', /not valid JSON/],
  ])('refuses %s with exit 1 and one line', async (_name, content, message) => {
    const run = await agn('canonical', tempFile('bad.json', content));
    expect(run.code).toBe(1);
    expect(run.stdout.length).toBe(0);
    expect(run.stderr).toMatch(message);
    expectOneLine(run.stderr);
  });
});

describe('agn stable-id', () => {
  it('prints 8 hex digits and a newline', async () => {
    const run = await agn('stable-id', 'inference_model', 'foo', 'bar', 'baz');
    expect(run.code).toBe(0);
    expect(run.stdout.toString()).toMatch(/^[0-9a-f]{8}\n$/);
  });
});

describe('agn overlay verify and revision on the contract fixtures', () => {
  const manifest = JSON.parse(readFileSync(join(CONTRACT, 'manifest.json'), 'utf8')).fixtures as Record<
    string,
    { expected: string; reason?: string; revision?: string }
  >;

  it.each(Object.entries(manifest))('%s', async (file, expectation) => {
    const path = join(CONTRACT, file);
    const strict = await agn('overlay', 'verify', path);
    const legacy = await agn('overlay', 'verify', path, '--legacy');
    if (expectation.expected === 'accept') {
      expect([strict.code, strict.stdout.toString()]).toEqual([0, `accept ${expectation.revision}\n`]);
      expect(legacy.stdout.toString()).toBe(`accept ${expectation.revision}\n`);
      const revision = await agn('overlay', 'revision', path);
      expect(revision.stdout.toString()).toBe(`${expectation.revision}\n`);
    } else if (expectation.expected === 'accept_legacy') {
      expect([legacy.code, legacy.stdout.toString()]).toEqual([0, 'accept-legacy\n']);
      expect([strict.code, strict.stdout.toString()]).toEqual([1, 'reject malformed\n']);
    } else {
      const reason = REFERENCE_REASON_ALIASES[expectation.reason!] ?? expectation.reason;
      expect([strict.code, strict.stdout.toString()]).toEqual([1, `reject ${reason}\n`]);
      expect(legacy.stdout.toString()).toBe(`reject ${reason}\n`);
      expectOneLine(strict.stderr);
    }
  });

  it('accepts valid-selection-policy.json with its revision', async () => {
    const run = await agn('overlay', 'verify', join(CONTRACT, 'valid-selection-policy.json'));
    expect(run.stdout.toString()).toBe('accept d3321586b5e414b8bd80c07a9d16ac10dce38d6810e3591a8526a6bdd0639007\n');
  });

  it('checks the expected scope flags and the size limit', async () => {
    const file = join(CONTRACT, 'valid-multi-candidate.json');
    const scoped = [
      '--network',
      'glb-demo',
      '--gateway',
      'glb-demo-edge-gateway',
      '--namespace',
      'grid-system',
      '--local-site',
      'east-edge',
    ];
    expect((await agn('overlay', 'verify', file, ...scoped)).code).toBe(0);
    const wrong = await agn('overlay', 'verify', file, '--gateway', 'other-gateway');
    expect([wrong.code, wrong.stdout.toString()]).toEqual([1, 'reject scope_mismatch\n']);
    const small = await agn('overlay', 'verify', file, '--max-bytes', '100');
    expect([small.code, small.stdout.toString()]).toEqual([1, 'reject oversized\n']);
    const legacyScoped = await agn(
      'overlay',
      'verify',
      join(CONTRACT, 'legacy-payload.json'),
      '--legacy',
      '--network',
      'glb-demo',
    );
    expect(legacyScoped.stdout.toString()).toBe('reject malformed\n');
  });

  it('revision of a bare payload equals the revision of the envelope that carries it', async () => {
    const envelope = JSON.parse(readFileSync(join(CONTRACT, 'valid-multi-candidate.json'), 'utf8'));
    const bare = tempFile('bare.json', JSON.stringify(envelope.overlay));
    expect((await agn('overlay', 'revision', bare)).stdout.toString()).toBe(`${envelope.revision.value}\n`);
  });
});

describe('agn overlay verify --consumer', () => {
  // The example grid's overlays as the operator renders them (test/routing/example-grid.test.ts):
  // our gateway's carries selection_policy weightedRandom with traffic weights, the Praxis AI main one has neither.
  const ours = join(REPO_ROOT, 'test', 'fixtures', 'routing', 'example-grid.consumer-gateway.overlay.json');
  const praxisMain = join(REPO_ROOT, 'test', 'fixtures', 'routing', 'example-grid.praxis-ai.overlay.json');
  const revisionOf = (file: string) =>
    (JSON.parse(readFileSync(file, 'utf8')) as { revision: { value: string } }).revision.value;

  it('accepts for every consumer an overlay without selection_policy, with the same revision', async () => {
    for (const consumer of ['agn', 'praxis-main', 'praxis-groups']) {
      const run = await agn('overlay', 'verify', '--consumer', consumer, praxisMain);
      expect([run.code, run.stdout.toString(), run.stderr]).toEqual([0, `accept ${revisionOf(praxisMain)}\n`, '']);
    }
  });

  it('praxis-main rejects an overlay carrying selection_policy as the digest mismatch Praxis reports', async () => {
    // praxis-proxy/ai@aa2b3feb filters/src/routing/overlay.rs: no selection_policy in OverlayDocument (208-222), the
    // digest over candidates, local_site and network only (606-617), "envelope digest mismatch" (428-431).
    const run = await agn('overlay', 'verify', ours, '--consumer', 'praxis-main');
    expect([run.code, run.stdout.toString()]).toEqual([1, 'reject digest_mismatch\n']);
    expect(run.stderr).toMatch(/praxis-main computes without selection_policy/);
    expectOneLine(run.stderr);
    // Without --consumer (agn) the same file is accepted: the flag is what changes the verdict.
    expect((await agn('overlay', 'verify', ours)).stdout.toString()).toBe(`accept ${revisionOf(ours)}\n`);
  });

  it('praxis-groups rejects weightedRandom naming the variant', async () => {
    // PR #731: modes deterministic, roundRobin, random; serde's "unknown variant `weightedRandom`".
    const run = await agn('overlay', 'verify', '--consumer', 'praxis-groups', ours);
    expect([run.code, run.stdout.toString()]).toEqual([1, 'reject invalid_selection_policy\n']);
    expect(run.stderr).toMatch(/unknown variant "weightedRandom"/);
    expectOneLine(run.stderr);
  });

  it('both Praxis dialects reject a schema_version other than "1.0.0"; agn accepts 1.x', async () => {
    // praxis-proxy/ai@aa2b3feb overlay.rs 198 and 409-414: schema_version compared with "1.0.0" exactly.
    const doc = JSON.parse(readFileSync(praxisMain, 'utf8'));
    doc.schema_version = '1.1.0';
    const file = tempFile('schema-1.1.0.json', JSON.stringify(doc));
    for (const consumer of ['praxis-main', 'praxis-groups']) {
      const run = await agn('overlay', 'verify', file, '--consumer', consumer);
      expect([run.code, run.stdout.toString()]).toEqual([1, 'reject unsupported_schema\n']);
      expect(run.stderr).toMatch(/exactly "1\.0\.0"/);
    }
    expect((await agn('overlay', 'verify', file, '--consumer', 'agn')).stdout.toString()).toBe(
      `accept ${revisionOf(praxisMain)}\n`,
    );
  });
});

describe('agn overlay configmap-name', () => {
  it('prints the docs/contract.md §2.1 name', async () => {
    expect((await agn('overlay', 'configmap-name', 'production', 'inference-gw')).stdout.toString()).toBe(
      'grid-overlay-production-inference-gw\n',
    );
  });
});

describe('agn --help', () => {
  it('lists every command with one line each', async () => {
    const run = await agn('--help');
    expect(run.code).toBe(0);
    const text = run.stdout.toString();
    for (const command of [
      'up',
      'canonical FILE',
      'stable-id KIND NAME SITE CLUSTER',
      'overlay revision FILE',
      'overlay verify FILE',
      'overlay configmap-name NETWORK GATEWAY',
      '--help',
    ]) {
      expect(text.split('\n').filter((line) => line.startsWith(`  agn ${command}`))).toHaveLength(1);
    }
  });
});

describe('bad input to every command: one clear line, non-zero exit', () => {
  it.each([
    [['canonical'], 2, /usage: agn canonical FILE/],
    [['canonical', '/nonexistent/file.json'], 2, /cannot read \/nonexistent\/file.json: no such file/],
    [['canonical', '/'], 2, /cannot read \/: is a directory/],
    [['stable-id', 'inference_model', 'a', 'b'], 2, /expected 4 argument\(s\), got 3/],
    [['stable-id', 'a2a_agent', 'a', 'b', 'c'], 2, /KIND must be one of inference_model, mcp_tool/],
    [['stable-id', 'inference_model', '', 'b', 'c'], 2, /NAME must not be empty/],
    [['overlay', 'revision'], 2, /usage: agn overlay revision FILE/],
    [['overlay', 'revision', '/nonexistent.json'], 2, /no such file/],
    [['overlay', 'verify'], 2, /usage: agn overlay verify FILE/],
    [['overlay', 'verify', 'x.json', '--max-bytes', 'ten'], 2, /--max-bytes must be a positive integer/],
    [['overlay', 'verify', 'x.json', '--bogus'], 2, /Unknown option '--bogus'/],
    [['overlay', 'verify', 'x.json', '--network', ''], 2, /--network must not be empty/],
    [['overlay', 'verify', '/nonexistent.json'], 2, /cannot read \/nonexistent.json: no such file/],
    [
      ['overlay', 'verify', 'x.json', '--consumer', 'praxis'],
      2,
      /--consumer must be one of agn, praxis-main, praxis-groups, got "praxis"/,
    ],
    [
      ['overlay', 'verify', 'x.json', '--consumer', ''],
      2,
      /--consumer must be one of agn, praxis-main, praxis-groups, got ""/,
    ],
    [['overlay', 'verify', 'x.json', '--consumer'], 2, /--consumer/],
    [['overlay', 'configmap-name', 'net'], 2, /usage: agn overlay configmap-name NETWORK GATEWAY/],
    [['overlay', 'frobnicate'], 2, /unknown overlay command "frobnicate"/],
    [['frobnicate'], 2, /unknown command "frobnicate"/],
  ] as [string[], number, RegExp][])('agn %j', async (args, code, message) => {
    const run = await agn(...args);
    expect(run.code).toBe(code);
    expect(run.stderr).toMatch(message);
    expectOneLine(run.stderr);
  });

  it.each([
    ['an array', '[]', /an overlay must be a JSON object/],
    ['an object without candidates', '{"network":"n"}', /no routing payload found/],
    ['invalid JSON', '{', /not valid JSON/],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), /not valid UTF-8/],
  ])('agn overlay revision on %s exits 1 with one line', async (_name, content, message) => {
    const run = await agn('overlay', 'revision', tempFile('rev.json', content));
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(message);
    expectOneLine(run.stderr);
  });

  it('agn overlay verify on garbage rejects it as malformed with the detail on stderr', async () => {
    const run = await agn('overlay', 'verify', tempFile('garbage.json', 'not json at all'));
    expect([run.code, run.stdout.toString()]).toEqual([1, 'reject malformed\n']);
    expectOneLine(run.stderr);
  });
});
