// Throwaway PKI for one control-plane run: a CA, the API server's serving certificate, an admin client
// certificate in system:masters, and the ServiceAccount token signing key. Generated with the openssl CLI
// into the run's private work directory; nothing here is reused across runs.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ControlPlanePki {
  readonly caCert: string; // path
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly adminCert: string;
  readonly adminKey: string;
  readonly serviceAccountKey: string; // private, signs tokens
  readonly serviceAccountPub: string; // public, verifies them
}

export async function openssl(args: readonly string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (err) {
    // openssl's stderr names the failing step; it never echoes key material.
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed in ${cwd}: ${stderr.trim() || String(err)}`);
  }
}

/** Extensions of a client certificate (the API server reads the identity from its subject). */
export const CLIENT_EXTENSIONS = [
  'basicConstraints=critical,CA:FALSE',
  'keyUsage=critical,digitalSignature,keyEncipherment',
  'extendedKeyUsage=clientAuth',
] as const;

/** The names a cluster's own clients use for the API server. */
export const KUBERNETES_SERVICE_NAMES = [
  'DNS:kubernetes',
  'DNS:kubernetes.default',
  'DNS:kubernetes.default.svc',
  'DNS:kubernetes.default.svc.cluster.local',
] as const;

/** `openssl req` arguments for a new unencrypted P-256 key. */
const NEW_P256_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'] as const;

/** A self-signed P-256 CA, ca.crt and ca.key in dir, valid two days. */
export async function createCa(dir: string, commonName: string): Promise<void> {
  await openssl(
    [
      'req',
      '-x509',
      ...NEW_P256_KEY,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-sha256',
      '-subj',
      `/CN=${commonName}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
}

/**
 * A leaf signed by dir's CA: name.key, name.crt. Extensions go through a file because `openssl x509 -req` reads
 * them from one. Each leaf has a random serial of its own (not -CAcreateserial), so leaves may be issued at once.
 */
export async function issueLeaf(
  dir: string,
  name: string,
  subject: string,
  extensions: readonly string[],
): Promise<void> {
  const extFile = `${name}.ext`;
  await writeFile(join(dir, extFile), `${extensions.join('\n')}\n`);
  await openssl(
    ['req', '-new', ...NEW_P256_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject],
    dir,
  );
  const serial = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex')}`;
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      serial,
      '-days',
      '2',
      '-sha256',
      '-extfile',
      extFile,
      '-out',
      `${name}.crt`,
    ],
    dir,
  );
}

/** The ServiceAccount token signing key pair: sa.key (private, signs) and sa.pub (public, verifies). */
export async function createServiceAccountKey(dir: string): Promise<void> {
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'sa.key'], dir);
  await openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
}

export async function generatePki(dir: string): Promise<ControlPlanePki> {
  await createCa(dir, 'agn-cluster-test-ca');
  // The names clients inside a cluster would use, plus the loopback address the suite connects to.
  await Promise.all([
    issueLeaf(dir, 'apiserver', '/CN=kube-apiserver', [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${['IP:127.0.0.1', 'DNS:localhost', ...KUBERNETES_SERVICE_NAMES].join(',')}`,
    ]),
    // Organisation system:masters is the API server's built-in superuser group.
    issueLeaf(dir, 'admin', '/O=system:masters/CN=agn-cluster-test-admin', CLIENT_EXTENSIONS),
    createServiceAccountKey(dir),
  ]);
  return {
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    serverCert: join(dir, 'apiserver.crt'),
    serverKey: join(dir, 'apiserver.key'),
    adminCert: join(dir, 'admin.crt'),
    adminKey: join(dir, 'admin.key'),
    serviceAccountKey: join(dir, 'sa.key'),
    serviceAccountPub: join(dir, 'sa.pub'),
  };
}

export interface KubeconfigUser {
  readonly name: string;
  // Exactly one of a client certificate pair or a bearer token.
  readonly clientCert?: string; // PEM text
  readonly clientKey?: string; // PEM text
  readonly token?: string;
}

// A self-contained kubeconfig (credentials inlined), as JSON, which every kubeconfig reader accepts.
export function renderKubeconfig(server: string, caPem: string, user: KubeconfigUser): string {
  const b64 = (text: string): string => Buffer.from(text).toString('base64');
  const credentials: Record<string, string> = {};
  if (user.token !== undefined) credentials.token = user.token;
  if (user.clientCert !== undefined) credentials['client-certificate-data'] = b64(user.clientCert);
  if (user.clientKey !== undefined) credentials['client-key-data'] = b64(user.clientKey);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'agn-test', cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name: user.name, user: credentials }],
    contexts: [{ name: user.name, context: { cluster: 'agn-test', user: user.name } }],
    'current-context': user.name,
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

export async function readPem(path: string): Promise<string> {
  return readFile(path, 'utf8');
}
