// Publishes this site's own records: stamps each with the next revision (persisted before use, so revisions stay
// monotonic across restarts), signs it with the site key, merges it into the local view and hands it to gossip.
import type { KeyObject } from 'node:crypto';
import { systemClock, type Clock } from '../swim/clock.ts';
import {
  providerKey,
  RECORD_SCHEMA_VERSION,
  signRecord,
  siteKey,
  type ProviderState,
  type SignedStateRecord,
  type SiteInfo,
  type StateRecordBody,
} from './records.ts';
import { nextRevision, type RevisionStore } from './revision-store.ts';
import type { StateStore, StoredRecord } from './state-store.ts';

export interface LocalPublisherOptions {
  readonly store: StateStore;
  /** Writer identity (operator replica); breaks revision ties between replicas of one site. */
  readonly writer: string;
  readonly privateKey: KeyObject;
  readonly revisions: RevisionStore;
  /** Hands a signed record to gossip; returns false when it must wait for push-pull (too large for a packet). */
  readonly broadcast: (key: string, record: SignedStateRecord) => boolean;
  readonly clock?: Clock;
}

export class LocalPublisher {
  readonly #o: LocalPublisherOptions;
  readonly #clock: Clock;
  #highWater: number;
  #chain: Promise<unknown> = Promise.resolve();

  private constructor(options: LocalPublisherOptions, highWater: number) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#highWater = highWater;
  }

  static async open(options: LocalPublisherOptions): Promise<LocalPublisher> {
    if (options.privateKey.asymmetricKeyType !== 'ed25519' || options.privateKey.type !== 'private') {
      throw new Error('site signing key must be an Ed25519 private key');
    }
    return new LocalPublisher(options, await options.revisions.load());
  }

  get highWater(): number {
    return this.#highWater;
  }

  publishSite(info: SiteInfo): Promise<SignedStateRecord> {
    const { network, localSite } = this.#o.store;
    return this.#publish({ kind: 'site', key: siteKey(network, localSite), site_info: info });
  }

  publishProvider(provider: ProviderState): Promise<SignedStateRecord> {
    const { network, localSite } = this.#o.store;
    return this.#publish({ kind: 'provider', key: providerKey(network, localSite, provider.name), provider });
  }

  /** A tombstone: peers keep it (last writer wins), so the provider does not come back from an old copy. */
  withdrawProvider(name: string): Promise<SignedStateRecord> {
    const { network, localSite } = this.#o.store;
    return this.#publish({ kind: 'provider', key: providerKey(network, localSite, name), tombstone: true });
  }

  /**
   * Re-asserts the deletion of one of this site's providers when a live copy older than a collected tombstone comes
   * back (StateStore `collectedOwnKey`): a fresh tombstone, above every copy, reaches the members that joined after
   * the old one was collected. `isPublished` skips a provider this site publishes again. Returns the unsubscribe.
   */
  reassertCollectedDeletions(isPublished: (name: string) => boolean, onError: (error: unknown) => void): () => void {
    const { store } = this.#o;
    const prefix = `${siteKey(store.network, store.localSite)}/`;
    const listener = (record: StoredRecord): void => {
      if (record.kind !== 'provider' || !record.key.startsWith(prefix)) return;
      const name = record.key.slice(prefix.length);
      if (isPublished(name) || store.get(record.key) !== undefined) return;
      this.withdrawProvider(name).catch(onError);
    };
    store.on('collectedOwnKey', listener);
    return () => store.off('collectedOwnKey', listener);
  }

  /** Serialized so two publishes never share a revision. */
  #publish(
    part: Pick<StateRecordBody, 'kind' | 'key' | 'site_info' | 'provider' | 'tombstone'>,
  ): Promise<SignedStateRecord> {
    const run = async (): Promise<SignedStateRecord> => {
      const { store } = this.#o;
      const floor = Math.max(this.#highWater, store.highestRevisionOf(store.localSite));
      const revision = nextRevision(floor, this.#clock.now());
      await this.#o.revisions.save(revision);
      this.#highWater = revision;
      const body: StateRecordBody = {
        schema_version: RECORD_SCHEMA_VERSION,
        kind: part.kind,
        network: store.network,
        site: store.localSite,
        key: part.key,
        revision,
        writer: this.#o.writer,
        ...(part.tombstone ? { tombstone: true } : {}),
        ...(part.site_info ? { site_info: part.site_info } : {}),
        ...(part.provider ? { provider: part.provider } : {}),
      };
      const signed = signRecord(body, this.#o.privateKey);
      const result = store.apply(signed, store.localSite);
      if (result !== 'merged') throw new Error(`own record ${body.key} was refused by the local view (${result})`);
      this.#o.broadcast(body.key, signed);
      return signed;
    };
    const p = this.#chain.then(run, run);
    this.#chain = p.catch(() => undefined);
    return p;
  }
}
