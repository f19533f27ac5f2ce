// The provider-hop request id (docs/contract.md §3.1): 32 lowercase hex = microsecond timestamp (16 hex) + a
// per-process random tag (4 hex) + a counter (12 hex). Unique per process without coordination, sortable by time. Made
// on every request (it is every answer's x-request-id), so plain numbers: microseconds since the epoch stay exact
// below 2^53 until the year 2255.

export const REQUEST_ID_PATTERN = /^[0-9a-f]{32}$/;
const COUNTER_MODULUS = 2 ** 48;

export interface RequestIdSources {
  /** Microseconds since the epoch. */
  nowMicros(): number;
  /** 16 random bits, drawn once per process. */
  processTag: number;
}

/** 2^24: each number is written as a high part (rarely changing, its hex cached) and 6 hex digits of low part. */
const LOW = 0x1000000;

/** `value` (0 <= value < 2^24) as exactly 6 hex digits: one toString and a slice, no padStart. */
const hex6 = (value: number): string => (value + LOW).toString(16).slice(1);

export function createRequestIdGenerator(sources: RequestIdSources): () => string {
  const tag = (sources.processTag & 0xffff).toString(16).padStart(4, '0');
  let counter = 0;
  // The high parts change every 16.8 s (microseconds) and every 16.8 M requests (counter): their hex is cached, so a
  // request formats two small numbers instead of two 48-bit ones with padStart.
  let microsHigh = -1;
  let microsHighHex = '';
  let counterHigh = -1;
  let counterHighHex = '';
  return () => {
    const micros = Math.max(0, Math.floor(sources.nowMicros()));
    const high = Math.floor(micros / LOW);
    if (high !== microsHigh) {
      microsHigh = high;
      microsHighHex = high.toString(16).padStart(10, '0');
    }
    const countHigh = Math.floor(counter / LOW);
    if (countHigh !== counterHigh) {
      counterHigh = countHigh;
      counterHighHex = countHigh.toString(16).padStart(6, '0');
    }
    const id = microsHighHex + hex6(micros - high * LOW) + tag + counterHighHex + hex6(counter - countHigh * LOW);
    counter = (counter + 1) % COUNTER_MODULUS;
    return id;
  };
}
