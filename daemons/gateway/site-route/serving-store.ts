// The gateway's serving config (GRID_SERVING_CONFIG, delivered by overlay-sync): the same lifecycle as the overlay
// store: cold load, a watch on the file's directory (the `..data` swap and overlay-sync's rename are seen), debounce,
// skip on same bytes or same revision, full validation with the shared contract validator, atomic swap, and
// last-known-good on any bad replacement. Only this module reads the file; grid_site_route reads `current()`.
import type { ServingConfigDocument, ServingScope } from '../../../schemas/generated/serving-config.ts';
import { GATEWAY_MAX_SERVING_BYTES, validateServing } from '../../../schemas/serving/serving-config.ts';
import type { Logger } from '../../shared/log.ts';
import { WatchedFile, readBounded } from '../../shared/watched-file.ts';
import type { ServingMetrics } from './serving-metrics.ts';

export type ServingReload =
  | { readonly outcome: 'accepted'; readonly revision: string }
  | { readonly outcome: 'unchanged'; readonly reason: 'same_bytes' | 'same_revision' }
  | { readonly outcome: 'rejected'; readonly reason: string; readonly message: string };

export interface ServingStoreOptions {
  readonly file: string;
  readonly expectedScope?: Partial<ServingScope>;
  readonly debounceMs?: number;
  /** Safety re-read for file systems whose events can be lost; 0 disables it. */
  readonly pollIntervalMs?: number;
  readonly logger: Logger;
  readonly metrics: ServingMetrics;
}

export class ServingStore {
  readonly #o: ServingStoreOptions;
  #document: ServingConfigDocument | undefined;
  #revision: string | undefined;
  #lastRaw: Buffer | undefined;
  readonly #file: WatchedFile<ServingReload>;
  readonly #listeners = new Set<(document: ServingConfigDocument) => void>();

  constructor(options: ServingStoreOptions) {
    this.#o = options;
    this.#file = new WatchedFile({
      file: options.file,
      debounceMs: options.debounceMs ?? 250,
      pollIntervalMs: options.pollIntervalMs ?? 5_000,
      load: (trigger) => this.#load(trigger),
    });
  }

  /** The accepted serving config; undefined until one is accepted. */
  current(): ServingConfigDocument | undefined {
    return this.#document;
  }

  revision(): string | undefined {
    return this.#revision;
  }

  /** Called with every newly accepted serving config. */
  onAccepted(listener: (document: ServingConfigDocument) => void): void {
    this.#listeners.add(listener);
  }

  async start(): Promise<void> {
    await this.#file.start();
  }

  close(): void {
    this.#file.close();
  }

  /** One load attempt; concurrent triggers coalesce into one follow-up load. */
  reload(trigger: string): Promise<ServingReload> {
    return this.#file.reload(trigger);
  }

  async #load(trigger: string): Promise<ServingReload> {
    const { file, logger, metrics } = this.#o;
    let raw: Buffer;
    try {
      raw = await readBounded(file, GATEWAY_MAX_SERVING_BYTES);
    } catch (error) {
      return this.#reject(
        'unreadable',
        `cannot read serving config ${file} (${(error as NodeJS.ErrnoException).code ?? 'EIO'})`,
        trigger,
      );
    }
    if (this.#lastRaw !== undefined && raw.equals(this.#lastRaw)) {
      metrics.reloads.inc({ result: 'unchanged', reason: 'same_bytes' });
      return { outcome: 'unchanged', reason: 'same_bytes' };
    }
    this.#lastRaw = raw;
    const verdict = validateServing(raw, {
      maxBytes: GATEWAY_MAX_SERVING_BYTES,
      ...(this.#o.expectedScope !== undefined ? { expectedScope: this.#o.expectedScope } : {}),
    });
    if (!verdict.ok) return this.#reject(verdict.reason, `${file}: ${verdict.message}`, trigger);
    if (verdict.revision === this.#revision) {
      metrics.reloads.inc({ result: 'unchanged', reason: 'same_revision' });
      return { outcome: 'unchanged', reason: 'same_revision' };
    }
    const previous = this.#revision;
    this.#document = verdict.document;
    this.#revision = verdict.revision;
    metrics.reloads.inc({ result: 'accepted', reason: 'valid' });
    metrics.acceptedRevision.reset();
    metrics.acceptedRevision.set({ revision: verdict.revision }, 1);
    logger.info(
      {
        revision: verdict.revision,
        previous_revision: previous ?? null,
        entries: verdict.document.serving.entries.length,
        trigger,
      },
      'serving config accepted',
    );
    for (const listener of this.#listeners) listener(verdict.document);
    return { outcome: 'accepted', revision: verdict.revision };
  }

  #reject(reason: string, message: string, trigger: string): ServingReload {
    this.#o.metrics.reloads.inc({ result: 'rejected', reason });
    this.#o.logger.warn(
      { reason, detail: message, trigger, serving_revision: this.#revision ?? null },
      this.#revision === undefined
        ? 'serving config rejected; no serving config in use yet'
        : 'serving config rejected; keeping the last-known-good one',
    );
    return { outcome: 'rejected', reason, message };
  }
}
