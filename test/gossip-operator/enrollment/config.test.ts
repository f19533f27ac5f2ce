// Enrollment configuration and certificate material: off by default, every missing or wrong piece refused at
// start with the flag and file named (never the key), and reload() swaps certificates without a restart.
import { connect } from 'node:tls';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../daemons/gossip-operator/config.ts';
import type { EnrollmentConfig } from '../../../daemons/gossip-operator/enrollment/config.ts';
import { loadEnrollmentMaterial } from '../../../daemons/gossip-operator/enrollment/server.ts';
import {
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  pemFingerprint,
} from '../../../daemons/shared/tls.ts';
import { startOperator } from '../../../daemons/gossip-operator/operator.ts';
import { openLocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { capturingLogger, tempDir, testConfig } from '../helpers.ts';
import { thrownMessage } from '../../thrown.ts';
import { SIGNER, type Signer, startSigner, writeSignerFiles } from './helpers.ts';

const BASE = ['--site', 'site-a'];
const FILES = [
  '--enrollment-tls-cert',
  'a.crt',
  '--enrollment-tls-key',
  'a.key',
  '--grid-ca-cert',
  'ca.crt',
  '--grid-ca-key',
  'ca.key',
];

function configError(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  return thrownMessage(() => parseConfig(argv, env), ConfigError);
}

describe('enrollment configuration', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('is off unless an address is given, and then needs all four files', () => {
    expect(parseConfig(BASE, {}).enrollment).toBeUndefined();
    expect(parseConfig([...BASE, ...FILES], {}).enrollment).toBeUndefined();
    const on = parseConfig([...BASE, '--enrollment-address', '127.0.0.1:9443', ...FILES], {}).enrollment;
    expect(on).toEqual({
      address: '127.0.0.1:9443',
      tlsCertFile: 'a.crt',
      tlsKeyFile: 'a.key',
      caCertFile: 'ca.crt',
      caKeyFile: 'ca.key',
      certificateLifetimeMs: 2160 * 3_600_000,
    });
    const fromEnv = parseConfig(BASE, {
      GRID_ENROLLMENT_ADDRESS: ':9443',
      GRID_ENROLLMENT_TLS_CERT: 'a.crt',
      GRID_ENROLLMENT_TLS_KEY: 'a.key',
      GRID_CA_CERT: 'ca.crt',
      GRID_CA_KEY: 'ca.key',
      GRID_ENROLLMENT_CERT_LIFETIME: '24h',
    }).enrollment;
    expect(fromEnv?.certificateLifetimeMs).toBe(86_400_000);
    expect(configError([...BASE, '--enrollment-address', '127.0.0.1:9443', ...FILES.slice(0, 6)])).toContain(
      '--grid-ca-key (env GRID_CA_KEY) is required with --enrollment-address',
    );
    expect(configError([...BASE, '--enrollment-address', 'nowhere', ...FILES])).toContain(
      '--enrollment-address (env GRID_ENROLLMENT_ADDRESS): "nowhere" must be HOST:PORT',
    );
    for (const bad of ['30m', '8761h', '90d', '0h', 'soon']) {
      expect(
        configError([...BASE, '--enrollment-address', ':9443', ...FILES, '--enrollment-cert-lifetime', bad]),
      ).toContain('--enrollment-cert-lifetime');
    }
  });

  it('refuses wrong certificate material at start, naming the flag and file and never the key', async () => {
    const dirs = await tempDir('enroll-material');
    cleanups.push(() => dirs.remove());
    const files = await writeSignerFiles(dirs.path);
    const config: EnrollmentConfig = {
      address: '127.0.0.1:0',
      tlsCertFile: files.tlsCertFile,
      tlsKeyFile: files.tlsKeyFile,
      caCertFile: files.caCertFile,
      caKeyFile: files.caKeyFile,
      certificateLifetimeMs: 3_600_000,
    };
    await expect(loadEnrollmentMaterial(config)).resolves.toBeDefined();

    const other = await createCertificateAuthority({ commonName: 'other-ca' });
    const otherKey = join(dirs.path, 'other-ca.key');
    await writeFile(otherKey, other.keyPem);
    const foreign = await createServerCertificate(other, { commonName: SIGNER, sans: [SIGNER] });
    const foreignCert = join(dirs.path, 'foreign.crt');
    await writeFile(foreignCert, foreign.certPem);
    const clientOnly = await createClientCertificate(files.ca, { commonName: SIGNER });
    const clientCert = join(dirs.path, 'client.crt');
    await writeFile(clientCert, clientOnly.certPem);
    const leafAsCa = join(dirs.path, 'leaf-as-ca.crt');
    await writeFile(leafAsCa, clientOnly.certPem);
    const cases: Array<[Partial<EnrollmentConfig>, string]> = [
      [{ caKeyFile: otherKey }, `--grid-ca-key ${otherKey}: the private key does not belong to the CA certificate`],
      [
        { caKeyFile: join(dirs.path, 'missing.key') },
        `--grid-ca-key ${join(dirs.path, 'missing.key')}: cannot be read (no such file)`,
      ],
      [{ caKeyFile: files.caCertFile }, 'not a PEM private key'],
      [{ caCertFile: leafAsCa }, 'not a CA certificate'],
      [{ tlsCertFile: foreignCert }, `--enrollment-tls-cert ${foreignCert}: not issued by the grid CA`],
      [{ tlsCertFile: clientCert }, 'extended key usage does not include serverAuth'],
      [
        { tlsKeyFile: otherKey },
        `--enrollment-tls-key ${otherKey}: the private key does not belong to the certificate --enrollment-tls-cert ${files.tlsCertFile}`,
      ],
      [{ tlsKeyFile: files.caCertFile }, `--enrollment-tls-key ${files.caCertFile}: not a PEM private key`],
    ];
    for (const [change, message] of cases) {
      const error = await loadEnrollmentMaterial({ ...config, ...change }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).toContain(message);
      expect(error?.message).not.toContain('PRIVATE KEY');
      expect(error?.message).not.toContain(files.ca.keyPem.split('\n')[1]);
    }
  });

  it('fails the operator start when the material is wrong, and serves a rotated certificate after reload', async () => {
    const dirs = await tempDir('enroll-bad');
    cleanups.push(() => dirs.remove());
    const files = await writeSignerFiles(dirs.path);
    const state = join(dirs.path, 'state');
    const store = await openLocalStore({ stateDir: state });
    cleanups.push(() => store.close());
    const { logger } = capturingLogger();
    const enrollment: EnrollmentConfig = {
      address: '127.0.0.1:0',
      tlsCertFile: files.tlsCertFile,
      tlsKeyFile: files.tlsKeyFile,
      caCertFile: files.caCertFile,
      caKeyFile: join(dirs.path, 'nope.key'),
      certificateLifetimeMs: 3_600_000,
    };
    await expect(
      startOperator({
        config: testConfig({ site: SIGNER, store: { backend: 'local', stateDir: state }, enrollment }),
        logger,
        store,
      }),
    ).rejects.toThrow('--grid-ca-key');

    const signer: Signer = await startSigner('enroll-reload');
    cleanups.push(() => signer.stop());
    const presented = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(
          { host: '127.0.0.1', port: signer.port, ca: signer.files.ca.certPem, servername: SIGNER },
          () => {
            resolve(
              pemFingerprint(
                `-----BEGIN CERTIFICATE-----\n${socket.getPeerCertificate().raw.toString('base64')}\n-----END CERTIFICATE-----`,
              ),
            );
            socket.end();
          },
        );
        socket.on('error', reject);
      });
    const before = await presented();
    expect(before).toBe(pemFingerprint(readFileSync(signer.files.tlsCertFile, 'utf8')));
    const rotated = await createServerCertificate(signer.files.ca, { commonName: SIGNER, sans: [SIGNER] });
    await writeFile(signer.files.tlsCertFile, rotated.certPem);
    await writeFile(signer.files.tlsKeyFile, rotated.keyPem);
    await signer.op.operator.enrollment?.reload();
    expect(await presented()).toBe(rotated.fingerprint);
    // A broken file on reload keeps the working certificate.
    await writeFile(signer.files.tlsCertFile, 'garbage');
    await expect(signer.op.operator.enrollment?.reload()).rejects.toThrow('--enrollment-tls-cert');
    expect(await presented()).toBe(rotated.fingerprint);
  });
});
