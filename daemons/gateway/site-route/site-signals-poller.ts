// Polls every site of the serving config at its mTLS signals endpoint (the operator's GET /v1/signals) with the
// gateway's client certificate, and keeps each site's newest concluded sample. The site's certificate must chain to
// the grid CA and name the site, and the document must name that site and the serving config's network, so no site
// answers for another. A failing poll keeps the last sample only until it is `staleAfterMs` old: after that the
// site's signals are missing (neutral), never zero and never frozen.
import { readFile } from 'node:fs/promises';
import type { PeerSignalRow } from '../../../schemas/generated/peer-signals.ts';
import { checkPeerSignalRow, checkPeerSignalsEnvelope, plausibleAge } from '../../../schemas/signals/validate.ts';
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';
import { pollPeer, type PollResult, type TlsMaterial } from '../../shared/signals-client.ts';
import { concludeSite } from './site-sample.ts';
import type { ServingMetrics } from './serving-metrics.ts';
import type { SiteSample } from './site-view.ts';

/** Where the gateway's signals client identity lives: the grid CA and a certificate it issued, with its key. */
export interface SignalsTlsFiles {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export interface PollSite {
  readonly site: string;
  /** host:port; absent when the site advertises no signals endpoint (its signals stay missing). */
  readonly address?: string;
  /** Providers the serving config names at the site; only their rows count. */
  readonly providers: ReadonlySet<string>;
}

export interface SiteSignalsPollerOptions {
  readonly tls: SignalsTlsFiles;
  readonly logger: Logger;
  readonly metrics: ServingMetrics;
  /** Told how many relayed ages an answer carried that this gateway refused (the age report's skewCount). */
  readonly onRefusedAges?: (count: number) => void;
  /** @default 5000 - the reference gateway's poll of its operator */
  readonly intervalMs?: number;
  /** @default 2000 */
  readonly timeoutMs?: number;
  /** @default 3 x intervalMs - a sample older than this (no successful poll since) reads as missing */
  readonly staleAfterMs?: number;
  /** Gateway clock, ms. */
  readonly now?: () => number;
  /** The poll itself; tests keep the default (real mTLS). */
  readonly poll?: (site: string, address: string, material: TlsMaterial, timeoutMs: number) => Promise<PollResult>;
}

/** The rows of a valid answer for `site` in `network`; a bad row costs that row, a bad document the whole answer. */
export function answerRows(
  body: unknown,
  site: string,
  network: string,
): { ok: true; rows: PeerSignalRow[]; refused: number; refusedAges: number } | { ok: false; error: string } {
  const envelope = checkPeerSignalsEnvelope(body);
  if (!envelope.ok) return { ok: false, error: envelope.error };
  if (envelope.value.site !== site)
    return { ok: false, error: `document names site "${envelope.value.site.slice(0, 80)}", polled site is "${site}"` };
  if (envelope.value.network !== network)
    return { ok: false, error: `document is for network "${envelope.value.network.slice(0, 80)}", not "${network}"` };
  const rows: PeerSignalRow[] = [];
  const seen = new Set<string>();
  let refused = 0;
  let refusedAges = 0;
  envelope.value.rows.forEach((raw, index) => {
    const row = checkPeerSignalRow(raw, index);
    const badAge = row.ok && !plausibleAge(row.value.age_ms);
    if (badAge) refusedAges++;
    if (!row.ok || badAge || seen.has(row.value.provider)) {
      refused++;
      return;
    }
    seen.add(row.value.provider);
    rows.push(row.value);
  });
  return { ok: true, rows, refused, refusedAges };
}

export class SiteSignalsPoller {
  readonly #o: SiteSignalsPollerOptions;
  readonly #interval: number;
  readonly #staleAfter: number;
  readonly #now: () => number;
  readonly #samples = new Map<string, SiteSample>();
  readonly #listeners = new Set<(sample: SiteSample) => void>();
  #sites: readonly PollSite[] = [];
  #network: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #closed = false;
  #tlsWarned = false;
  readonly #failing = new Set<string>();

  constructor(options: SiteSignalsPollerOptions) {
    this.#o = options;
    this.#interval = options.intervalMs ?? 5_000;
    this.#staleAfter = options.staleAfterMs ?? 3 * this.#interval;
    this.#now = options.now ?? Date.now;
  }

  /** The sites to poll, from the accepted serving config; a site no longer listed loses its sample at once. */
  setSites(network: string, sites: readonly PollSite[]): void {
    this.#network = network;
    this.#sites = sites;
    const listed = new Set(sites.map((s) => s.site));
    for (const site of [...this.#samples.keys()]) {
      if (listed.has(site)) continue;
      this.#samples.delete(site);
      this.#o.metrics.sampleAge.remove({ site });
    }
  }

  /** The newest sample of a site, undefined when never polled successfully or older than the staleness bound. */
  sample(site: string): SiteSample | undefined {
    const sample = this.#samples.get(site);
    if (sample === undefined || this.#now() - sample.atMs > this.#staleAfter) return undefined;
    return sample;
  }

  onSample(listener: (sample: SiteSample) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  start(): void {
    this.#schedule(0);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#round;
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#round = this.round().finally(() => this.#schedule(this.#interval));
    }, delayMs);
    this.#timer.unref();
  }

  async #material(): Promise<TlsMaterial | undefined> {
    const { caFile, certFile, keyFile } = this.#o.tls;
    try {
      // Read every round, so a rotated certificate is used from the next poll on.
      const [caPem, certPem, keyPem] = await Promise.all([caFile, certFile, keyFile].map((f) => readFile(f, 'utf8')));
      this.#tlsWarned = false;
      return { caPem: caPem!, certPem: certPem!, keyPem: keyPem! };
    } catch (error) {
      if (!this.#tlsWarned) {
        this.#tlsWarned = true;
        this.#o.logger.warn(
          { ca: caFile, cert: certFile, key: keyFile, error: errorFields(error) },
          "site signals: the client certificate files cannot be read, so no site is polled and every site's signals are missing",
        );
      }
      return undefined;
    }
  }

  /** One poll of every site; never throws. */
  async round(): Promise<void> {
    const network = this.#network;
    if (network === undefined || this.#sites.length === 0) return;
    const material = await this.#material();
    if (material === undefined) return;
    const poll = this.#o.poll ?? pollPeer;
    await Promise.all(
      this.#sites.map(async ({ site, address, providers }) => {
        const { metrics, logger } = this.#o;
        if (address === undefined) {
          metrics.polls.inc({ site, outcome: 'no_address' });
          return;
        }
        const result = await poll(site, address, material, this.#o.timeoutMs ?? 2_000);
        const answer = result.ok ? answerRows(result.body, site, network) : { ok: false as const, error: result.error };
        if (!answer.ok) {
          metrics.polls.inc({ site, outcome: result.ok ? 'invalid' : 'failed' });
          if (!this.#failing.has(site)) {
            this.#failing.add(site);
            logger.warn(
              { site, address, error: answer.error },
              `site signals: no usable answer from ${site}; its last sample is used for at most ${this.#staleAfter} ms`,
            );
          }
          return;
        }
        if (answer.refusedAges > 0) this.#o.onRefusedAges?.(answer.refusedAges);
        if (this.#failing.delete(site)) logger.info({ site }, `site signals: ${site} answers again`);
        metrics.polls.inc({ site, outcome: 'answered' });
        if (!this.#sites.some((s) => s.site === site)) return;
        const sample = concludeSite(site, answer.rows, this.#now(), providers.size > 0 ? providers : undefined);
        this.#samples.set(site, sample);
        for (const listener of this.#listeners) {
          try {
            listener(sample);
          } catch (error) {
            logger.error(
              { site, error: errorFields(error) },
              'site signals: a sample listener failed; the sample is kept',
            );
          }
        }
      }),
    );
    const now = this.#now();
    for (const [site, sample] of this.#samples) this.#o.metrics.sampleAge.set({ site }, (now - sample.atMs) / 1000);
  }
}
