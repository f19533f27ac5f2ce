// Throwaway PKI for one node cluster (one site): a CA, the API server's serving certificate (for the node's
// address, the kubernetes Service's ClusterIP and its DNS names), a client certificate for each component under the
// identity the API server's bootstrap RBAC and Node authorizer expect, and the ServiceAccount signing key. Made
// with the openssl CLI in the run's private directory, like test/cluster/certs.ts; nothing is reused across runs.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { renderKubeconfig } from '../cluster/certs.ts';

const exec = promisify(execFile);

async function openssl(args: readonly string[], cwd: string): Promise<void> {
  try {
    await exec('openssl', args, { cwd });
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed in ${cwd}: ${stderr.trim() || String(err)}`);
  }
}

async function issue(dir: string, name: string, subject: string, extensions: readonly string[]): Promise<void> {
  await writeFile(join(dir, `${name}.ext`), `${extensions.join('\n')}\n`);
  await openssl(
    [
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      subject,
    ],
    dir,
  );
  // A serial of its own per leaf (not -CAcreateserial): the leaves are issued concurrently.
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
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    ],
    dir,
  );
}

const CLIENT = [
  'basicConstraints=critical,CA:FALSE',
  'keyUsage=critical,digitalSignature,keyEncipherment',
  'extendedKeyUsage=clientAuth',
];

/** The client identities of a node's components: file stem and certificate subject. */
export const CLIENTS = {
  admin: '/O=system:masters/CN=agn-node-admin',
  'kube-controller-manager': '/CN=system:kube-controller-manager',
  'kube-scheduler': '/CN=system:kube-scheduler',
  'kube-proxy': '/CN=system:kube-proxy',
  // The API server's client certificate towards the kubelet (logs, exec, port-forward); the kubelet authorizes it
  // with a SubjectAccessReview, which system:masters passes.
  'apiserver-kubelet-client': '/O=system:masters/CN=kube-apiserver-kubelet-client',
  // CoreDNS lists Services, EndpointSlices, Namespaces (and Pods for `pods verified`): admin keeps this test's
  // CoreDNS out of RBAC questions that are not the project's.
  coredns: '/O=system:masters/CN=agn-node-coredns',
} as const;

export type ClientName = keyof typeof CLIENTS | 'kubelet';

export interface NodePki {
  readonly dir: string;
  readonly caCert: string;
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
  cert(client: ClientName): string;
  key(client: ClientName): string;
  /** A self-contained kubeconfig file for `client` against `server`, written under dir; returns its path. */
  kubeconfig(client: ClientName, server: string): Promise<string>;
}

export async function generateNodePki(dir: string, nodeName: string, serverIps: readonly string[]): Promise<NodePki> {
  await openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-sha256',
      '-subj',
      '/CN=agn-node-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  const sans = [
    ...serverIps.map((ip) => `IP:${ip}`),
    'IP:127.0.0.1',
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
  ];
  await Promise.all([
    issue(dir, 'apiserver', '/CN=kube-apiserver', [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${sans.join(',')}`,
    ]),
    // The Node authorizer and NodeRestriction know a kubelet by this subject.
    issue(dir, 'kubelet', `/O=system:nodes/CN=system:node:${nodeName}`, CLIENT),
    ...Object.entries(CLIENTS).map(([name, subject]) => issue(dir, name, subject, CLIENT)),
    openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'sa.key'], dir).then(() =>
      openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir),
    ),
  ]);
  const caCert = join(dir, 'ca.crt');
  const caPem = await readFile(caCert, 'utf8');
  return {
    dir,
    caCert,
    caKey: join(dir, 'ca.key'),
    serverCert: join(dir, 'apiserver.crt'),
    serverKey: join(dir, 'apiserver.key'),
    serviceAccountKey: join(dir, 'sa.key'),
    serviceAccountPub: join(dir, 'sa.pub'),
    cert: (client) => join(dir, `${client}.crt`),
    key: (client) => join(dir, `${client}.key`),
    async kubeconfig(client, server) {
      const path = join(dir, `${client}.kubeconfig`);
      const [clientCert, clientKey] = await Promise.all([
        readFile(join(dir, `${client}.crt`), 'utf8'),
        readFile(join(dir, `${client}.key`), 'utf8'),
      ]);
      await writeFile(path, renderKubeconfig(server, caPem, { name: client, clientCert, clientKey }), { mode: 0o600 });
      return path;
    },
  };
}
