// `agn site keygen` and `agn site enroll` against a started operator serving the redeem endpoint: once through the
// real entry point (a child process, as a user runs it), then through the command functions it dispatches to. The
// key is made locally, the signer is verified against the grid CA bundle, the files land with the right modes, and
// every failure is one line naming what failed, never the token.
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certifiedIdentity, verifySiteBundle } from '../../daemons/gossip-operator/site-identity.ts';
import { CliError } from '../../daemons/cli/cli-error.ts';
import { enrollCommand, keygenCommand } from '../../daemons/cli/site-commands.ts';
import { createCertificateAuthority } from '../../daemons/shared/tls.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { grid, tempDir } from '../gossip-operator/helpers.ts';
import { createInvite, SIGNER, type Signer, startSigner } from '../gossip-operator/enrollment/helpers.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function agn(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args],
      { cwd: REPO_ROOT, env: { ...process.env, AGN_INVITE_TOKEN: '', ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        resolve({
          code: error ? (typeof error.code === 'number' ? error.code : -1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        });
      },
    );
  });
}

describe('agn site enroll', () => {
  let signer: Signer;
  let work: { path: string; remove: () => Promise<void> };
  const tokens: string[] = [];
  beforeAll(async () => {
    signer = await startSigner('cli-enroll');
    work = await tempDir('cli-enroll-work');
  });
  afterAll(async () => {
    await signer?.stop();
    await work?.remove();
  });
  const url = () => `https://127.0.0.1:${signer.port}`;
  const enrollArgs = (tokenId: string, tokenFile: string, site: string, out: string, extra: string[] = []) => [
    'site',
    'enroll',
    '--url',
    url(),
    '--ca',
    signer.files.caCertFile,
    '--token-id',
    tokenId,
    '--token-file',
    tokenFile,
    '--site',
    site,
    '--out',
    out,
    '--signer',
    SIGNER,
    ...extra,
  ];

  it('redeems an invite and writes tls.crt, tls.key (0600) and ca.crt that pass the peer chain check', async () => {
    const inv = await createInvite(signer, 'east2', { siteName: 'east2' });
    tokens.push(inv.token);
    const tokenFile = join(work.path, 'east2.token');
    writeFileSync(tokenFile, `${inv.token}\n`, { mode: 0o600 });
    const out = join(work.path, 'east2');
    const run = await agn(enrollArgs(inv.tokenId, tokenFile, 'east2', out));
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^enrolled east2: wrote .*tls\.crt, .*tls\.key and .*ca\.crt \(certificate valid until \d{4}-/,
    );
    expect(statSync(join(out, 'tls.key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(out, 'ca.crt'), 'utf8')).toBe(signer.files.ca.certPem);
    const certPem = readFileSync(join(out, 'tls.crt'), 'utf8');
    const keyPem = readFileSync(join(out, 'tls.key'), 'utf8');
    expect(new X509Certificate(certPem).checkPrivateKey((await import('node:crypto')).createPrivateKey(keyPem))).toBe(
      true,
    );
    const identity = await certifiedIdentity('east2', certPem, keyPem);
    expect(
      verifySiteBundle(
        identity.certificateBundle ?? '',
        'east2',
        readFileSync(join(out, 'ca.crt'), 'utf8'),
        Date.now(),
      ),
    ).toMatchObject({ ok: true });
    expect((await grid(signer.state, 'SiteInvite', 'east2')).status.redeemedBy).toBe('east2');

    // The token is spent: a second run says so and writes nothing.
    const again = await enrollCommand(
      enrollArgs(inv.tokenId, tokenFile, 'east2', join(work.path, 'east2-again')).slice(2),
    ).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(again).toContain('the signer refused the redeem: already_redeemed (HTTP 409)');
    expect(existsSync(join(work.path, 'east2-again', 'tls.crt'))).toBe(false);
    expect(existsSync(join(work.path, 'east2-again', 'tls.key'))).toBe(false);
  });

  it('keygen then a key-bound invite: enroll uses the kept key and the signer accepts it', async () => {
    const out = join(work.path, 'bound');
    const keygen = await keygenCommand([out]);
    expect(keygen.exitCode).toBe(0);
    const digest = keygen.stdout.trim();
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(join(out, 'tls.key')).mode & 0o777).toBe(0o600);
    expect((await keygenCommand([out])).stdout.trim()).toBe(digest);
    const keyBefore = readFileSync(join(out, 'tls.key'), 'utf8');

    const inv = await createInvite(signer, 'bound', { siteName: 'bound', publicKeySHA256: digest });
    tokens.push(inv.token);
    // Another key does not redeem a bound invite.
    const otherOut = join(work.path, 'bound-other');
    writeFileSync(join(work.path, 'bound.token'), inv.token);
    const refused = await enrollCommand(
      enrollArgs(inv.tokenId, join(work.path, 'bound.token'), 'bound', otherOut).slice(2),
    ).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(refused).toContain('the signer refused the redeem: key_mismatch (HTTP 403)');
    expect(existsSync(join(otherOut, 'tls.key'))).toBe(false);

    const run = await enrollCommand(enrollArgs(inv.tokenId, join(work.path, 'bound.token'), 'bound', out).slice(2));
    expect(run.exitCode).toBe(0);
    expect(readFileSync(join(out, 'tls.key'), 'utf8')).toBe(keyBefore);
    expect((await grid(signer.state, 'SiteInvite', 'bound')).status.redeemedPublicKeySHA256).toBe(digest);
  });

  it('names what failed: untrusted signer, wrong signer name, unreachable signer, missing token, bad flags', async () => {
    const inv = await createInvite(signer, 'west1', { siteName: 'west1' });
    tokens.push(inv.token);
    const tokenFile = join(work.path, 'west1.token');
    writeFileSync(tokenFile, inv.token);
    const out = join(work.path, 'west1');
    const otherCa = await createCertificateAuthority({ commonName: 'not-the-grid' });
    const otherCaFile = join(work.path, 'other-ca.crt');
    writeFileSync(otherCaFile, otherCa.certPem);
    const args = enrollArgs(inv.tokenId, tokenFile, 'west1', out);
    const swap = (from: string, to: string) => args.map((a) => (a === from ? to : a));

    // In process (the command function the entry point runs; the first test covers the entry point itself).
    const failure = async (argv: string[], env: Record<string, string> = {}): Promise<CliError> => {
      const saved = process.env['AGN_INVITE_TOKEN'];
      delete process.env['AGN_INVITE_TOKEN'];
      Object.assign(process.env, env);
      try {
        const result = await enrollCommand(argv[0] === 'site' ? argv.slice(2) : argv).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(result).toBeInstanceOf(CliError);
        return result as CliError;
      } finally {
        if (saved === undefined) delete process.env['AGN_INVITE_TOKEN'];
        else process.env['AGN_INVITE_TOKEN'] = saved;
      }
    };
    const cases: Array<[string[], 1 | 2, string]> = [
      [
        swap(signer.files.caCertFile, otherCaFile),
        1,
        `cannot redeem at ${url()}: the signer's certificate does not verify against --ca ${otherCaFile}`,
      ],
      [
        args.slice(0, -2),
        1,
        "the signer's certificate does not name 127.0.0.1 (pass --signer with the signer's site name)",
      ],
      [swap(url(), 'https://127.0.0.1:1'), 1, 'cannot redeem at https://127.0.0.1:1: connection refused'],
      [swap(tokenFile, ''), 2, 'the invite token is required: --token-file FILE or env AGN_INVITE_TOKEN'],
      [
        swap(tokenFile, join(work.path, 'no-such-token')),
        2,
        `cannot read --token-file ${join(work.path, 'no-such-token')}: ENOENT`,
      ],
      [
        swap('west1', 'west9'),
        1,
        'the signer refused the redeem: site_name_mismatch (HTTP 403): SiteInvite west1 is for site west1, not west9',
      ],
      [swap('west1', 'West_1'), 2, '--site "West_1" must be a DNS label'],
      [swap(inv.tokenId, 'ffffffffffffffff'), 1, 'the signer refused the redeem: unknown_token (HTTP 401)'],
      [swap(url(), url().replace('https', 'http')), 2, '--url must use https'],
      [swap(signer.files.caCertFile, tokenFile), 1, `--ca ${tokenFile}: no PEM certificate found`],
      [['--url', url()], 2, '--ca is required'],
      [[...args, '--token', inv.token], 2, "Unknown option '--token'"],
    ];
    for (const [argv, exitCode, message] of cases) {
      const error = await failure(argv);
      expect({ argv, exitCode: error.exitCode, message: error.message }).toEqual({
        argv,
        exitCode,
        message: expect.stringContaining(message),
      });
      expect(error.message).not.toContain('\n');
      for (const token of tokens) expect(error.message).not.toContain(token.slice(0, 16));
    }
    const wrongToken = await failure(swap(tokenFile, ''), { AGN_INVITE_TOKEN: `${inv.token}x` });
    expect(wrongToken.message).toContain('wrong_token (HTTP 401)');
    expect(existsSync(join(out, 'tls.crt'))).toBe(false);
    expect(existsSync(join(out, 'tls.key'))).toBe(false);

    // After all that the token still works.
    const ok = await enrollCommand(args.slice(2));
    expect(ok.exitCode).toBe(0);
    expect(existsSync(join(out, 'tls.crt'))).toBe(true);
  });
});
