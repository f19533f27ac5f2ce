// Last-writer-wins register set: one register per record key, ordered by (revision, writer). Two different
// bodies with the same (revision, writer) can only come from a misbehaving writer; the body text breaks that
// tie so every member still picks the same winner (merge stays commutative). Pure functions.

export interface Versioned {
  readonly key: string;
  readonly revision: number;
  readonly writer: string;
  /** The exact signed body text. */
  readonly body: string;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** > 0 when `a` wins over `b`. */
export function compareVersions(a: Versioned, b: Versioned): number {
  return a.revision - b.revision || cmp(a.writer, b.writer) || cmp(a.body, b.body);
}

export function newer<T extends Versioned>(a: T, b: T): T {
  return compareVersions(a, b) >= 0 ? a : b;
}

/** Merge of two record sets keyed by `key`. */
export function mergeRecordSets<T extends Versioned>(
  a: ReadonlyMap<string, T>,
  b: ReadonlyMap<string, T>,
): Map<string, T> {
  const out = new Map(a);
  for (const [key, rb] of b) {
    const ra = out.get(key);
    out.set(key, ra === undefined ? rb : newer(ra, rb));
  }
  return out;
}
