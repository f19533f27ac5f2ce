/**
 * The metrics scraper's bearer token (metricsConfig.auth): a 10-minute token of the site's scraper
 * ServiceAccount, minted with the TokenRequest API and reused until two thirds of its lifetime has passed.
 *
 * The operator never sends its own token: whoever runs the scraped endpoint receives the credential, and the scraper
 * ServiceAccount may only get /metrics. The token is not bound to a Pod, because the API server binds a token only to
 * a Pod running as the token's own ServiceAccount and the operator runs as another. Audiences stay the API server's
 * default so the endpoint's TokenReview accepts it.
 *
 * The token never leaves this module except as the value handed to the scrape: it is not logged, not put into an
 * error detail and not kept anywhere but the one cached field.
 */
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';
import type { ObjectRef, ResourceStore } from '../../shared/resource-store/types.ts';

/** The operator mints a 10-minute token: short enough that a leaked one soon expires. */
export const SCRAPER_TOKEN_SECONDS = 600;

export type BearerResult =
  | { readonly ok: true; readonly token: string }
  | { readonly ok: false; readonly detail: string };

export interface ScraperTokenOptions {
  readonly store: Pick<ResourceStore, 'createToken'>;
  /** The scraper ServiceAccount (namespace and name from the operator's configuration). */
  readonly serviceAccount: Required<ObjectRef>;
  readonly logger: Logger;
  readonly now: () => number;
  readonly expirationSeconds?: number;
}

interface Cached {
  readonly token: string;
  /** When the token is replaced: two thirds of the lifetime the API server granted. */
  readonly renewAtMs: number;
  readonly expiresAtMs: number;
}

export class ScraperTokenSource {
  readonly #options: ScraperTokenOptions;
  #cached: Cached | undefined;
  #inFlight: Promise<BearerResult> | undefined;
  /** The last mint failure logged, so a persistent failure warns once, not on every scrape. */
  #lastError: string | undefined;
  #mints = 0;

  constructor(options: ScraperTokenOptions) {
    this.#options = options;
  }

  /** How many TokenRequests were sent (for tests and the reuse bound). */
  get mints(): number {
    return this.#mints;
  }

  /** The current token, minting a new one when none is cached or two thirds of its lifetime has passed. */
  async bearer(): Promise<BearerResult> {
    const cached = this.#cached;
    if (cached !== undefined && this.#options.now() < cached.renewAtMs) return { ok: true, token: cached.token };
    // Every provider scraped in one tick shares one TokenRequest.
    this.#inFlight ??= this.#mint().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #mint(): Promise<BearerResult> {
    const { store, serviceAccount, logger, now } = this.#options;
    const where = `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`;
    const requestedAtMs = now();
    this.#mints += 1;
    try {
      const minted = await store.createToken(serviceAccount, {
        expirationSeconds: this.#options.expirationSeconds ?? SCRAPER_TOKEN_SECONDS,
      });
      const expiresAtMs = Date.parse(minted.expirationTimestamp);
      if (!Number.isFinite(expiresAtMs) || expiresAtMs <= requestedAtMs) {
        throw new Error(
          `the API server answered an expirationTimestamp ${JSON.stringify(minted.expirationTimestamp.slice(0, 40))} that is not in the future`,
        );
      }
      // Measured from the request, not the answer: a slow answer only makes the renewal earlier.
      const renewAtMs = requestedAtMs + Math.floor(((expiresAtMs - requestedAtMs) * 2) / 3);
      this.#cached = { token: minted.token, renewAtMs, expiresAtMs };
      if (this.#lastError !== undefined)
        logger.info({ serviceAccount: where }, 'metrics scraper token minted again after a failure');
      this.#lastError = undefined;
      return { ok: true, token: minted.token };
    } catch (error) {
      const message = (error as Error).message;
      if (message !== this.#lastError) {
        logger.warn(
          { serviceAccount: where, error: errorFields(error) },
          'minting the metrics scraper token failed; metricsConfig.auth scrapes fail until it succeeds',
        );
      }
      this.#lastError = message;
      // A token minted earlier stays usable until it really expires: a brief API outage does not stop scraping.
      const cached = this.#cached;
      if (cached !== undefined && now() < cached.expiresAtMs) return { ok: true, token: cached.token };
      this.#cached = undefined;
      return { ok: false, detail: `minting a token for the metrics scraper ${where} failed: ${message}` };
    }
  }
}
