// SiteInvite redemption on the real API server: the SiteInvite controller issues the token into a Secret, two
// "replicas" (two KubernetesStores, two redeemers) race six redeems of that token, and the Secret DELETE the API
// server answers once is what lets exactly one certificate out. The redemption lands in status through the status
// subresource, so the server's schema (date-time, the digest pattern) accepts what the redeemer writes.
import 'reflect-metadata';
import { X509Certificate } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { OperatorContext } from '../../daemons/gossip-operator/context.ts';
import { SiteInviteController } from '../../daemons/gossip-operator/controllers/site-invite.ts';
import {
  InviteRedeemer,
  parseRedeemRequest,
  type RedeemRefusal,
} from '../../daemons/gossip-operator/enrollment/redeem.ts';
import { loadGridCa } from '../../daemons/gossip-operator/enrollment/site-certificate.ts';
import { SECRET, SITE_INVITE } from '../../daemons/gossip-operator/kinds.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { createCertificateAuthority } from '../../daemons/shared/tls.ts';
import { inviteTokenSecretName } from '../../schemas/object-names.ts';
import { csr, namespaceWithStores } from './enrollment-fixture.ts';
import { uniqueName } from './kube.ts';

describe('SiteInvite redeem on the API server', () => {
  const { namespace, open } = namespaceWithStores('enroll');

  it('issues exactly one certificate for a token raced by two replicas, and records it in status', async () => {
    const name = uniqueName('invite');
    const site = uniqueName('east');
    const store = open();
    await store.apply(
      SITE_INVITE,
      { apiVersion: SITE_INVITE.apiVersion, kind: 'SiteInvite', metadata: { name }, spec: { siteName: site } },
      { fieldManager: 'agn-cluster-test' },
    );
    const lines: string[] = [];
    const logger = createLogger({
      name: 'enroll-test',
      destination: new Writable({
        write: (c: Buffer, _e, cb) => {
          lines.push(c.toString());
          cb();
        },
      }),
    });
    const ctx = { store, logger, config: { namespace, site: 'signer' }, now: Date.now } as unknown as OperatorContext;
    const controller = new SiteInviteController(ctx);
    await controller.reconcile(name);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const invite: any = await store.get(SITE_INVITE, { name });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const secret: any = await store.get(SECRET, { name: inviteTokenSecretName(name), namespace });
    const token = Buffer.from(secret.data.token, 'base64').toString('utf8');

    const authority = await createCertificateAuthority({ commonName: 'cluster-grid-ca' });
    const ca = await loadGridCa(authority.certPem, authority.keyPem, { cert: 'ca.crt', key: 'ca.key' });
    const replicas = [open(), open()].map(
      (s) =>
        new InviteRedeemer({ store: s, namespace, ca: () => ca, certificateLifetimeMs: 86_400_000, now: Date.now }),
    );
    const requests = await Promise.all(
      Array.from({ length: 6 }, async () =>
        parseRedeemRequest(
          Buffer.from(JSON.stringify({ tokenId: invite.status.tokenId, token, siteName: site, csr: await csr() })),
        ),
      ),
    );
    const results = await Promise.allSettled(
      requests.map((request, i) => (replicas[i % 2] as InviteRedeemer).redeem(request)),
    );
    const issued = results.filter((r) => r.status === 'fulfilled');
    expect(issued).toHaveLength(1);
    for (const r of results)
      if (r.status === 'rejected')
        expect(['already_redeemed', 'revoked']).toContain((r.reason as RedeemRefusal).outcome);
    const winner = (issued[0] as PromiseFulfilledResult<{ certificate: string; publicKeySHA256: string }>).value;
    expect(new X509Certificate(winner.certificate).checkIssued(new X509Certificate(authority.certPem))).toBe(true);

    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const after: any = await store.get(SITE_INVITE, { name });
    expect(after.status).toMatchObject({
      redeemed: true,
      redeemedBy: site,
      redeemedPublicKeySHA256: winner.publicKeySHA256,
    });
    expect(after.status.redeemedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(await store.get(SECRET, { name: inviteTokenSecretName(name), namespace })).toBeUndefined();
    await controller.reconcile(name);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const reconciled: any = await store.get(SITE_INVITE, { name });
    expect(reconciled.status.conditions.find((c: { type: string }) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Redeemed',
    });
    for (const line of lines) expect(line).not.toContain(token);
  });
});
