// The overlay-sync shell: watches one ConfigMap through the resource store, runs each observation through
// the pure core (state.ts) and performs the one effect it asks for, an atomic write of the exact raw bytes.
// Observations are processed one at a time; when several arrive during a write only the newest is kept,
// since an older revision is never worth writing after a newer one.

import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { contractValidator, type ContractVerdict, type SyncedContract } from './contracts.ts';
import type { OverlayScope } from '../../schemas/overlay/types.ts';
import type { Logger } from '../shared/log.ts';
import { errorFields } from '../shared/log.ts';
import { removeStaleTempFiles, writeFileAtomic } from '../shared/resource-store/atomic-write.ts';
import { CONFIG_MAP } from '../shared/resource-store/index.ts';
import type {
  KubeObject,
  ResourceStore,
  WatchEvent,
  WatchRestartReason,
  WatchSubscription,
} from '../shared/resource-store/types.ts';
import type { OverlaySyncMetrics } from './metrics.ts';
import { assess, COLD, restored, transition, type Observation, type SyncStatus } from './state.ts';

export interface OverlaySyncTarget {
  readonly namespace: string;
  readonly configMap: string;
  readonly dataKey: string;
  readonly output: string;
  readonly expectedScope: Readonly<Partial<OverlayScope>>;
  readonly maxBytes: number;
  /** What the ConfigMap holds; the overlay when absent. */
  readonly contract?: SyncedContract;
}

export interface OverlaySyncOptions {
  readonly target: OverlaySyncTarget;
  readonly store: ResourceStore;
  readonly metrics: OverlaySyncMetrics;
  readonly log: Logger;
  readonly now?: () => number;
}

interface PendingObservation {
  readonly observation: Observation;
  readonly resourceVersion: string | undefined;
}

interface ConfigMapObject extends KubeObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

export class OverlaySync {
  readonly #target: OverlaySyncTarget;
  readonly #store: ResourceStore;
  readonly #metrics: OverlaySyncMetrics;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #validate: (raw: Uint8Array) => ContractVerdict;
  #status: SyncStatus = COLD;
  #watch: WatchSubscription | undefined;
  #pending: PendingObservation | undefined;
  #draining: Promise<void> | undefined;
  #observations = 0;
  #reconnects = 0;
  #lastRestart: { reason: WatchRestartReason; at: string; message?: string } | undefined;
  readonly #listeners = new Set<(status: SyncStatus) => void>();

  constructor(options: OverlaySyncOptions) {
    this.#target = options.target;
    this.#store = options.store;
    this.#metrics = options.metrics;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
    this.#validate = contractValidator(this.#target.contract ?? 'overlay', {
      maxBytes: this.#target.maxBytes,
      expectedScope: this.#target.expectedScope,
    });
  }

  get status(): SyncStatus {
    return this.#status;
  }

  isReady(): boolean {
    return this.#status.state !== 'cold';
  }

  /** Called after every processed observation (and the restore at start). */
  onProcessed(listener: (status: SyncStatus) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #iso(ms: number): string {
    return new Date(ms).toISOString();
  }

  #set(status: SyncStatus): void {
    const before = this.#status;
    this.#status = status;
    this.#metrics.state(status);
    if (before.state !== status.state || before.degradedReason !== status.degradedReason) {
      const fields = {
        state: status.state,
        previous: before.state,
        degraded_reason: status.degradedReason,
        revision: status.writtenRevision,
      };
      if (status.state === 'ready_degraded' || status.degradedReason !== undefined) {
        this.#log.warn({ ...fields, message_detail: status.degradedMessage }, 'overlay-sync state changed');
      } else {
        this.#log.info(fields, 'overlay-sync state changed');
      }
    }
  }

  /** Restores a valid existing file as last-known-good, then starts watching the ConfigMap. */
  async start(): Promise<void> {
    await mkdir(dirname(this.#target.output), { recursive: true });
    const removed = await removeStaleTempFiles(this.#target.output);
    if (removed > 0)
      this.#log.warn({ removed, output: this.#target.output }, 'removed temp files left by an interrupted write');
    await this.#restore();
    this.#watch = this.#store.watch<ConfigMapObject>(CONFIG_MAP, {
      namespace: this.#target.namespace,
      name: this.#target.configMap,
      onEvent: (event) => this.#onEvent(event),
      onSynced: (items) => {
        if (items.length === 0) {
          this.#enqueue({
            observation: {
              kind: 'missing',
              reason: 'configmap_absent',
              message: `ConfigMap ${this.#target.namespace}/${this.#target.configMap} does not exist`,
            },
            resourceVersion: undefined,
          });
        }
      },
      onRestart: (reason, error) => this.#onRestart(reason, error),
    });
  }

  async #restore(): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readFile(this.#target.output);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        this.#log.warn(
          { output: this.#target.output, error: errorFields(error) },
          'cannot read existing overlay file; starting cold',
        );
      }
      return;
    }
    const result = this.#validate(raw);
    if (!result.ok) {
      this.#log.warn(
        { output: this.#target.output, reason: result.reason },
        `existing ${this.#target.contract ?? 'overlay'} file is not valid; starting cold`,
      );
      return;
    }
    const now = this.#now();
    this.#metrics.restored(now, raw.byteLength);
    this.#set(restored(this.#status, result.revision, raw.byteLength, this.#iso(now)));
    this.#log.info({ revision: result.revision, output: this.#target.output }, 'restored last-known-good overlay file');
    this.#notify();
  }

  #onRestart(reason: WatchRestartReason, error: Error | undefined): void {
    this.#reconnects += 1;
    this.#metrics.reconnected(reason);
    const message = error === undefined ? undefined : errorFields(error).message;
    this.#lastRestart =
      message === undefined ? { reason, at: this.#iso(this.#now()) } : { reason, at: this.#iso(this.#now()), message };
    const fields = { reason, configmap: `${this.#target.namespace}/${this.#target.configMap}`, error: message };
    if (reason === 'error') this.#log.warn(fields, 'ConfigMap watch failed; reconnecting with backoff');
    else this.#log.debug(fields, 'ConfigMap watch restarted');
  }

  #onEvent(event: WatchEvent<ConfigMapObject>): void {
    const resourceVersion = event.object.metadata.resourceVersion;
    const where = `ConfigMap ${this.#target.namespace}/${this.#target.configMap}`;
    if (event.type === 'DELETED') {
      this.#enqueue({
        observation: { kind: 'missing', reason: 'configmap_deleted', message: `${where} was deleted` },
        resourceVersion,
      });
      return;
    }
    const text = event.object.data?.[this.#target.dataKey];
    const binary = event.object.binaryData?.[this.#target.dataKey];
    let raw: Uint8Array | undefined;
    if (typeof text === 'string') raw = Buffer.from(text, 'utf8');
    else if (typeof binary === 'string') raw = Buffer.from(binary, 'base64');
    if (raw === undefined) {
      this.#enqueue({
        observation: {
          kind: 'missing',
          reason: 'data_key_missing',
          message: `${where} has no data key ${this.#target.dataKey}`,
        },
        resourceVersion,
      });
      return;
    }
    this.#enqueue({ observation: { kind: 'payload', raw }, resourceVersion });
  }

  #enqueue(pending: PendingObservation): void {
    this.#pending = pending;
    this.#draining ??= this.#drain().finally(() => {
      this.#draining = undefined;
    });
  }

  async #drain(): Promise<void> {
    while (this.#pending !== undefined) {
      const next = this.#pending;
      this.#pending = undefined;
      try {
        await this.#process(next);
      } catch (error) {
        // #process handles its own failures; this only guards the loop so one surprise cannot stop syncing.
        this.#log.error({ error: errorFields(error) }, 'unexpected failure while processing a ConfigMap observation');
      }
    }
  }

  async #process({ observation, resourceVersion }: PendingObservation): Promise<void> {
    const assessment = assess(observation, this.#status.writtenRevision, this.#validate);
    const observedAt = this.#now();
    this.#observations += 1;
    this.#metrics.observed(assessment, observedAt);
    if (assessment.outcome === 'rejected') {
      this.#log.warn(
        { reason: assessment.reason, detail: assessment.message, resource_version: resourceVersion },
        'overlay rejected; keeping last-known-good file',
      );
    }
    if (assessment.outcome !== 'accepted') {
      this.#set(transition(this.#status, { assessment, resourceVersion, at: this.#iso(observedAt) }));
      this.#notify();
      return;
    }
    const raw = (observation as Extract<Observation, { kind: 'payload' }>).raw;
    let write: { ok: true; bytes: number } | { ok: false; message: string };
    try {
      await writeFileAtomic(this.#target.output, raw);
      write = { ok: true, bytes: raw.byteLength };
    } catch (error) {
      write = { ok: false, message: `writing ${this.#target.output} failed: ${errorFields(error).message}` };
    }
    const writtenAt = this.#now();
    this.#metrics.wrote(write.ok, writtenAt, raw.byteLength);
    this.#set(transition(this.#status, { assessment, resourceVersion, at: this.#iso(writtenAt), write }));
    if (write.ok)
      this.#log.info(
        { revision: assessment.revision, bytes: raw.byteLength, resource_version: resourceVersion },
        'overlay file written',
      );
    else this.#log.error({ detail: write.message }, 'overlay file write failed; keeping last-known-good file');
    this.#notify();
  }

  #notify(): void {
    for (const listener of this.#listeners) listener(this.#status);
  }

  /** The /status document. Validator messages are bounded and never contain credential values. */
  statusDocument(): Record<string, unknown> {
    const s = this.#status;
    return {
      state: s.state,
      configmap: { namespace: this.#target.namespace, name: this.#target.configMap, data_key: this.#target.dataKey },
      output: this.#target.output,
      store: this.#store.backend,
      observed: {
        revision: s.observedRevision ?? null,
        resource_version: s.observedResourceVersion ?? null,
        at: s.observedAt ?? null,
        outcome: s.lastOutcome ?? null,
        reason: s.lastReason ?? null,
        count: this.#observations,
      },
      written: {
        revision: s.writtenRevision ?? null,
        at: s.writtenAt ?? null,
        bytes: s.writtenBytes ?? null,
        source: s.writtenSource ?? null,
      },
      degraded_reason: s.degradedReason ?? null,
      degraded_message: s.degradedMessage ?? null,
      watch: { reconnects: this.#reconnects, last_restart: this.#lastRestart ?? null },
    };
  }

  async stop(): Promise<void> {
    await this.#watch?.close();
    this.#watch = undefined;
    await this.#draining;
  }
}
