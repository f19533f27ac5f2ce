// The Secrets a compiled site's grid objects reference (every …SecretRef / secretRef in their specs), each with the
// role it plays there, and the test material a Secret of that role gets. Every secret string made here is pushed to
// `inPlay`, which the suites check never reaches a log line.
import { randomBytes } from 'node:crypto';

export interface SecretRef {
  name: string;
  namespace: string;
  key?: string;
}

export type SecretRole = 'ca' | 'site' | 'swim' | 'token';

/**
 * Every Secret the specs name with a namespace, by `namespace/name`, with its role (by the field that names it). A
 * name-only ref (a gateway's transport.caSecretRef) is resolved in its gateway's namespace, not made here.
 */
export function referencedSecrets(specs: readonly unknown[]): Map<string, { ref: SecretRef; role: SecretRole }> {
  const out = new Map<string, { ref: SecretRef; role: SecretRole }>();
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) for (const v of value) walk(v, key);
    else if (value !== null && typeof value === 'object') {
      const record = value as Record<string, unknown>;
      if (/secretref$/i.test(key) && typeof record['name'] === 'string' && typeof record['namespace'] === 'string') {
        const role =
          key === 'caSecretRef' ? 'ca' : key === 'siteSecretRef' ? 'site' : /swimkey/i.test(key) ? 'swim' : 'token';
        const ref = record as unknown as SecretRef;
        out.set(`${ref.namespace}/${ref.name}`, { ref, role });
      }
      for (const [k, v] of Object.entries(record)) walk(v, k);
    }
  };
  for (const spec of specs) walk(spec, 'spec');
  return out;
}

const b64 = (text: string | Buffer): string => Buffer.from(text).toString('base64');

/**
 * The data of a Secret playing `role`: the grid CA, the site's certificate and key, a fresh 32-byte SWIM key, or a
 * fresh token. The key, SWIM key and token go to `inPlay`.
 */
export function secretData(
  ref: SecretRef,
  role: SecretRole,
  material: { caPem: string; certPem: string; keyPem: string },
  inPlay: string[],
): Record<string, string> {
  if (role === 'ca') return { [ref.key ?? 'ca.crt']: b64(material.caPem) };
  if (role === 'site') {
    inPlay.push(
      material.keyPem
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('-----'))
        .join(''),
    );
    return { 'tls.crt': b64(material.certPem), 'tls.key': b64(material.keyPem) };
  }
  if (role === 'swim') {
    const key = randomBytes(32);
    inPlay.push(key.toString('hex'), key.toString('base64'));
    return { [ref.key ?? 'key']: b64(key) };
  }
  const token = `tok-${randomBytes(18).toString('hex')}`;
  inPlay.push(token);
  return { [ref.key ?? 'token']: b64(token) };
}
