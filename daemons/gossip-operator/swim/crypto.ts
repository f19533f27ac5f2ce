// Frame layout (docs/contract.md §5), the same for UDP datagrams and TCP push-pull messages:
//
//   "GRID" (4 bytes) | version (1 byte) | nonce (12 random bytes) | ciphertext | GCM tag (16 bytes)
//
// The additional authenticated data is the 5 header bytes and the recipient's member name, so a flipped version
// byte fails like a wrong key, and a frame reflected back to its sender or replayed to another member fails
// authentication there. The sender is bound too: its name is the `from` of the plaintext, under the same tag.
// Frame versions are append-only:
//   0: plaintext, "GRID" | 0 | payload. Only when no key is configured; a node with a key ring refuses it.
//   1: AES-256-GCM with the key ring's primary key, header only as AAD. Retired (reflectable: a frame opens at any
//      member, so an attacker can send it back to another); refused.
//   2: AES-256-GCM, AAD = header | recipient name (UTF-8). ANY_RECIPIENT ("") only opens a join push-pull
//      request to a seed whose name the sender cannot know yet (push-pull.ts). Plaintext: JSON (codec.ts).
//   3: as 2; plaintext: tagged binary, push-pull compressed (binary-codec.ts).
// The encrypted version is the wire version, negotiated per peer (wire.ts). A version above the highest this
// build speaks is refused as unsupported_version (a newer member that has not yet learned what we speak).
import { createCipheriv, createDecipheriv, randomFillSync } from 'node:crypto';
import type { KeyRing } from './keyring.ts';

export const FRAME_MAGIC = Buffer.from('GRID', 'ascii');
export const FRAME_VERSION_PLAINTEXT = 0;
export const FRAME_VERSION_AES256GCM = 2;
export const FRAME_VERSION_BINARY = 3;
/** Highest frame version this build can open. */
export const FRAME_VERSION_MAX = FRAME_VERSION_BINARY;
/** Recipient of a frame to a seed whose member name is not known yet (a join). */
export const ANY_RECIPIENT = '';
export const HEADER_BYTES = 5;
export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;

/** Bytes a frame adds to its payload. */
export function frameOverhead(keyring: KeyRing | undefined): number {
  return keyring ? HEADER_BYTES + NONCE_BYTES + TAG_BYTES : HEADER_BYTES;
}

// Nonces come from a pool of random bytes refilled in 16 KiB blocks: one CSPRNG call per ~1,300 frames instead
// of one per frame. Each nonce is still 96 fresh random bits, used once.
const NONCE_POOL_BYTES = 16 * 1024 - ((16 * 1024) % NONCE_BYTES);
let noncePool = Buffer.alloc(0);
let noncePoolOffset = 0;

function randomNonce(): Buffer {
  if (noncePoolOffset + NONCE_BYTES > noncePool.length) {
    noncePool = randomFillSync(Buffer.allocUnsafe(NONCE_POOL_BYTES));
    noncePoolOffset = 0;
  }
  const n = noncePool.subarray(noncePoolOffset, noncePoolOffset + NONCE_BYTES);
  noncePoolOffset += NONCE_BYTES;
  return n;
}

function additionalData(header: Buffer, recipient: string): Buffer {
  return Buffer.concat([header, Buffer.from(recipient, 'utf8')]);
}

/**
 * Seals `payload` for `recipient` (its member name, or ANY_RECIPIENT for a join to an unnamed seed) as frame
 * `version` (the wire version of the payload's encoding; ignored without a key ring: plaintext is version 0).
 */
export function sealFrame(
  keyring: KeyRing | undefined,
  payload: Buffer,
  recipient: string,
  nonce: Buffer = randomNonce(),
  version: number = FRAME_VERSION_AES256GCM,
): Buffer {
  if (!keyring) return Buffer.concat([FRAME_MAGIC, Buffer.of(FRAME_VERSION_PLAINTEXT), payload]);
  const header = Buffer.concat([FRAME_MAGIC, Buffer.of(version)]);
  const cipher = createCipheriv('aes-256-gcm', keyring.primary, nonce);
  cipher.setAAD(additionalData(header, recipient));
  const body = Buffer.concat([cipher.update(payload), cipher.final()]);
  return Buffer.concat([header, nonce, body, cipher.getAuthTag()]);
}

export type OpenResult =
  | {
      readonly ok: true;
      readonly payload: Buffer;
      readonly version: number;
      readonly nonce: Buffer | undefined;
      readonly recipient: string | undefined;
    }
  | {
      readonly ok: false;
      readonly reason:
        | 'bad_frame'
        | 'decrypt_failed'
        | 'plaintext_rejected'
        | 'encrypted_unexpected'
        | 'unsupported_version';
    };

/**
 * Opens a frame addressed to one of `recipients` (tried in order; the first is this member's own name). The
 * result names the recipient the frame was sealed for (undefined for plaintext, which binds nothing).
 */
export function openFrame(
  keyring: KeyRing | undefined,
  frame: Buffer,
  recipients: readonly string[],
  maxVersion: number = FRAME_VERSION_MAX,
): OpenResult {
  if (frame.length < HEADER_BYTES || !frame.subarray(0, 4).equals(FRAME_MAGIC))
    return { ok: false, reason: 'bad_frame' };
  const version = frame[4];
  if (version === FRAME_VERSION_PLAINTEXT) {
    if (keyring) return { ok: false, reason: 'plaintext_rejected' };
    return { ok: true, payload: frame.subarray(HEADER_BYTES), version, nonce: undefined, recipient: undefined };
  }
  if (version === undefined || version < FRAME_VERSION_AES256GCM) return { ok: false, reason: 'bad_frame' };
  if (version > maxVersion) return { ok: false, reason: 'unsupported_version' };
  if (!keyring) return { ok: false, reason: 'encrypted_unexpected' };
  if (frame.length < HEADER_BYTES + NONCE_BYTES + TAG_BYTES) return { ok: false, reason: 'decrypt_failed' };
  const header = frame.subarray(0, HEADER_BYTES);
  const nonce = frame.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES);
  const body = frame.subarray(HEADER_BYTES + NONCE_BYTES, frame.length - TAG_BYTES);
  const tag = frame.subarray(frame.length - TAG_BYTES);
  for (const recipient of recipients) {
    const aad = additionalData(header, recipient);
    for (const key of keyring.keys) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, nonce);
        decipher.setAAD(aad);
        decipher.setAuthTag(tag);
        const payload = Buffer.concat([decipher.update(body), decipher.final()]);
        return { ok: true, payload, version, nonce: Buffer.from(nonce), recipient };
      } catch {
        // wrong key or another recipient: try the next combination
      }
    }
  }
  return { ok: false, reason: 'decrypt_failed' };
}

/**
 * Remembers nonces seen inside the replay window. GCM proves a frame came from a key holder but not that it is
 * new; replaying a captured ping-req or alive message must not work twice. Bounded: oldest entries go first.
 */
export class ReplayGuard {
  readonly #seen = new Map<string, number>();
  readonly #windowMs: number;
  readonly #maxEntries: number;

  constructor(windowMs: number, maxEntries: number) {
    this.#windowMs = windowMs;
    this.#maxEntries = maxEntries;
  }

  /** 'ok' records the nonce; otherwise the packet must be dropped. */
  check(nonce: Buffer | undefined, sentAtMs: number, nowMs: number): 'ok' | 'replayed' | 'stale_packet' {
    if (Math.abs(nowMs - sentAtMs) > this.#windowMs) return 'stale_packet';
    if (nonce === undefined) return 'ok';
    const id = nonce.toString('base64');
    if (this.#seen.has(id)) return 'replayed';
    this.#seen.set(id, nowMs);
    this.#evict(nowMs);
    return 'ok';
  }

  #evict(nowMs: number): void {
    // Map iteration is insertion order, so the oldest entries come first.
    for (const [id, at] of this.#seen) {
      if (this.#seen.size <= this.#maxEntries && nowMs - at <= this.#windowMs) break;
      this.#seen.delete(id);
    }
  }
}
