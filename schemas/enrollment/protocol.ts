/**
 * What the signer's redeem endpoint and the `agn site enroll` client share, kept free of heavy imports so the CLI
 * starts quickly: the path, and the key digest SiteInvite spec.publicKeySHA256 binds.
 */
import { createHash } from 'node:crypto';

export const REDEEM_PATH = '/v1/enroll/redeem';

/** SHA-256 of a SubjectPublicKeyInfo (DER), 64 lowercase hex: what SiteInvite spec.publicKeySHA256 binds. */
export function spkiSha256(spkiDer: ArrayBuffer | Uint8Array): string {
  return createHash('sha256')
    .update(spkiDer instanceof Uint8Array ? spkiDer : new Uint8Array(spkiDer))
    .digest('hex');
}
