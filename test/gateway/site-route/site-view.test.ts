// The gateway's SiteView end to end over real parts: serving config files on disk (the contract's builder, a real
// directory watch), three operator signals endpoints (the operator's own PeerSignalsServer) on real mTLS with
// certificates generated here, and the gateway's poller presenting its client certificate. Covers the conclusion
// (running + waiting per endpoint, times ready endpoints, plus flow control), a missing signal read as neutral, a
// site answering for another refused, a foreign client refused, bounded staleness after a site stops answering,
// and last-known-good on a bad serving config.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PeerSignalRow, PeerSignalsDocument } from '../../../schemas/generated/peer-signals.ts';
import type { ServingConfigEntry, ServingSite } from '../../../schemas/generated/serving-config.ts';
import { buildServingDocument, serializeServing } from '../../../schemas/serving/serving-config.ts';
import { PeerSignalsServer } from '../../../daemons/gossip-operator/peer-signals/server.ts';
import { createServingMetrics } from '../../../daemons/gateway/site-route/serving-metrics.ts';
import { createSiteViewService, type SiteViewService } from '../../../daemons/gateway/site-route/site-view-service.ts';
import { SiteSignalsPoller } from '../../../daemons/gateway/site-route/site-signals-poller.ts';
import type { SiteSample } from '../../../daemons/gateway/site-route/site-view.ts';
import {
  createCertificateAuthority,
  createClientCertificate,
  createSiteCertificate,
  type CertificateAuthority,
  type LeafCertificate,
} from '../../../daemons/shared/tls.ts';
import { capturingLogger } from '../../gossip-operator/helpers.ts';
import { tempDir, waitFor, writeRaw } from '../helpers.ts';

const row = (provider: string, signals: PeerSignalRow['signals'], age = 200): PeerSignalRow => ({
  provider,
  age_ms: age,
  generation: 1,
  signals,
});
const doc = (site: string, rows: PeerSignalRow[], network = 'grid'): PeerSignalsDocument => ({
  schema_version: '1.0',
  site,
  network,
  rows,
});

function entry(
  site: string,
  provider: string,
  models: string[],
  extra: Partial<ServingConfigEntry> = {},
): ServingConfigEntry {
  return { site, provider, models, cluster: `${provider}-cluster`, admission: 'all', ready: true, ...extra };
}

describe('SiteView: serving config and site signals over mTLS', () => {
  let ca: CertificateAuthority;
  let otherCa: CertificateAuthority;
  const siteCerts = new Map<string, LeafCertificate>();
  let gatewayCert: LeafCertificate;
  let foreignCert: LeafCertificate;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    ca = await createCertificateAuthority({ commonName: 'grid ca' });
    otherCa = await createCertificateAuthority({ commonName: 'not the grid ca' });
    for (const site of ['west', 'east', 'north'])
      siteCerts.set(site, await createSiteCertificate(ca, { commonName: site, organization: 'grid' }));
    gatewayCert = await createClientCertificate(ca, { commonName: 'west-consumer', organization: 'grid-west' });
    foreignCert = await createClientCertificate(otherCa, { commonName: 'west-consumer', organization: 'grid-west' });
  }, 60_000);

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** An operator signals endpoint presenting `cert` (default: the site's own), serving whatever `answer` holds. */
  async function operatorEndpoint(site: string, cert = siteCerts.get(site)!) {
    const state: { answer: PeerSignalsDocument | undefined } = { answer: undefined };
    const server = await PeerSignalsServer.start({ address: '127.0.0.1:0', document: () => state.answer });
    server.useMaterial({ caPem: ca.certPem, certPem: cert.certPem, keyPem: cert.keyPem });
    cleanups.push(() => server.close());
    return { state, address: server.boundAddress, server };
  }

  async function gatewayFiles(client: LeafCertificate = gatewayCert) {
    const { dir, cleanup } = await tempDir('site-view');
    cleanups.push(cleanup);
    const tlsDir = join(dir, 'tls');
    await mkdir(join(dir, 'serving'), { recursive: true });
    await mkdir(tlsDir, { recursive: true });
    await writeFile(join(tlsDir, 'ca.crt'), ca.certPem);
    await writeFile(join(tlsDir, 'tls.crt'), client.certPem);
    await writeFile(join(tlsDir, 'tls.key'), client.keyPem);
    return { file: join(dir, 'serving', 'serving-config.json'), tlsDir };
  }

  async function writeServing(
    file: string,
    sites: ServingSite[],
    entries: ServingConfigEntry[],
    localSite = 'west',
  ): Promise<string> {
    const document = buildServingDocument(
      { gateway: 'edge', namespace: 'grid-system' },
      { network: 'grid', local_site: localSite, sites, entries },
      '2026-12-01T00:00:00Z',
    );
    await writeRaw(file, serializeServing(document));
    return document.revision.value;
  }

  async function startView(
    file: string,
    tlsDir: string,
    options: { pollIntervalMs?: number; staleAfterMs?: number } = {},
  ) {
    const log = capturingLogger();
    const registry = new Registry();
    const service: SiteViewService = createSiteViewService(
      {
        file,
        tls: { caFile: join(tlsDir, 'ca.crt'), certFile: join(tlsDir, 'tls.crt'), keyFile: join(tlsDir, 'tls.key') },
        pollIntervalMs: options.pollIntervalMs ?? 100,
        ...(options.staleAfterMs !== undefined ? { staleAfterMs: options.staleAfterMs } : {}),
        filePollIntervalMs: 100,
      },
      { logger: log.logger, registry },
    );
    await service.start();
    cleanups.push(() => service.close());
    return { service, view: service.view, log, registry };
  }

  it('concludes each site from its own endpoint: in-flight, waiting and ready endpoints; a missing series stays undefined', async () => {
    const west = await operatorEndpoint('west');
    const east = await operatorEndpoint('east');
    const north = await operatorEndpoint('north');
    west.state.answer = doc('west', [
      row('llm-a', {
        healthy: true,
        running_per_endpoint: 3,
        waiting_per_endpoint: 1,
        ready_endpoints: 2,
        flow_control_held: 4,
      }),
      // Not in this gateway's serving config: says nothing about room for its requests.
      row('llm-other', { healthy: true, running_per_endpoint: 50, waiting_per_endpoint: 50, ready_endpoints: 9 }),
    ]);
    east.state.answer = doc('east', [
      row('llm-b', { healthy: true, running_per_endpoint: 0, waiting_per_endpoint: 0, ready_endpoints: 0 }),
    ]);
    // A site whose EPP publishes no pool series (vLLM's own /metrics): every signal missing, none zero.
    north.state.answer = doc('north', [row('llm-c', { healthy: true, queue_depth: 0.2 })]);
    const { file, tlsDir } = await gatewayFiles();
    const revision = await writeServing(
      file,
      [
        { site: 'east', signals_address: east.address },
        { site: 'north', signals_address: north.address },
        { site: 'quiet' },
        { site: 'west', signals_address: west.address },
      ],
      [
        entry('east', 'llm-b', ['m1']),
        entry('north', 'llm-c', ['m1', 'm2']),
        entry('quiet', 'llm-q', ['m1']),
        entry('west', 'llm-a', ['m1']),
        entry('west', 'llm-down', ['m1'], { admission: 'none', ready: false, excluded: 'unhealthy' }),
      ],
    );
    const { view, registry } = await startView(file, tlsDir);
    const seen: SiteSample[] = [];
    view.onSample((s) => seen.push(s));

    expect(view.revision()).toBe(revision);
    expect(view.models()).toEqual(['m1', 'm2']);
    const m1 = view.entries('m1');
    // Local entries first, the excluded one kept (known, never chosen).
    expect(m1.map((e) => [e.site, e.provider, e.local])).toEqual([
      ['west', 'llm-a', true],
      ['west', 'llm-down', true],
      ['east', 'llm-b', false],
      ['north', 'llm-c', false],
      ['quiet', 'llm-q', false],
    ]);
    expect(m1[1]).toMatchObject({
      admission: 'none',
      ready: false,
      excluded: 'unhealthy',
      cluster: 'llm-down-cluster',
    });
    expect(view.entries('unknown-model')).toEqual([]);

    const westSample = await waitFor('a west sample', () => view.sample('west'));
    // (3 running + 1 waiting) x 2 ready + 4 held; llm-other is not counted.
    expect(westSample).toMatchObject({ site: 'west', inFlight: 12, waiting: 6, readyEndpoints: 2 });
    const eastSample = await waitFor('an east sample', () => view.sample('east'));
    expect(eastSample).toMatchObject({ inFlight: 0, waiting: 0, readyEndpoints: 0 });
    const northSample = await waitFor('a north sample', () => view.sample('north'));
    expect(northSample.inFlight).toBeUndefined();
    expect(northSample.waiting).toBeUndefined();
    expect(northSample.readyEndpoints).toBeUndefined();
    // No signals endpoint advertised: never sampled.
    expect(view.sample('quiet')).toBeUndefined();
    expect(seen.some((s) => s.site === 'west' && s.inFlight === 12)).toBe(true);
    const text = await registry.metrics();
    expect(text).toMatch(/grid_site_signals_polls_total\{site="quiet",outcome="no_address"\} [1-9]/);
    expect(text).toMatch(/grid_site_signals_polls_total\{site="west",outcome="answered"\} [1-9]/);
    expect(text).toContain(`grid_serving_config_accepted_revision{revision="${revision}"} 1`);
  }, 30_000);

  it("refuses a site answering with another site's certificate or document, and a gateway certificate of another CA", async () => {
    // East's address, but the endpoint presents west's certificate: not east.
    const impostor = await operatorEndpoint('east', siteCerts.get('west')!);
    impostor.state.answer = doc('east', [row('llm-b', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })]);
    // North's own certificate, but its document speaks for west.
    const confused = await operatorEndpoint('north');
    confused.state.answer = doc('west', [row('llm-c', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })]);
    // West: a document for another network.
    const otherNetwork = await operatorEndpoint('west');
    otherNetwork.state.answer = doc(
      'west',
      [row('llm-a', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })],
      'other-grid',
    );
    const { file, tlsDir } = await gatewayFiles();
    await writeServing(
      file,
      [
        { site: 'east', signals_address: impostor.address },
        { site: 'north', signals_address: confused.address },
        { site: 'west', signals_address: otherNetwork.address },
      ],
      [entry('east', 'llm-b', ['m1']), entry('north', 'llm-c', ['m1']), entry('west', 'llm-a', ['m1'])],
    );
    const { view, registry } = await startView(file, tlsDir);
    await waitFor('three refused polls per site', async () => {
      const text = await registry.metrics();
      return /site="east",outcome="failed"\} [3-9]/.test(text) &&
        /site="north",outcome="invalid"\} [3-9]/.test(text) &&
        /site="west",outcome="invalid"\} [3-9]/.test(text)
        ? true
        : undefined;
    });
    for (const site of ['east', 'north', 'west']) expect(view.sample(site)).toBeUndefined();

    // A gateway whose client certificate another CA issued: the operator's endpoint refuses the handshake.
    const honest = await operatorEndpoint('east');
    honest.state.answer = doc('east', [row('llm-b', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })]);
    const foreign = await gatewayFiles(foreignCert);
    await writeServing(
      foreign.file,
      [{ site: 'east', signals_address: honest.address }, { site: 'west' }],
      [entry('east', 'llm-b', ['m1'])],
    );
    const stranger = await startView(foreign.file, foreign.tlsDir);
    await waitFor('refused polls', async () =>
      /site="east",outcome="failed"\} [2-9]/.test(await stranger.registry.metrics()) ? true : undefined,
    );
    expect(stranger.view.sample('east')).toBeUndefined();
    // The same endpoint answers a gateway of the grid CA.
    const { file: okFile, tlsDir: okTls } = await gatewayFiles();
    await writeServing(
      okFile,
      [{ site: 'east', signals_address: honest.address }, { site: 'west' }],
      [entry('east', 'llm-b', ['m1'])],
    );
    const trusted = await startView(okFile, okTls);
    expect(await waitFor('an east sample', () => trusted.view.sample('east'))).toMatchObject({
      inFlight: 1,
      readyEndpoints: 1,
    });
  }, 30_000);

  it('keeps a sample while a site stops answering only for the staleness bound, then reads it as missing; recovers on the next answer', async () => {
    const east = await operatorEndpoint('east');
    east.state.answer = doc('east', [
      row('llm-b', { healthy: true, running_per_endpoint: 2, waiting_per_endpoint: 0, ready_endpoints: 1 }),
    ]);
    const { file, tlsDir } = await gatewayFiles();
    await writeServing(
      file,
      [{ site: 'east', signals_address: east.address }, { site: 'west' }],
      [entry('east', 'llm-b', ['m1'])],
    );
    const { view, log } = await startView(file, tlsDir, { pollIntervalMs: 100, staleAfterMs: 800 });
    const first = await waitFor('an east sample', () => view.sample('east'));
    expect(first.inFlight).toBe(2);

    // The endpoint answers 503 (nothing to serve) from now on: the last sample stays, then goes.
    east.state.answer = undefined;
    await waitFor('a failed poll logged', () =>
      log.lines.some((l) => l.includes('no usable answer from east')) ? true : undefined,
    );
    const last = view.sample('east');
    expect(last?.inFlight).toBe(2);
    await waitFor('the east sample expires', () => (view.sample('east') === undefined ? true : undefined), 5_000);
    // Not before the bound, counted from the last answer.
    expect(Date.now() - last!.atMs).toBeGreaterThanOrEqual(800);

    east.state.answer = doc('east', [
      row('llm-b', { healthy: true, running_per_endpoint: 5, waiting_per_endpoint: 1, ready_endpoints: 1 }),
    ]);
    expect(await waitFor('east answers again', () => view.sample('east'))).toMatchObject({ inFlight: 6, waiting: 1 });
  }, 30_000);

  it('a bad serving config never replaces a good one; a missing file at start leaves the view empty until a valid one arrives', async () => {
    const { file, tlsDir } = await gatewayFiles();
    const { view, service, registry, log } = await startView(file, tlsDir);
    expect(view.revision()).toBeUndefined();
    expect(view.models()).toEqual([]);

    const good = await writeServing(file, [{ site: 'west' }], [entry('west', 'llm-a', ['m1'])]);
    await waitFor('the serving config accepted', () => (view.revision() === good ? true : undefined));
    expect(view.entries('m1')).toHaveLength(1);

    // Tampered: an entry edited after the revision was computed.
    const tampered = JSON.parse(
      serializeServing(
        buildServingDocument(
          { gateway: 'edge', namespace: 'grid-system' },
          { network: 'grid', local_site: 'west', sites: [{ site: 'west' }], entries: [entry('west', 'llm-a', ['m1'])] },
          '2026-12-01T00:00:00Z',
        ),
      ),
    );
    tampered.serving.entries[0].models = ['m1', 'injected'];
    // The directory watch (or the safety re-read) picks each one up; the counter says it was refused, and why.
    const refused = (reason: string) => async () =>
      new RegExp(`grid_serving_config_reload_total\\{result="rejected",reason="${reason}"\\} [1-9]`).test(
        await registry.metrics(),
      )
        ? true
        : undefined;
    await writeRaw(file, JSON.stringify(tampered));
    await waitFor('the tampered config refused', refused('digest_mismatch'));
    expect(view.revision()).toBe(good);
    await writeRaw(file, '{"schema_version": "1.0", "serving": ');
    await waitFor('the broken config refused', refused('malformed'));
    expect(view.revision()).toBe(good);
    expect(view.models()).toEqual(['m1']);
    // A reload of the same bad bytes changes nothing either.
    expect(await service.store.reload('test')).toMatchObject({ outcome: 'unchanged', reason: 'same_bytes' });
    const warning = log.lines.find((l) => l.includes('keeping the last-known-good'));
    expect(warning).toContain(file);
    expect(warning).toContain('digest_mismatch');

    const next = await writeServing(file, [{ site: 'west' }], [entry('west', 'llm-a', ['m1', 'm3'])]);
    await waitFor('the next serving config accepted', () => (view.revision() === next ? true : undefined));
    expect(view.models()).toEqual(['m1', 'm3']);
  }, 30_000);

  it('a site that leaves the serving config loses its sample at once', async () => {
    const metrics = createServingMetrics(new Registry());
    let now = 1_000;
    const poller = new SiteSignalsPoller({
      tls: { caFile: '/nonexistent', certFile: '/nonexistent', keyFile: '/nonexistent' },
      logger: capturingLogger().logger,
      metrics,
      now: () => now,
      poll: async (site) => ({
        ok: true,
        body: doc(site, [row('p', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })]),
      }),
    });
    poller.setSites('grid', [{ site: 'east', address: '127.0.0.1:1', providers: new Set(['p']) }]);
    // No client certificate files: no poll, every signal missing.
    await poller.round();
    expect(poller.sample('east')).toBeUndefined();
    const { tlsDir } = await gatewayFiles();
    const withTls = new SiteSignalsPoller({
      tls: { caFile: join(tlsDir, 'ca.crt'), certFile: join(tlsDir, 'tls.crt'), keyFile: join(tlsDir, 'tls.key') },
      logger: capturingLogger().logger,
      metrics,
      now: () => now,
      staleAfterMs: 500,
      poll: async (site) => ({
        ok: true,
        body: doc(site, [row('p', { healthy: true, running_per_endpoint: 1, ready_endpoints: 1 })]),
      }),
    });
    withTls.setSites('grid', [{ site: 'east', address: '127.0.0.1:1', providers: new Set(['p']) }]);
    await withTls.round();
    expect(withTls.sample('east')).toMatchObject({ atMs: 1_000, inFlight: 1 });
    now = 1_500;
    expect(withTls.sample('east')).toBeDefined();
    now = 1_501;
    expect(withTls.sample('east')).toBeUndefined();
    now = 1_000;
    withTls.setSites('grid', [{ site: 'west', providers: new Set() }]);
    expect(withTls.sample('east')).toBeUndefined();
  });
});
