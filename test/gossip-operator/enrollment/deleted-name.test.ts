// SiteInvite allowDeletedName through a real signer operator on the local store: its GridSite controller records
// the name of a GridSite it sees, a redeem racing that GridSite's deletion is refused with site_name_deleted (409)
// and counted, the token stays unspent, and an invite with allowDeletedName enrolls the name again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GRID_SITE } from '../../../daemons/gossip-operator/kinds.ts';
import { siteNameLedgerConfigMapName } from '../../../schemas/object-names.ts';
import { grid, readStateObject, waitFor } from '../helpers.ts';
import { createInvite, csrFor, redeem, SIGNER, type Signer, siteKeys, startSigner } from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('SiteInvite redeem of a deleted site name', () => {
  let signer: Signer;
  beforeAll(async () => {
    signer = await startSigner('deleted-name');
  });
  afterAll(async () => {
    await signer?.stop();
  });

  it('refuses a redeem racing the GridSite deletion, and lets allowDeletedName reuse the name', async () => {
    const store = signer.op.store;
    await store.apply(
      GRID_SITE,
      {
        apiVersion: GRID_SITE.apiVersion,
        kind: 'GridSite',
        metadata: { name: 'east9' },
        spec: { gridNetworkRef: 'production' },
      },
      { fieldManager: 'test' },
    );
    const ledger: Json = await waitFor('the GridSite controller to record east9', async () => {
      const cm: Json = await readStateObject(
        signer.state,
        'core',
        'ConfigMap',
        'grid-system',
        siteNameLedgerConfigMapName(SIGNER),
      );
      return cm?.data?.east9 !== undefined ? cm : undefined;
    });
    expect(ledger.data.east9).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    // The GridSite exists, so the token is minted; it is deleted before the site redeems.
    const inv = await createInvite(signer, 'east9-rekey', { siteName: 'east9' });
    await store.delete(GRID_SITE, { name: 'east9' });
    const refused = await redeem(signer, {
      tokenId: inv.tokenId,
      token: inv.token,
      siteName: 'east9',
      csr: await csrFor(await siteKeys()),
    });
    expect(refused.status).toBe(409);
    expect(refused.json).toEqual({
      error: 'site_name_deleted',
      message:
        'site east9 was deleted from the grid; SiteInvite east9-rekey does not set spec.allowDeletedName, so the name is not reused',
    });
    expect(refused.text).not.toContain(inv.token.slice(0, 16));
    // Not spent: the token Secret is still there and the invite unredeemed, now saying why it cannot be used.
    expect(
      await readStateObject(signer.state, 'core', 'Secret', 'grid-system', 'grid-invite-east9-rekey'),
    ).toBeDefined();
    const blocked: Json = await waitFor('the invite to report the deleted name', async () => {
      const i: Json = await grid(signer.state, 'SiteInvite', 'east9-rekey');
      return i?.status?.conditions?.find((c: Json) => c.type === 'Ready' && c.reason === 'SiteNameDeleted');
    });
    expect(blocked.message).toContain('spec.allowDeletedName: true');
    expect((await grid(signer.state, 'SiteInvite', 'east9-rekey')).status.redeemed).toBe(false);

    const reuse = await createInvite(signer, 'east9-new', { siteName: 'east9', allowDeletedName: true });
    const accepted = await redeem(signer, {
      tokenId: reuse.tokenId,
      token: reuse.token,
      siteName: 'east9',
      csr: await csrFor(await siteKeys()),
    });
    expect(accepted.status, accepted.text).toBe(200);
    const reused: Json = await waitFor('the redeemed invite', async () => {
      const i: Json = await grid(signer.state, 'SiteInvite', 'east9-new');
      return i?.status?.redeemed === true ? i : undefined;
    });
    expect(reused.status.redeemedBy).toBe('east9');
    expect(
      signer.op.lines.some(
        (l) => l.includes('invite reuses the name of a deleted site') && l.includes('"siteInvite":"east9-new"'),
      ),
    ).toBe(true);

    const metrics = await signer.op.operator.metrics.registry.metrics();
    expect(metrics).toMatch(/grid_enrollment_redeem_total\{outcome="site_name_deleted"\} 1\b/);
    expect(metrics).toMatch(/grid_enrollment_redeem_total\{outcome="issued"\} 1\b/);
  });
});
