// The two condition writers (GatewayAgesRejected, PeerTimeValid) against a real kube-apiserver (a control plane of its
// own, so "the first GridNetwork by name" is this test's): the gateway age ingest and the peer poller write through the
// status subresource under their own field managers, the API server accepts what they write (CRD status schema), and a
// GridNetwork-controller-style Ready write keeps both conditions.
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubernetesStore } from '../../daemons/shared/resource-store/index.ts';
import { createCertificateAuthority, createSiteCertificate } from '../../daemons/shared/tls.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { GRID_NETWORK, SECRET } from '../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../daemons/gossip-operator/metrics.ts';
import { GatewayAgeIngest, GATEWAY_AGES_FIELD_MANAGER } from '../../daemons/gossip-operator/gateway-ages/ingest.ts';
import { PeerPoller, PEER_SIGNALS_FIELD_MANAGER } from '../../daemons/gossip-operator/peer-signals/poller.ts';
import { PolledSignals } from '../../daemons/gossip-operator/peer-signals/polled-signals.ts';
import { withOwnConditions, type Condition } from '../../daemons/gossip-operator/controllers/status.ts';
import { resolveBinDir, startControlPlane, type ControlPlane } from './control-plane.ts';
import { waitFor } from './kube.ts';
import { gatedStore } from '../gossip-operator/gated-store.ts';
import { applyManifests, RawClient } from './manifests.ts';
import { testTokenFile } from '../ingest-token.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('PeerTimeValid and GatewayAgesRejected on a real API server', () => {
  let plane: ControlPlane | undefined;
  let store: KubernetesStore;

  beforeAll(async () => {
    plane = await startControlPlane({ binDir: resolveBinDir() });
    const kc = new KubeConfig();
    kc.loadFromFile(plane.kubeconfigPath);
    const admin = new RawClient(kc);
    await applyManifests(admin, ['crds.k8s.yaml']);
    const ns = await admin.request('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'grid-system' },
    });
    if (ns.status !== 201) throw new Error(`creating namespace grid-system: HTTP ${ns.status}`);
    store = new KubernetesStore({ kubeconfigPath: plane.kubeconfigPath });
    const ca = await createCertificateAuthority({ commonName: 'grid ca' });
    const cert = await createSiteCertificate(ca, { commonName: 'site-a' });
    await store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'grid-ca', namespace: 'grid-system' },
        data: { 'ca.crt': b64(ca.certPem) },
      },
      { fieldManager: 'test' },
    );
    await store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'grid-site-cert', namespace: 'grid-system' },
        data: { 'tls.crt': b64(cert.certPem), 'tls.key': b64(cert.keyPem) },
      },
      { fieldManager: 'test' },
    );
    await store.apply(
      GRID_NETWORK,
      {
        apiVersion: 'grid.praxis.fast/v1alpha1',
        kind: 'GridNetwork',
        metadata: { name: 'grid' },
        spec: {
          signalTransport: { mode: 'poll' },
          tls: {
            caSecretRef: { name: 'grid-ca', namespace: 'grid-system' },
            siteSecretRef: { name: 'grid-site-cert', namespace: 'grid-system' },
          },
        },
      },
      { fieldManager: 'test' },
    );
  }, 180_000);

  afterAll(async () => {
    await store?.close();
    await plane?.stop();
  });

  const network = async (): Promise<Json> => store.get(GRID_NETWORK, { name: 'grid' });
  const condition = async (type: string): Promise<Condition | undefined> =>
    ((await network())?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);
  const statusManagers = async (): Promise<string[]> =>
    ((await network()).metadata.managedFields as Json[])
      .filter((m) => m.subresource === 'status')
      .map((m) => m.manager);

  it('records gateway age evidence the API server accepts, under grid-operator-gateway-ages', async () => {
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics: new OperatorMetrics(),
    });
    const answer = await ingest.submit({
      epoch: 'd41d8cd98f00b204',
      replica: 'edge-7c9f',
      sequence: 3,
      skewCount: 2,
      rejected: true,
    });
    expect(answer).toEqual({ status: 202, body: { outcome: 'recorded', condition: 'True' } });
    const status = (await network()).status;
    expect(status.gatewayAgeReports).toEqual([
      {
        epoch: 'd41d8cd98f00b204',
        replica: 'edge-7c9f',
        sequence: 3,
        skewCount: 2,
        reportedRejected: true,
        rejected: true,
        receivedAt: expect.any(String) as unknown,
      },
    ]);
    expect(await condition('GatewayAgesRejected')).toMatchObject({
      status: 'True',
      reason: 'GatewayAgesRejected',
      observedGeneration: 1,
    });
    expect(await statusManagers()).toContain(GATEWAY_AGES_FIELD_MANAGER);
  });

  it('records spend the API server accepts as it is written: live epochs, the retired baseline and epochs, nano-dollars', async () => {
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics: new OperatorMetrics(),
    });
    const live = '1700000000000-00000000000000a1';
    const gone = '1700000001000-00000000000000b2';
    expect(
      (await ingest.submitSpend({ epoch: live, replica: 'edge-1', sequence: 2, spend_usd: { 'team-a': 0.07 } })).status,
    ).toBe(202);
    expect(
      (
        await ingest.submitSpend({
          epoch: gone,
          replica: 'edge-2',
          sequence: 5,
          spend_usd: { 'team-a': 0.1, 'team-b': 1.25 },
          final: true,
        })
      ).body,
    ).toEqual({ outcome: 'final_recorded' });
    const status = (await network()).status;
    expect(status.gatewaySpendReports).toEqual([
      {
        epoch: live,
        replica: 'edge-1',
        sequence: 2,
        spend: [{ tenantId: 'team-a', nanoUsd: 70_000_000 }],
        reportedAt: expect.any(String) as unknown,
      },
    ]);
    expect(status.gatewaySpendRetired).toEqual({
      baseline: [
        { tenantId: 'team-a', nanoUsd: 100_000_000 },
        { tenantId: 'team-b', nanoUsd: 1_250_000_000 },
      ],
      epochs: [{ epoch: gone, sequence: 5, reason: 'final', retiredAt: expect.any(String) as unknown }],
    });
    expect(
      (
        await ingest.submitSpend({
          epoch: gone,
          replica: 'edge-2',
          sequence: 5,
          spend_usd: { 'team-a': 0.1, 'team-b': 1.25 },
          final: true,
        })
      ).body,
    ).toEqual({ outcome: 'duplicate' });
  });

  it('writes PeerTimeValid under grid-operator-peer-signals, and a Ready write keeps both conditions', async () => {
    const poller = new PeerPoller({
      site: 'site-a',
      store,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics: new OperatorMetrics(),
      polled: new PolledSignals(),
      members: () => [],
      converged: () => true,
      localSignals: () => [],
      onSignalsChanged: () => {},
      intervalMs: 3_600_000,
    });
    await poller.start();
    try {
      await waitFor(
        'PeerTimeValid True',
        async () => ((await condition('PeerTimeValid'))?.status === 'True' ? true : undefined),
        30_000,
      );
    } finally {
      await poller.stop();
    }
    expect(await statusManagers()).toEqual(
      expect.arrayContaining([GATEWAY_AGES_FIELD_MANAGER, PEER_SIGNALS_FIELD_MANAGER]),
    );
    const fresh = await network();
    const ready: Condition = {
      type: 'Ready',
      status: 'True',
      reason: 'OverlaysDistributed',
      message: '0 gateway overlays distributed',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 1,
    };
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { conditions: withOwnConditions(fresh.status.conditions, [ready], ['Ready']) },
      { fieldManager: 'grid-operator' },
    );
    const types = ((await network()).status.conditions as Condition[]).map((c) => `${c.type}=${c.status}`).sort();
    expect(types).toEqual(['GatewayAgesRejected=True', 'PeerTimeValid=True', 'Ready=True']);
  });
  it("a report raced by an administrator's entry removal and a Ready write (409, read again) puts nothing back and drops nothing", async () => {
    const before = await network();
    // Two records: the one recorded above, and one more the administrator will verify as retired. These ingests
    // never received d41d… themselves, so its freshness is unknown to them: GatewayAgesRejected Unknown.
    const first = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics: new OperatorMetrics(),
    });
    expect(
      (
        await first.submit({
          epoch: 'aaaaaaaaaaaaaaaa',
          replica: 'edge-old',
          sequence: 1,
          skewCount: 1,
          rejected: true,
        })
      ).status,
    ).toBe(202);
    const held = gatedStore(store, (kind) => kind.kind === 'GridNetwork');
    const ingest = new GatewayAgeIngest({
      address: '127.0.0.1:0',
      tokenFile: testTokenFile(),
      store: held.store,
      logger: createLogger({ name: 'test', level: 'silent' }),
      metrics: new OperatorMetrics(),
    });
    const pending = ingest.submit({
      epoch: 'bbbbbbbbbbbbbbbb',
      replica: 'edge-new',
      sequence: 1,
      skewCount: 0,
      rejected: false,
    });
    await held.gate.reached;
    const now = await network();
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { gatewayAgeReports: (now.status.gatewayAgeReports as Json[]).filter((r) => r.epoch !== 'aaaaaaaaaaaaaaaa') },
      { fieldManager: 'kubectl' },
    );
    const ready: Condition = {
      type: 'Ready',
      status: 'False',
      reason: 'OverlayNotDistributed',
      message: 'x',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 1,
    };
    await store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { conditions: withOwnConditions(now.status.conditions, [ready], ['Ready']) },
      { fieldManager: 'grid-operator' },
    );
    held.gate.release();
    expect((await pending).status).toBe(202);
    const status = (await network()).status;
    expect((status.gatewayAgeReports as Json[]).map((r) => r.epoch).sort()).toEqual([
      'bbbbbbbbbbbbbbbb',
      'd41d8cd98f00b204',
    ]);
    expect((status.conditions as Condition[]).map((c) => `${c.type}=${c.status}`).sort()).toEqual([
      'GatewayAgesRejected=Unknown',
      'PeerTimeValid=True',
      'Ready=False',
    ]);
    expect(before.metadata.resourceVersion).not.toBe((await network()).metadata.resourceVersion);
  });
});
