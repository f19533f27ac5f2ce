// Two sites' peer signals endpoints over real mTLS (grid CA and site certificates generated here), each with its
// own local store. Site B serves one row with a future-stamped sample (a negative age): site A refuses and counts
// that row, keeps B's other row for routing, and writes PeerTimeValid False under its own field manager; once B
// answers clean, True. Rounds run on the pollers' own timers; the test waits on the store.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createCertificateAuthority,
  createClientCertificate,
  createSiteCertificate,
  type CertificateAuthority,
  type LeafCertificate,
} from '../../../daemons/shared/tls.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { GRID_NETWORK, SECRET } from '../../../daemons/gossip-operator/kinds.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import {
  PeerPoller,
  PEER_SIGNALS_FIELD_MANAGER,
  type PollTarget,
} from '../../../daemons/gossip-operator/peer-signals/poller.ts';
import { PolledSignals } from '../../../daemons/gossip-operator/peer-signals/polled-signals.ts';
import { pollPeer } from '../../../daemons/shared/signals-client.ts';
import type { LocalSignal } from '../../../daemons/gossip-operator/peer-signals/rows.ts';
import { withOwnConditions, type Condition } from '../../../daemons/gossip-operator/controllers/status.ts';
import type { ResourceStore } from '../../../daemons/shared/resource-store/types.ts';
import { gatedStore } from '../gated-store.ts';
import { capturingLogger, tempDir, waitFor } from '../helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const b64 = (text: string) => Buffer.from(text).toString('base64');

interface Site {
  readonly name: string;
  readonly store: LocalStore;
  readonly metrics: OperatorMetrics;
  readonly polled: PolledSignals;
  readonly poller: PeerPoller;
  signals: LocalSignal[];
  members: PollTarget[];
  converged: boolean;
}

describe('peer signals over mTLS', () => {
  let ca: CertificateAuthority;
  const certs = new Map<string, LeafCertificate>();
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    ca = await createCertificateAuthority({ commonName: 'grid ca' });
    for (const name of ['site-a', 'site-b'])
      certs.set(name, await createSiteCertificate(ca, { commonName: name, organization: 'grid' }));
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A site whose poller starts at once, or after `setup` ran (so its first round already sees the members). */
  async function startSite(
    name: string,
    options: {
      mode?: string;
      tls?: boolean;
      status?: Json;
      setup?: (site: Site) => void;
      wrapStore?: (store: ResourceStore) => ResourceStore;
    } = {},
    dir?: string,
  ): Promise<Site> {
    const dirs = dir === undefined ? await tempDir(`peer-signals-${name}`) : { path: dir, remove: async () => {} };
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    if (dir === undefined) {
      const cert = certs.get(name)!;
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
          metadata: { name: 'grid', generation: 1 },
          spec: {
            signalTransport: { mode: options.mode ?? 'poll' },
            ...(options.tls === false
              ? {}
              : {
                  tls: {
                    caSecretRef: { name: 'grid-ca', namespace: 'grid-system' },
                    siteSecretRef: { name: 'grid-site-cert', namespace: 'grid-system' },
                  },
                }),
          },
        },
        { fieldManager: 'test' },
      );
      if (options.status !== undefined)
        await store.patchStatus(GRID_NETWORK, { name: 'grid' }, options.status, { fieldManager: 'test' });
    }
    const metrics = new OperatorMetrics();
    const polled = new PolledSignals();
    const site: Site = {
      name,
      store,
      metrics,
      polled,
      signals: [],
      members: [],
      converged: true,
      poller: new PeerPoller({
        site: name,
        store: options.wrapStore?.(store) ?? store,
        logger: capturingLogger().logger,
        metrics,
        polled,
        members: () => site.members,
        converged: () => site.converged,
        localSignals: () => site.signals,
        onSignalsChanged: () => {},
        serveAddress: '127.0.0.1:0',
        intervalMs: 100,
        timeoutMs: 3_000,
      }),
    };
    options.setup?.(site);
    await site.poller.start();
    cleanups.push(async () => {
      await site.poller.stop();
      await store.close();
      await dirs.remove();
    });
    return site;
  }

  const peerTime = async (site: Site): Promise<Condition | undefined> => {
    const network = (await site.store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    return (network?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === 'PeerTimeValid');
  };
  const refused = async (site: Site, peer: string, reason: string): Promise<number> =>
    (await site.metrics.peerSignalsRefused.get()).values.find(
      (v) => v.labels.peer === peer && v.labels.reason === reason,
    )?.value ?? 0;
  const polls = async (site: Site, outcome: string): Promise<number> =>
    (await site.metrics.peerSignalPolls.get()).values
      .filter((v) => v.labels.outcome === outcome)
      .reduce((n, v) => n + v.value, 0);
  const sample = (observedAtMs: number, generation = 1) => ({
    generation,
    observedAtMs,
    healthy: true,
    queueDepth: 0.3,
  });

  it('a bad age from one peer turns PeerTimeValid False, keeps its valid rows, and one clean answer turns it True', async () => {
    const a = await startSite('site-a');
    const b = await startSite('site-b');
    b.signals = [
      { provider: 'llm-good', sample: sample(Date.now() - 1_000) },
      { provider: 'llm-stamped-ahead', sample: sample(Date.now() + 120_000) },
    ];
    a.members = [{ name: 'site-b', signalsAddress: b.poller.servedAddress! }];

    const rejected = await waitFor(
      'PeerTimeValid False on site-a',
      async () => ((await peerTime(a))?.status === 'False' ? await peerTime(a) : undefined),
      30_000,
    );
    expect(rejected.reason).toBe('PeerAgeRejected');
    expect(rejected.message).toContain('site-b');
    expect(rejected.observedGeneration).toBe(1);
    expect(await refused(a, 'site-b', 'skew')).toBeGreaterThanOrEqual(1);
    expect(await a.metrics.registry.metrics()).toMatch(
      /grid_peer_signals_refused_total\{peer="site-b",reason="skew"\} [1-9]/,
    );
    // Only the rejected row is unavailable for measurement.
    expect(a.polled.entry('site-b', 'llm-good')).toMatchObject({
      kind: 'sample',
      sample: { queueDepth: 0.3, healthy: true },
    });
    expect(a.polled.entry('site-b', 'llm-stamped-ahead')).toEqual({ kind: 'refused' });
    const network = (await a.store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    expect(network.metadata.managedFields.map((m: Json) => m.manager)).toContain(PEER_SIGNALS_FIELD_MANAGER);

    // Site B fixes its stamping: the next answer is clean.
    b.signals = [b.signals[0]!, { provider: 'llm-stamped-ahead', sample: sample(Date.now() - 500, 2) }];
    const valid = await waitFor(
      'PeerTimeValid True on site-a',
      async () => ((await peerTime(a))?.status === 'True' ? await peerTime(a) : undefined),
      30_000,
    );
    expect(valid.reason).toBe('PeerAgesValid');
    expect(a.polled.entry('site-b', 'llm-stamped-ahead')).toMatchObject({ kind: 'sample' });
    // Steady state writes nothing: the transition time stays put across further rounds.
    const seen = await polls(a, 'answered');
    await waitFor(
      'three more answered polls',
      async () => (await polls(a, 'answered')) >= seen + 3 || undefined,
      30_000,
    );
    expect((await peerTime(a))?.lastTransitionTime).toBe(valid.lastTransitionTime);
    expect((await peerTime(a))?.message).toBe(valid.message);
  });

  it('preserves a stored False after restart while the rejecting peer does not answer, and a clean answer restores True', async () => {
    const stored = {
      type: 'PeerTimeValid',
      status: 'False',
      reason: 'PeerAgeRejected',
      message: 'rows from peer site-b were rejected',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 1,
    };
    const b = await startSite('site-b');
    b.signals = [{ provider: 'llm', sample: sample(Date.now() - 100) }];
    // site-b is a member but its advertised address is wrong: no answer, standing kept.
    const a = await startSite('site-a', {
      status: { conditions: [stored] },
      setup: (s) => (s.members = [{ name: 'site-b', signalsAddress: '127.0.0.1:1' }]),
    });
    await waitFor('a few unanswered polls', async () => (await polls(a, 'no_answer')) >= 3 || undefined, 30_000);
    expect(await peerTime(a)).toEqual(stored);
    a.members = [{ name: 'site-b', signalsAddress: b.poller.servedAddress! }];
    await waitFor(
      'PeerTimeValid True after the clean answer',
      async () => ((await peerTime(a))?.status === 'True' ? true : undefined),
      30_000,
    );
  });

  it('publishes nothing while the membership-convergence gate is held, but still collects signals', async () => {
    const b = await startSite('site-b');
    b.signals = [{ provider: 'llm', sample: sample(Date.now() + 60_000) }];
    const a = await startSite('site-a', {
      setup: (s) => {
        s.converged = false;
        s.members = [{ name: 'site-b', signalsAddress: b.poller.servedAddress! }];
      },
    });
    await waitFor(
      'skewed rows counted while the gate is held',
      async () => (await refused(a, 'site-b', 'skew')) >= 3 || undefined,
      30_000,
    );
    expect(await peerTime(a)).toBeUndefined();
    a.converged = true;
    await waitFor(
      'PeerTimeValid False once converged',
      async () => ((await peerTime(a))?.status === 'False' ? true : undefined),
      30_000,
    );
  });

  it('without TLS material nothing is polled or served and no condition is claimed', async () => {
    const a = await startSite('site-a', { tls: false });
    const b = await startSite('site-b');
    a.members = [{ name: 'site-b', signalsAddress: b.poller.servedAddress! }];
    const before = await polls(b, 'no_answer');
    // b polls a (which has no material to serve with): the handshake fails, so a does not answer.
    b.members = [{ name: 'site-a', signalsAddress: a.poller.servedAddress! }];
    await waitFor(
      'site-b to fail polling site-a',
      async () => (await polls(b, 'no_answer')) > before || undefined,
      30_000,
    );
    expect(await polls(a, 'answered')).toBe(0);
    expect(await peerTime(a)).toBeUndefined();
  });

  it('a GridNetwork status write of Ready keeps PeerTimeValid', async () => {
    const a = await startSite('site-a');
    a.members = [];
    const valid = await waitFor(
      'PeerTimeValid True (no peers)',
      async () => ((await peerTime(a))?.status === 'True' ? await peerTime(a) : undefined),
      30_000,
    );
    const fresh = (await a.store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    const ready: Condition = {
      type: 'Ready',
      status: 'True',
      reason: 'OverlaysDistributed',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    // What the GridNetwork controller sends: its stale list with only Ready replaced onto a fresh read.
    await a.store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { conditions: withOwnConditions(fresh.status.conditions, [ready], ['Ready']) },
      { fieldManager: 'grid-operator' },
    );
    const after = (await a.store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    expect(after.status.conditions.map((c: Condition) => c.type).sort()).toEqual(['PeerTimeValid', 'Ready']);
    expect(after.status.conditions.find((c: Condition) => c.type === 'PeerTimeValid')).toEqual(valid);
  });

  it("a condition another writer adds between the poller's read and its patch is kept (conflict, read again)", async () => {
    let held: ReturnType<typeof gatedStore> | undefined;
    const a = await startSite('site-a', {
      wrapStore: (store) => (held = gatedStore(store, (kind) => kind.kind === 'GridNetwork')).store,
    });
    await held!.gate.reached;
    const rejected: Condition = {
      type: 'GatewayAgesRejected',
      status: 'True',
      reason: 'GatewayAgesRejected',
      message: 'x',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    await a.store.patchStatus(
      GRID_NETWORK,
      { name: 'grid' },
      { conditions: [rejected] },
      { fieldManager: 'grid-operator-gateway-ages' },
    );
    held!.gate.release();
    await waitFor(
      'PeerTimeValid True (no peers)',
      async () => ((await peerTime(a))?.status === 'True' ? true : undefined),
      30_000,
    );
    const after = (await a.store.get(GRID_NETWORK, { name: 'grid' })) as Json;
    expect(after.status.conditions.map((c: Condition) => c.type).sort()).toEqual([
      'GatewayAgesRejected',
      'PeerTimeValid',
    ]);
  });

  it('the endpoint refuses a client without a grid-CA certificate, and the poller refuses a server that is not the polled site', async () => {
    const b = await startSite('site-b');
    b.signals = [{ provider: 'llm', sample: sample(Date.now()) }];
    await waitFor('site-b serving with its material', () => (b.poller.servedAddress !== undefined ? true : undefined));
    const address = b.poller.servedAddress!;
    const a = certs.get('site-a')!;
    const good = { caPem: ca.certPem, certPem: a.certPem, keyPem: a.keyPem };
    await waitFor(
      'a good poll',
      async () => ((await pollPeer('site-b', address, good, 3_000)).ok ? true : undefined),
      30_000,
    );
    const other = await createCertificateAuthority({ commonName: 'other ca' });
    const stranger = await createClientCertificate(other, { commonName: 'site-a' });
    const refusedClient = await pollPeer(
      'site-b',
      address,
      { caPem: ca.certPem, certPem: stranger.certPem, keyPem: stranger.keyPem },
      3_000,
    );
    expect(refusedClient.ok).toBe(false);
    const impostor = await pollPeer('site-c', address, good, 3_000);
    expect(impostor).toEqual({ ok: false, error: 'certificate does not name site site-c' });
  });
});
