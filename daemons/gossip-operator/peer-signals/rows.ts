/**
 * Peer signal rows, both directions, pure. Serving: a local sample becomes a row whose age is measured on the
 * monotonic clock from the moment this process first saw that sample ("A relayed age survives a clock step on
 * every hop"). Receiving: each row is checked on its own; a row with a negative or implausible age is refused as
 * skew and only that row becomes unavailable ("valid rows from the same peer remain available").
 */
import type { PeerSignalRow, PeerSignalsDocument } from '../../../schemas/generated/peer-signals.ts';
import { checkPeerSignalRow, checkPeerSignalsEnvelope, plausibleAge } from '../../../schemas/signals/validate.ts';
import type { MetricsSample } from '../../routing/model.ts';

export const PEER_SIGNALS_SCHEMA_VERSION = '1.0';

export interface LocalSignal {
  readonly provider: string;
  readonly sample: MetricsSample;
}

interface Anchor {
  readonly generation: number;
  readonly observedAtMs: number;
  /** Monotonic ms when this process first served the sample, and its age then. */
  readonly anchorMonoMs: number;
  readonly ageAtAnchorMs: number;
}

/**
 * Turns local samples into rows. The wall clock is read once per sample (when first seen, right after the scrape
 * that stamped it); from then on only the monotonic clock advances the age. A sample stamped in the future gives
 * a negative age and is served as such: hiding it would hide this site's stamping error from its peers.
 */
export class RowAges {
  readonly #anchors = new Map<string, Anchor>();

  rows(signals: readonly LocalSignal[], wallNowMs: number, monoNowMs: number): PeerSignalRow[] {
    const live = new Set<string>();
    const rows: PeerSignalRow[] = [];
    for (const { provider, sample } of signals.slice(0, 1024)) {
      live.add(provider);
      let anchor = this.#anchors.get(provider);
      if (
        anchor === undefined ||
        anchor.generation !== sample.generation ||
        anchor.observedAtMs !== sample.observedAtMs
      ) {
        anchor = {
          generation: sample.generation,
          observedAtMs: sample.observedAtMs,
          anchorMonoMs: monoNowMs,
          ageAtAnchorMs: Math.round(wallNowMs - sample.observedAtMs),
        };
        this.#anchors.set(provider, anchor);
      }
      rows.push({
        provider,
        age_ms: Math.round(anchor.ageAtAnchorMs + (monoNowMs - anchor.anchorMonoMs)),
        generation: Math.max(0, Math.floor(sample.generation)),
        signals: signalValues(sample),
      });
    }
    for (const provider of [...this.#anchors.keys()]) if (!live.has(provider)) this.#anchors.delete(provider);
    return rows;
  }
}

function signalValues(sample: MetricsSample): PeerSignalRow['signals'] {
  const finite = (v: number | undefined): v is number => v !== undefined && Number.isFinite(v);
  return {
    healthy: sample.healthy,
    ...(finite(sample.queueDepth) ? { queue_depth: Math.max(0, sample.queueDepth) } : {}),
    ...(finite(sample.kvCacheUtilization)
      ? { kv_cache_utilization: Math.min(1, Math.max(0, sample.kvCacheUtilization)) }
      : {}),
    ...(finite(sample.prefixCacheHitRatio)
      ? { prefix_cache_hit_ratio: Math.min(1, Math.max(0, sample.prefixCacheHitRatio)) }
      : {}),
    ...(finite(sample.latencyP99Ms) ? { latency_p99_ms: Math.max(0, sample.latencyP99Ms) } : {}),
    ...(finite(sample.errorRate) ? { error_rate: Math.min(1, Math.max(0, sample.errorRate)) } : {}),
    ...(finite(sample.runningPerEndpoint) ? { running_per_endpoint: Math.max(0, sample.runningPerEndpoint) } : {}),
    ...(finite(sample.waitingPerEndpoint) ? { waiting_per_endpoint: Math.max(0, sample.waitingPerEndpoint) } : {}),
    ...(finite(sample.flowControlHeld) ? { flow_control_held: Math.max(0, sample.flowControlHeld) } : {}),
    ...(finite(sample.readyEndpoints) ? { ready_endpoints: Math.max(0, sample.readyEndpoints) } : {}),
  };
}

export function signalsDocument(site: string, network: string, rows: PeerSignalRow[]): PeerSignalsDocument {
  return { schema_version: PEER_SIGNALS_SCHEMA_VERSION, site, network, rows };
}

export type RefusalReason = 'skew' | 'invalid';

export interface ClassifiedAnswer {
  readonly valid: readonly PeerSignalRow[];
  readonly refused: readonly { readonly reason: RefusalReason; readonly provider?: string; readonly detail: string }[];
}

/**
 * Checks a peer's answer. Returns an error (the answer is not an answer: the peer keeps its standing) when the
 * envelope is wrong or names another site or network; otherwise the valid rows and the refused ones.
 */
export function classifyAnswer(
  body: unknown,
  peer: string,
  network: string,
): { ok: true; answer: ClassifiedAnswer } | { ok: false; error: string } {
  const envelope = checkPeerSignalsEnvelope(body);
  if (!envelope.ok) return { ok: false, error: envelope.error };
  const doc = envelope.value;
  if (doc.site !== peer)
    return { ok: false, error: `document names site "${doc.site.slice(0, 80)}", polled member is "${peer}"` };
  if (doc.network !== network)
    return { ok: false, error: `document is for network "${doc.network.slice(0, 80)}", not "${network}"` };
  const valid: PeerSignalRow[] = [];
  const refused: { reason: RefusalReason; provider?: string; detail: string }[] = [];
  const seen = new Set<string>();
  doc.rows.forEach((raw, index) => {
    const row = checkPeerSignalRow(raw, index);
    if (!row.ok) {
      refused.push({ reason: 'invalid', detail: row.error });
      return;
    }
    const { provider, age_ms: age } = row.value;
    if (!plausibleAge(age)) {
      refused.push({
        reason: 'skew',
        provider,
        detail: `rows[${index}] provider ${provider}: age_ms ${age} is ${age < 0 ? 'negative' : 'implausible'}`,
      });
      return;
    }
    if (seen.has(provider)) {
      refused.push({ reason: 'invalid', provider, detail: `rows[${index}] provider ${provider} appears twice` });
      return;
    }
    seen.add(provider);
    valid.push(row.value);
  });
  return { ok: true, answer: { valid, refused } };
}
