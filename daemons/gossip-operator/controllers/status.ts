/** Status helpers shared by the controllers: bounded messages, conditions with stable transition times. */
import { canonicalize } from '../../../schemas/canonical-json.ts';
import { redactText } from '../../shared/log.ts';

export const MAX_MESSAGE_BYTES = 512;

/** A status message: secrets masked, one line, at most 512 bytes. */
export function boundedMessage(text: string): string {
  const oneLine = redactText(text).replace(/\s+/g, ' ').trim();
  if (Buffer.byteLength(oneLine) <= MAX_MESSAGE_BYTES) return oneLine;
  let cut = oneLine.slice(0, MAX_MESSAGE_BYTES - 3);
  while (Buffer.byteLength(cut) > MAX_MESSAGE_BYTES - 3) cut = cut.slice(0, -1);
  return `${cut}...`;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export function nowRfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Sets conditions keyed by type, keeping lastTransitionTime when the status did not change (so a steady state
 * writes nothing and triggers no watch event).
 */
export function mergeConditions(
  existing: readonly Condition[] | undefined,
  updates: readonly Omit<Condition, 'lastTransitionTime'>[],
  nowMs: number,
): Condition[] {
  const out = new Map<string, Condition>();
  for (const c of existing ?? []) out.set(c.type, c);
  for (const u of updates) {
    const before = out.get(u.type);
    const lastTransitionTime =
      before !== undefined && before.status === u.status ? before.lastTransitionTime : nowRfc3339(nowMs);
    out.set(u.type, { ...u, message: boundedMessage(u.message), lastTransitionTime });
  }
  return [...out.values()].slice(0, 16);
}

/**
 * Equal content whatever the key order: an API server hands an object back with its keys sorted, not in the order
 * they were written, so a text comparison would see a change (a status write, a "tools changed") at every probe.
 * Absent and undefined are the same.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  // No status yet (undefined) is a document of its own; JCS has no text for it.
  if (a === undefined || b === undefined) return a === b;
  return canonicalize(a) === canonicalize(b);
}

/**
 * The object without its status, for validation: status is what this operator writes, so a status another writer
 * got wrong must not turn a good spec into an invalid one.
 */
export function specOnly<T extends { status?: unknown }>(object: T): Omit<T, 'status'> {
  const { status: _status, ...rest } = object;
  return rest;
}

/**
 * A status merge patch replaces the whole conditions list, and three writers share it (GridNetwork reconcile:
 * Ready; the peer poller: PeerTimeValid; gateway age ingest: GatewayAgesRejected). Each writer sends the list read
 * just before its patch with only its own types replaced, so no writer drops or reverts another's condition.
 */
export function withOwnConditions(
  fresh: readonly Condition[] | undefined,
  own: readonly Condition[],
  ownTypes: readonly string[],
): Condition[] {
  const mine = new Map(own.filter((c) => ownTypes.includes(c.type)).map((c) => [c.type, c]));
  const out: Condition[] = [];
  for (const c of fresh ?? []) {
    if (!ownTypes.includes(c.type)) out.push(c);
    else if (mine.has(c.type)) {
      out.push(mine.get(c.type)!);
      mine.delete(c.type);
    }
  }
  return [...out, ...mine.values()].slice(0, 16);
}
