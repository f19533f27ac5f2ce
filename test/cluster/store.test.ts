// The ResourceStore contract (test/resource-store/contract.ts, the suite the local store passes) run unchanged
// against KubernetesStore on the real API server, then the case a reflector exists for: the server forgets the
// resourceVersion a watch would resume from (410 Gone). A control plane of its own is restarted under a live
// store watch while etcd's history is compacted, and the store must relist and lose no update.
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CONFIG_MAP, KubernetesStore } from '../../daemons/shared/resource-store/index.ts';
import type { KubeObject, ResourceKind, WatchRestartReason } from '../../daemons/shared/resource-store/types.ts';
import { resourceStoreContract } from '../resource-store/contract.ts';
import { resolveBinDir, startControlPlane } from './control-plane.ts';
import type { ControlPlane } from './control-plane.ts';
import { adminKubeConfig, uniqueName, waitFor } from './kube.ts';
import { applyManifests, RawClient } from './manifests.ts';

const GRID_NETWORK: ResourceKind = {
  apiVersion: 'grid.praxis.fast/v1alpha1',
  kind: 'GridNetwork',
  plural: 'gridnetworks',
  namespaced: false,
};
const namespace = uniqueName('contract');

beforeAll(async () => {
  const admin = new RawClient(adminKubeConfig());
  await applyManifests(admin, ['crds.k8s.yaml']);
  const res = await admin.request('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  if (res.status !== 201) throw new Error(`creating namespace ${namespace}: HTTP ${res.status}`);
});

resourceStoreContract({
  name: 'kubernetes',
  namespace,
  statusKind: GRID_NETWORK,
  open: async () => new KubernetesStore({ kubeconfigPath: inject('kubeconfigPath') }),
});

async function etcd(plane: ControlPlane, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${plane.etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

describe('KubernetesStore watch across a kube-apiserver restart and an etcd compaction (own control plane)', () => {
  let plane: ControlPlane | undefined;

  beforeAll(async () => {
    plane = await startControlPlane({ binDir: resolveBinDir() });
  });
  afterAll(async () => {
    await plane?.stop();
  });

  it('relists after 410 Gone and delivers every later update, ending on the newest', async () => {
    if (!plane) throw new Error('no control plane');
    const kc = new KubeConfig();
    kc.loadFromFile(plane.kubeconfigPath);
    const writer = new KubernetesStore({ kubeconfigPath: plane.kubeconfigPath });
    // Short backoff so the reconnect after the restart is quick; the reconnect logic is the store's own.
    const watcher = new KubernetesStore({
      kubeconfigPath: plane.kubeconfigPath,
      tuning: { backoff: { initialMs: 200, maxMs: 1_000, jitter: 0.2 } },
    });
    const ns = 'default';
    const name = 'routing-overlay';
    const cm = (v: number): KubeObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: ns },
      data: { v: String(v) },
    });
    const OP = { fieldManager: 'grid-operator', force: true };
    const seen: string[] = [];
    const restarts: WatchRestartReason[] = [];
    let syncs = 0;
    try {
      await writer.apply(CONFIG_MAP, cm(0), OP);
      const watch = watcher.watch(CONFIG_MAP, {
        namespace: ns,
        name,
        onEvent: (e) => seen.push(`${e.type} ${String((e.object as { data?: { v?: string } }).data?.v)}`),
        onSynced: () => void (syncs += 1),
        onRestart: (reason) => restarts.push(reason),
      });
      await waitFor('the first sync', () => (syncs >= 1 ? true : undefined));
      await writer.apply(CONFIG_MAP, cm(1), OP);
      await waitFor('MODIFIED 1', () => (seen.includes('MODIFIED 1') ? true : undefined));

      // While kube-apiserver is down: unrelated writes straight into etcd move its revision on, and the history
      // is compacted up to there. The restarted server's watch cache starts after the watcher's last
      // resourceVersion, and etcd no longer has it either: resuming must fail with 410.
      await plane.restartApiServer(async () => {
        let revision = '0';
        for (let i = 0; i < 5; i++) {
          const put = await etcd(plane!, '/v3/kv/put', {
            key: Buffer.from(`/agn-test/filler-${i}`).toString('base64'),
            value: Buffer.from('x').toString('base64'),
          });
          revision = String((put['header'] as { revision: string }).revision);
        }
        await etcd(plane!, '/v3/kv/compaction', { revision, physical: true });
      });

      for (let v = 2; v <= 6; v++) await writer.apply(CONFIG_MAP, cm(v), OP);
      await waitFor(
        'the newest update after the restart',
        () => (seen[seen.length - 1]?.endsWith(' 6') ? true : undefined),
        45_000,
      );
      await watch.close();
    } finally {
      await writer.close();
      await watcher.close();
    }
    console.log(
      `store watch across restart + compaction: restarts=${restarts.join(',')} syncs=${syncs} events=${seen.join(' | ')}`,
    );
    expect(restarts).toContain('gone');
    expect(syncs).toBeGreaterThanOrEqual(2); // the initial list and the relist after 410
    // Nothing out of order and nothing reported twice; the newest value is the last one seen.
    const values = seen.map((s) => Number(s.split(' ')[1]));
    for (let i = 1; i < values.length; i++) expect(values[i]!).toBeGreaterThan(values[i - 1]!);
    expect(values[values.length - 1]).toBe(6);
  });
});
