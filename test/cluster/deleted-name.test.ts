// SiteInvite allowDeletedName on the real API server: the site name ledger is a ConfigMap written with server-side
// apply and a resourceVersion precondition (two "replicas" recording at once lose no name), a GridSite deleted
// after its name was recorded makes an invite for that name Ready=False SiteNameDeleted with no token Secret, a
// redeem racing the deletion is refused with site_name_deleted, and allowDeletedName issues and redeems.
import 'reflect-metadata';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { OperatorContext } from '../../daemons/gossip-operator/context.ts';
import { SiteInviteController } from '../../daemons/gossip-operator/controllers/site-invite.ts';
import { InviteRedeemer, parseRedeemRequest, RedeemRefusal } from '../../daemons/gossip-operator/enrollment/redeem.ts';
import { loadGridCa } from '../../daemons/gossip-operator/enrollment/site-certificate.ts';
import { GRID_SITE, SECRET, SITE_INVITE } from '../../daemons/gossip-operator/kinds.ts';
import {
  checkDeletedSiteName,
  readSiteNameLedger,
  recordSiteNames,
} from '../../daemons/gossip-operator/site-name-ledger.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import type { KubernetesStore } from '../../daemons/shared/resource-store/index.ts';
import { createCertificateAuthority } from '../../daemons/shared/tls.ts';
import { inviteTokenSecretName, siteNameLedgerConfigMapName } from '../../schemas/object-names.ts';
import { csr, namespaceWithStores } from './enrollment-fixture.ts';
import { uniqueName } from './kube.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('deleted site names on the API server', () => {
  const { namespace, open } = namespaceWithStores('deleted');
  const signerSite = uniqueName('signer');
  const ledger = { name: siteNameLedgerConfigMapName(signerSite), namespace };

  it('refuses a deleted name without allowDeletedName, at the invite and at the redeem, and reuses it with it', async () => {
    const store = open();
    const site = uniqueName('east');
    await store.apply(
      GRID_SITE,
      {
        apiVersion: GRID_SITE.apiVersion,
        kind: 'GridSite',
        metadata: { name: site },
        spec: { gridNetworkRef: 'production' },
      },
      { fieldManager: 'agn-cluster-test' },
    );
    // Two replicas record names at once from an absent ledger: the empty create plus the precondition turn the
    // race into retries, never into one map replacing the other.
    const others = Array.from({ length: 6 }, (_, i) => `${site}-peer${i}`);
    const chain = async (replica: KubernetesStore, names: readonly string[]) => {
      for (const name of names) await recordSiteNames(replica, ledger, [name], Date.now());
    };
    await Promise.all([chain(open(), [site, ...others.slice(0, 3)]), chain(open(), others.slice(3))]);
    expect([...(await readSiteNameLedger(store, ledger)).names.keys()].sort()).toEqual([site, ...others].sort());
    expect((await checkDeletedSiteName(store, ledger, site)).deleted).toBe(false);

    const lines: string[] = [];
    const logger = createLogger({
      name: 'deleted-name-test',
      destination: new Writable({
        write: (c: Buffer, _e, cb) => {
          lines.push(c.toString());
          cb();
        },
      }),
    });
    const ctx = { store, logger, config: { namespace, site: signerSite }, now: Date.now } as unknown as OperatorContext;
    const controller = new SiteInviteController(ctx);
    const invite = async (spec: Record<string, unknown>): Promise<Json> => {
      const name = uniqueName('invite');
      await store.apply(
        SITE_INVITE,
        { apiVersion: SITE_INVITE.apiVersion, kind: 'SiteInvite', metadata: { name }, spec },
        { fieldManager: 'agn-cluster-test' },
      );
      await controller.reconcile(name);
      return store.get(SITE_INVITE, { name });
    };
    const ready = (i: Json) => i.status.conditions.find((c: Json) => c.type === 'Ready');

    // Issued while the GridSite exists; then the GridSite is deleted before the site redeems.
    const racing = await invite({ siteName: site });
    expect(ready(racing)).toMatchObject({ status: 'True', reason: 'TokenIssued' });
    expect(await store.delete(GRID_SITE, { name: site })).toBe(true);
    const refused = await invite({ siteName: site });
    expect(ready(refused)).toMatchObject({ status: 'False', reason: 'SiteNameDeleted' });
    expect(ready(refused).message).toContain(`site ${site} was deleted from the grid`);
    expect(ready(refused).message).toContain('spec.allowDeletedName: true');
    expect(refused.status.tokenId).toBeUndefined();
    expect(await store.get(SECRET, { name: inviteTokenSecretName(refused.metadata.name), namespace })).toBeUndefined();

    const authority = await createCertificateAuthority({ commonName: 'cluster-grid-ca' });
    const ca = await loadGridCa(authority.certPem, authority.keyPem, { cert: 'ca.crt', key: 'ca.key' });
    const redeemer = new InviteRedeemer({
      store: open(),
      namespace,
      ca: () => ca,
      certificateLifetimeMs: 86_400_000,
      now: Date.now,
      siteNameLedger: ledger,
    });
    const tokenOf = async (i: Json): Promise<string> => {
      const secret: Json = await store.get(SECRET, { name: inviteTokenSecretName(i.metadata.name), namespace });
      return Buffer.from(secret.data.token, 'base64').toString('utf8');
    };
    const request = async (i: Json) =>
      parseRedeemRequest(
        Buffer.from(
          JSON.stringify({ tokenId: i.status.tokenId, token: await tokenOf(i), siteName: site, csr: await csr() }),
        ),
      );
    const error = await redeemer.redeem(await request(racing)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RedeemRefusal);
    expect((error as RedeemRefusal).outcome).toBe('site_name_deleted');
    // The token was not spent.
    expect(await store.get(SECRET, { name: inviteTokenSecretName(racing.metadata.name), namespace })).toBeDefined();

    const reuse = await invite({ siteName: site, allowDeletedName: true });
    expect(ready(reuse)).toMatchObject({ status: 'True', reason: 'TokenIssued' });
    expect(reuse.status.conditions.find((c: Json) => c.type === 'SiteNameReused')).toMatchObject({
      status: 'True',
      reason: 'DeletedNameReused',
    });
    const issued = await redeemer.redeem(await request(reuse));
    expect(issued.siteName).toBe(site);
    const after: Json = await store.get(SITE_INVITE, { name: reuse.metadata.name });
    expect(after.status).toMatchObject({ redeemed: true, redeemedBy: site });
  });
});
