// The enrollment endpoint follows its files on disk, mounted as the construct mounts them (two Secret volumes: this
// site's certificate and the grid CA, each `tls.crt`/`tls.key`) and updated the kubelet's way: a renewed serving
// certificate is presented to new connections without SIGHUP; a replacement that fails the checks (not issued by the
// grid CA) keeps the certificate in force, is logged naming the file and counted; a CA rotation, whose two Secrets
// arrive one after the other, is refused while the two disagree and taken once both are renewed, after which issued
// site certificates are signed by the new CA.
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import type { CertificateAuthority } from '../../../daemons/shared/tls.ts';
import { KubeletVolume } from '../../kubelet-volume.ts';
import { startLocalOperator, tempDir, testConfig, waitFor, type LocalOperator } from '../helpers.ts';
import { CERT_LIFETIME_MS, SIGNER, createInvite, csrFor, redeem, siteKeys, type Signer } from './helpers.ts';

const BOUND_MS = 3_000;

describe('enrollment certificates followed on disk', () => {
  let remove: () => Promise<void>;
  let site: KubeletVolume;
  let gridCa: KubeletVolume;
  let ca: CertificateAuthority;
  let op: LocalOperator;
  let state: string;

  beforeAll(async () => {
    const dirs = await tempDir('enroll-watch');
    remove = dirs.remove;
    ca = await createCertificateAuthority({ commonName: 'agn-test-grid-ca' });
    const serving = await createServerCertificate(ca, { commonName: SIGNER, sans: [SIGNER] });
    site = await KubeletVolume.create(join(dirs.path, 'enrollment-site'), {
      'tls.crt': serving.certPem,
      'tls.key': serving.keyPem,
    });
    gridCa = await KubeletVolume.create(join(dirs.path, 'enrollment-ca'), {
      'tls.crt': ca.certPem,
      'tls.key': ca.keyPem,
    });
    state = join(dirs.path, 'state');
    const config = testConfig({
      site: SIGNER,
      store: { backend: 'local', stateDir: state },
      enrollment: {
        address: '127.0.0.1:0',
        tlsCertFile: site.path('tls.crt'),
        tlsKeyFile: site.path('tls.key'),
        caCertFile: gridCa.path('tls.crt'),
        caKeyFile: gridCa.path('tls.key'),
        certificateLifetimeMs: CERT_LIFETIME_MS,
      },
    });
    op = await startLocalOperator(config, { stateDir: state });
  });

  afterAll(async () => {
    await op.stop();
    const log = op.lines.join('');
    expect(log).not.toContain('PRIVATE KEY');
    await remove();
  });

  const port = (): number => op.operator.enrollment?.port ?? 0;
  /** The certificate a new TLS connection is given (trusting `trust`), as a fingerprint. */
  const presented = (trust: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: port(), ca: trust, servername: SIGNER }, () => {
        resolve(socket.getPeerCertificate().fingerprint256.replaceAll(':', '').toLowerCase());
        socket.end();
      });
      socket.on('error', reject);
    });
  const counted = async (outcome: string): Promise<number> =>
    (await op.operator.metrics.fileReloads.get()).values.find(
      (v) => v.labels['file_kind'] === 'enrollment_tls' && v.labels['outcome'] === outcome,
    )?.value ?? 0;

  it('serves a renewed certificate to new connections without SIGHUP', async () => {
    const renewed = await createServerCertificate(ca, { commonName: SIGNER, sans: [SIGNER] });
    await site.update({ 'tls.crt': renewed.certPem, 'tls.key': renewed.keyPem });
    await waitFor(
      'the renewed certificate served',
      async () => ((await presented(ca.certPem)) === renewed.fingerprint ? true : undefined),
      BOUND_MS,
    );
    expect(await counted('accepted')).toBe(2);
  });

  it('keeps the certificate in force when the replacement is not issued by the grid CA, and counts it', async () => {
    const current = await presented(ca.certPem);
    const other = await createCertificateAuthority({ commonName: 'not-the-grid-ca' });
    const foreign = await createServerCertificate(other, { commonName: SIGNER, sans: [SIGNER] });
    await site.update({ 'tls.crt': foreign.certPem, 'tls.key': foreign.keyPem });
    await waitFor(
      'the foreign certificate counted',
      async () => ((await counted('rejected')) === 1 ? true : undefined),
      BOUND_MS,
    );
    expect(await presented(ca.certPem)).toBe(current);
    const log = op.lines.join('');
    expect(log).toContain(
      `--enrollment-tls-cert ${site.path('tls.crt')}: not issued by the grid CA ${gridCa.path('tls.crt')}`,
    );
    expect(log).toContain('enrollment_tls unusable; the previous one stays in force');
  });

  it('takes a CA rotation once both Secrets carry it, and signs new site certificates with the new CA', async () => {
    const next = await createCertificateAuthority({ commonName: 'agn-test-grid-ca-2' });
    const serving = await createServerCertificate(next, { commonName: SIGNER, sans: [SIGNER] });
    const before = await counted('rejected');
    // The CA Secret first: the serving certificate in its volume is not issued by the new CA yet, so nothing changes.
    await gridCa.update({ 'tls.crt': next.certPem, 'tls.key': next.keyPem });
    await waitFor(
      'the half-rotated pair counted',
      async () => ((await counted('rejected')) > before ? true : undefined),
      BOUND_MS,
    );
    await site.update({ 'tls.crt': serving.certPem, 'tls.key': serving.keyPem });
    await waitFor(
      'the new CA and certificate served',
      async () => ((await presented(next.certPem).catch(() => '')) === serving.fingerprint ? true : undefined),
      BOUND_MS,
    );

    const signer = { files: { ca: next }, op, state, port: port() } as unknown as Signer;
    const invite = await createInvite(signer, 'east9', { siteName: 'east9' });
    const reply = await redeem(signer, {
      tokenId: invite.tokenId,
      token: invite.token,
      siteName: 'east9',
      csr: await csrFor(await siteKeys()),
    });
    expect(reply.status).toBe(200);
    expect(new X509Certificate(reply.json.certificate).checkIssued(new X509Certificate(next.certPem))).toBe(true);
    expect(reply.json.caCertificate).toBe(next.certPem);
  });
});
