/**
 * Binds gossip state signatures to the site identity (docs/contract.md §5: per-origin signatures on state records,
 * bound to the site identity, so a key holder cannot speak for another site).
 *
 * Each operator makes an Ed25519 record-signing key at start and certifies it with its site certificate
 * (GridNetwork spec.tls.siteSecretRef, issued by the grid CA with the site name as CN or DNS SAN). Its site record
 * carries both certificates in public_cert_pem. A peer trusts a signing key only when the chain
 * grid CA -> site certificate (naming that site) -> signing certificate verifies, so the shared SWIM key alone
 * cannot forge another site's records. No private key ever leaves the process.
 */
import 'reflect-metadata';
import { createPrivateKey, generateKeyPairSync, KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { pemCertificates } from '../shared/tls.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface SigningIdentity {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  /** Site certificate then signing certificate (PEM); absent without site TLS material (records stay local). */
  readonly certificateBundle?: string;
}

/** A throwaway key: own records still verify locally, but peers refuse them (unknown_signer). */
export function ephemeralIdentity(): SigningIdentity {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { privateKey, publicKey };
}

function signingAlgorithm(key: KeyObject): { name: string; hash?: string; namedCurve?: string } {
  switch (key.asymmetricKeyType) {
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      const namedCurve = curve === 'secp384r1' ? 'P-384' : curve === 'secp521r1' ? 'P-521' : 'P-256';
      return {
        name: 'ECDSA',
        namedCurve,
        hash: namedCurve === 'P-256' ? 'SHA-256' : namedCurve === 'P-384' ? 'SHA-384' : 'SHA-512',
      };
    }
    case 'rsa':
      return { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    case 'ed25519':
      return { name: 'Ed25519' };
    default:
      throw new Error(
        `site private key type ${key.asymmetricKeyType ?? 'unknown'} cannot certify a signing key (use EC, RSA or Ed25519)`,
      );
  }
}

/** A signing key certified by the site certificate. Throws with a message naming the problem, never the key. */
export async function certifiedIdentity(
  site: string,
  siteCertPem: string,
  siteKeyPem: string,
  validDays = 30,
): Promise<SigningIdentity> {
  const leaf = new x509.X509Certificate(siteCertPem);
  const leafKey = createPrivateKey(siteKeyPem);
  const algorithm = signingAlgorithm(leafKey);
  const importAlgorithm =
    algorithm.name === 'ECDSA'
      ? { name: 'ECDSA', namedCurve: algorithm.namedCurve }
      : algorithm.name === 'RSASSA-PKCS1-v1_5'
        ? { name: algorithm.name, hash: 'SHA-256' }
        : { name: 'Ed25519' };
  const signingKey = await webcrypto.subtle.importKey(
    'pkcs8',
    leafKey.export({ type: 'pkcs8', format: 'der' }),
    importAlgorithm,
    false,
    ['sign'],
  );
  const keys = (await webcrypto.subtle.generateKey({ name: 'Ed25519' }, true, [
    'sign',
    'verify',
  ])) as unknown as webcrypto.CryptoKeyPair;
  const notBefore = new Date(Date.now() - 60_000);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(12)))
      .toString('hex')
      .replace(/^./, '1'),
    subject: `CN=${site.replace(/([,+"\\<>;=])/g, '\\$1')}`,
    issuer: leaf.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + validDays * 86_400_000),
    signingKey,
    publicKey: keys.publicKey,
    signingAlgorithm: algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    ],
  });
  return {
    privateKey: KeyObject.from(keys.privateKey),
    publicKey: KeyObject.from(keys.publicKey),
    certificateBundle: `${leaf.toString('pem')}\n${cert.toString('pem')}\n`,
  };
}

function namesSite(cert: X509Certificate, site: string): boolean {
  const cn = cert.subject.split('\n').some((line) => line === `CN=${site}`);
  const san = (cert.subjectAltName ?? '').split(', ').some((entry) => entry === `DNS:${site}`);
  return cn || san;
}

function validAt(cert: X509Certificate, nowMs: number): boolean {
  return Date.parse(cert.validFrom) <= nowMs && nowMs <= Date.parse(cert.validTo);
}

export type BundleCheck =
  | { readonly ok: true; readonly publicKey: KeyObject }
  | { readonly ok: false; readonly detail: string };

/** Verifies grid CA -> site certificate naming `site` -> Ed25519 signing certificate. Never throws. */
export function verifySiteBundle(bundle: string, site: string, caPem: string, nowMs: number): BundleCheck {
  try {
    const pems = pemCertificates(bundle);
    if (pems.length !== 2)
      return { ok: false, detail: `expected a site and a signing certificate, got ${pems.length} certificates` };
    const cas = pemCertificates(caPem).map((p) => new X509Certificate(p));
    const leaf = new X509Certificate(pems[0] as string);
    const signing = new X509Certificate(pems[1] as string);
    if (!cas.some((ca) => leaf.checkIssued(ca) && leaf.verify(ca.publicKey)))
      return { ok: false, detail: 'site certificate is not issued by the grid CA' };
    if (!namesSite(leaf, site)) return { ok: false, detail: `site certificate does not name site ${site}` };
    if (!validAt(leaf, nowMs) || !validAt(signing, nowMs))
      return { ok: false, detail: 'certificate outside its validity period' };
    // The site certificate is an end-entity (no keyCertSign), so OpenSSL's checkIssued refuses it as an issuer;
    // the delegation is checked directly: issuer name and signature.
    if (signing.issuer !== leaf.subject || !signing.verify(leaf.publicKey))
      return { ok: false, detail: 'signing certificate is not issued by the site certificate' };
    if (signing.publicKey.asymmetricKeyType !== 'ed25519')
      return { ok: false, detail: 'signing certificate key is not Ed25519' };
    return { ok: true, publicKey: signing.publicKey };
  } catch (error) {
    return { ok: false, detail: `certificate bundle cannot be parsed (${(error as Error).message.slice(0, 120)})` };
  }
}
