// What the enrollment cluster tests share: a fresh namespace with the CRDs applied, KubernetesStores opened on the
// test API server and closed after the file, and a throwaway CSR.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, inject } from 'vitest';
import { KubernetesStore } from '../../daemons/shared/resource-store/index.ts';
import { adminKubeConfig, uniqueName } from './kube.ts';
import { applyManifests, RawClient } from './manifests.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** A PEM CSR for a fresh P-256 key (the redeem binds the certificate to the CSR's key, not to its subject). */
export async function csr(): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  return (
    await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=x',
      keys,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    })
  ).toString('pem');
}

/** Call inside a describe: registers the hooks that create the namespace and close every store `open()` returned. */
export function namespaceWithStores(prefix: string): { readonly namespace: string; open(): KubernetesStore } {
  const namespace = uniqueName(prefix);
  const stores: KubernetesStore[] = [];
  beforeAll(async () => {
    const admin = new RawClient(adminKubeConfig());
    await applyManifests(admin, ['crds.k8s.yaml']);
    const res = await admin.request('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: namespace },
    });
    if (res.status !== 201) throw new Error(`creating namespace ${namespace}: HTTP ${res.status}`);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
  });
  return {
    namespace,
    open: () => {
      const store = new KubernetesStore({ kubeconfigPath: inject('kubeconfigPath') });
      stores.push(store);
      return store;
    },
  };
}
