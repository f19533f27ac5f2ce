/**
 * The epoch of a gateway spend report (gateway-spend-report.schema.json `epoch`): `<start time in ms, 13 digits>-<16+
 * random hex digits>`. Fixed width, so string order is start order: the operator's ledger forgets the oldest epochs
 * first and refuses an unknown epoch at or below its watermark, and a gateway told so draws its new epoch above it.
 * An older gateway's epoch is random hex alone; it carries no start time and no watermark covers it.
 */

const START_DIGITS = 13;
const MIN_RANDOM_DIGITS = 16;
const MAX_START_MS = 9_999_999_999_999;

/** The start time a time-prefixed epoch carries; undefined for a random-hex epoch of an older gateway. */
export function epochStartMs(epoch: string): number | undefined {
  // Character codes rather than a regular expression: the ledger asks this of every remembered epoch. The prefix
  // decides (a random-hex epoch has no '-'), whatever random part follows.
  if (epoch.length < START_DIGITS + 1 + MIN_RANDOM_DIGITS || epoch.charCodeAt(START_DIGITS) !== 45) return undefined;
  for (let i = 0; i < START_DIGITS; i++) {
    const c = epoch.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  return Number(epoch.slice(0, START_DIGITS));
}

/** The epoch starting at `startMs` (clamped to what 13 digits hold) with `randomHex` (16 or more lowercase hex digits). */
export function formatEpoch(startMs: number, randomHex: string): string {
  const ms = Math.min(Math.max(0, Math.floor(startMs)), MAX_START_MS);
  return `${String(ms).padStart(13, '0')}-${randomHex}`;
}

/** A new epoch starting now, or just after `watermark` when that is later (a clock behind the operator's records). */
export function epochAbove(nowMs: number, watermark: string | undefined, randomHex: string): string {
  const floor = watermark === undefined ? undefined : epochStartMs(watermark);
  return formatEpoch(floor === undefined ? nowMs : Math.max(nowMs, floor + 1), randomHex);
}
