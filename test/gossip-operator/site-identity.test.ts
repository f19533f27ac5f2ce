// Gossip state signatures are bound to the site identity: a signing key is trusted only through the chain
// grid CA -> site certificate naming the site -> signing certificate. A holder of the SWIM key (or of another
// site's certificate) cannot make another site's records verify.
import { describe, expect, it } from 'vitest';
import { certifiedIdentity, verifySiteBundle } from '../../daemons/gossip-operator/site-identity.ts';
import { createCertificateAuthority, createClientCertificate } from '../../daemons/shared/tls.ts';

describe('site signing identity', () => {
  it('verifies a bundle through the grid CA and rejects forgeries', async () => {
    const ca = await createCertificateAuthority({ commonName: 'grid ca' });
    const otherCa = await createCertificateAuthority({ commonName: 'rogue ca' });
    const siteB = await createClientCertificate(ca, { commonName: 'site-b' });
    const identity = await certifiedIdentity('site-b', siteB.certPem, siteB.keyPem);
    expect(identity.certificateBundle).not.toContain('PRIVATE KEY');
    const good = verifySiteBundle(identity.certificateBundle!, 'site-b', ca.certPem, Date.now());
    expect(good.ok).toBe(true);
    expect(good.ok && good.publicKey.equals(identity.publicKey)).toBe(true);

    // Another site's certificate cannot speak for site-b.
    const siteC = await createClientCertificate(ca, { commonName: 'site-c' });
    const asC = await certifiedIdentity('site-b', siteC.certPem, siteC.keyPem);
    expect(verifySiteBundle(asC.certificateBundle!, 'site-b', ca.certPem, Date.now())).toMatchObject({
      ok: false,
      detail: 'site certificate does not name site site-b',
    });
    // A certificate from another CA is refused.
    const rogue = await createClientCertificate(otherCa, { commonName: 'site-b' });
    const rogueId = await certifiedIdentity('site-b', rogue.certPem, rogue.keyPem);
    expect(verifySiteBundle(rogueId.certificateBundle!, 'site-b', ca.certPem, Date.now())).toMatchObject({
      ok: false,
      detail: 'site certificate is not issued by the grid CA',
    });
    // A signing certificate swapped in from another delegation does not chain to this site certificate.
    const other = await certifiedIdentity('site-b', siteB.certPem, siteB.keyPem);
    const [leafPem] = identity.certificateBundle!.match(
      /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g,
    )!;
    const [, foreignSigning] = asC.certificateBundle!.match(
      /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g,
    )!;
    expect(verifySiteBundle(`${leafPem}\n${foreignSigning}\n`, 'site-b', ca.certPem, Date.now()).ok).toBe(false);
    expect(other.publicKey.equals(identity.publicKey)).toBe(false);
    // Garbage never throws.
    expect(verifySiteBundle('not a pem', 'site-b', ca.certPem, Date.now())).toMatchObject({ ok: false });
    expect(verifySiteBundle(identity.certificateBundle!, 'site-b', 'garbage', Date.now())).toMatchObject({ ok: false });
    // Outside the validity period.
    expect(
      verifySiteBundle(identity.certificateBundle!, 'site-b', ca.certPem, Date.now() + 400 * 86_400_000),
    ).toMatchObject({ ok: false });
  });
});
