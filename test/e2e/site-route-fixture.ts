// Three sites for the grid_site_route qualification, on the gateway's real SiteView: a serving config file (the
// contract's builder; the gateway's ServingStore reads it as GRID_SERVING_CONFIG) and, per site, a sim backend and
// the operator's own signals endpoint (PeerSignalsServer) on mTLS with certificates of a grid CA made here, polled by
// the gateway's signals poller with its client certificate. What each site's endpoint answers is its EPP pool as a
// stand-in sees it: the requests its sim is answering now plus the load the test places on the site from elsewhere,
// running up to the site's capacity and waiting beyond it.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PeerSignalsDocument } from '../../schemas/generated/peer-signals.ts';
import type { ServingConfigEntry } from '../../schemas/generated/serving-config.ts';
import { buildServingDocument, serializeServing } from '../../schemas/serving/serving-config.ts';
import { PeerSignalsServer } from '../../daemons/gossip-operator/peer-signals/server.ts';
import type { ServingOptions } from '../../daemons/gateway/site-route/site-view-service.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import {
  createCertificateAuthority,
  createClientCertificate,
  createSiteCertificate,
} from '../../daemons/shared/tls.ts';
import { writeRaw } from '../gateway/helpers.ts';

export const NETWORK = 'grid';

/** What the test sets on a site: its capacity and the load other traffic places on it. */
export interface SiteLoad {
  /** Requests the site runs at once; more wait. */
  capacity: number;
  /** Requests from elsewhere the site holds, on top of what this gateway sends. */
  background: number;
  /** Work waiting at one busy endpoint while the site as a whole is under its ceiling (an unbalanced pool). */
  skewedQueue: number;
  readyEndpoints: number;
}

export interface SignalsSite {
  readonly name: string;
  readonly provider: string;
  readonly sim: SimServer;
  readonly load: SiteLoad;
  readonly signals: PeerSignalsServer;
  /** Answers the site's endpoint has served (one per poll). */
  polls: number;
}

/** The document a site's operator serves for one poll, from its sim's running requests and the test's load. */
function signalsDocument(site: SignalsSite): PeerSignalsDocument {
  site.polls++;
  const { load } = site;
  const held = site.sim.running + load.background;
  const running = Math.min(held, load.capacity);
  const waiting = held - running + load.skewedQueue;
  // One ready endpoint holds everything: per-endpoint averages are the site's totals.
  return {
    schema_version: '1.0',
    site: site.name,
    network: NETWORK,
    rows: [
      {
        provider: site.provider,
        age_ms: 100,
        generation: 1,
        signals: {
          healthy: true,
          running_per_endpoint: running,
          waiting_per_endpoint: waiting,
          ready_endpoints: load.readyEndpoints,
        },
      },
    ],
  };
}

export interface ThreeSites {
  readonly sites: SignalsSite[];
  /** The gateway's serving options: the serving config file and its signals client identity. */
  readonly serving: ServingOptions;
  /** Rewrites the serving config (the view picks it up like a delivery by overlay-sync). */
  writeServing(entries: readonly ServingConfigEntry[]): Promise<string>;
  readonly entries: readonly ServingConfigEntry[];
  close(): Promise<void>;
}

export async function startThreeSites(
  dir: string,
  names: readonly string[],
  sims: readonly SimServer[],
  loads: readonly SiteLoad[],
  pollMs: number,
): Promise<ThreeSites> {
  const ca = await createCertificateAuthority({ commonName: 'site-route grid ca' });
  const gatewayCert = await createClientCertificate(ca, { commonName: `${names[0]}-consumer`, organization: 'grid' });
  const sites: SignalsSite[] = [];
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    const cert = await createSiteCertificate(ca, { commonName: name, organization: 'grid' });
    const site = { name, provider: `llm-${name}`, sim: sims[i]!, load: loads[i]!, polls: 0 } as SignalsSite;
    const signals = await PeerSignalsServer.start({ address: '127.0.0.1:0', document: () => signalsDocument(site) });
    signals.useMaterial({ caPem: ca.certPem, certPem: cert.certPem, keyPem: cert.keyPem });
    (site as { signals: PeerSignalsServer }).signals = signals;
    sites.push(site);
  }
  const tlsDir = join(dir, 'signals-tls');
  await mkdir(tlsDir, { recursive: true });
  await mkdir(join(dir, 'serving'), { recursive: true });
  await writeFile(join(tlsDir, 'ca.crt'), ca.certPem);
  await writeFile(join(tlsDir, 'tls.crt'), gatewayCert.certPem);
  await writeFile(join(tlsDir, 'tls.key'), gatewayCert.keyPem);
  const file = join(dir, 'serving', 'serving-config.json');
  const entries: ServingConfigEntry[] = sites.map((s) => ({
    site: s.name,
    provider: s.provider,
    models: ['m'],
    cluster: `c-${s.name}`,
    admission: 'all',
    ready: true,
  }));
  const writeServing = async (list: readonly ServingConfigEntry[]): Promise<string> => {
    const document = buildServingDocument(
      { gateway: 'consumer-gateway', namespace: 'grid-system' },
      {
        network: NETWORK,
        local_site: names[0]!,
        sites: sites.map((s) => ({ site: s.name, signals_address: s.signals.boundAddress })),
        entries: [...list],
      },
      '2026-12-01T00:00:00Z',
    );
    await writeRaw(file, serializeServing(document));
    return document.revision.value;
  };
  await writeServing(entries);
  return {
    sites,
    entries,
    writeServing,
    serving: {
      file,
      tls: { caFile: join(tlsDir, 'ca.crt'), certFile: join(tlsDir, 'tls.crt'), keyFile: join(tlsDir, 'tls.key') },
      pollIntervalMs: pollMs,
      filePollIntervalMs: 100,
    },
    async close() {
      for (const s of sites) await s.signals.close();
    },
  };
}
