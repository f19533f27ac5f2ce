// One GridNetwork's view of the grid's CRDT state: verified, bounded, last-writer-wins records per origin site
// plus the tenant spend G-Counters. Every gossiped record passes the same gate, cheapest checks first; a record
// that fails is dropped and counted and never changes the view. `apply` never throws.
import { EventEmitter } from 'node:events';
import type { KeyObject } from 'node:crypto';
import { systemClock, type Clock } from '../swim/clock.ts';
import { DropCounter, type GossipLogger } from '../swim/drop-counter.ts';
import { gCounterValue, setSlot, type TenantSpend } from './g-counter.ts';
import { compareVersions, type Versioned } from './lww.ts';
import {
  checkRecord,
  containsPrivateKey,
  verifyRecord,
  type ProviderState,
  type SignedStateRecord,
  type SiteInfo,
  type StateRecordBody,
} from './records.ts';
import { STATE_DROP_REASONS, type StateDropReason } from './reasons.ts';

export interface StateLimits {
  /** Records one origin site may hold here (its site record, providers and tombstones). */
  readonly maxRecordsPerOrigin: number;
  /** Origin sites retained; when full, the longest-departed origin is evicted, never a present one. */
  readonly maxOrigins: number;
  /** Largest signed body accepted (bytes). */
  readonly maxRecordBodyBytes: number;
  /** A revision more than this ahead of our clock is refused, so no record can pin a register for ever
   * (revisions are hybrid: max(previous + 1, origin clock in ms)). Must exceed the clock skew between sites. */
  readonly maxRevisionAheadMs: number;
  /**
   * A tombstone is collected this long after this member stored it (its own clock, so origin clock skew does not
   * shorten it). It must outlive every live copy of the key still in flight: SWIM retransmits (seconds), a push-pull
   * round (30 s), a member partitioned until it is declared dead and forgotten (30 s + 300 s), and the revision
   * window a copy can be ahead (maxRevisionAheadMs, 10 min). 24 h is far beyond all of them. A copy held longer
   * (a member partitioned for days) is still refused: see the per-origin collected floor in StateStore.
   */
  readonly tombstoneRetentionMs: number;
}

export function defaultStateLimits(): StateLimits {
  return {
    maxRecordsPerOrigin: 1_024,
    maxOrigins: 256, // the GridSite auto-discovery cap
    maxRecordBodyBytes: 64 * 1024,
    maxRevisionAheadMs: 10 * 60_000,
    tombstoneRetentionMs: 24 * 3_600_000,
  };
}

/** Public key of a site, learned with its GridSite trust pin; undefined when the site is not trusted (yet). */
export type SignerResolver = (site: string) => KeyObject | undefined;

export interface StoredRecord extends Versioned {
  readonly origin: string;
  readonly kind: string;
  readonly tombstone: boolean;
  readonly parsed: StateRecordBody;
  readonly signed: SignedStateRecord;
  /** This member's clock when the record was merged (tombstone retention runs from here). */
  readonly storedAtMs: number;
}

export interface RemoteProvider {
  readonly key: string;
  readonly site: string;
  readonly revision: number;
  readonly writer: string;
  readonly provider: ProviderState;
}

export type ApplyResult = 'merged' | StateDropReason;

interface Origin {
  readonly records: Map<string, StoredRecord>;
  departedAtMs: number | undefined;
  /**
   * The highest revision of a tombstone collected for this origin. A record of a key this view does not hold, at or
   * below it, may be the live copy a collected tombstone deleted, so it is refused: one number per origin replaces
   * every collected tombstone. It cannot refuse a new record: the origin stamps each record above every revision it
   * issued before (publisher.ts). It can refuse an old live record this member never received within the retention,
   * which push-pull makes vanishingly unlikely; failing that way excludes a provider instead of resurrecting one.
   */
  collectedFloor: number;
}

export interface StateStoreOptions {
  readonly network: string;
  readonly localSite: string;
  readonly resolveSigner: SignerResolver;
  readonly limits?: Partial<StateLimits>;
  readonly clock?: Clock;
  readonly logger?: GossipLogger;
}

export class StateStore extends EventEmitter<{ change: [StoredRecord]; collectedOwnKey: [StoredRecord] }> {
  readonly network: string;
  readonly localSite: string;
  readonly limits: StateLimits;
  readonly drops: DropCounter<StateDropReason>;
  readonly #resolve: SignerResolver;
  readonly #clock: Clock;
  readonly #origins = new Map<string, Origin>();
  #spend: Record<string, TenantSpend[string]> = {};

  constructor(options: StateStoreOptions) {
    super();
    this.network = options.network;
    this.localSite = options.localSite;
    this.limits = { ...defaultStateLimits(), ...options.limits };
    this.#resolve = options.resolveSigner;
    this.#clock = options.clock ?? systemClock;
    this.drops = new DropCounter('gossip-state', STATE_DROP_REASONS, options.logger);
  }

  /** Gate and merge one record received from member `from`. */
  apply(raw: unknown, from: string): ApplyResult {
    try {
      return this.#apply(raw, from);
    } catch (err) {
      return this.#drop('bad_record', `from ${from}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  #drop(reason: StateDropReason, detail: string): StateDropReason {
    this.drops.drop(reason, detail);
    return reason;
  }

  #apply(raw: unknown, from: string): ApplyResult {
    const checked = checkRecord(raw, this.limits.maxRecordBodyBytes);
    if (!checked.ok) return this.#drop(checked.reason, `via ${from}: ${checked.detail}`);
    const { signed, body } = checked.value;
    if (body.network !== this.network)
      return this.#drop('wrong_network', `record of network ${body.network} via ${from} (this view: ${this.network})`);
    if (signed.signer !== body.site)
      return this.#drop('origin_mismatch', `record of site ${body.site} signed by ${signed.signer} via ${from}`);
    if (body.revision > this.#clock.now() + this.limits.maxRevisionAheadMs) {
      return this.#drop(
        'revision_jump',
        `revision ${body.revision} of ${body.key} via ${from} is more than ${this.limits.maxRevisionAheadMs} ms ahead`,
      );
    }
    const incoming: StoredRecord = {
      key: body.key,
      revision: body.revision,
      writer: body.writer,
      body: signed.body,
      origin: body.site,
      kind: body.kind,
      tombstone: body.tombstone === true,
      parsed: body,
      signed,
      storedAtMs: this.#clock.now(),
    };
    const origin = this.#origins.get(body.site);
    const current = origin?.records.get(body.key);
    if (current && compareVersions(incoming, current) <= 0)
      return this.#drop('stale', `${body.key}@${body.revision} via ${from}`);
    const key = this.#resolve(signed.signer);
    if (!key)
      return this.#drop('unknown_signer', `no trusted key for site ${signed.signer} (record ${body.key} via ${from})`);
    if (!verifyRecord(signed, key))
      return this.#drop(
        'bad_signature',
        `record ${body.key} via ${from} does not verify against ${signed.signer}'s key`,
      );
    if (!current && origin !== undefined && incoming.revision <= origin.collectedFloor) {
      // Only this site can re-assert a deletion of its own key: a new tombstone, above every copy, ends the replay
      // for members that never had the old tombstone (one that joined after it was collected).
      if (body.site === this.localSite && !incoming.tombstone) this.emit('collectedOwnKey', incoming);
      return this.#drop(
        'tombstone_collected',
        `${body.key}@${body.revision} via ${from} is at or below the collected tombstone floor ${origin.collectedFloor} of ${body.site}`,
      );
    }
    if (body.site_info?.public_cert_pem !== undefined && containsPrivateKey(body.site_info.public_cert_pem)) {
      return this.#drop(
        'private_key_pem',
        `site ${body.site} published a PEM containing a private key; record discarded`,
      );
    }
    const target = origin ?? this.#admitOrigin(body.site);
    if (!target)
      return this.#drop(
        'origins_full',
        `${this.limits.maxOrigins} origins retained, none departed; record ${body.key} via ${from}`,
      );
    if (!current && target.records.size >= this.limits.maxRecordsPerOrigin) {
      return this.#drop(
        'origin_records_full',
        `site ${body.site} already has ${this.limits.maxRecordsPerOrigin} records; ${body.key} via ${from}`,
      );
    }
    target.records.set(body.key, incoming);
    if (body.kind === 'site' && body.site_info && !body.tombstone) this.#mergeSpend(body.site, body.site_info);
    this.emit('change', incoming);
    return 'merged';
  }

  #admitOrigin(site: string): Origin | undefined {
    if (this.#origins.size >= this.limits.maxOrigins) {
      let victim: [string, Origin] | undefined;
      for (const entry of this.#origins) {
        const d = entry[1].departedAtMs;
        if (
          d !== undefined &&
          entry[0] !== this.localSite &&
          (victim === undefined || d < (victim[1].departedAtMs as number))
        )
          victim = entry;
      }
      if (!victim) return undefined;
      this.#forgetOrigin(victim[0]);
    }
    const o: Origin = { records: new Map(), departedAtMs: undefined, collectedFloor: 0 };
    this.#origins.set(site, o);
    return o;
  }

  #forgetOrigin(site: string): void {
    // Its spend slot stays: spend never expires (a departed or evicted site's spend was still spent; dropping the
    // slot would silently lower every tenant's total and reopen a spent budget, the reference's issue #52).
    this.#origins.delete(site);
  }

  #mergeSpend(site: string, info: SiteInfo): void {
    for (const [tenant, usd] of Object.entries(info.tenant_spend_usd)) {
      if (usd !== undefined) this.#spend[tenant] = setSlot(this.#spend[tenant] ?? {}, site, usd);
    }
  }

  /** Membership says the site is dead or left: it becomes the first origin evicted when the origin table is full. */
  markDeparted(site: string, nowMs: number = this.#clock.now()): void {
    const o = this.#origins.get(site);
    if (o && o.departedAtMs === undefined && site !== this.localSite) o.departedAtMs = nowMs;
  }

  /** The site is alive again: it is no longer an eviction candidate. */
  markPresent(site: string): void {
    const o = this.#origins.get(site);
    if (o) o.departedAtMs = undefined;
  }

  /**
   * Collects tombstones older than tombstoneRetentionMs (raising their origin's collected floor). Call periodically.
   * Spend slots are never swept: tenant spend is cumulative for the life of the grid.
   */
  sweep(nowMs: number = this.#clock.now()): void {
    for (const o of this.#origins.values()) {
      for (const [key, record] of o.records) {
        if (record.tombstone && nowMs - record.storedAtMs >= this.limits.tombstoneRetentionMs) {
          o.records.delete(key);
          o.collectedFloor = Math.max(o.collectedFloor, record.revision);
        }
      }
    }
  }

  /** Tombstones held (for tests and the memory bound). */
  tombstoneCount(): number {
    let n = 0;
    for (const o of this.#origins.values()) for (const r of o.records.values()) if (r.tombstone) n += 1;
    return n;
  }

  get(key: string): StoredRecord | undefined {
    for (const o of this.#origins.values()) {
      const r = o.records.get(key);
      if (r) return r;
    }
    return undefined;
  }

  records(): StoredRecord[] {
    const out: StoredRecord[] = [];
    for (const o of this.#origins.values()) out.push(...o.records.values());
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Every record as signed by its origin, for push-pull. */
  signedRecords(): SignedStateRecord[] {
    return this.records().map((r) => r.signed);
  }

  origins(): string[] {
    return [...this.#origins.keys()].sort();
  }

  /** Highest revision held for any record of `site` (the publisher stays above it after losing its disk). */
  highestRevisionOf(site: string): number {
    const o = this.#origins.get(site);
    let max = o?.collectedFloor ?? 0;
    for (const r of o?.records.values() ?? []) max = Math.max(max, r.revision);
    return max;
  }

  /** Live provider records of other sites (remoteProviderCount counts these). */
  remoteProviders(): RemoteProvider[] {
    const out: RemoteProvider[] = [];
    for (const r of this.records()) {
      if (r.kind === 'provider' && !r.tombstone && r.parsed.provider && r.origin !== this.localSite) {
        out.push({ key: r.key, site: r.origin, revision: r.revision, writer: r.writer, provider: r.parsed.provider });
      }
    }
    return out;
  }

  /** Site records (gateway address, certificate, capabilities) by site. */
  sites(): Map<string, SiteInfo> {
    const out = new Map<string, SiteInfo>();
    for (const r of this.records())
      if (r.kind === 'site' && !r.tombstone && r.parsed.site_info) out.set(r.origin, r.parsed.site_info);
    return out;
  }

  /** Per-tenant G-Counters (slot per site). */
  tenantSpend(): TenantSpend {
    return { ...this.#spend };
  }

  /** Converged spend per tenant in USD (the sum of each tenant's slots). */
  tenantSpendTotals(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.#spend).map(([t, c]) => [t, gCounterValue(c)]));
  }
}
