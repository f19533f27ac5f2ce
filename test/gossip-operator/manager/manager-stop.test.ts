// Manager.stop on a real local store: no key is dequeued once stop began, a reconcile already running finishes
// (its status write lands) before stop resolves, and one that outlives the deadline is abandoned, named in the log.
// Either way each controller's close() runs after its worker, so what it holds outside reconciles is released.
import { afterEach, describe, expect, it } from 'vitest';
import { Manager, type Controller } from '../../../daemons/gossip-operator/manager/manager.ts';
import { CONFIG_MAP, createResourceStore } from '../../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../../daemons/shared/resource-store/types.ts';
import { capturingLogger, tempDir, waitFor } from '../helpers.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function storeWith(names: readonly string[]): Promise<ResourceStore> {
  const dir = await tempDir('manager-stop');
  const store = await createResourceStore({ backend: 'local', stateDir: dir.path });
  cleanups.push(async () => {
    await store.close();
    await dir.remove();
  });
  for (const name of names) {
    await store.apply(
      CONFIG_MAP,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'grid-system' }, data: {} },
      { fieldManager: 'test' },
    );
  }
  return store;
}

/** A controller whose reconciles wait for `release`; `started` lists the keys it was handed, in order. */
function heldController(): Controller & { started: string[]; finished: string[]; release: () => void } {
  const waiting: Array<() => void> = [];
  const started: string[] = [];
  const finished: string[] = [];
  return {
    name: 'held',
    kind: CONFIG_MAP,
    started,
    finished,
    release: () => {
      for (const resolve of waiting.splice(0)) resolve();
    },
    async reconcile(name) {
      started.push(name);
      await new Promise<void>((resolve) => waiting.push(resolve));
      finished.push(name);
      return {};
    },
  };
}

describe('Manager.stop', () => {
  it('waits for the reconcile in flight and dequeues nothing after stop began', async () => {
    const store = await storeWith(['a', 'b', 'c']);
    const { logger } = capturingLogger();
    const controller = heldController();
    const manager = new Manager({ store, logger });
    manager.add(controller);
    manager.start();
    await waitFor('a reconcile in flight', () => (controller.started.length === 1 ? true : undefined));
    let stopped = false;
    const stopping = manager.stop(5_000).then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(stopped).toBe(false);
    controller.release();
    await stopping;
    // The one in flight finished; the two still queued were never handed out.
    expect(controller.finished).toEqual(controller.started);
    expect(controller.started).toHaveLength(1);
  });

  it('abandons a reconcile that outlives the deadline and names its controller', async () => {
    const store = await storeWith(['a']);
    const { logger, lines } = capturingLogger();
    const controller = heldController();
    const manager = new Manager({ store, logger });
    manager.add(controller);
    manager.start();
    await waitFor('a reconcile in flight', () => (controller.started.length === 1 ? true : undefined));
    const t0 = Date.now();
    await manager.stop(200);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(controller.finished).toEqual([]);
    const warning = lines
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'reconciles or watches still running at the stop deadline; abandoning them');
    expect(warning).toMatchObject({ deadlineMs: 200, controllers: ['held'], watchesOpen: false });
    controller.release();
  });

  it('closes each controller after its reconciles, also when one outlived the deadline', async () => {
    const store = await storeWith(['a']);
    const { logger } = capturingLogger();
    const events: string[] = [];
    const held = heldController();
    const plain = { ...heldController(), name: 'plain', close: async () => void events.push('plain closed') };
    const closing = Object.assign(held, {
      close: async () => void events.push(`held closed after ${held.finished.length} finished`),
    });
    const manager = new Manager({ store, logger });
    manager.add(closing);
    manager.add(plain);
    manager.start();
    await waitFor('reconciles in flight', () =>
      held.started.length === 1 && plain.started.length === 1 ? true : undefined,
    );
    plain.release();
    await manager.stop(200);
    expect(events.sort()).toEqual(['held closed after 0 finished', 'plain closed']);
    held.release();
  });

  it('abandons a watch whose close hangs at the deadline (a Kubernetes watch request that does not end)', async () => {
    const real = await storeWith(['a']);
    // The store as the Kubernetes one can behave: closing a watch never settles.
    const store: ResourceStore = new Proxy(real, {
      get(target, key, receiver) {
        if (key !== 'watch') return Reflect.get(target, key, receiver) as unknown;
        return (...args: Parameters<ResourceStore['watch']>) => {
          const subscription = target.watch(...args);
          return { ...subscription, close: () => new Promise<void>(() => undefined) };
        };
      },
    });
    const { logger, lines } = capturingLogger();
    const manager = new Manager({ store, logger });
    manager.add(heldController());
    manager.start();
    const t0 = Date.now();
    await manager.stop(200);
    expect(Date.now() - t0).toBeLessThan(2_000);
    const warning = lines
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'reconciles or watches still running at the stop deadline; abandoning them');
    expect(warning).toMatchObject({ deadlineMs: 200, watchesOpen: true });
  });
});
