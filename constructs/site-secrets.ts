/**
 * The Secrets a compiled site names but never contains, each with what it is for: the list `agn pki secrets` fills
 * from the grid's PKI and prints the rest of for the user to create. GridSiteStack builds it from exactly the
 * objects it renders, so the list cannot drift from the manifests.
 */

interface NeedBase {
  readonly name: string;
  readonly namespace: string;
  /** The data keys the manifests read. */
  readonly keys: readonly string[];
}

export type SiteSecretNeed = NeedBase &
  /** The grid CA certificate (GridNetwork spec.tls.caSecretRef): `ca.crt`. */
  (
    | { readonly purpose: 'grid-ca' }
    /** This site's identity (spec.tls.siteSecretRef; the enrollment endpoint serves it): `ca.crt`, `tls.crt`, `tls.key`. */
    | { readonly purpose: 'site-certificate' }
    /** The mesh's AES-256-GCM key (spec.tls.swimKeySecretRef): `key`, 32 bytes. */
    | { readonly purpose: 'swim-key' }
    /**
     * A gateway's TLS material: `ca.crt` (the grid CA), `tls.crt`, `tls.key`. A provider gateway serves it (its
     * `serverNames` must be SANs, its fingerprint is the site's pin); a consumer presents it on the provider hop
     * (one of `organizations` must be its subject O for every provider gateway it calls).
     */
    | {
        readonly purpose: 'gateway-tls';
        readonly role: 'provider';
        readonly gateway: string;
        readonly serverNames: readonly string[];
      }
    | {
        readonly purpose: 'gateway-tls';
        readonly role: 'consumer';
        readonly gateway: string;
        readonly organizations: readonly string[];
      }
    /** The grid CA certificate and key (tls.crt, tls.key) the enrollment endpoint signs joining sites with. */
    | { readonly purpose: 'grid-ca-signer' }
    /** A provider's bearer token: a simulated backend's is the grid's to make, a real one is the user's. */
    | { readonly purpose: 'provider-credential'; readonly provider: string; readonly simulated: boolean }
    /** A consumer's caller keys file (salted hashes, `agn key mint`): the user's. */
    | { readonly purpose: 'caller-keys'; readonly gateway: string }
    /** A bearer token the grid's own daemons share (`token`): the fleet dashboard's, the gateway ingest's. */
    | { readonly purpose: 'dashboard-token' }
    | { readonly purpose: 'ingest-token' }
  );

export type SiteSecretPurpose = SiteSecretNeed['purpose'];

/** One need per (namespace, name): a Secret two objects mount is listed once, with the union of their keys. */
export function mergeNeeds(needs: readonly SiteSecretNeed[]): SiteSecretNeed[] {
  const out = new Map<string, SiteSecretNeed>();
  for (const need of needs) {
    const id = `${need.namespace}/${need.name}`;
    const before = out.get(id);
    out.set(id, before === undefined ? need : { ...before, keys: [...new Set([...before.keys, ...need.keys])] });
  }
  return [...out.values()].sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1));
}
