// The metric names of docs/contract.md §4, exactly. Labels carry only catalogue values (outcomes, reasons), never
// names from the payload, so cardinality is bounded and nothing from a credential reference leaks.

import { Counter, Gauge, Registry } from 'prom-client';
import type { WatchRestartReason } from '../shared/resource-store/types.ts';
import type { Assessment, SyncStatus } from './state.ts';

const PREFIX = 'grid_overlay_sync';

export class OverlaySyncMetrics {
  readonly registry = new Registry();
  readonly events = new Counter({
    name: `${PREFIX}_events_total`,
    help: 'ConfigMap observations by outcome (accepted, unchanged, rejected, missing) and reason.',
    labelNames: ['outcome', 'reason'] as const,
    registers: [this.registry],
  });
  readonly fileWrites = new Counter({
    name: `${PREFIX}_file_writes_total`,
    help: 'Atomic writes of the overlay file by outcome (success, failure).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly validationFailures = new Counter({
    name: `${PREFIX}_validation_failures_total`,
    help: 'Overlays rejected by the contract validator, by reason (docs/contract.md §2.4).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly watchReconnects = new Counter({
    name: `${PREFIX}_watch_reconnects_total`,
    help: 'ConfigMap watch restarts by reason (gone = 410 relist, closed = stream ended, error = failure with backoff).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly ready = new Gauge({
    name: `${PREFIX}_ready`,
    help: '1 when a valid overlay file exists.',
    registers: [this.registry],
  });
  readonly degraded = new Gauge({
    name: `${PREFIX}_degraded`,
    help: '1 when serving the last-known-good file because the latest observation was unusable.',
    registers: [this.registry],
  });
  readonly lastObserved = new Gauge({
    name: `${PREFIX}_last_observed_timestamp_seconds`,
    help: 'Unix time of the last ConfigMap observation.',
    registers: [this.registry],
  });
  readonly lastWrite = new Gauge({
    name: `${PREFIX}_last_write_timestamp_seconds`,
    help: 'Unix time of the last successful overlay file write (or restore at start).',
    registers: [this.registry],
  });
  readonly payloadBytes = new Gauge({
    name: `${PREFIX}_payload_bytes`,
    help: 'Size in bytes of the overlay file being served.',
    registers: [this.registry],
  });

  constructor() {
    this.ready.set(0);
    this.degraded.set(0);
  }

  observed(assessment: Assessment, atMs: number): void {
    this.events.inc({ outcome: assessment.outcome, reason: assessment.reason });
    if (assessment.outcome === 'rejected') this.validationFailures.inc({ reason: assessment.reason });
    this.lastObserved.set(atMs / 1000);
  }

  wrote(ok: boolean, atMs: number, bytes: number): void {
    this.fileWrites.inc({ outcome: ok ? 'success' : 'failure' });
    if (ok) {
      this.lastWrite.set(atMs / 1000);
      this.payloadBytes.set(bytes);
    }
  }

  restored(atMs: number, bytes: number): void {
    this.lastWrite.set(atMs / 1000);
    this.payloadBytes.set(bytes);
  }

  reconnected(reason: WatchRestartReason): void {
    this.watchReconnects.inc({ reason });
  }

  state(status: SyncStatus): void {
    this.ready.set(status.state === 'cold' ? 0 : 1);
    this.degraded.set(status.state === 'ready_degraded' ? 1 : 0);
  }
}
