/**
 * Resolves an EndpointTls (spec.tls or a per-feature override) into PEM material for a probe. Invalid material
 * fails closed with a reason code; there is no insecure-skip option. Messages name Secrets and keys, never bytes.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { ProbeTls } from '../probes/http-probe.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import { readConfigMapKey, readSecretKey, SecretError } from '../secrets.ts';

export interface EndpointTlsSpec {
  readonly caSecretRef?: { name: string; namespace: string; key?: string };
  readonly caConfigMapRef?: { name: string; namespace: string; key?: string };
  readonly clientCertificateSecretRef?: {
    name: string;
    namespace: string;
    certificateKey?: string;
    privateKeyKey?: string;
  };
}

export type TlsResolution =
  | { readonly ok: true; readonly tls: ProbeTls | undefined }
  | { readonly ok: false; readonly reason: string; readonly message: string };

/** `prefix` makes the reason feature-specific, e.g. EndpointTls, MetricsTls, HealthCheckTls. */
export async function resolveEndpointTls(
  store: ResourceStore,
  spec: EndpointTlsSpec | undefined,
  prefix: string,
): Promise<TlsResolution> {
  if (spec === undefined) return { ok: true, tls: undefined };
  const fail = (error: unknown): TlsResolution => {
    if (error instanceof SecretError) {
      return {
        ok: false,
        reason: error.problem === 'key_missing' ? `${prefix}KeyMissing` : `${prefix}SecretMissing`,
        message: error.message,
      };
    }
    return { ok: false, reason: `${prefix}MaterialInvalid`, message: (error as Error).message };
  };
  try {
    const out: { ca?: string; cert?: string; key?: string } = {};
    if (spec.caSecretRef !== undefined)
      out.ca = (await readSecretKey(store, spec.caSecretRef, 'ca.crt')).toString('utf8');
    else if (spec.caConfigMapRef !== undefined) out.ca = await readConfigMapKey(store, spec.caConfigMapRef, 'ca.crt');
    if (out.ca !== undefined) {
      try {
        new X509Certificate(out.ca);
      } catch {
        throw new Error('the configured CA is not a PEM certificate');
      }
    }
    const client = spec.clientCertificateSecretRef;
    if (client !== undefined) {
      out.cert = (await readSecretKey(store, { ...client, key: client.certificateKey }, 'tls.crt')).toString('utf8');
      const key = (await readSecretKey(store, { ...client, key: client.privateKeyKey }, 'tls.key')).toString('utf8');
      try {
        new X509Certificate(out.cert);
        createPrivateKey(key);
      } catch {
        throw new Error(
          `client certificate Secret ${client.namespace}/${client.name} does not hold a PEM certificate and private key`,
        );
      }
      out.key = key;
    }
    return { ok: true, tls: out };
  } catch (error) {
    return fail(error);
  }
}
