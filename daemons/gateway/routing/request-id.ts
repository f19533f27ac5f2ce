// The provider-hop request id (SPEC §3.1): 32 lowercase hex = microsecond timestamp (16 hex) + a per-process
// random tag (4 hex) + a counter (12 hex). Unique per process without coordination, sortable by time. Made on
// every request (it is every answer's x-request-id), so plain numbers: microseconds since the epoch stay exact
// below 2^53 until the year 2255.

export const REQUEST_ID_PATTERN = /^[0-9a-f]{32}$/;
const COUNTER_MODULUS = 2 ** 48;

export interface RequestIdSources {
  /** Microseconds since the epoch. */
  nowMicros(): number;
  /** 16 random bits, drawn once per process. */
  processTag: number;
}

export function createRequestIdGenerator(sources: RequestIdSources): () => string {
  const tag = (sources.processTag & 0xffff).toString(16).padStart(4, '0');
  let counter = 0;
  return () => {
    const micros = Math.max(0, Math.floor(sources.nowMicros())).toString(16).padStart(16, '0');
    const id = `${micros}${tag}${counter.toString(16).padStart(12, '0')}`;
    counter = (counter + 1) % COUNTER_MODULUS;
    return id;
  };
}
