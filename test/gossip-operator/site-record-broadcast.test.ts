// The signed site record of a realistic site (the example grid's east and west, with the certificates the local grid
// issues) is larger than one 1400-byte packet: unsplit, it could travel only by push-pull and every start would log
// broadcast_too_large. It goes out as a split broadcast (record-parts.ts): the peer learns the signing key and merges
// the record with no push-pull at all, and nothing is logged.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { afterAll, expect, test } from 'vitest';
import { GossipRuntime } from '../../daemons/gossip-operator/gossip-runtime.ts';
import { OperatorMetrics } from '../../daemons/gossip-operator/metrics.ts';
import { certifiedIdentity } from '../../daemons/gossip-operator/site-identity.ts';
import { FileRevisionStore } from '../../daemons/gossip-operator/state/revision-store.ts';
import { ensureGridPki } from '../../daemons/local-grid/pki.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { testTiming, waitFor } from '../gossip/helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-site-record-'));
const runtimes: GossipRuntime[] = [];
afterAll(async () => {
  await Promise.all(runtimes.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
});

test('the example grid site record, with real certificates, is broadcast in packets and merged without push-pull', async () => {
  const pki = await ensureGridPki(join(dir, 'pki'), ['east', 'west']);
  const caPem = readFileSync(pki.caFile, 'utf8');
  const key = randomBytes(32);
  const lines: string[] = [];
  const destination = new Writable({
    write: (chunk, _enc, done) => {
      lines.push(String(chunk));
      done();
    },
  });
  // Periodic push-pull is out of reach: after the join, only broadcasts can carry the records.
  const timing = testTiming({ pushPullIntervalMs: 600_000, announceIntervalMs: 600_000 });
  const start = async (site: string, port = 0) => {
    const own = pki.sites.find((s) => s.site === site)!;
    const identity = await certifiedIdentity(
      site,
      readFileSync(own.siteIdentity.certFile, 'utf8'),
      readFileSync(own.siteIdentity.keyFile, 'utf8'),
    );
    const runtime = await GossipRuntime.start({
      site,
      network: 'demo',
      bindHost: '127.0.0.1',
      bindPort: port,
      timing,
      key,
      identity,
      caPem,
      writer: `gossip-operator-${site}-5d8f9c7b6-x2x9z`,
      revisions: new FileRevisionStore(join(dir, `${site}.revision`)),
      logger: createLogger({ name: 'gossip-operator', level: 'debug', destination }),
      metrics: new OperatorMetrics({ defaultMetrics: false }),
      onChange: () => {},
    });
    runtimes.push(runtime);
    return runtime;
  };
  const east = await start('east');
  const west = await start('west');
  await west.join([east.address]);
  await waitFor(
    'east and west to see each other',
    5_000,
    () => east.membership.members().length === 2 && west.membership.members().length === 2,
  );
  const streamsBefore =
    east.membership.stats().transport.streamsOpened + west.membership.stats().transport.streamsOpened;

  for (const [runtime, port] of [
    [east, 18443],
    [west, 28443],
  ] as const) {
    await runtime.publishSite({
      gateway_address: `127.0.0.1:${port}`,
      public_cert_pem: runtime.certificateBundle!,
      signals_address: `127.0.0.1:${port + 1}`,
      capabilities: { inference: true, agent_tools: true, agent_to_agent: false },
      tenant_spend_usd: {},
    });
  }
  const eastRecord = east.store.get('demo/east')!.signed;
  const broadcastBytes = Buffer.byteLength(JSON.stringify({ k: 'user', data: { v: 1, rec: eastRecord } }));
  expect(broadcastBytes).toBeGreaterThan(east.membership.maxBroadcastBytes); // a split is needed ...

  await waitFor(
    "each site to hold the other one's verified site record",
    5_000,
    () => (east.store.get('demo/west') !== undefined && west.store.get('demo/east') !== undefined) || 'not yet',
  );
  expect(west.store.get('demo/east')!.signed).toEqual(eastRecord); // ... and the exact signed record arrived
  // No push-pull carried it, and nobody counted or logged a broadcast too large.
  expect(east.membership.stats().transport.streamsOpened + west.membership.stats().transport.streamsOpened).toBe(
    streamsBefore,
  );
  for (const r of [east, west]) expect(r.membership.stats().drops.broadcast_too_large).toBe(0);
  expect(lines.join('')).not.toContain('broadcast_too_large');
  expect(lines.join('')).not.toContain('PRIVATE KEY');
});
