/**
 * Lease-based leader election through the resource store (coordination.k8s.io/v1 Lease: holderIdentity,
 * renewTime, leaseDurationSeconds), so a second operator replica of the same site waits instead of writing the
 * same status and ConfigMaps. Each replica writes with a field manager of its own: on the API server, server-side
 * apply then refuses (409) a second replica's claim of holderIdentity while another manager owns it, so two
 * replicas creating the Lease at once cannot both win; `force` is used only to take over a Lease that was released
 * or has expired. Every write to an existing Lease carries the resourceVersion it was decided on, so two replicas
 * taking over the same expired Lease, or a renewal racing a take-over, cannot both succeed: the store refuses the
 * later one with a conflict (both stores check it). Creating the Lease has no version to check and the local store
 * does not model field ownership, so every acquisition is also confirmed: write, wait a short settle time, read
 * back; only a Lease that still names the candidate makes it leader. A leader that cannot renew within the lease
 * duration steps down (onLost), like client-go's leaderelection.
 */
import { LEASE, ResourceStoreError } from '../../shared/resource-store/index.ts';
import type { KubeObject, ResourceStore } from '../../shared/resource-store/types.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface LeaseObject extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  readonly store: ResourceStore;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs?: number;
  readonly retryPeriodMs?: number;
  /** Time between writing a claim and reading it back. */
  readonly settleMs?: number;
  readonly now?: () => number;
  readonly onStarted: () => void;
  readonly onLost: () => void;
  readonly onError?: (error: unknown) => void;
}

export const LEASE_FIELD_MANAGER = 'grid-operator-leader-election';

/** One field manager per replica (API-server limit: 128 characters), so ownership of holderIdentity tells them apart. */
export function leaseFieldManager(identity: string): string {
  return `${LEASE_FIELD_MANAGER}-${identity}`.slice(0, 128);
}

function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

/** Pure: may `identity` claim a Lease as observed now? */
export function canClaim(lease: LeaseSpec | undefined, identity: string, nowMs: number): boolean {
  if (lease === undefined || lease.holderIdentity === undefined || lease.holderIdentity === '') return true;
  if (lease.holderIdentity === identity) return true;
  const renewed = Date.parse(lease.renewTime ?? '');
  const durationMs = (lease.leaseDurationSeconds ?? 15) * 1000;
  return Number.isNaN(renewed) || nowMs > renewed + durationMs;
}

export class LeaderElector {
  readonly #o: Required<Omit<LeaderElectionOptions, 'onError'>> & Pick<LeaderElectionOptions, 'onError'>;
  #leader = false;
  #lastRenewMs = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #tick: Promise<void> = Promise.resolve();

  constructor(options: LeaderElectionOptions) {
    this.#o = {
      leaseDurationMs: 15_000,
      retryPeriodMs: 2_000,
      settleMs: 200,
      now: Date.now,
      ...options,
    };
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  start(): void {
    const loop = (): void => {
      if (this.#stopped) return;
      this.#tick = this.#attempt().finally(() => {
        if (!this.#stopped) {
          this.#timer = setTimeout(loop, this.#o.retryPeriodMs);
          this.#timer.unref();
        }
      });
    };
    loop();
  }

  async #read(): Promise<LeaseObject | undefined> {
    return this.#o.store.get<LeaseObject>(LEASE, { name: this.#o.name, namespace: this.#o.namespace });
  }

  /**
   * `force` only to take a Lease over from another (released or expired) holder; `resourceVersion` is the version the
   * decision was made on (absent only when creating). See the module comment.
   */
  async #write(spec: LeaseSpec, force: boolean, resourceVersion: string | undefined): Promise<void> {
    const lease: LeaseObject = {
      apiVersion: LEASE.apiVersion,
      kind: LEASE.kind,
      metadata: { name: this.#o.name, namespace: this.#o.namespace },
      spec,
    };
    await this.#o.store.apply(LEASE, lease, {
      fieldManager: leaseFieldManager(this.#o.identity),
      force,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    });
  }

  async #attempt(): Promise<void> {
    try {
      const now = this.#o.now();
      const read = await this.#read();
      const current = read?.spec;
      const version = read?.metadata.resourceVersion;
      if (this.#leader) {
        if (current?.holderIdentity !== this.#o.identity) {
          this.#lose();
          return;
        }
        await this.#write({ ...current, renewTime: microTime(now) }, false, version);
        this.#lastRenewMs = now;
        return;
      }
      if (!canClaim(current, this.#o.identity, now)) return;
      const ours = current?.holderIdentity === this.#o.identity;
      const exists = current !== undefined;
      await this.#write(
        {
          holderIdentity: this.#o.identity,
          leaseDurationSeconds: Math.ceil(this.#o.leaseDurationMs / 1000),
          acquireTime: ours && current?.acquireTime !== undefined ? current.acquireTime : microTime(now),
          renewTime: microTime(now),
          leaseTransitions: (current?.leaseTransitions ?? 0) + (ours || current?.holderIdentity === undefined ? 0 : 1),
        },
        exists && !ours,
        exists ? version : undefined,
      );
      await new Promise((resolve) => setTimeout(resolve, this.#o.settleMs));
      const confirmed = (await this.#read())?.spec;
      if (this.#stopped || confirmed?.holderIdentity !== this.#o.identity) return;
      this.#leader = true;
      this.#lastRenewMs = now;
      this.#o.onStarted();
    } catch (error) {
      // A conflict is the precondition doing its job (another replica wrote first); the next attempt reads again.
      const conflict = error instanceof ResourceStoreError && error.code === 'conflict';
      if (!conflict) this.#o.onError?.(error);
      if (this.#leader && this.#o.now() - this.#lastRenewMs > this.#o.leaseDurationMs) this.#lose();
    }
  }

  #lose(): void {
    if (!this.#leader) return;
    this.#leader = false;
    this.#o.onLost();
  }

  /** Stops campaigning; a leader releases the Lease so a standby takes over without waiting for expiry. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick.catch(() => undefined);
    if (!this.#leader) return;
    this.#leader = false;
    try {
      const read = await this.#read();
      const current = read?.spec;
      if (current?.holderIdentity === this.#o.identity) {
        await this.#write(
          { ...current, holderIdentity: '', renewTime: microTime(this.#o.now()) },
          false,
          read?.metadata.resourceVersion,
        );
      }
    } catch (error) {
      this.#o.onError?.(error);
    }
  }
}
