/**
 * The process-global SWIM member of this site and the CRDT view of its GridNetwork: UDP transport with AES-256-GCM
 * (key ring), membership, the state store and gossip delegate, and the publisher of this site's own records.
 * The GridNetwork controller starts it on its first good reconcile (after the SWIM key is resolved, so it never
 * starts in plaintext when a key is configured) and feeds it seeds and local state.
 */
import { KeyObject } from 'node:crypto';
import { errorFields, type Logger } from '../shared/log.ts';
import { GossipState, withOwnKey } from './state/gossip-state.ts';
import { LocalPublisher } from './state/publisher.ts';
import type { ProviderState, SignedStateRecord, SiteInfo } from './state/records.ts';
import type { RevisionStore } from './state/revision-store.ts';
import { StateStore } from './state/state-store.ts';
import type { GridNetworkSwimSpec, SwimTiming } from './swim/config.ts';
import { applySwimSpec } from './swim/config.ts';
import { KeyRing } from './swim/keyring.ts';
import { Membership, type MemberView } from './swim/membership.ts';
import { transportBounds, UdpTransport } from './swim/udp-transport.ts';
import type { OperatorMetrics } from './metrics.ts';
import { verifySiteBundle, type SigningIdentity } from './site-identity.ts';

export interface GossipRuntimeOptions {
  readonly site: string;
  readonly network: string;
  readonly bindHost: string;
  readonly bindPort: number;
  readonly advertiseAddress?: string;
  readonly timing: SwimTiming;
  readonly swimSpec?: GridNetworkSwimSpec;
  /** Absent: plaintext (no key configured anywhere). */
  readonly key?: Buffer;
  readonly identity: SigningIdentity;
  /** Grid CA bundle: peers' signing keys are trusted only through it. */
  readonly caPem?: string;
  readonly writer: string;
  readonly revisions: RevisionStore;
  readonly logger: Logger;
  readonly metrics: OperatorMetrics;
  readonly onChange: () => void;
}

const MAX_BODY_BYTES = 64 * 1024;

export class GossipRuntime {
  readonly membership: Membership;
  readonly store: StateStore;
  readonly publisher: LocalPublisher;
  readonly keyring: KeyRing | undefined;
  /** public_cert_pem of this site's record: site certificate and signing certificate. */
  readonly certificateBundle: string | undefined;
  readonly #gossip: GossipState;
  #lastPublished = new Map<string, string>();

  private constructor(parts: {
    membership: Membership;
    store: StateStore;
    publisher: LocalPublisher;
    keyring: KeyRing | undefined;
    certificateBundle: string | undefined;
    gossip: GossipState;
    logger: Logger;
  }) {
    this.membership = parts.membership;
    this.store = parts.store;
    this.publisher = parts.publisher;
    this.keyring = parts.keyring;
    this.certificateBundle = parts.certificateBundle;
    this.#gossip = parts.gossip;
    this.publisher.reassertCollectedDeletions(
      (name) => this.#lastPublished.has(`provider/${name}`),
      (error) => parts.logger.warn({ error: errorFields(error) }, 're-asserting a collected provider deletion failed'),
    );
  }

  static async start(o: GossipRuntimeOptions): Promise<GossipRuntime> {
    const config = applySwimSpec(o.site, o.timing, o.swimSpec);
    const signers = new Map<string, KeyObject>();
    const gossipLogger = {
      warn: (obj: object, msg: string) => o.logger.warn(obj, msg),
      debug: (obj: object, msg: string) => o.logger.debug(obj, msg),
    };
    const store = new StateStore({
      network: o.network,
      localSite: o.site,
      resolveSigner: withOwnKey(o.site, o.identity.publicKey, (site) => signers.get(site)),
      logger: gossipLogger,
    });
    // Learns a peer's signing key from its site record before the store verifies the record: the key is accepted
    // only through the grid CA chain (site-identity.ts), so a record never vouches for itself.
    const learn = (record: unknown): void => {
      if (o.caPem === undefined || typeof record !== 'object' || record === null) return;
      const { signer, body } = record as { signer?: unknown; body?: unknown };
      if (
        typeof signer !== 'string' ||
        typeof body !== 'string' ||
        signer === o.site ||
        Buffer.byteLength(body) > MAX_BODY_BYTES
      )
        return;
      let parsed: { kind?: unknown; site?: unknown; site_info?: { public_cert_pem?: unknown } };
      try {
        parsed = JSON.parse(body) as typeof parsed;
      } catch {
        return;
      }
      const bundle = parsed.site_info?.public_cert_pem;
      if (parsed.kind !== 'site' || parsed.site !== signer || typeof bundle !== 'string') return;
      const check = verifySiteBundle(bundle, signer, o.caPem, Date.now());
      if (check.ok) signers.set(signer, check.publicKey);
    };
    const gossip = new GossipState(store, { learn });
    const keyring = o.key === undefined ? undefined : new KeyRing([o.key]);
    const transport = await UdpTransport.bind({
      bindHost: o.bindHost,
      bindPort: o.bindPort,
      ...(o.advertiseAddress !== undefined ? { advertiseAddress: o.advertiseAddress } : {}),
      ...transportBounds(config),
    });
    const membership = Membership.start({
      config,
      transport,
      ...(keyring !== undefined ? { keyring } : {}),
      delegate: gossip,
      logger: gossipLogger,
    });
    gossip.attach(membership);
    membership.drops.on('drop', (event) => o.metrics.gossipDrops.inc({ component: 'swim', reason: event.reason }));
    store.drops.on('drop', (event) => o.metrics.gossipDrops.inc({ component: 'gossip-state', reason: event.reason }));
    store.on('change', (record) => {
      if (record.origin !== o.site) o.onChange();
    });
    for (const event of ['join', 'update', 'leave', 'forget'] as const) membership.on(event, () => o.onChange());
    const publisher = await LocalPublisher.open({
      store,
      writer: o.writer,
      privateKey: o.identity.privateKey,
      revisions: o.revisions,
      broadcast: gossip.broadcast,
    });
    return new GossipRuntime({
      membership,
      store,
      publisher,
      keyring,
      certificateBundle: o.identity.certificateBundle,
      gossip,
      logger: o.logger,
    });
  }

  get address(): string {
    return this.membership.address;
  }

  /** Rotation: encrypt with `key` from now on, still accepting the previous one. */
  useKey(key: Buffer): void {
    if (this.keyring === undefined) return;
    // The ring's primary is a KeyObject (or raw bytes in older builds); compare the bytes either way.
    const primary: unknown = this.keyring.primary;
    const current = primary instanceof KeyObject ? primary.export() : Buffer.from(primary as Uint8Array);
    if (!current.equals(key)) this.keyring.use(key);
  }

  join(seeds: readonly string[]): Promise<unknown> {
    return this.membership.join(seeds);
  }

  members(): MemberView[] {
    return this.membership.members().filter((m) => m.name !== this.membership.name);
  }

  /** Publishes only what changed since the last publish, so a steady state costs no revision or broadcast. */
  async publishSite(info: SiteInfo): Promise<void> {
    await this.#publishIfChanged('site', info, () => this.publisher.publishSite(info));
  }

  async publishProviders(providers: readonly ProviderState[]): Promise<void> {
    const names = new Set(providers.map((p) => p.name));
    for (const provider of providers)
      await this.#publishIfChanged(`provider/${provider.name}`, provider, () =>
        this.publisher.publishProvider(provider),
      );
    for (const key of [...this.#lastPublished.keys()]) {
      if (!key.startsWith('provider/')) continue;
      const name = key.slice('provider/'.length);
      if (names.has(name)) continue;
      await this.publisher.withdrawProvider(name);
      this.#lastPublished.delete(key);
    }
  }

  async #publishIfChanged(key: string, value: unknown, publish: () => Promise<SignedStateRecord>): Promise<void> {
    const text = JSON.stringify(value);
    if (this.#lastPublished.get(key) === text) return;
    await publish();
    this.#lastPublished.set(key, text);
  }

  async close(): Promise<void> {
    try {
      await this.membership.leave();
    } finally {
      this.#gossip.detach();
      await this.membership.shutdown();
    }
  }
}
