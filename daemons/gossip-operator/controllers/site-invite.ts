/**
 * SiteInvite reconcile: a one-time token is stored in a Secret in the operator namespace
 * and only its public id, Secret reference and expiry go to status (never the token). An expired unused token is
 * revoked (its Secret deleted); deleting the invite revokes it too. The optional publicKeySHA256 binding is
 * stored beside the token for the enrollment path, which enforces it. A name the site name ledger records with no
 * GridSite now (a deleted site) gets no token unless spec.allowDeletedName is set (site-name-ledger.ts).
 */
import { randomBytes } from 'node:crypto';
import type { SiteInviteResource } from '../../../schemas/crds/types.ts';
import type { SiteInviteStatus } from '../../../schemas/generated/siteinvites.ts';
import { validateCustomResource } from '../../../schemas/crds/validate.ts';
import type { KubeObject } from '../../shared/resource-store/types.ts';
import type { OperatorContext } from '../context.ts';
import { secretKeyBytes } from '../secrets.ts';
import { FIELD_MANAGER, GRID_SITE, LABEL_PREFIX_INVITE, SECRET, SITE_INVITE, siteIdOf } from '../kinds.ts';
import type { Controller, ReconcileResult, SecondaryWatch } from '../manager/manager.ts';
import { checkDeletedSiteName, describeLedger } from '../site-name-ledger.ts';
import { boundedMessage, type Condition, mergeConditions, nowRfc3339, sameJson, specOnly } from './status.ts';
import { inviteTokenSecretName, siteNameLedgerConfigMapName } from '../../../schemas/object-names.ts';
import { checkDuration, type DurationCheck, type DurationRule } from '../../../schemas/durations.ts';

export const DEFAULT_INVITE_LIFETIME = '24h';
/**
 * spec.lifetime (docs/contract.md §1): one unit of s, m or h, from 5m through 168h; the CRD pattern admits the units.
 */
export const INVITE_LIFETIME_RULE: DurationRule = {
  units: ['s', 'm', 'h'],
  minMs: 5 * 60_000,
  maxMs: 168 * 3_600_000,
  example: DEFAULT_INVITE_LIFETIME,
};

/** spec.lifetime checked, the default when absent; the error names spec.lifetime and the accepted range. */
export function inviteLifetime(text: string | undefined): DurationCheck {
  return checkDuration('spec.lifetime', text ?? DEFAULT_INVITE_LIFETIME, INVITE_LIFETIME_RULE);
}

/** Lifetime in ms; undefined when malformed or out of range. */
export function inviteLifetimeMs(text: string | undefined): number | undefined {
  const checked = inviteLifetime(text);
  return checked.ok ? checked.ms : undefined;
}

export type InviteState = 'issue' | 'active' | 'expired' | 'redeemed';

/** Pure: what the invite needs now. */
export function inviteState(status: SiteInviteStatus | undefined, nowMs: number): InviteState {
  if (status?.redeemed === true) return 'redeemed';
  if (status?.tokenId === undefined || status.expiresAt === undefined) return 'issue';
  return nowMs >= Date.parse(status.expiresAt) ? 'expired' : 'active';
}

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
}

export class SiteInviteController implements Controller {
  readonly name = 'siteinvite';
  readonly kind = SITE_INVITE;
  readonly #ctx: OperatorContext;
  /** Invite name → its spec.siteName, so a GridSite change re-checks the invites for that name. */
  readonly #siteNames = new Map<string, string>();
  readonly watches: readonly SecondaryWatch[];

  constructor(ctx: OperatorContext) {
    this.#ctx = ctx;
    this.watches = [
      {
        kind: GRID_SITE,
        map: (site) => {
          const id = siteIdOf(site);
          return [...this.#siteNames]
            .filter(([, siteName]) => siteName === id || siteName === site.metadata.name)
            .map(([invite]) => invite);
        },
      },
    ];
  }

  async #revoke(invite: string): Promise<boolean> {
    return this.#ctx.store.delete(SECRET, {
      name: inviteTokenSecretName(invite),
      namespace: this.#ctx.config.namespace,
    });
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const ctx = this.#ctx;
    const invite = (await ctx.store.get(SITE_INVITE, { name })) as SiteInviteResource | undefined;
    if (invite === undefined) {
      this.#siteNames.delete(name);
      if (await this.#revoke(name)) ctx.logger.info({ siteInvite: name }, 'invite deleted; its token was revoked');
      return {};
    }
    const now = ctx.now();
    const generation = invite.metadata.generation ?? 1;
    const write = async (status: SiteInviteStatus): Promise<void> => {
      if (!sameJson({ ...invite.status, ...status }, invite.status)) {
        await ctx.store.patchStatus(SITE_INVITE, { name }, status as Record<string, unknown>, {
          fieldManager: FIELD_MANAGER,
        });
      }
    };
    const conditions = (
      ready: boolean,
      reason: string,
      message: string,
      extra: Omit<Condition, 'lastTransitionTime'>[] = [],
    ) =>
      mergeConditions(
        invite.status?.conditions as Condition[] | undefined,
        [
          { type: 'Ready', status: ready ? 'True' : 'False', reason, message, observedGeneration: generation },
          ...extra,
        ],
        now,
      );

    const issues = validateCustomResource(specOnly(invite));
    const lifetime = inviteLifetime(invite.spec?.lifetime);
    if (issues.length > 0 || !lifetime.ok) {
      const message =
        issues.length > 0
          ? issues
              .slice(0, 3)
              .map((i) => `${i.path || '(object)'}: ${i.message}`)
              .join('; ')
          : lifetime.ok
            ? ''
            : lifetime.message;
      await write({
        observedGeneration: generation,
        conditions: conditions(false, 'InviteInvalid', boundedMessage(message)),
      });
      return {};
    }
    const lifetimeMs = lifetime.ms;
    this.#siteNames.set(name, invite.spec.siteName);
    const state = inviteState(invite.status, now);
    const reuse: Omit<Condition, 'lastTransitionTime'>[] = [];
    if (state === 'issue' || state === 'active') {
      const siteName = invite.spec.siteName;
      const ledger = { name: siteNameLedgerConfigMapName(ctx.config.site), namespace: ctx.config.namespace };
      const check = await checkDeletedSiteName(ctx.store, ledger, siteName);
      for (const problem of check.problems)
        ctx.logger.warn({ siteInvite: name, problem }, 'site name ledger entry is malformed');
      const seen = check.firstSeen !== undefined ? ` (first seen ${check.firstSeen})` : '';
      if (check.deleted && invite.spec.allowDeletedName !== true) {
        // No token: a new site would inherit the deleted site's identity. The spec is immutable, so the fix is a new invite.
        await write({
          observedGeneration: generation,
          conditions: conditions(
            false,
            'SiteNameDeleted',
            `site ${siteName} was deleted from the grid${seen} and ${describeLedger(ledger)} still records its name; no token is issued. To reuse the name, recreate this invite with spec.allowDeletedName: true`,
          ),
        });
        // An issued token stays (the redeem endpoint refuses it) and still expires on time.
        return state === 'active'
          ? { requeueAfterMs: Math.max(1_000, Date.parse(invite.status?.expiresAt ?? '') - now) }
          : {};
      }
      if (check.deleted) {
        if (invite.status?.conditions?.some((c) => c.type === 'SiteNameReused' && c.status === 'True') !== true) {
          ctx.logger.info(
            { siteInvite: name, site: siteName },
            'invite reuses the name of a deleted site (spec.allowDeletedName)',
          );
        }
        reuse.push({
          type: 'SiteNameReused',
          status: 'True',
          reason: 'DeletedNameReused',
          message: `site ${siteName} was deleted from the grid${seen}; spec.allowDeletedName lets this invite reuse the name`,
          observedGeneration: generation,
        });
      } else if (invite.status?.conditions?.some((c) => c.type === 'SiteNameReused') === true) {
        reuse.push({
          type: 'SiteNameReused',
          status: 'False',
          reason: 'NameNotDeleted',
          message: `a GridSite stands for ${siteName} again, or its name was never recorded`,
          observedGeneration: generation,
        });
      }
    }
    if (state === 'redeemed') {
      await write({
        observedGeneration: generation,
        conditions: conditions(true, 'Redeemed', `redeemed by ${invite.status?.redeemedBy ?? 'a site'}`),
      });
      return {};
    }
    if (state === 'expired') {
      if (await this.#revoke(name))
        ctx.logger.info({ siteInvite: name }, 'invite expired unused; its token was revoked');
      await write({
        observedGeneration: generation,
        conditions: conditions(
          false,
          'Expired',
          `the token expired at ${invite.status?.expiresAt ?? ''} unused and was revoked`,
          [
            {
              type: 'Expired',
              status: 'True',
              reason: 'Expired',
              message: 'token lifetime elapsed',
              observedGeneration: generation,
            },
          ],
        ),
      });
      return {};
    }
    if (state === 'issue') {
      const ref = { name: inviteTokenSecretName(name), namespace: ctx.config.namespace };
      const existing = (await ctx.store.get(SECRET, ref)) as SecretObject | undefined;
      let tokenId = existing === undefined ? undefined : secretKeyBytes(existing, 'tokenId')?.toString('utf8');
      const created = Date.parse(invite.metadata.creationTimestamp ?? '') || now;
      const expiresAt = nowRfc3339(created + lifetimeMs);
      if (tokenId === undefined) {
        tokenId = randomBytes(8).toString('hex');
        const token = randomBytes(32).toString('base64url');
        const data: Record<string, string> = {
          token: Buffer.from(token).toString('base64'),
          tokenId: Buffer.from(tokenId).toString('base64'),
          siteName: Buffer.from(invite.spec.siteName).toString('base64'),
          expiresAt: Buffer.from(expiresAt).toString('base64'),
        };
        if (invite.spec.publicKeySHA256 !== undefined)
          data['publicKeySHA256'] = Buffer.from(invite.spec.publicKeySHA256).toString('base64');
        const secret: SecretObject = {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name: ref.name,
            namespace: ref.namespace,
            labels: { 'app.kubernetes.io/managed-by': FIELD_MANAGER, [LABEL_PREFIX_INVITE]: name },
            ...(invite.metadata.uid !== undefined
              ? {
                  ownerReferences: [
                    { apiVersion: invite.apiVersion, kind: 'SiteInvite', name, uid: invite.metadata.uid },
                  ],
                }
              : {}),
          },
          type: 'Opaque',
          data,
        };
        await ctx.store.apply(SECRET, secret, { fieldManager: FIELD_MANAGER, force: true });
        ctx.logger.info(
          { siteInvite: name, tokenId, secret: `${ref.namespace}/${ref.name}`, expiresAt },
          'invite token issued',
        );
      }
      await write({
        tokenId,
        tokenSecretRef: ref,
        expiresAt,
        redeemed: false,
        observedGeneration: generation,
        conditions: conditions(
          true,
          'TokenIssued',
          `one-time token stored in Secret ${ref.namespace}/${ref.name}; deliver it out of band`,
          reuse,
        ),
      });
      return { requeueAfterMs: Math.max(1_000, created + lifetimeMs - now) };
    }
    await write({
      observedGeneration: generation,
      conditions: conditions(
        true,
        'TokenIssued',
        `one-time token stored in Secret ${ctx.config.namespace}/${inviteTokenSecretName(name)}`,
        reuse,
      ),
    });
    return { requeueAfterMs: Math.max(1_000, Date.parse(invite.status?.expiresAt ?? '') - now) };
  }
}
