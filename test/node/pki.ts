// Throwaway PKI for one node cluster (one site): a CA, the API server's serving certificate (for the node's
// address, the kubernetes Service's ClusterIP and its DNS names), a client certificate for each component under the
// identity the API server's bootstrap RBAC and Node authorizer expect, and the ServiceAccount signing key. Made
// with the openssl CLI in the run's private directory, like test/cluster/certs.ts; nothing is reused across runs.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CLIENT_EXTENSIONS,
  createCa,
  createServiceAccountKey,
  issueLeaf,
  KUBERNETES_SERVICE_NAMES,
  renderKubeconfig,
} from '../cluster/certs.ts';

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
  // The NetworkPolicy engine: bound by node-cluster.ts to the ClusterRole of upstream's install.yaml, nothing more.
  'kube-network-policies': '/CN=agn-node-kube-network-policies',
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
  await createCa(dir, 'agn-node-ca');
  const sans = [...serverIps.map((ip) => `IP:${ip}`), 'IP:127.0.0.1', 'DNS:localhost', ...KUBERNETES_SERVICE_NAMES];
  await Promise.all([
    issueLeaf(dir, 'apiserver', '/CN=kube-apiserver', [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${sans.join(',')}`,
    ]),
    // The Node authorizer and NodeRestriction know a kubelet by this subject.
    issueLeaf(dir, 'kubelet', `/O=system:nodes/CN=system:node:${nodeName}`, CLIENT_EXTENSIONS),
    ...Object.entries(CLIENTS).map(([name, subject]) => issueLeaf(dir, name, subject, CLIENT_EXTENSIONS)),
    createServiceAccountKey(dir),
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
