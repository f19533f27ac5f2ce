// AES-256-GCM key ring for SWIM packet protection. The primary key encrypts; every key in the ring is tried on
// receipt, so a new key can be installed on all sites first, made primary second, and the old one removed last.
// Key bytes never appear in errors, logs or metrics.

import { createSecretKey, type KeyObject } from 'node:crypto';

export const SWIM_KEY_BYTES = 32;

export class KeyRingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyRingError';
  }
}

/** Parses GRID_SWIM_ENCRYPT_KEY: exactly 64 hex characters. The message never echoes the value. */
export function parseHexKey(hex: string, source: string): Buffer {
  const s = hex.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(s)) {
    throw new KeyRingError(`${source}: SWIM key must be 64 hex characters (32 bytes); got ${s.length} characters`);
  }
  return Buffer.from(s, 'hex');
}

/** Validates raw key bytes from a Secret (`spec.tls.swimKeySecretRef`, key `key`): exactly 32 bytes. */
export function checkKeyBytes(bytes: Uint8Array, source: string): Buffer {
  if (bytes.length !== SWIM_KEY_BYTES) {
    throw new KeyRingError(`${source}: SWIM key must be exactly 32 bytes; got ${bytes.length}`);
  }
  return Buffer.from(bytes);
}

export class KeyRing {
  #keys: Buffer[];
  // KeyObjects are built once: deriving one from raw bytes on every packet dominated the CPU profile.
  #objects: KeyObject[];

  /** `keys[0]` is the primary (encrypting) key; all are accepted for decryption. */
  constructor(keys: readonly Uint8Array[]) {
    if (keys.length === 0) throw new KeyRingError('a key ring needs at least one key');
    this.#keys = keys.map((k, i) => checkKeyBytes(k, `key ring entry ${i}`));
    this.#objects = this.#keys.map((k) => createSecretKey(k));
  }

  get primary(): KeyObject {
    return this.#objects[0] as KeyObject;
  }

  /** Keys in trial order: primary first, since it is what nearly every peer uses. */
  get keys(): readonly KeyObject[] {
    return this.#objects;
  }

  #set(keys: Buffer[]): void {
    this.#keys = keys;
    this.#objects = keys.map((k) => createSecretKey(k));
  }

  /** Accept `key` for decryption (rotation step 1). Idempotent. */
  add(key: Uint8Array): void {
    const k = checkKeyBytes(key, 'added key');
    if (!this.#keys.some((e) => e.equals(k))) this.#set([...this.#keys, k]);
  }

  /** Encrypt with `key` from now on (rotation step 2); adds it when missing. */
  use(key: Uint8Array): void {
    const k = checkKeyBytes(key, 'primary key');
    this.#set([k, ...this.#keys.filter((e) => !e.equals(k))]);
  }

  /** Stop accepting `key` (rotation step 3). The primary cannot be removed. */
  remove(key: Uint8Array): void {
    const k = Buffer.from(key);
    if ((this.#keys[0] as Buffer).equals(k))
      throw new KeyRingError('cannot remove the primary key; make another key primary first');
    this.#set(this.#keys.filter((e) => !e.equals(k)));
  }
}
