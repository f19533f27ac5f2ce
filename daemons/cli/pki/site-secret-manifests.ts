/**
 * The Secret manifests of one site, filled from the grid's PKI directory: every Secret the compiled site names
 * (GridSiteStack.secretNeeds) that the PKI holds, and the list of those only the user can make (a real provider's
 * API key, the caller keys file), each with the command that makes it. The manifests carry key bytes: they go to
 * `kubectl apply -f -`, never into dist/ or a repository.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { SiteSecretNeed } from '../../../constructs/site-secrets.ts';
import { credentialFile, PkiError, readCaPair, readLeaf, readSwimKey, tokenFile } from './grid-pki.ts';

export const SECRET_MANAGER_LABEL = 'agn-pki';

export interface SecretManifest {
  readonly apiVersion: 'v1';
  readonly kind: 'Secret';
  readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Record<string, string> };
  readonly type: 'Opaque' | 'kubernetes.io/tls';
  readonly data: Record<string, string>;
}

export interface UserSecret {
  readonly need: SiteSecretNeed;
  /** What it holds and the command that makes it. */
  readonly how: string;
}

function manifest(need: SiteSecretNeed, network: string, data: Record<string, string | Buffer>): SecretManifest {
  const missing = need.keys.filter((key) => data[key] === undefined);
  if (missing.length > 0)
    throw new PkiError(`Secret ${need.namespace}/${need.name}: the PKI has no value for key ${missing.join(', ')}`);
  const tls = data['tls.crt'] !== undefined && data['tls.key'] !== undefined;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: need.name,
      namespace: need.namespace,
      labels: { 'app.kubernetes.io/managed-by': SECRET_MANAGER_LABEL, 'grid.praxis.fast/network': network },
    },
    type: tls ? 'kubernetes.io/tls' : 'Opaque',
    data: Object.fromEntries(
      need.keys.map((key) => [key, Buffer.from(data[key] as string | Buffer).toString('base64')]),
    ),
  };
}

function readToken(file: string, what: string): string {
  if (!existsSync(file)) throw new PkiError(`${file}: missing (${what}); run agn pki init`);
  return readFileSync(file, 'utf8').trim();
}

/** The site's Secrets from `dir`, and the ones the user makes. */
export function siteSecretManifests(
  dir: string,
  network: string,
  site: string,
  needs: readonly SiteSecretNeed[],
): { secrets: SecretManifest[]; user: UserSecret[] } {
  const secrets: SecretManifest[] = [];
  const user: UserSecret[] = [];
  const ca = (): string => readCaPair(dir).certPem;
  const leaf = (name: string): Record<string, string> => {
    const pair = readLeaf(dir, site, name);
    return { 'ca.crt': ca(), 'tls.crt': pair.certPem, 'tls.key': pair.keyPem };
  };
  for (const need of needs) {
    switch (need.purpose) {
      case 'grid-ca':
        secrets.push(manifest(need, network, { 'ca.crt': ca() }));
        break;
      case 'site-certificate':
        secrets.push(manifest(need, network, leaf('site')));
        break;
      case 'swim-key':
        secrets.push(manifest(need, network, { key: readSwimKey(dir) }));
        break;
      case 'gateway-tls':
        secrets.push(manifest(need, network, leaf(need.role === 'provider' ? 'provider-gateway' : 'consumer-gateway')));
        break;
      case 'grid-ca-signer': {
        const pair = readCaPair(dir);
        secrets.push(manifest(need, network, { 'tls.crt': pair.certPem, 'tls.key': pair.keyPem }));
        break;
      }
      case 'provider-credential':
        if (need.simulated) {
          const data = Object.fromEntries(
            need.keys.map((key) => [
              key,
              readToken(credentialFile(dir, site, need.name, key), `the token of simulated backend ${need.provider}`),
            ]),
          );
          secrets.push(manifest(need, network, data));
        } else {
          const key = need.keys[0] ?? 'token';
          user.push({
            need,
            how: `the bearer token of ${need.provider}: kubectl -n ${need.namespace} create secret generic ${need.name} --from-literal=${key}=<token>`,
          });
        }
        break;
      case 'dashboard-token':
        secrets.push(
          manifest(need, network, { token: readToken(tokenFile(dir, site, 'dashboard'), 'the dashboard token') }),
        );
        break;
      case 'ingest-token':
        secrets.push(
          manifest(need, network, { token: readToken(tokenFile(dir, site, 'ingest'), 'the gateway ingest token') }),
        );
        break;
      case 'caller-keys': {
        const key = need.keys[0] ?? 'caller-keys.json';
        user.push({
          need,
          how: `the caller keys of consumer gateway ${need.gateway} (salted hashes): agn key mint --tenant <tenant> --keys-file ${key}, then kubectl -n ${need.namespace} create secret generic ${need.name} --from-file=${key}=${key}`,
        });
        break;
      }
    }
  }
  return { secrets, user };
}
