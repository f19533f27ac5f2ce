// A control plane of its own (not the shared one): restarts kube-apiserver under a live watch, and checks that
// teardown leaves no process behind. This is the situation overlay-sync's reconnect logic must handle.
import { CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveBinDir, startControlPlane } from './control-plane.ts';
import type { ControlPlane } from './control-plane.ts';
import { waitFor } from './kube.ts';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface WatchEvent {
  readonly type: string;
  readonly value: string;
  readonly resourceVersion: string;
  readonly code?: number; // for ERROR events: the Status code (410 = resourceVersion too old)
}

// One watch from a resourceVersion; resolves `ended` when the server or the network closes it.
async function watchFrom(kc: KubeConfig, namespace: string, name: string, resourceVersion: string) {
  const events: WatchEvent[] = [];
  let ended = false;
  let endError: unknown;
  const controller = await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/configmaps`,
    { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: false },
    (type, obj: V1ConfigMap & { code?: number }) => {
      events.push({
        type,
        value: obj.data?.value ?? '',
        resourceVersion: obj.metadata?.resourceVersion ?? '',
        ...(type === 'ERROR' ? { code: obj.code } : {}),
      });
    },
    (err: unknown) => {
      ended = true;
      endError = err;
    },
  );
  return {
    events,
    controller,
    isEnded: () => ended,
    endError: () => endError,
  };
}

describe('kube-apiserver restart under a watch', () => {
  let plane: ControlPlane | undefined;
  const pids: { etcd: number; apiserver: number }[] = [];

  beforeAll(async () => {
    plane = await startControlPlane({ binDir: resolveBinDir() });
    pids.push(plane.pids());
  });

  afterAll(async () => {
    await plane?.stop();
  });

  it('ends the watch on shutdown, and a client resuming from its last resourceVersion misses no update', async () => {
    if (!plane) throw new Error('no control plane');
    const kc = new KubeConfig();
    kc.loadFromFile(plane.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const namespace = 'restart';
    const name = 'routing-overlay';
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const created = await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name }, data: { value: 'r1' } },
    });

    const first = await watchFrom(kc, namespace, name, created.metadata?.resourceVersion ?? '');
    await core.replaceNamespacedConfigMap({ name, namespace, body: { metadata: { name }, data: { value: 'r2' } } });
    await waitFor('MODIFIED r2 on the first watch', () =>
      first.events.some((e) => e.value === 'r2') ? true : undefined,
    );
    const lastSeen = first.events[first.events.length - 1]?.resourceVersion ?? '';

    await plane.restartApiServer();
    pids.push(plane.pids());
    expect(pids[1]?.apiserver).not.toBe(pids[0]?.apiserver);
    expect(pids[1]?.etcd).toBe(pids[0]?.etcd);
    expect(isAlive(pids[0]?.apiserver ?? 0)).toBe(false);
    // The old connection is gone with the old process: the client is told, it does not hang silently.
    await waitFor('the first watch to end', () => (first.isEnded() ? true : undefined));
    first.controller.abort();

    // Written after the restart, before the client reconnects: the update a careless reconnect would miss.
    await core.replaceNamespacedConfigMap({ name, namespace, body: { metadata: { name }, data: { value: 'r3' } } });

    const resumed = await watchFrom(kc, namespace, name, lastSeen);
    try {
      await waitFor('the resumed watch to deliver r3 or answer 410 Gone', () =>
        resumed.events.some((e) => e.value === 'r3' || (e.type === 'ERROR' && e.code === 410)) ? true : undefined,
      );
      const gone = resumed.events.find((e) => e.type === 'ERROR');
      if (gone) {
        // The new server's watch cache starts after lastSeen: it says so with 410, and a relist recovers r3.
        expect(gone.code).toBe(410);
        const relisted = await core.listNamespacedConfigMap({ namespace, fieldSelector: `metadata.name=${name}` });
        expect(relisted.items.map((c) => c.data?.value)).toEqual(['r3']);
      } else {
        expect(resumed.events.map((e) => [e.type, e.value])).toEqual([['MODIFIED', 'r3']]);
      }
      console.log(
        `resume after restart: ${gone ? '410 Gone, recovered by relist' : 'resumed from the last resourceVersion'}`,
      );
    } finally {
      resumed.controller.abort();
    }
  });

  it('stop() leaves neither etcd nor kube-apiserver running', async () => {
    if (!plane) throw new Error('no control plane');
    const last = plane.pids();
    await plane.stop();
    plane = undefined;
    for (const p of pids.concat([last])) {
      expect(isAlive(p.apiserver), `kube-apiserver pid ${p.apiserver}`).toBe(false);
      expect(isAlive(p.etcd), `etcd pid ${p.etcd}`).toBe(false);
    }
  });
});
