// The operator program (node daemons/gossip-operator/main.ts) with the enrollment endpoint switched on by its
// environment: a bad CA key stops the start with one error naming the variable's flag, a good one serves redeems,
// and SIGHUP swaps in a rotated serving certificate without a restart.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { connect } from 'node:tls';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { REDEEM_PATH } from '../../../schemas/enrollment/protocol.ts';
import { createServerCertificate, pemFingerprint } from '../../../daemons/shared/tls.ts';
import { REPO_ROOT } from '../../fixtures-path.ts';
import { grid, readStateObject, tempDir, waitFor } from '../helpers.ts';
import { csrFor, SIGNER, siteKeys, writeSignerFiles } from './helpers.ts';

interface Operator {
  child: ChildProcess;
  output: () => string;
}

function startOperatorProcess(dir: string, env: Record<string, string>): Operator {
  let output = '';
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'daemons/gossip-operator/main.ts'),
      '--store',
      'local',
      '--manifests',
      join(dir, 'manifests'),
      '--state',
      join(dir, 'state'),
      '--site',
      SIGNER,
      '--gossip-bind',
      '127.0.0.1:0',
      '--admin',
      '127.0.0.1:0',
      '--swim-profile',
      'loopback',
      '--leader-elect',
      'false',
    ],
    { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

describe('gossip-operator process with enrollment', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('refuses a bad CA key at start, then serves redeems and reloads its certificate on SIGHUP', async () => {
    const dirs = await tempDir('enroll-process');
    cleanups.push(() => dirs.remove());
    const files = await writeSignerFiles(dirs.path);
    await mkdir(join(dirs.path, 'manifests'));
    await writeFile(
      join(dirs.path, 'manifests', 'invite.yaml'),
      'apiVersion: grid.praxis.fast/v1alpha1\nkind: SiteInvite\nmetadata:\n  name: east2\nspec:\n  siteName: east2\n',
    );
    const env = {
      GRID_ENROLLMENT_ADDRESS: '127.0.0.1:0',
      GRID_ENROLLMENT_TLS_CERT: files.tlsCertFile,
      GRID_ENROLLMENT_TLS_KEY: files.tlsKeyFile,
      GRID_CA_CERT: files.caCertFile,
      GRID_CA_KEY: files.tlsKeyFile, // the serving key, not the CA's
    };
    const bad = startOperatorProcess(dirs.path, env);
    cleanups.push(async () => void (bad.child.exitCode === null && bad.child.kill('SIGKILL')));
    expect(await exited(bad.child)).toBe(1);
    expect(bad.output()).toContain(
      `--grid-ca-key ${files.tlsKeyFile}: the private key does not belong to the CA certificate`,
    );
    expect(bad.output()).not.toContain('PRIVATE KEY');

    const op = startOperatorProcess(dirs.path, { ...env, GRID_CA_KEY: files.caKeyFile });
    cleanups.push(async () => {
      if (op.child.exitCode === null) {
        op.child.kill('SIGTERM');
        await exited(op.child);
      }
    });
    const port = Number(
      (
        await waitFor(
          'the operator to log its enrollment address',
          () => /"enrollment":"127\.0\.0\.1:(\d+)"/.exec(op.output()) ?? undefined,
          30_000,
        )
      )[1],
    );
    const state = join(dirs.path, 'state');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const invite: any = await waitFor('the invite token', async () =>
      (await grid(state, 'SiteInvite', 'east2'))?.status?.tokenId !== undefined
        ? grid(state, 'SiteInvite', 'east2')
        : undefined,
    );
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const secret: any = await readStateObject(state, 'core', 'Secret', 'grid-system', 'grid-invite-east2');
    const token = Buffer.from(secret.data.token, 'base64').toString('utf8');
    const body = JSON.stringify({
      tokenId: invite.status.tokenId,
      token,
      siteName: 'east2',
      csr: await csrFor(await siteKeys()),
    });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: REDEEM_PATH,
          ca: files.ca.certPem,
          servername: SIGNER,
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    await waitFor('the redemption in status', async () =>
      (await grid(state, 'SiteInvite', 'east2'))?.status?.redeemed === true ? true : undefined,
    );

    const presented = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca: files.ca.certPem, servername: SIGNER }, () => {
          resolve(
            pemFingerprint(
              `-----BEGIN CERTIFICATE-----\n${socket.getPeerCertificate().raw.toString('base64')}\n-----END CERTIFICATE-----`,
            ),
          );
          socket.end();
        });
        socket.on('error', reject);
      });
    const rotated = await createServerCertificate(files.ca, { commonName: SIGNER, sans: [SIGNER] });
    await writeFile(files.tlsCertFile, rotated.certPem);
    await writeFile(files.tlsKeyFile, rotated.keyPem);
    op.child.kill('SIGHUP');
    await waitFor('the rotated certificate to be served', async () =>
      (await presented()) === rotated.fingerprint ? true : undefined,
    );
    expect(op.child.exitCode).toBeNull();
    expect(op.output()).not.toContain(token);
    expect(op.output()).not.toContain('PRIVATE KEY');
  });
});
