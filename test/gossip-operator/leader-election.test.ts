// Two operator replicas of one site on one local state directory (two stores, as two processes would open it):
// one holds the coordination.k8s.io/v1 Lease and reconciles, the other waits without writing; when the leader
// stops it releases the Lease and the standby takes over.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { canClaim, LeaderElector } from '../../daemons/gossip-operator/manager/leader-election.ts';
import { LEASE, openLocalStore } from '../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../daemons/shared/resource-store/types.ts';
import { gatedStore } from './gated-store.ts';
import {
  grid,
  readStateObject,
  renderFixture,
  startBackend,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('Lease leader election', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('claims a free, own or expired Lease and never a live one held by another', () => {
    const now = Date.parse('2026-01-01T00:00:10Z');
    expect(canClaim(undefined, 'a', now)).toBe(true);
    expect(canClaim({ holderIdentity: '' }, 'a', now)).toBe(true);
    expect(
      canClaim({ holderIdentity: 'a', renewTime: '2026-01-01T00:00:09.000000Z', leaseDurationSeconds: 15 }, 'a', now),
    ).toBe(true);
    expect(
      canClaim({ holderIdentity: 'b', renewTime: '2026-01-01T00:00:09.000000Z', leaseDurationSeconds: 15 }, 'a', now),
    ).toBe(false);
    expect(
      canClaim({ holderIdentity: 'b', renewTime: '2025-12-31T23:59:50.000000Z', leaseDurationSeconds: 15 }, 'a', now),
    ).toBe(true);
    expect(canClaim({ holderIdentity: 'b', renewTime: 'garbage', leaseDurationSeconds: 15 }, 'a', now)).toBe(true);
  });

  it('lets one replica reconcile while the second waits, then hands over on stop', async () => {
    const backend = await startBackend();
    cleanups.push(() => backend.close());
    const dirs = await tempDir('operator-lease');
    cleanups.push(() => dirs.remove());
    const state = join(dirs.path, 'state');
    const manifests = join(dirs.path, 'manifests');
    await renderFixture('single-site/grid.yaml', { BACKEND_URL: backend.url, API_TOKEN: 'x' }, manifests);
    const replica = (identity: string) =>
      startLocalOperator(
        testConfig({ site: 'site-a', identity, store: { backend: 'local', stateDir: state }, leaderElection: true }),
        { stateDir: state, manifestsDir: manifests },
      );
    const first: LocalOperator = await replica('replica-1');
    let firstStopped = false;
    cleanups.push(async () => {
      if (!firstStopped) await first.stop();
    });
    await waitFor('replica-1 to lead', () => first.operator.isLeader() || undefined);
    const second = await replica('replica-2');
    cleanups.push(() => second.stop());

    await waitFor(
      'replica-1 to publish status',
      async () => (await grid(state, 'GridNetwork', 'grid'))?.status?.phase === 'Active' || undefined,
    );
    // Several retry periods (200 ms) pass: the standby never leads, never starts SWIM, never reconciles.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(second.operator.isLeader()).toBe(false);
    expect(second.operator.context.gossip).toBeUndefined();
    expect(await second.operator.metrics.reconciles.get()).toMatchObject({ values: [] });
    const lease: Json = await readStateObject(
      state,
      'coordination.k8s.io',
      'Lease',
      'grid-system',
      'gossip-operator-leader',
    );
    expect(lease.spec).toMatchObject({ holderIdentity: 'replica-1', leaseDurationSeconds: 3 });
    expect(Date.parse(lease.spec.renewTime)).toBeGreaterThan(Date.now() - 3_000);
    const standbyReady = await fetch(`http://127.0.0.1:${second.operator.admin.port}/readyz`);
    expect(standbyReady.status).toBe(200);

    await first.stop();
    firstStopped = true;
    await waitFor('replica-2 to take over', () => second.operator.isLeader() || undefined, 10_000);
    const handedOver: Json = await readStateObject(
      state,
      'coordination.k8s.io',
      'Lease',
      'grid-system',
      'gossip-operator-leader',
    );
    expect(handedOver.spec.holderIdentity).toBe('replica-2');
    expect(handedOver.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
    await waitFor('replica-2 to start SWIM and reconcile', () => second.operator.context.gossip?.address);
  });

  it('lets only one of two replicas take over an expired Lease when both decided on the same read', async () => {
    // Replica A reads the expired Lease and is held before it writes; replica B reads the same version, takes the
    // Lease over and confirms it. A's write then carries a resourceVersion that moved on: the store refuses it, so
    // A never leads. Without the precondition A's forced write would win and both would lead until B's next renewal.
    const dirs = await tempDir('lease-race');
    cleanups.push(() => dirs.remove());
    const store = await openLocalStore({ stateDir: dirs.path });
    cleanups.push(() => store.close());
    const expired = new Date(Date.now() - 60_000).toISOString().replace(/Z$/, '000Z');
    await store.apply(
      LEASE,
      {
        apiVersion: LEASE.apiVersion,
        kind: LEASE.kind,
        metadata: { name: 'gossip-operator-leader', namespace: 'grid-system' },
        spec: {
          holderIdentity: 'gone',
          leaseDurationSeconds: 3,
          renewTime: expired,
          acquireTime: expired,
          leaseTransitions: 0,
        },
      },
      { fieldManager: 'grid-operator-leader-election-gone' },
    );
    const gated = gatedStore(store, (kind) => kind.kind === 'Lease');
    const started: string[] = [];
    const errors: unknown[] = [];
    const elector = (identity: string, on: ResourceStore) =>
      new LeaderElector({
        store: on,
        namespace: 'grid-system',
        name: 'gossip-operator-leader',
        identity,
        leaseDurationMs: 3_000,
        retryPeriodMs: 100,
        settleMs: 20,
        onStarted: () => started.push(identity),
        onLost: () => undefined,
        onError: (error) => errors.push(error),
      });
    const a = elector('replica-a', gated.store);
    const b = elector('replica-b', store);
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    a.start();
    await gated.gate.reached;
    b.start();
    await waitFor('replica-b to take the Lease over', () => b.isLeader || undefined, 5_000);
    gated.gate.release();
    // A's held attempt finishes (refused), and later attempts see a live Lease held by B.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(a.isLeader).toBe(false);
    expect(started).toEqual(['replica-b']);
    const lease = await store.get<Json>(LEASE, { name: 'gossip-operator-leader', namespace: 'grid-system' });
    expect(lease?.spec).toMatchObject({ holderIdentity: 'replica-b', leaseTransitions: 1 });
    expect(errors).toEqual([]); // a conflict is the precondition working, not an error to log
  });
});
