// GridNetwork reconcile's status write against the real local store, raced by the peer poller: Ready is written
// from a fresh read with its resourceVersion, so a PeerTimeValid that lands between that read and the patch stays.
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { GRID_NETWORK } from '../../../daemons/gossip-operator/kinds.ts';
import { GridNetworkController } from '../../../daemons/gossip-operator/controllers/grid-network.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import type { Condition } from '../../../daemons/gossip-operator/controllers/status.ts';
import { TerminalError } from '../../../daemons/gossip-operator/manager/manager.ts';
import { gatedStore } from '../gated-store.ts';
import { tempDir } from '../helpers.ts';

describe('GridNetwork status write', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('keeps a PeerTimeValid written between its fresh read and its patch', async () => {
    const dirs = await tempDir('grid-network-status');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    // An invalid spec takes the shortest reconcile path that writes Ready (False, InvalidSpec).
    await store.apply(
      GRID_NETWORK,
      {
        apiVersion: GRID_NETWORK.apiVersion,
        kind: 'GridNetwork',
        metadata: { name: 'grid' },
        spec: { metricsRefreshInterval: 5 },
      },
      { fieldManager: 'test' },
    );
    let networkGets = 0;
    // The reconcile's own read is the first GridNetwork get; the fresh read just before the patch is the second.
    const held = gatedStore(store, (kind) => kind.kind === 'GridNetwork' && ++networkGets === 2);
    const ctx = { store: held.store, now: () => Date.parse('2026-01-01T00:00:00Z') } as unknown as OperatorContext;
    const reconcile = new GridNetworkController(ctx).reconcile('grid').catch((e: unknown) => e);
    await held.gate.reached;
    const peer: Condition = {
      type: 'PeerTimeValid',
      status: 'False',
      reason: 'PeerTimeRejected',
      message: 'x',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { conditions: [peer] },
      { fieldManager: 'grid-operator-peer-signals' },
    );
    held.gate.release();
    expect(await reconcile).toBeInstanceOf(TerminalError);
    const conditions = ((await store.get(GRID_NETWORK, { name: 'grid' }))!['status'] as { conditions: Condition[] })
      .conditions;
    expect(conditions.map((c) => `${c.type}=${c.status}`).sort()).toEqual(['PeerTimeValid=False', 'Ready=False']);
    // The competing write really landed inside the window: the held read went stale, the patch met a conflict and the
    // writer read a third time. Without this, a reconcile that read the object once more or less would move the gate
    // and the test would pass without any race.
    expect(held.gets()).toBeGreaterThanOrEqual(3);
  });
});
