// Optimistic-concurrency status writes on the real local store: two writers of one GridNetwork's conditions
// interleave (both read, one writes, then the other) and neither condition is lost.
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore, ResourceStoreError, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { type Condition, withOwnConditions } from '../../../daemons/gossip-operator/controllers/status.ts';
import { patchStatusFresh, STATUS_WRITE_ATTEMPTS } from '../../../daemons/gossip-operator/controllers/status-write.ts';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import { gatedStore } from '../gated-store.ts';
import { tempDir } from '../helpers.ts';

const cond = (type: string, status: Condition['status']): Condition => ({
  type,
  status,
  reason: type,
  message: `${type} ${status}`,
  lastTransitionTime: '2026-01-01T00:00:00Z',
});

/** The build every shared-conditions writer uses: its own type replaced in the fresh list, the rest kept. */
const ownCondition = (c: Condition) => (fresh: GridNetworkResource) => ({
  conditions: withOwnConditions(fresh.status?.conditions as Condition[] | undefined, [c], [c.type]),
});

describe('patchStatusFresh', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(): Promise<LocalStore> {
    const dirs = await tempDir('status-write');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    await store.apply(
      GRID_NETWORK,
      { apiVersion: GRID_NETWORK.apiVersion, kind: 'GridNetwork', metadata: { name: 'grid' }, spec: {} },
      { fieldManager: 'test' },
    );
    return store;
  }
  const types = async (store: LocalStore) =>
    (
      ((await store.get(GRID_NETWORK, { name: 'grid' }))!['status'] as { conditions?: Condition[] } | undefined)
        ?.conditions ?? []
    )
      .map((c) => `${c.type}=${c.status}`)
      .sort();

  it('two writers interleaving: the one whose read went stale gets a conflict, reads again, and neither condition is lost', async () => {
    const store = await setup();
    const held = gatedStore(store);
    const slow = patchStatusFresh(
      held.store,
      GRID_NETWORK,
      { name: 'grid' },
      'grid-operator-peer-signals',
      ownCondition(cond('PeerTimeValid', 'False')),
      { sleep: async () => {} },
    );
    await held.gate.reached;
    // The other writer reads and writes while the first holds a read without GatewayAgesRejected.
    const fast = await patchStatusFresh(
      store,
      GRID_NETWORK,
      { name: 'grid' },
      'grid-operator-gateway-ages',
      ownCondition(cond('GatewayAgesRejected', 'True')),
    );
    expect(fast).toMatchObject({ written: true, attempts: 1 });
    held.gate.release();
    expect(await slow).toMatchObject({ written: true, attempts: 2 });
    expect(await types(store)).toEqual(['GatewayAgesRejected=True', 'PeerTimeValid=False']);
    // And the other order: Ready (reconcile) held while PeerTimeValid changes; PeerTimeValid keeps its new value.
    const held2 = gatedStore(store);
    const ready = patchStatusFresh(
      held2.store,
      GRID_NETWORK,
      { name: 'grid' },
      'grid-operator',
      ownCondition(cond('Ready', 'True')),
      { sleep: async () => {} },
    );
    await held2.gate.reached;
    await patchStatusFresh(
      store,
      GRID_NETWORK,
      { name: 'grid' },
      'grid-operator-peer-signals',
      ownCondition(cond('PeerTimeValid', 'True')),
    );
    held2.gate.release();
    await ready;
    expect(await types(store)).toEqual(['GatewayAgesRejected=True', 'PeerTimeValid=True', 'Ready=True']);
  });

  it('gives up after a bounded number of conflicts with the conflict error, with jittered pauses between rounds', async () => {
    const store = await setup();
    const pauses: number[] = [];
    let round = 0;
    await store.patchStatus(GRID_NETWORK, { name: 'grid' }, { phase: 'p1' }, { fieldManager: 'w' });
    // Every round another writer moves the object on between this writer's read and its patch.
    const interfering = new Proxy(store, {
      get(target, prop) {
        if (prop === 'get') {
          return async (...args: Parameters<LocalStore['get']>) => {
            const object = await target.get(...args);
            await target.patchStatus(
              GRID_NETWORK,
              { name: 'grid' },
              { connectedSites: round },
              { fieldManager: 'other' },
            );
            return object;
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const failed = await patchStatusFresh(
      interfering,
      GRID_NETWORK,
      { name: 'grid' },
      'w',
      () => ({ phase: `q${++round}` }),
      {
        random: () => 0.5,
        sleep: async (ms) => {
          pauses.push(ms);
        },
      },
    ).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ResourceStoreError);
    expect((failed as ResourceStoreError).code).toBe('conflict');
    expect(pauses).toEqual([20, 40, 60, 80]);
    // One build per round, one pause between rounds: the bound is the module's own constant.
    expect(round).toBe(STATUS_WRITE_ATTEMPTS);
    expect(pauses).toHaveLength(STATUS_WRITE_ATTEMPTS - 1);
    expect(((await store.get(GRID_NETWORK, { name: 'grid' }))!['status'] as { phase?: string }).phase).toBe('p1');
  });

  it('writes nothing when the build says so or the object is gone, and passes other errors through at once', async () => {
    const store = await setup();
    expect(await patchStatusFresh(store, GRID_NETWORK, { name: 'grid' }, 'w', () => undefined)).toMatchObject({
      written: false,
      attempts: 1,
    });
    expect(await patchStatusFresh(store, GRID_NETWORK, { name: 'absent' }, 'w', () => ({ phase: 'x' }))).toEqual({
      object: undefined,
      written: false,
      attempts: 1,
    });
    const bad = await patchStatusFresh(store, GRID_NETWORK, { name: 'Not_A_Name' }, 'w', () => ({ phase: 'x' })).catch(
      (e: unknown) => e,
    );
    expect((bad as ResourceStoreError).code).toBe('invalid');
  });
});
