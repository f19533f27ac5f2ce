// Two operators (two sites, two local stores: two clusters) gossip over real UDP with AES-256-GCM from the
// swim-key Secret. Each renders the other's providers only once the peer's GridSite is Active, which needs the
// peer gateway's mTLS probe (grid CA chain, serverName, canonical fingerprint pin) to pass against a real TLS
// server with certificates from daemons/shared/tls.ts.
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCertificateAuthority,
  createClientCertificate,
  createServerCertificate,
  type CertificateAuthority,
  type LeafCertificate,
} from '../../daemons/shared/tls.ts';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { GRID_SITE } from '../../daemons/gossip-operator/kinds.ts';
import type { OperatorConfig } from '../../daemons/gossip-operator/config.ts';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway as startConsumerGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import { startSim } from '../../daemons/sim/server.ts';
import { call, candidate, consumerConfig, payload, writeOverlay } from '../gateway/helpers.ts';
import { legacyPemFingerprint } from '../../daemons/gossip-operator/probes/site-probe.ts';
import {
  capturingLogger,
  configMap,
  freePort,
  grid,
  renderFixture,
  schemaProblems,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type LocalOperator,
} from './helpers.ts';
import { testTokenFile } from '../ingest-token.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

interface Site {
  readonly name: string;
  readonly region: string;
  readonly cert: LeafCertificate;
  readonly gatewayCert: LeafCertificate;
  gateway?: TlsServer;
  gatewayAddress?: string;
  dirs?: { path: string; remove: () => Promise<void> };
  op?: LocalOperator;
  /** The operator's gateway ingest port (spend reports, budgets), kept across a restart. */
  ingestPort?: number;
}

async function startGateway(
  ca: CertificateAuthority,
  cert: LeafCertificate,
): Promise<{ server: TlsServer; address: string }> {
  const server = createTlsServer(
    { cert: cert.certPem, key: cert.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
    (socket) => socket.end(),
  );
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function overlayOf(cm: Json): Json {
  return JSON.parse(cm.data['routing-overlay.json']);
}

describe('two sites over encrypted gossip and mTLS-verified GridSites', () => {
  const swimKey = randomBytes(32);
  let ca: CertificateAuthority;
  let a: Site;
  let b: Site;
  let c: { dirs: { path: string; remove: () => Promise<void> }; op: LocalOperator } | undefined;

  const stateDir = (s: Site) => join(s.dirs!.path, 'state');

  async function startSite(site: Site, peer: Site, seeds: string): Promise<void> {
    site.dirs = await tempDir(`operator-${site.name}`);
    await renderFixture(
      'two-sites/site.yaml',
      {
        SITE: site.name,
        REGION: site.region,
        PEER: peer.name,
        PEER_REGION: peer.region,
        PEER_GATEWAY: peer.gatewayAddress!,
        PEER_PIN: peer.gatewayCert.fingerprint,
        SEEDS: seeds,
        CA_CRT: b64(ca.certPem),
        SITE_CRT: b64(site.cert.certPem),
        SITE_KEY: b64(site.cert.keyPem),
        SWIM_KEY: b64(swimKey),
        AUTO_DISCOVER: site === a ? 'true' : 'false',
      },
      join(site.dirs.path, 'manifests'),
    );
    site.ingestPort ??= await freePort();
    site.op = await startLocalOperator(siteConfig(site), {
      stateDir: stateDir(site),
      manifestsDir: join(site.dirs.path, 'manifests'),
    });
  }

  // Seeds come from the rendered manifests (GridNetwork spec.seeds), so a restart rejoins the same peer.
  function siteConfig(site: Site): OperatorConfig {
    return testConfig({
      site: site.name,
      store: { backend: 'local', stateDir: stateDir(site) },
      gatewayAddress: site.gatewayAddress!,
      gatewayAgeAddress: `127.0.0.1:${site.ingestPort!}`,
      ingestTokenFile: testTokenFile(),
    });
  }

  beforeAll(async () => {
    ca = await createCertificateAuthority({ commonName: 'grid ca' });
    const site = async (name: string, region: string): Promise<Site> => ({
      name,
      region,
      cert: await createClientCertificate(ca, { commonName: name, organization: 'grid' }),
      gatewayCert: await createServerCertificate(ca, {
        commonName: `${name}-gateway`,
        sans: [`${name}.gateway.grid.internal`, '127.0.0.1'],
      }),
    });
    a = await site('site-a', 'eu-west');
    b = await site('site-b', 'us-east');
    for (const s of [a, b]) {
      const gw = await startGateway(ca, s.gatewayCert);
      s.gateway = gw.server;
      s.gatewayAddress = gw.address;
    }
    await startSite(b, a, '');
    const bGossip = await waitFor('site-b SWIM member', () => b.op!.operator.context.gossip?.address);
    await startSite(a, b, `"${bGossip}"`);
  });

  afterAll(async () => {
    await c?.op.stop();
    await c?.dirs.remove();
    for (const s of [a, b]) {
      await s?.op?.stop();
      await new Promise<void>((resolve) => (s?.gateway ? s.gateway.close(() => resolve()) : resolve()));
      await s?.dirs?.remove();
    }
  });

  it('forms an encrypted two-member mesh', async () => {
    await waitFor(
      'site-a to see site-b alive',
      () => a.op!.operator.context.gossip?.membership.member('site-b')?.state === 'alive' || undefined,
    );
    await waitFor(
      'site-b to see site-a alive',
      () => b.op!.operator.context.gossip?.membership.member('site-a')?.state === 'alive' || undefined,
    );
    expect(a.op!.operator.context.gossip!.keyring).toBeDefined();
    expect(a.op!.operator.context.gossip!.membership.drops.count('plaintext_rejected')).toBe(0);
  });

  it('drops and counts packets it cannot decrypt', async () => {
    const gossip = a.op!.operator.context.gossip!;
    const [host, port] = gossip.address.split(':') as [string, string];
    const before = gossip.membership.drops.count('decrypt_failed') + gossip.membership.drops.count('bad_frame');
    const socket = createSocket('udp4');
    const forged = Buffer.concat([Buffer.from('GRID'), Buffer.from([1]), randomBytes(12), randomBytes(64)]);
    await new Promise<void>((resolve) => socket.send(forged, Number(port), host, () => resolve()));
    socket.close();
    await waitFor(
      'the forged packet to be counted',
      () =>
        gossip.membership.drops.count('decrypt_failed') + gossip.membership.drops.count('bad_frame') > before ||
        undefined,
    );
    const text = await a.op!.operator.metrics.registry.metrics();
    expect(text).toMatch(/grid_gossip_dropped_total\{component="swim",reason="(decrypt_failed|bad_frame)"\} [1-9]/);
    expect(a.op!.operator.context.gossip!.membership.member('site-b')?.state).toBe('alive');
  });

  it('marks each peer GridSite Active after the mTLS probe with the fingerprint pin', async () => {
    for (const [site, peer] of [
      [a, b],
      [b, a],
    ] as const) {
      const gs: Json = await waitFor(`${site.name}'s GridSite grid-${peer.name} Active`, async () => {
        const o: Json = await grid(stateDir(site), 'GridSite', `grid-${peer.name}`);
        return o?.status?.phase === 'Active' && o.status.publicCertPem !== undefined ? o : undefined;
      });
      expect(gs.status.reason).toBe('TlsVerified');
      expect(gs.status.conditions.find((c: Json) => c.type === 'CertificatePinned').status).toBe('True');
      // The peer's public certificate came over gossip; never a private key.
      expect(gs.status.publicCertPem).toContain('BEGIN CERTIFICATE');
      expect(gs.status.publicCertPem).not.toContain('PRIVATE KEY');
    }
  });

  it('accepts the deprecated trust.certFingerprint pin and keeps a site whose legacy pin mismatches out of Active', async () => {
    const legacy = legacyPemFingerprint(new X509Certificate(b.gatewayCert.certPem).raw);
    const site = (name: string, certFingerprint: string) => ({
      apiVersion: GRID_SITE.apiVersion,
      kind: GRID_SITE.kind,
      metadata: { name },
      spec: {
        gridNetworkRef: 'grid',
        gatewayEndpoint: {
          address: b.gatewayAddress!,
          tls: { mode: 'Mutual', serverName: 'site-b.gateway.grid.internal' },
        },
        trust: { certFingerprint },
      },
    });
    const store = a.op!.operator.context.store;
    await store.apply(GRID_SITE, site('legacy-pin', legacy), { fieldManager: 'test' });
    await store.apply(GRID_SITE, site('legacy-pin-wrong', `ff:${legacy.slice(3)}`), { fieldManager: 'test' });
    try {
      const ok: Json = await waitFor('the legacy-pinned GridSite Active', async () => {
        const o: Json = await grid(stateDir(a), 'GridSite', 'legacy-pin');
        return o?.status?.phase === 'Active' ? o : undefined;
      });
      expect(ok.status.reason).toBe('TlsVerified');
      const wrong: Json = await waitFor('the mismatching legacy pin reported', async () => {
        const o: Json = await grid(stateDir(a), 'GridSite', 'legacy-pin-wrong');
        return o?.status?.reason === 'FingerprintMismatch' ? o : undefined;
      });
      expect(wrong.status.phase).toBe('Connecting');
      expect(wrong.status.message).toContain('trust.certFingerprint');
      expect(wrong.status.conditions.find((c: Json) => c.type === 'CertificatePinned').status).toBe('False');
    } finally {
      await store.delete(GRID_SITE, { name: 'legacy-pin' });
      await store.delete(GRID_SITE, { name: 'legacy-pin-wrong' });
    }
  });

  it("renders the other site's providers into each gateway overlay", async () => {
    for (const [site, peer] of [
      [a, b],
      [b, a],
    ] as const) {
      const overlay: Json = await waitFor(`${site.name}'s overlay with ${peer.name}'s provider`, async () => {
        const cm: Json = await configMap(stateDir(site), 'grid-system', 'grid-overlay-grid-edge');
        if (cm === undefined) return undefined;
        const o = overlayOf(cm);
        return o.overlay.candidates.some((c: Json) => c.site === peer.name) ? o : undefined;
      });
      const remote = overlay.overlay.candidates.find((c: Json) => c.name === `model-${peer.name}`);
      expect(remote).toMatchObject({
        site: peer.name,
        cluster: `llm-${peer.name}`,
        fresh: true,
        selection_tier: 'cross_region',
      });
      expect(remote.credential).toBeUndefined();
      // The shared model: own site first (same_site before cross_region under geographyFirst).
      const shared = overlay.overlay.candidates.filter((c: Json) => c.name === 'shared-model');
      expect(shared.map((c: Json) => c.site)).toEqual([site.name, peer.name]);
      const network: Json = await waitFor(`${site.name}'s GridNetwork status to count the peer`, async () => {
        const n: Json = await grid(stateDir(site), 'GridNetwork', 'grid');
        return n?.status?.connectedSites === 1 && n.status.remoteProviderCount === 1 && n.status.phase === 'Active'
          ? n
          : undefined;
      });
      expect(network.status.routingMapStatus[0].phase).toBe('Distributed');
      expect(await schemaProblems(stateDir(site))).toEqual([]);
    }
  });

  it("two tenants through both sites' consumers: every budgetStatus converges to the priced usage, through an operator restart, and the cap is enforced at both", async () => {
    const sim = await startSim({ name: 'sim', models: ['m1'], token: 'sim-token' });
    sim.state.completion_tokens = 10;
    const dirs = await tempDir('tenant-gateways');
    const keyA = mintCallerKey('tenant-a');
    const keyB = mintCallerKey('tenant-b');
    writeFileSync(join(dirs.path, 'keys.json'), JSON.stringify({ keys: [keyA.entry, keyB.entry] }));
    const overlayPath = join(dirs.path, 'overlay.json');
    await writeOverlay(
      overlayPath,
      payload([
        {
          ...candidate('m1', 'west', 'sim'),
          credential: { strategy: 'bearer_token', secretRef: { name: 't', namespace: 'n', key: 'k' } },
        },
      ]),
    );
    const price = { per_million_input_tokens: 20_000, per_million_output_tokens: 40_000 };
    const consumers: GatewayInstance[] = [];
    try {
      for (const site of [a, b]) {
        const config = consumerConfig({
          overlayPath,
          credentials: [{ name: 't', namespace: 'n', key: 'k', value: 'sim-token' }],
          clusters: [{ name: 'sim', endpoints: [`127.0.0.1:${sim.port}`] }],
        });
        const chain = (config['filter_chains'] as { filters: unknown[] }[])[0]!;
        chain.filters.unshift({ filter: 'caller_auth', keys_file: 'keys.json' }, { filter: 'budget_enforce' });
        chain.filters.splice(3, 0, {
          filter: 'usage_meter',
          prices: [{ cluster: 'sim', ...price }],
          report: { url: `http://127.0.0.1:${site.ingestPort!}`, interval_ms: 100, token_file: testTokenFile() },
        });
        const gateway = await startConsumerGateway(resolveConfig(config, `${site.name}.json`), {
          configDir: dirs.path,
          logger: capturingLogger().logger,
          processMetrics: false,
          overlayPollIntervalMs: 0,
        });
        consumers.push(gateway);
        await waitFor(`${site.name} consumer overlay`, () => gateway.overlay?.current() ?? undefined);
      }
      const expected: Record<string, number> = {};
      const send = async (gateway: GatewayInstance, key: string, tenant: string, stream: boolean): Promise<number> => {
        const reply = await call(`http://127.0.0.1:${gateway.listeners[0]!.port}/v1/chat/completions`, {
          headers: { authorization: `Bearer ${key}` },
          body: {
            model: 'm1',
            messages: [],
            ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
          },
        });
        if (reply.status !== 200) return reply.status;
        const usage = stream
          ? JSON.parse(
              reply.text
                .split('\n\n')
                .find((e) => e.includes('"usage"'))!
                .slice(6),
            ).usage
          : reply.json().usage;
        expected[tenant] =
          (expected[tenant] ?? 0) +
          (usage.prompt_tokens * price.per_million_input_tokens +
            usage.completion_tokens * price.per_million_output_tokens) /
            1e6;
        return 200;
      };
      const converged = async (what: string): Promise<void> => {
        for (const site of [a, b]) {
          await waitFor(`${site.name}'s budgetStatus ${what}`, async () => {
            const n: Json = await grid(stateDir(site), 'GridNetwork', 'grid');
            const spend = Object.fromEntries(
              (n?.status?.budgetStatus ?? []).map((t: Json) => [t.tenantId, Math.round(t.spendUsd * 100)]),
            );
            return Object.entries(expected).every(([tenant, usd]) => spend[tenant] === Math.round(usd * 100))
              ? true
              : undefined;
          });
        }
      };
      expect(await send(consumers[0]!, keyA.key, 'tenant-a', false)).toBe(200);
      expect(await send(consumers[1]!, keyB.key, 'tenant-b', true)).toBe(200);
      expect(await send(consumers[0]!, keyB.key, 'tenant-b', false)).toBe(200);
      await converged('after the first traffic');

      // Site a's operator restarts mid-run; traffic goes on at both sites meanwhile.
      await a.op!.stop();
      expect(await send(consumers[0]!, keyB.key, 'tenant-b', true)).toBe(200);
      expect(await send(consumers[1]!, keyB.key, 'tenant-b', false)).toBe(200);
      a.op = await startLocalOperator(siteConfig(a), {
        stateDir: stateDir(a),
        manifestsDir: join(a.dirs!.path, 'manifests'),
      });
      await converged('after the operator restart');
      for (const site of [a, b]) {
        const n: Json = await grid(stateDir(site), 'GridNetwork', 'grid');
        const tenantB = n.status.budgetStatus.find((t: Json) => t.tenantId === 'tenant-b');
        expect(tenantB.spendUsd).toBeCloseTo(expected['tenant-b']!, 9);
      }

      // tenant-a (cap 1 USD) goes over at site b; both consumers refuse it once budgets converge; tenant-b goes on.
      expect(await send(consumers[1]!, keyA.key, 'tenant-a', false)).toBe(200);
      expect(expected['tenant-a']!).toBeGreaterThanOrEqual(1);
      for (const gateway of consumers) {
        await waitFor('tenant-a refused', async () =>
          (await send(gateway, keyA.key, 'tenant-a', false)) === 429 ? true : undefined,
        );
        expect(await send(gateway, keyB.key, 'tenant-b', false)).toBe(200);
      }
    } finally {
      for (const gateway of consumers) await gateway.close();
      await sim.close();
      await dirs.remove();
    }
  });

  it('auto-discovers a third member but never routes to it without a verified, pinned gateway', async () => {
    const dirs = await tempDir('operator-site-c');
    const cert = await createClientCertificate(ca, { commonName: 'site-c' });
    await renderFixture(
      'two-sites/site-c.yaml',
      {
        SEEDS: `"${b.op!.operator.context.gossip!.address}"`,
        CA_CRT: b64(ca.certPem),
        SITE_CRT: b64(cert.certPem),
        SITE_KEY: b64(cert.keyPem),
        SWIM_KEY: b64(swimKey),
      },
      join(dirs.path, 'manifests'),
    );
    const state = join(dirs.path, 'state');
    const op = await startLocalOperator(
      testConfig({ site: 'site-c', store: { backend: 'local', stateDir: state }, gatewayAddress: '127.0.0.1:9' }),
      { stateDir: state, manifestsDir: join(dirs.path, 'manifests') },
    );
    c = { dirs, op };
    // site-a labels its GridNetwork auto-discover-sites: a stub appears with the gossiped gateway address.
    // Until site-c's site record arrives the stub has no address (Discovered, GatewayAddressMissing).
    const stub: Json = await waitFor("site-a's stub GridSite for site-c with its gateway address", async () => {
      const gs: Json = await grid(stateDir(a), 'GridSite', 'grid-site-c');
      return gs?.spec.gatewayEndpoint.address !== '' && gs?.status?.phase === 'Connecting' ? gs : undefined;
    });
    expect(stub.metadata.labels).toMatchObject({
      'grid.praxis.fast/auto-discovered': 'true',
      'grid.praxis.fast/network': 'grid',
    });
    expect(stub.metadata.annotations['grid.praxis.fast/site-id']).toBe('site-c');
    expect(stub.spec.gatewayEndpoint.address).toBe('127.0.0.1:9');
    // No trust pin: reachable or not, it can never become Active.
    expect(stub.status.phase).toBe('Connecting');
    expect(['TrustMaterialMissing', 'ProbeUnreachable']).toContain(stub.status.reason);
    // site-b does not auto-discover: no stub there.
    expect(await grid(stateDir(b), 'GridSite', 'grid-site-c')).toBeUndefined();
    // site-c's provider record reached site-a (signed, verified) but is excluded from its overlay.
    await waitFor(
      "site-c's record at site-a",
      () => a.op!.operator.context.gossip!.store.remoteProviders().some((r) => r.site === 'site-c') || undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const cm: Json = await configMap(stateDir(a), 'grid-system', 'grid-overlay-grid-edge');
    expect(overlayOf(cm).overlay.candidates.some((x: Json) => x.site === 'site-c')).toBe(false);
    // Declared GridSites are never touched by discovery.
    const declared: Json = await grid(stateDir(a), 'GridSite', 'grid-site-b');
    expect(declared.metadata.labels?.['grid.praxis.fast/auto-discovered']).toBeUndefined();
  });

  it("marks a site that shut down gracefully Left and drops its providers from the peer's overlay", async () => {
    await b.op!.stop();
    const gs: Json = await waitFor("site-a's GridSite grid-site-b Left", async () => {
      const o: Json = await grid(stateDir(a), 'GridSite', 'grid-site-b');
      return o?.status?.phase === 'Left' ? o : undefined;
    });
    expect(gs.status.reason).toBe('MemberLeft');
    await waitFor("site-b's providers gone from site-a's overlay", async () => {
      const cm: Json = await configMap(stateDir(a), 'grid-system', 'grid-overlay-grid-edge');
      return overlayOf(cm).overlay.candidates.some((x: Json) => x.site === 'site-b') ? undefined : true;
    });
  });
});
