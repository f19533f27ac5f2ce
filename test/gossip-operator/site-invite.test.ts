// SiteInvite: the one-time token lives only in a Secret (never in status or logs), expiry and deletion revoke it.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inviteLifetimeMs, inviteState } from '../../daemons/gossip-operator/controllers/site-invite.ts';
import { SITE_INVITE } from '../../daemons/gossip-operator/kinds.ts';
import { grid, readStateObject, renderFixture, startLocalOperator, tempDir, testConfig, waitFor } from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('SiteInvite', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('accepts lifetimes from 5m through 168h (default 24h)', () => {
    expect(inviteLifetimeMs(undefined)).toBe(86_400_000);
    expect(inviteLifetimeMs('5m')).toBe(300_000);
    expect(inviteLifetimeMs('168h')).toBe(604_800_000);
    for (const bad of ['4m', '169h', '1d', '0h', '', '24 h']) expect(inviteLifetimeMs(bad)).toBeUndefined();
  });

  it('moves from issue to active to expired, and stays redeemed once redeemed', () => {
    const now = Date.parse('2026-01-02T00:00:00Z');
    expect(inviteState(undefined, now)).toBe('issue');
    expect(inviteState({ tokenId: 'a', expiresAt: '2026-01-02T00:00:01Z' }, now)).toBe('active');
    expect(inviteState({ tokenId: 'a', expiresAt: '2026-01-02T00:00:00Z' }, now)).toBe('expired');
    expect(inviteState({ tokenId: 'a', expiresAt: '2026-01-01T00:00:00Z', redeemed: true }, now)).toBe('redeemed');
  });

  it('stores the token in a Secret, publishes only its id, and revokes it when the invite is deleted', async () => {
    const dirs = await tempDir('operator-invite');
    cleanups.push(() => dirs.remove());
    const state = join(dirs.path, 'state');
    const manifests = join(dirs.path, 'manifests');
    await renderFixture('single-site/invite.yaml', {}, manifests);
    const op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state } }), {
      stateDir: state,
      manifestsDir: manifests,
    });
    cleanups.push(() => op.stop());
    const invite: Json = await waitFor('the invite token', async () => {
      const i: Json = await grid(state, 'SiteInvite', 'east2');
      return i?.status?.tokenId !== undefined ? i : undefined;
    });
    expect(invite.status.tokenSecretRef).toEqual({ name: 'grid-invite-east2', namespace: 'grid-system' });
    expect(invite.status.redeemed).toBe(false);
    const lifetime = Date.parse(invite.status.expiresAt) - Date.parse(invite.metadata.creationTimestamp);
    expect(lifetime).toBe(86_400_000);
    const secret: Json = await readStateObject(state, 'core', 'Secret', 'grid-system', 'grid-invite-east2');
    const token = Buffer.from(secret.data.token, 'base64').toString('utf8');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret.data.tokenId, 'base64').toString('utf8')).toBe(invite.status.tokenId);
    expect(Buffer.from(secret.data.publicKeySHA256, 'base64').toString('utf8')).toBe(
      '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
    );
    expect(JSON.stringify(invite)).not.toContain(token);
    for (const line of op.lines) expect(line).not.toContain(token);

    // Reconciling again keeps the same token (idempotent).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const again: Json = await readStateObject(state, 'core', 'Secret', 'grid-system', 'grid-invite-east2');
    expect(again.data.token).toBe(secret.data.token);

    await op.store.delete(SITE_INVITE, { name: 'east2' });
    await waitFor('the token Secret to be revoked', async () =>
      (await readStateObject(state, 'core', 'Secret', 'grid-system', 'grid-invite-east2')) === undefined
        ? true
        : undefined,
    );
  });
});
