/**
 * Reading Secret and ConfigMap keys through the resource store. Values are returned to the caller only; every
 * error names the object and key, never the bytes, so a reconcile can put the message in status as is.
 */
import type { ResourceStore } from '../shared/resource-store/types.ts';
import { CONFIG_MAP, SECRET } from './kinds.ts';

export interface KeyRef {
  readonly name: string;
  readonly namespace: string;
  readonly key?: string;
}

export type SecretProblem = 'missing' | 'key_missing' | 'unreadable';

export class SecretError extends Error {
  readonly problem: SecretProblem;
  constructor(problem: SecretProblem, message: string) {
    super(message);
    this.name = 'SecretError';
    this.problem = problem;
  }
}

export interface SecretObject {
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** The bytes of one key of a Secret already read (data is base64 as on the API server; stringData for local manifests). */
export function secretKeyBytes(secret: SecretObject, key: string): Buffer | undefined {
  const encoded = secret.data?.[key];
  if (typeof encoded === 'string') return Buffer.from(encoded, 'base64');
  const plain = secret.stringData?.[key];
  return typeof plain === 'string' ? Buffer.from(plain, 'utf8') : undefined;
}

/** The bytes of one Secret key (data is base64 as on the API server; stringData is accepted for local manifests). */
export async function readSecretKey(store: ResourceStore, ref: KeyRef, defaultKey: string): Promise<Buffer> {
  const key = ref.key ?? defaultKey;
  const where = `Secret ${ref.namespace}/${ref.name}`;
  let secret: SecretObject | undefined;
  try {
    secret = (await store.get(SECRET, { name: ref.name, namespace: ref.namespace })) as SecretObject | undefined;
  } catch (error) {
    throw new SecretError('unreadable', `${where} cannot be read (${(error as { code?: string }).code ?? 'error'})`);
  }
  if (secret === undefined) throw new SecretError('missing', `${where} does not exist`);
  const bytes = secretKeyBytes(secret, key);
  if (bytes === undefined) throw new SecretError('key_missing', `${where} has no key "${key}"`);
  return bytes;
}

export async function readConfigMapKey(store: ResourceStore, ref: KeyRef, defaultKey: string): Promise<string> {
  const key = ref.key ?? defaultKey;
  const where = `ConfigMap ${ref.namespace}/${ref.name}`;
  const object = (await store.get(CONFIG_MAP, { name: ref.name, namespace: ref.namespace })) as
    | { data?: Record<string, string> }
    | undefined;
  if (object === undefined) throw new SecretError('missing', `${where} does not exist`);
  const value = object.data?.[key];
  if (typeof value !== 'string') throw new SecretError('key_missing', `${where} has no key "${key}"`);
  return value;
}
