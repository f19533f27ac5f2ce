// Two whole operators under signalTransport poll: each advertises its signals endpoint in its gossiped site
// record, polls the other over mTLS, hands the polled rows to routing and writes PeerTimeValid True, which the
// GridNetwork controller's own status writes (Ready, every second here) leave in place.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, createSiteCertificate } from '../../../daemons/shared/tls.ts';
import {
  grid,
  renderFixture,
  startBackend,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type Backend,
  type LocalOperator,
} from '../helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

describe('two operators under poll signal transport', () => {
  const swimKey = randomBytes(32);
  const sites: {
    name: string;
    backend: Backend;
    dirs: { path: string; remove: () => Promise<void> };
    op: LocalOperator;
  }[] = [];

  beforeAll(async () => {
    const ca = await createCertificateAuthority({ commonName: 'grid ca' });
    let seeds = '';
    for (const name of ['site-b', 'site-a']) {
      const cert = await createSiteCertificate(ca, { commonName: name, organization: 'grid' });
      const backend = await startBackend();
      backend.queueDepth = name === 'site-b' ? 0.4 : 0.1;
      const dirs = await tempDir(`poll-${name}`);
      await renderFixture(
        'peer-signals/site.yaml',
        {
          SITE: name,
          SEEDS: seeds,
          BACKEND: backend.url,
          CA_CRT: b64(ca.certPem),
          SITE_CRT: b64(cert.certPem),
          SITE_KEY: b64(cert.keyPem),
          SWIM_KEY: b64(swimKey),
        },
        join(dirs.path, 'manifests'),
      );
      const stateDir = join(dirs.path, 'state');
      const op = await startLocalOperator(
        testConfig({
          site: name,
          store: { backend: 'local', stateDir },
          signalsAddress: '127.0.0.1:0',
          peerPollIntervalMs: 200,
        }),
        { stateDir, manifestsDir: join(dirs.path, 'manifests') },
      );
      sites.push({ name, backend, dirs, op });
      const address = await waitFor(`${name} SWIM member`, () => op.operator.context.gossip?.address);
      seeds = `"${address}"`;
    }
  });

  afterAll(async () => {
    for (const s of sites) {
      await s.op.stop();
      await s.backend.close();
      await s.dirs.remove();
    }
  });

  it('polls the peer, uses its rows and keeps PeerTimeValid True beside Ready', { timeout: 180_000 }, async () => {
    const [b, a] = sites as [(typeof sites)[number], (typeof sites)[number]];
    const stateDir = (s: typeof a) => join(s.dirs.path, 'state');
    // site-b's row for its provider, polled by site-a over mTLS, with the queue depth site-b scraped.
    await waitFor(
      "site-b's polled row at site-a",
      () => {
        const entry = a.op.operator.context.peerSignals.entry('site-b', 'llm-site-b');
        return entry?.kind === 'sample' && entry.sample.queueDepth === 0.4 ? entry : undefined;
      },
      60_000,
    );
    expect(a.op.operator.context.gossip!.store.sites().get('site-b')?.signals_address).toMatch(/^127\.0\.0\.1:\d+$/);
    for (const s of [a, b]) {
      const network: Json = await waitFor(
        `${s.name}: PeerTimeValid True and Ready`,
        async () => {
          const n: Json = await grid(stateDir(s), 'GridNetwork', 'grid');
          const types = (n?.status?.conditions ?? []).map((c: Json) => `${c.type}=${c.status}`);
          return types.includes('PeerTimeValid=True') && types.some((t: string) => t.startsWith('Ready='))
            ? n
            : undefined;
        },
        60_000,
      );
      expect(network.metadata.managedFields.map((m: Json) => m.manager)).toEqual(
        expect.arrayContaining(['grid-operator', 'grid-operator-peer-signals']),
      );
    }
    // Several GridNetwork reconciles later (metricsRefreshInterval 1s) the condition is still there, unchanged.
    const before: Json = (await grid(stateDir(a), 'GridNetwork', 'grid')).status.conditions.find(
      (c: Json) => c.type === 'PeerTimeValid',
    );
    const reconciles = async () =>
      (await a.op.operator.metrics.reconciles.get()).values
        .filter((v) => v.labels.controller === 'gridnetwork')
        .reduce((n, v) => n + v.value, 0);
    const seen = await reconciles();
    await waitFor(
      'three more GridNetwork reconciles at site-a',
      async () => ((await reconciles()) >= seen + 3 ? true : undefined),
      60_000,
    );
    const after: Json = (await grid(stateDir(a), 'GridNetwork', 'grid')).status.conditions.find(
      (c: Json) => c.type === 'PeerTimeValid',
    );
    expect(after).toEqual(before);
    expect(await a.op.operator.metrics.registry.metrics()).toMatch(
      /grid_peer_signal_polls_total\{peer="site-b",outcome="answered"\} [1-9]/,
    );
  });
});
