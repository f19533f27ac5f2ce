// The gateway's TLS files read as one set and cross-checked before they are used: a listener's certificates with their
// keys and its client CA, an upstream cluster's CA and client certificate. A renewed certificate is taken only whole:
// a truncated PEM, a key that does not belong to its certificate, or a CA bundle with nothing usable is refused with
// the config field and the file named (never the bytes), and what is in force stays.
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import type { ClusterConfig, ListenerConfig } from '../../schemas/generated/gateway-config.ts';
import { MountedFileError } from '../shared/mounted-files.ts';

/** A certificate chain, key or CA bundle larger than this is not a certificate file. */
export const MAX_TLS_FILE_BYTES = 1024 * 1024;

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const CERTIFICATE_BEGIN = /-----BEGIN CERTIFICATE-----/g;

/** Every certificate of a PEM file, each parsed: a block without its END line (a cut file) is refused, not dropped. */
function certificates(bytes: Buffer, where: string): X509Certificate[] {
  const text = bytes.toString('utf8');
  const blocks = text.match(CERTIFICATE_BLOCK) ?? [];
  const begins = text.match(CERTIFICATE_BEGIN)?.length ?? 0;
  if (begins === 0) throw new MountedFileError(`${where}: no PEM certificate in the file`);
  if (blocks.length !== begins)
    throw new MountedFileError(`${where}: a PEM certificate is truncated (BEGIN without END)`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch {
      throw new MountedFileError(
        `${where}: certificate ${i + 1} of the file is not a valid certificate (truncated or corrupt)`,
      );
    }
  });
}

function privateKey(bytes: Buffer, where: string): KeyObject {
  try {
    return createPrivateKey(bytes);
  } catch {
    throw new MountedFileError(`${where}: not a PEM private key (truncated, corrupt or encrypted)`);
  }
}

/** A certificate file and its key file, checked to belong together. */
function pair(certBytes: Buffer, keyBytes: Buffer, certWhere: string, keyWhere: string): { cert: string; key: string } {
  const leaf = certificates(certBytes, certWhere)[0]!;
  const key = privateKey(keyBytes, keyWhere);
  if (!leaf.checkPrivateKey(key))
    throw new MountedFileError(`${keyWhere}: the private key does not belong to the certificate in ${certWhere}`);
  return { cert: certBytes.toString('utf8'), key: keyBytes.toString('utf8') };
}

/** Node's own check of the whole set (what setSecureContext and a connect would do); its message names no bytes. */
function secureContextProblem(options: SecureContextOptions, where: string): void {
  try {
    createSecureContext(options);
  } catch (error) {
    throw new MountedFileError(`${where}: the TLS material is refused (${(error as Error).message})`);
  }
}

export interface ListenerTls {
  readonly cert: readonly string[];
  readonly key: readonly string[];
  readonly ca?: string;
  /** SHA-256 of each leaf certificate, for the reload log line. */
  readonly fingerprints: readonly string[];
}

/** What setSecureContext takes for a listener's material (TLS 1.2 at least, as at start). */
export function listenerContextOptions(tls: ListenerTls): SecureContextOptions {
  return {
    cert: [...tls.cert],
    key: [...tls.key],
    ...(tls.ca === undefined ? {} : { ca: tls.ca }),
    minVersion: 'TLSv1.2',
  };
}

export interface TlsFileSet<T> {
  readonly files: string[];
  /** Each file named by its config field and path, for every problem reported. */
  readonly labels: string[];
  readonly parse: (contents: readonly Buffer[]) => T;
}

/** The files of a listener's TLS (cert, key for each certificate, then the client CA) and how to read them. */
export function listenerTlsFiles(listener: ListenerConfig, resolve: (path: string) => string): TlsFileSet<ListenerTls> {
  const tls = listener.tls!;
  const files: string[] = [];
  const labels: string[] = [];
  const add = (path: string, field: string): void => {
    files.push(resolve(path));
    labels.push(`listener ${listener.name} tls.${field} ${resolve(path)}`);
  };
  tls.certificates.forEach((c, i) => {
    add(c.cert_path, `certificates[${i}].cert_path`);
    add(c.key_path, `certificates[${i}].key_path`);
  });
  if (tls.client_ca !== undefined) add(tls.client_ca.ca_path, 'client_ca.ca_path');
  return {
    files,
    labels,
    parse(contents) {
      const pairs = tls.certificates.map((_, i) =>
        pair(contents[2 * i]!, contents[2 * i + 1]!, labels[2 * i]!, labels[2 * i + 1]!),
      );
      let ca: string | undefined;
      if (tls.client_ca !== undefined) {
        const at = 2 * tls.certificates.length;
        certificates(contents[at]!, labels[at]!);
        ca = contents[at]!.toString('utf8');
      }
      const material: ListenerTls = {
        cert: pairs.map((p) => p.cert),
        key: pairs.map((p) => p.key),
        ...(ca === undefined ? {} : { ca }),
        fingerprints: pairs.map((p) => new X509Certificate(p.cert).fingerprint256.replaceAll(':', '').toLowerCase()),
      };
      secureContextProblem(listenerContextOptions(material), `listener ${listener.name} tls`);
      return material;
    },
  };
}

export interface ClusterTls {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/** The files of an upstream cluster's TLS (the CA, then the client certificate and key) and how to read them. */
export function clusterTlsFiles(cluster: ClusterConfig, resolve: (path: string) => string): TlsFileSet<ClusterTls> {
  const tls = cluster.tls!;
  const files: string[] = [];
  const labels: string[] = [];
  const add = (path: string, field: string): void => {
    files.push(resolve(path));
    labels.push(`cluster "${cluster.name}" tls.${field} ${resolve(path)}`);
  };
  if (tls.ca !== undefined) add(tls.ca.ca_path, 'ca.ca_path');
  if (tls.client_cert !== undefined) {
    add(tls.client_cert.cert_path, 'client_cert.cert_path');
    add(tls.client_cert.key_path, 'client_cert.key_path');
  }
  return {
    files,
    labels,
    parse(contents) {
      let at = 0;
      let ca: string | undefined;
      if (tls.ca !== undefined) {
        certificates(contents[at]!, labels[at]!);
        ca = contents[at]!.toString('utf8');
        at++;
      }
      const client =
        tls.client_cert === undefined
          ? undefined
          : pair(contents[at]!, contents[at + 1]!, labels[at]!, labels[at + 1]!);
      const material: ClusterTls = { ...(ca === undefined ? {} : { ca }), ...(client === undefined ? {} : client) };
      secureContextProblem(material, `cluster "${cluster.name}" tls`);
      return material;
    },
  };
}
