/**
 * Redeeming a SiteInvite token: the joining site presents the public token id, the one-time
 * token, its site name and a PKCS#10 CSR; the signer checks them against the invite and its token Secret and issues
 * a site certificate inline. Every refusal has a stable outcome code (also the metric label) and an HTTP status, and
 * no message ever carries the token.
 *
 * One-time: redeems of one token id are serialized in this process, and the token Secret is deleted (the claim)
 * before the certificate is signed. A delete succeeds once only, in the local store and on an API server alike, so
 * two replicas racing on one token still issue at most one certificate.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { SiteInviteResource } from '../../../schemas/crds/types.ts';
import { inviteTokenSecretName } from '../../../schemas/object-names.ts';
import type { ObjectRef, ResourceStore } from '../../shared/resource-store/types.ts';
import { checkDeletedSiteName } from '../site-name-ledger.ts';
import { FIELD_MANAGER, SECRET, SITE_INVITE } from '../kinds.ts';
import { nowRfc3339 } from '../controllers/status.ts';
import { type SecretObject, secretKeyBytes } from '../secrets.ts';
import { CsrError, type GridCa, issueSiteCertificate, verifyCsr } from './site-certificate.ts';

/** Append-only catalogue: the `outcome` label of grid_enrollment_redeem_total and the `error` field of refusals. */
export const REDEEM_OUTCOMES = [
  'issued',
  'malformed_request',
  'payload_too_large',
  'invalid_csr',
  'unknown_token',
  'wrong_token',
  'expired',
  'revoked',
  'already_redeemed',
  'site_name_mismatch',
  'key_mismatch',
  'internal_error',
  // Added with SiteInvite spec.allowDeletedName: the invited name belongs to a site deleted from the grid.
  'site_name_deleted',
] as const;
export type RedeemOutcome = (typeof REDEEM_OUTCOMES)[number];

export const REDEEM_HTTP_STATUS: Readonly<Record<RedeemOutcome, number>> = {
  issued: 200,
  malformed_request: 400,
  payload_too_large: 413,
  invalid_csr: 400,
  unknown_token: 401,
  wrong_token: 401,
  expired: 410,
  revoked: 410,
  already_redeemed: 409,
  site_name_mismatch: 403,
  key_mismatch: 403,
  internal_error: 500,
  // 409 like already_redeemed: the request is fine, the grid's state (the name's record) conflicts with it.
  site_name_deleted: 409,
};

export class RedeemRefusal extends Error {
  readonly outcome: Exclude<RedeemOutcome, 'issued'>;
  constructor(outcome: Exclude<RedeemOutcome, 'issued'>, message: string) {
    super(message);
    this.name = 'RedeemRefusal';
    this.outcome = outcome;
  }
}

export interface RedeemRequest {
  readonly tokenId: string;
  readonly token: string;
  readonly siteName: string;
  readonly csr: string;
}

export interface RedeemResult {
  readonly invite: string;
  readonly siteName: string;
  /** The issued site certificate (PEM). */
  readonly certificate: string;
  /** The grid CA certificate (PEM): the trust bundle for the new site. */
  readonly caCertificate: string;
  /** Site certificate then grid CA certificate. */
  readonly chain: string;
  readonly serialNumber: string;
  readonly notAfter: string;
  readonly publicKeySHA256: string;
}

export const MAX_REDEEM_BODY_BYTES = 32 * 1024;
/**
 * Exactly the form the invite controller mints (8 random bytes in hex): a token pasted into the tokenId field by
 * mistake (43 base64url characters) is then refused as malformed without being echoed, logged or looked up.
 */
const TOKEN_ID = /^[0-9a-f]{16}$/;
const SITE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MIN_CA_REMAINING_MS = 3_600_000;
const FIELDS = ['tokenId', 'token', 'siteName', 'csr'] as const;

/** Pure: the request body as a RedeemRequest, or a refusal naming the field (never echoing its value). */
export function parseRedeemRequest(body: Buffer): RedeemRequest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw new RedeemRefusal('malformed_request', 'the request body is not a JSON object in UTF-8');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new RedeemRefusal('malformed_request', 'the request body is not a JSON object');
  const object = value as Record<string, unknown>;
  const unknown = Object.keys(object).find((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown !== undefined)
    throw new RedeemRefusal(
      'malformed_request',
      `unknown field "${unknown.slice(0, 40)}" (expected ${FIELDS.join(', ')})`,
    );
  for (const field of FIELDS) {
    if (typeof object[field] !== 'string' || object[field] === '')
      throw new RedeemRefusal('malformed_request', `field "${field}" must be a non-empty string`);
  }
  const request = object as unknown as RedeemRequest;
  if (!TOKEN_ID.test(request.tokenId))
    throw new RedeemRefusal(
      'malformed_request',
      'field "tokenId" must be the 16 lowercase hex digits of SiteInvite status.tokenId',
    );
  if (request.token.length > 256)
    throw new RedeemRefusal('malformed_request', 'field "token" is longer than 256 characters');
  if (request.siteName.length > 63 || !SITE_NAME.test(request.siteName))
    throw new RedeemRefusal(
      'malformed_request',
      'field "siteName" must be a DNS label: 1-63 lowercase letters, digits or -',
    );
  return request;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Constant-time comparison of hashes, so neither the token length nor a common prefix leaks through timing. */
export function tokenMatches(presented: string, stored: string): boolean {
  return timingSafeEqual(digest(presented), digest(stored));
}

function secretField(secret: SecretObject, key: string): string | undefined {
  return secretKeyBytes(secret, key)?.toString('utf8');
}

export interface InviteRedeemerOptions {
  readonly store: ResourceStore;
  /** Namespace of the token Secrets (the operator namespace). */
  readonly namespace: string;
  /** The grid CA currently loaded (swapped on reload). */
  readonly ca: () => GridCa;
  readonly certificateLifetimeMs: number;
  readonly now: () => number;
  /**
   * The site name ledger (site-name-ledger.ts): a name it records with no GridSite now is refused unless the
   * invite sets spec.allowDeletedName. Absent: no such check (only tests of other paths leave it out).
   */
  readonly siteNameLedger?: ObjectRef;
  /** Called after a redeem marked the invite, so its controller updates conditions promptly. */
  readonly onRedeemed?: (invite: string) => void;
  /** Called when the redemption could not be written to the invite's status after retries. */
  readonly onStatusError?: (invite: string, error: unknown) => void;
}

export class InviteRedeemer {
  readonly #options: InviteRedeemerOptions;
  /** Tail of the redeem chain per token id: one redeem of a token runs at a time in this process. */
  readonly #chains = new Map<string, Promise<unknown>>();

  constructor(options: InviteRedeemerOptions) {
    this.#options = options;
  }

  redeem(request: RedeemRequest): Promise<RedeemResult> {
    const previous = this.#chains.get(request.tokenId) ?? Promise.resolve();
    const run = previous.then(
      () => this.#redeemNow(request),
      () => this.#redeemNow(request),
    );
    const tail = run.catch(() => undefined);
    this.#chains.set(request.tokenId, tail);
    void tail.then(() => {
      if (this.#chains.get(request.tokenId) === tail) this.#chains.delete(request.tokenId);
    });
    return run;
  }

  async #redeemNow(request: RedeemRequest): Promise<RedeemResult> {
    const { store, namespace } = this.#options;
    // The CSR is checked first: it needs no secret, and a bad one is refused before any token is looked at.
    let csr;
    try {
      csr = await verifyCsr(request.csr);
    } catch (error) {
      if (error instanceof CsrError) throw new RedeemRefusal('invalid_csr', error.message);
      throw error;
    }
    const invites = (await store.list(SITE_INVITE)).items as unknown as SiteInviteResource[];
    const invite = invites.find((i) => i.status?.tokenId === request.tokenId);
    if (invite === undefined) throw new RedeemRefusal('unknown_token', `no SiteInvite has token id ${request.tokenId}`);
    const name = invite.metadata.name;
    if (invite.status?.redeemed === true)
      throw new RedeemRefusal('already_redeemed', `SiteInvite ${name} was already redeemed; create a new invite`);
    const now = this.#options.now();
    const expiresAt = Date.parse(invite.status?.expiresAt ?? '');
    if (!Number.isFinite(expiresAt) || now >= expiresAt)
      throw new RedeemRefusal(
        'expired',
        `the token of SiteInvite ${name} expired at ${invite.status?.expiresAt ?? '(unknown)'}`,
      );
    const secretRef = { name: inviteTokenSecretName(name), namespace };
    const secret = (await store.get(SECRET, secretRef)) as SecretObject | undefined;
    const stored = secret === undefined ? undefined : secretField(secret, 'token');
    if (secret === undefined || stored === undefined || secretField(secret, 'tokenId') !== request.tokenId) {
      throw new RedeemRefusal('revoked', `the token of SiteInvite ${name} was revoked or already used`);
    }
    if (!tokenMatches(request.token, stored))
      throw new RedeemRefusal('wrong_token', `the token does not match token id ${request.tokenId}`);
    // Only a holder of the token learns what the invite pins.
    if (request.siteName !== invite.spec.siteName) {
      throw new RedeemRefusal(
        'site_name_mismatch',
        `SiteInvite ${name} is for site ${invite.spec.siteName}, not ${request.siteName}`,
      );
    }
    const binding = invite.spec.publicKeySHA256;
    if (binding !== undefined && binding !== csr.publicKeySHA256) {
      throw new RedeemRefusal(
        'key_mismatch',
        `SiteInvite ${name} is bound to another public key (the CSR key has SHA-256 ${csr.publicKeySHA256})`,
      );
    }
    // Checked again here, not only when the token was minted: the GridSite may have been deleted since.
    const ledger = this.#options.siteNameLedger;
    if (
      ledger !== undefined &&
      invite.spec.allowDeletedName !== true &&
      (await checkDeletedSiteName(store, ledger, invite.spec.siteName)).deleted
    ) {
      throw new RedeemRefusal(
        'site_name_deleted',
        `site ${invite.spec.siteName} was deleted from the grid; SiteInvite ${name} does not set spec.allowDeletedName, so the name is not reused`,
      );
    }
    // Checked before the claim, so a CA about to expire never burns a token without issuing.
    const ca = this.#options.ca();
    if (ca.notAfterMs <= now + MIN_CA_REMAINING_MS)
      throw new RedeemRefusal(
        'internal_error',
        'the grid CA certificate expires within the hour; the signer must rotate it',
      );
    // The claim: whoever deletes the token Secret redeems the token; everyone else is refused.
    if (!(await store.delete(SECRET, secretRef)))
      throw new RedeemRefusal('revoked', `the token of SiteInvite ${name} was revoked or already used`);
    const issued = await issueSiteCertificate(ca, csr, request.siteName, this.#options.certificateLifetimeMs, now);
    const redemption = {
      redeemed: true,
      redeemedAt: nowRfc3339(now),
      redeemedBy: request.siteName,
      redeemedPublicKeySHA256: csr.publicKeySHA256,
    };
    // The token is spent now, so the certificate is returned even if recording fails: a site left without its
    // certificate could not retry, while a missing status record is visible in the log and fixable.
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await store.patchStatus(SITE_INVITE, { name }, redemption, { fieldManager: FIELD_MANAGER });
        lastError = undefined;
        break;
      } catch (error) {
        lastError = error;
      }
    }
    if (lastError !== undefined) this.#options.onStatusError?.(name, lastError);
    this.#options.onRedeemed?.(name);
    return {
      invite: name,
      siteName: request.siteName,
      certificate: issued.certPem,
      caCertificate: ca.certPem,
      chain: issued.certPem + ca.certPem,
      serialNumber: issued.serialNumber,
      notAfter: issued.notAfter,
      publicKeySHA256: csr.publicKeySHA256,
    };
  }
}
