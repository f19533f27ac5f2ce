// The dashboard's replica discovery: which pods become targets (pure), and the list+watch that keeps them current
// against a real local store as pods come, go, lose readiness and change IP.
import { afterEach, describe, expect, it } from 'vitest';
import { ReplicaDiscovery, replicaTargets } from '../../../daemons/gossip-operator/dashboard/replica-discovery.ts';
import { POD, type PodObject } from '../../../daemons/gossip-operator/kinds.ts';
import { openLocalStore, ResourceStoreError, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { ResourceStore, WatchOptions } from '../../../daemons/shared/resource-store/types.ts';
import { capturingLogger, tempDir, waitFor } from '../helpers.ts';

const LABELS = {
  'app.kubernetes.io/name': 'consumer-gateway',
  'app.kubernetes.io/instance': 'consumer-gateway',
  'app.kubernetes.io/part-of': 'agn',
};

function pod(
  name: string,
  status: PodObject['status'],
  extra: { labels?: Record<string, string>; namespace?: string; deleting?: boolean; ports?: boolean } = {},
): PodObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: extra.namespace ?? 'grid-system',
      labels: extra.labels ?? LABELS,
      ...(extra.deleting === true ? { deletionTimestamp: '2026-12-03T10:00:00Z' } : {}),
    },
    spec: {
      containers:
        extra.ports === false
          ? [{ name: 'gateway' }, { name: 'overlay-sync' }]
          : [
              {
                name: 'gateway',
                ports: [
                  { name: 'listener', containerPort: 8080 },
                  { name: 'admin', containerPort: 9901 },
                ],
              },
              { name: 'overlay-sync', ports: [{ name: 'sync-health', containerPort: 9091 }] },
              { name: 'serving-sync', ports: [{ name: 'serving-health', containerPort: 9092 }] },
            ],
    },
    ...(status !== undefined ? { status } : {}),
  };
}

describe('replicaTargets', () => {
  it('reads running pods with an IP at their admin and sync-health ports, and skips the rest', () => {
    expect(
      replicaTargets([
        pod('cg-b', { phase: 'Running', podIP: '10.0.0.6' }),
        pod('cg-a', { phase: 'Running', podIP: '10.0.0.5' }),
        pod('cg-v6', { phase: 'Running', podIP: 'fd00::7' }),
        pod('cg-pending', { phase: 'Pending' }),
        pod('cg-no-ip', { phase: 'Running' }),
        pod('cg-done', { phase: 'Failed', podIP: '10.0.0.9' }),
        pod('cg-leaving', { phase: 'Running', podIP: '10.0.0.10' }, { deleting: true }),
        pod('cg-unnamed-ports', { phase: 'Running', podIP: '10.0.0.11' }, { ports: false }),
      ]),
    ).toEqual([
      { replica: 'cg-a', kind: 'gateway', address: '10.0.0.5:9901' },
      { replica: 'cg-a', kind: 'overlay-sync', address: '10.0.0.5:9091' },
      { replica: 'cg-b', kind: 'gateway', address: '10.0.0.6:9901' },
      { replica: 'cg-b', kind: 'overlay-sync', address: '10.0.0.6:9091' },
      { replica: 'cg-v6', kind: 'gateway', address: '[fd00::7]:9901' },
      { replica: 'cg-v6', kind: 'overlay-sync', address: '[fd00::7]:9091' },
    ]);
  });
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function localStore(): Promise<LocalStore> {
  const dir = await tempDir('replica-discovery');
  const store = await openLocalStore({ stateDir: dir.path, coalesceMs: 5, rescanIntervalMs: 500 });
  cleanups.push(async () => {
    await store.close();
    await dir.remove();
  });
  return store;
}

async function put(store: ResourceStore, object: PodObject): Promise<void> {
  const { status, ...rest } = object;
  await store.apply(POD, rest as PodObject, { fieldManager: 'kubelet-stand-in' });
  if (status !== undefined)
    await store.patchStatus(POD, { namespace: object.metadata.namespace ?? '', name: object.metadata.name }, status, {
      fieldManager: 'kubelet-stand-in',
    });
}

function discover(store: ResourceStore): { discovery: ReplicaDiscovery; lines: string[]; addresses: () => string[] } {
  const { logger, lines } = capturingLogger();
  const discovery = new ReplicaDiscovery({ store, namespace: 'grid-system', logger });
  discovery.start();
  cleanups.push(() => discovery.close());
  return { discovery, lines, addresses: () => discovery.targets().map((t) => `${t.replica}/${t.kind}=${t.address}`) };
}

const settle = (what: string, addresses: () => string[], expected: string[]) =>
  waitFor(what, () => (JSON.stringify(addresses()) === JSON.stringify(expected) ? true : undefined), 5_000);

describe('ReplicaDiscovery on a store', () => {
  it('follows pods added, removed, not ready, pending and re-addressed; other pods and namespaces are not its', async () => {
    const store = await localStore();
    await put(store, pod('cg-1', { phase: 'Running', podIP: '10.0.0.5' }));
    await put(
      store,
      pod(
        'provider-gateway-1',
        { phase: 'Running', podIP: '10.0.0.8' },
        { labels: { ...LABELS, 'app.kubernetes.io/name': 'provider-gateway' } },
      ),
    );
    await put(store, pod('cg-elsewhere', { phase: 'Running', podIP: '10.0.1.5' }, { namespace: 'other' }));
    const { addresses } = discover(store);
    await settle('the existing pod listed', addresses, [
      'cg-1/gateway=10.0.0.5:9901',
      'cg-1/overlay-sync=10.0.0.5:9091',
    ]);

    // A second replica scheduled: no IP while pending, a target once running.
    await put(store, pod('cg-2', { phase: 'Pending' }));
    await new Promise((r) => setTimeout(r, 100));
    expect(addresses()).toEqual(['cg-1/gateway=10.0.0.5:9901', 'cg-1/overlay-sync=10.0.0.5:9091']);
    await put(store, pod('cg-2', { phase: 'Running', podIP: '10.0.0.6' }));
    await settle('the second replica added', addresses, [
      'cg-1/gateway=10.0.0.5:9901',
      'cg-1/overlay-sync=10.0.0.5:9091',
      'cg-2/gateway=10.0.0.6:9901',
      'cg-2/overlay-sync=10.0.0.6:9091',
    ]);

    // Not ready stays a target (its row shows it); a restarted pod sandbox with a new IP is read at the new one.
    await store.patchStatus(
      POD,
      { namespace: 'grid-system', name: 'cg-2' },
      { conditions: [{ type: 'Ready', status: 'False' }] },
      { fieldManager: 'kubelet-stand-in' },
    );
    await store.patchStatus(
      POD,
      { namespace: 'grid-system', name: 'cg-1' },
      { podIP: '10.0.0.15' },
      { fieldManager: 'kubelet-stand-in' },
    );
    await settle('the new IP', addresses, [
      'cg-1/gateway=10.0.0.15:9901',
      'cg-1/overlay-sync=10.0.0.15:9091',
      'cg-2/gateway=10.0.0.6:9901',
      'cg-2/overlay-sync=10.0.0.6:9091',
    ]);

    // Terminating, then gone.
    await store.apply(
      POD,
      {
        ...pod('cg-1', undefined),
        metadata: { ...pod('cg-1', undefined).metadata, deletionTimestamp: '2026-12-03T10:00:00Z' },
      },
      { fieldManager: 'kubelet-stand-in' },
    );
    await settle('the terminating pod dropped', addresses, [
      'cg-2/gateway=10.0.0.6:9901',
      'cg-2/overlay-sync=10.0.0.6:9091',
    ]);
    await store.delete(POD, { namespace: 'grid-system', name: 'cg-2' });
    await settle('the deleted pod dropped', addresses, []);
  });

  it('says once, with the fix, when the API server refuses the pod watch, and keeps the replicas it knew', async () => {
    // A stand-in for the API server's 403 (the cluster suite checks the real grant): the watch reports the
    // refusal the kubernetes store reports, every retry.
    let options: WatchOptions | undefined;
    const refusing = {
      backend: 'kubernetes',
      watch: (_kind: unknown, o: WatchOptions) => {
        options = o;
        return { close: async () => undefined };
      },
    } as unknown as ResourceStore;
    const { lines, addresses } = discover(refusing);
    options!.onSynced?.([pod('cg-1', { phase: 'Running', podIP: '10.0.0.5' })]);
    const forbidden = new ResourceStoreError(
      'forbidden',
      'list /api/v1/namespaces/grid-system/pods: HTTP 403 pods is forbidden',
      { statusCode: 403 },
    );
    for (let i = 0; i < 3; i++) options!.onRestart?.('error', forbidden);
    const warnings = lines.filter((l) => l.includes('cannot list and watch pods in namespace grid-system'));
    expect(warnings.length).toBe(1);
    expect(warnings[0]).toContain('grant list and watch on pods there');
    expect(warnings[0]).toContain('--dashboard-targets');
    expect(addresses()).toEqual(['cg-1/gateway=10.0.0.5:9901', 'cg-1/overlay-sync=10.0.0.5:9091']);
  });
});
