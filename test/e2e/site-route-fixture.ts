// Three sites for the grid_site_route qualification: per site a sim backend, an EPP stand-in that publishes the
// site's signals over real HTTP (in-flight = the sim's running requests plus the load the test places on the site
// from elsewhere, split into running and waiting at the site's capacity), and a SiteView that polls those signals
// servers like the gateway's signals poller does. The gateway is the real one, in-process, on real sockets.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { request } from 'undici';
import type { ServingEntry, SiteSample, SiteView } from '../../daemons/gateway/site-route/site-view.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { listen } from '../../daemons/shared/listen.ts';

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
  readonly sim: SimServer;
  readonly load: SiteLoad;
  readonly server: Server;
  readonly port: number;
}

/** The site's EPP stand-in: GET /signals answers the conclusion the operator relays for this site. */
export async function startSignalsSite(name: string, sim: SimServer, load: SiteLoad): Promise<SignalsSite> {
  const server = createServer((req, res) => {
    if (req.url !== '/signals') {
      res.writeHead(404).end();
      return;
    }
    const held = sim.running + load.background;
    const running = Math.min(held, load.capacity);
    const waiting = held - running + load.skewedQueue;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ inFlight: running + waiting, waiting, readyEndpoints: load.readyEndpoints }));
  });
  const bound = await listen(server, 0, '127.0.0.1');
  return { name, sim, load, server, port: bound.port };
}

/** A SiteView over the signals servers, polled every `pollMs`; a sample older than three polls is not trusted. */
export class PolledSiteView implements SiteView {
  entriesList: ServingEntry[];
  readonly #sites: readonly SignalsSite[];
  readonly #samples = new Map<string, SiteSample>();
  readonly #listeners = new Set<(sample: SiteSample) => void>();
  readonly #pollMs: number;
  #timer: NodeJS.Timeout | undefined;
  polls = 0;

  constructor(entries: ServingEntry[], sites: readonly SignalsSite[], pollMs: number) {
    this.entriesList = entries;
    this.#sites = sites;
    this.#pollMs = pollMs;
  }
  revision(): string | undefined {
    return 'e'.repeat(64);
  }
  models(): readonly string[] {
    return [...new Set(this.entriesList.flatMap((e) => e.models))];
  }
  entries(model: string): readonly ServingEntry[] {
    return this.entriesList.filter((e) => e.models.includes(model));
  }
  sample(site: string): SiteSample | undefined {
    const s = this.#samples.get(site);
    return s !== undefined && Date.now() - s.atMs <= 3 * this.#pollMs ? s : undefined;
  }
  onSample(listener: (sample: SiteSample) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  async pollOnce(): Promise<void> {
    await Promise.all(
      this.#sites.map(async (site) => {
        const res = await request(`http://127.0.0.1:${site.port}/signals`);
        const body = (await res.body.json()) as { inFlight: number; waiting: number; readyEndpoints: number };
        const sample: SiteSample = { site: site.name, atMs: Date.now(), ...body };
        this.#samples.set(site.name, sample);
        for (const listener of this.#listeners) listener(sample);
      }),
    );
    this.polls++;
  }
  start(): void {
    const tick = (): void => {
      this.pollOnce()
        .catch(() => undefined)
        .finally(() => {
          if (this.#timer !== undefined) this.#timer = setTimeout(tick, this.#pollMs);
        });
    };
    this.#timer = setTimeout(tick, 0);
  }
  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
