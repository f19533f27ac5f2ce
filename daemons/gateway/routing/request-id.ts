// The provider-hop request id (SPEC §3.1): 32 lowercase hex = microsecond timestamp (16 hex) + a per-process
// random tag (4 hex) + a counter (12 hex). Unique per process without coordination, sortable by time.

export const REQUEST_ID_PATTERN = /^[0-9a-f]{32}$/;
const COUNTER_MODULUS = 2 ** 48;

export interface RequestIdSources {
  /** Microseconds since the epoch. */
  nowMicros(): bigint;
  /** 16 random bits, drawn once per process. */
  processTag: number;
}

export function createRequestIdGenerator(sources: RequestIdSources): () => string {
  const tag = (sources.processTag & 0xffff).toString(16).padStart(4, '0');
  let counter = 0;
  return () => {
    const micros = BigInt.asUintN(64, sources.nowMicros()).toString(16).padStart(16, '0');
    const id = `${micros}${tag}${counter.toString(16).padStart(12, '0')}`;
    counter = (counter + 1) % COUNTER_MODULUS;
    return id;
  };
}
