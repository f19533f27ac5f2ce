// The consumer's overlay lifecycle (docs/contract.md §3.1): cold load (fail closed: not ready until a valid overlay is
// accepted), a watch on the file's directory (so the Kubernetes `..data` symlink swap is seen), debounce, skip when
// bytes or semantic revision are unchanged, full validation with the shared contract validator, atomic swap, and
// last-known-good on any bad replacement. Only this module touches the disk; requests read `current()`.
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import type { OverlayScope } from '../../schemas/overlay/types.ts';
import type { Logger } from '../shared/log.ts';
import { WatchedFile, readBounded } from '../shared/watched-file.ts';
import type { GatewayMetrics } from './metrics.ts';
import { buildSnapshot } from './routing/snapshot.ts';
import type { RoutingSnapshot } from './routing/snapshot.ts';

export type ReloadOutcome =
  | { outcome: 'accepted'; revision: string | null }
  | { outcome: 'unchanged'; reason: 'same_bytes' | 'same_revision' }
  | { outcome: 'rejected'; reason: string; message: string };

export interface OverlayStoreOptions {
  file: string;
  expectedScope?: Partial<OverlayScope>;
  reloadEnabled: boolean;
  debounceMs: number;
  /** Safety re-read interval for file systems whose events can be lost; 0 disables it. */
  pollIntervalMs?: number;
  logger: Logger;
  metrics: GatewayMetrics;
  nowMs?: () => number;
}

const LEGACY_REVISION_LABEL = 'legacy';

export class OverlayStore {
  readonly #options: OverlayStoreOptions;
  #snapshot: RoutingSnapshot | null = null;
  #lastRaw: Uint8Array | null = null;
  readonly #file: WatchedFile<ReloadOutcome>;
  #lastServedRevision: string | null = null;
  readonly #listeners = new Set<(snapshot: RoutingSnapshot) => void>();

  constructor(options: OverlayStoreOptions) {
    this.#options = options;
    this.#file = new WatchedFile({
      file: options.file,
      debounceMs: options.debounceMs,
      pollIntervalMs: options.pollIntervalMs ?? 5_000,
      load: (trigger) => this.#load(trigger),
    });
  }

  /** The accepted snapshot, or null while cold (the gateway is not ready). */
  current(): RoutingSnapshot | null {
    return this.#snapshot;
  }

  /** Called with every newly accepted snapshot. */
  onAccepted(listener: (snapshot: RoutingSnapshot) => void): void {
    this.#listeners.add(listener);
  }

  /** Records which revision served a request, for the serving-revision metric. */
  noteServed(snapshot: RoutingSnapshot): void {
    const label = snapshot.revision ?? LEGACY_REVISION_LABEL;
    if (label === this.#lastServedRevision) return;
    this.#options.metrics.overlayServingRevision.reset();
    this.#options.metrics.overlayServingRevision.set({ revision: label }, 1);
    this.#lastServedRevision = label;
  }

  async start(): Promise<void> {
    await this.#file.start(this.#options.reloadEnabled);
  }

  close(): void {
    this.#file.close();
  }

  /** One load attempt; concurrent triggers coalesce into one follow-up load. */
  reload(trigger: string): Promise<ReloadOutcome> {
    return this.#file.reload(trigger);
  }

  async #load(trigger: string): Promise<ReloadOutcome> {
    const { file, logger, metrics } = this.#options;
    let raw: Uint8Array;
    try {
      raw = await readBounded(file, GATEWAY_MAX_OVERLAY_BYTES);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
      return this.#reject('unreadable', `cannot read overlay file ${file} (${code})`, trigger);
    }
    if (this.#lastRaw !== null && Buffer.compare(raw, this.#lastRaw) === 0) {
      metrics.overlayReloads.inc({ outcome: 'unchanged', reason: 'same_bytes' });
      return { outcome: 'unchanged', reason: 'same_bytes' };
    }
    this.#lastRaw = raw;
    const expectedScope = this.#options.expectedScope;
    const result = validateOverlay(raw, {
      maxBytes: GATEWAY_MAX_OVERLAY_BYTES,
      ...(expectedScope === undefined ? {} : { expectedScope }),
      allowLegacy: expectedScope === undefined,
    });
    if (!result.ok) return this.#reject(result.reason, result.message, trigger);
    const revision = result.format === 'envelope' ? result.revision : null;
    if (revision !== null && this.#snapshot?.revision === revision) {
      metrics.overlayReloads.inc({ outcome: 'unchanged', reason: 'same_revision' });
      logger.debug({ revision, trigger }, 'overlay revision unchanged; snapshot kept');
      return { outcome: 'unchanged', reason: 'same_revision' };
    }
    const previous = this.#snapshot?.revision ?? null;
    this.#snapshot = buildSnapshot(result.payload, revision, result.format, (this.#options.nowMs ?? Date.now)());
    metrics.overlayReloads.inc({ outcome: 'accepted', reason: result.format });
    metrics.overlayAcceptedRevision.reset();
    metrics.overlayAcceptedRevision.set({ revision: revision ?? LEGACY_REVISION_LABEL, format: result.format }, 1);
    metrics.overlayCandidates.set(this.#snapshot.candidateCount);
    logger.info(
      {
        revision: revision ?? LEGACY_REVISION_LABEL,
        previous_revision: previous,
        format: result.format,
        candidates: this.#snapshot.candidateCount,
        trigger,
      },
      'overlay accepted',
    );
    for (const listener of this.#listeners) listener(this.#snapshot);
    return { outcome: 'accepted', revision };
  }

  #reject(reason: string, message: string, trigger: string): ReloadOutcome {
    const { logger, metrics } = this.#options;
    metrics.overlayReloads.inc({ outcome: 'rejected', reason });
    const serving = this.#snapshot === null ? null : (this.#snapshot.revision ?? LEGACY_REVISION_LABEL);
    logger.warn(
      { reason, detail: message, trigger, serving_revision: serving },
      serving === null
        ? 'overlay rejected; gateway stays not ready'
        : 'overlay rejected; keeping last-known-good snapshot',
    );
    return { outcome: 'rejected', reason, message };
  }
}
