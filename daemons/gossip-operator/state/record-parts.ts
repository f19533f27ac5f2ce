// The documented split of a signed state record too large for one packet (a site record with its two certificates is
// ~1.5 KB, a packet carries ~1.27 KB of broadcast). The record is not re-encoded: its signed body text is cut into
// slices, each slice travels as its own broadcast {v, part: {id, i, n, body}} (part 0 also carries signer and sig), and
// a receiver that holds all n slices of one id puts the exact signed text back together and merges it like any
// broadcast record, signature check included. So key and certificate changes spread epidemically like small records; a
// record that needs more than MAX_RECORD_PARTS packets still travels only by push-pull. Reassembly memory is bounded:
// at most `maxPending` incomplete records, oldest evicted.
import { createHash } from 'node:crypto';
import type { SignedStateRecord } from './records.ts';

/** Most packets one record is split into; beyond it, push-pull carries the record. */
export const MAX_RECORD_PARTS = 6;
/** Incomplete records held at once by a receiver (memory: this * MAX_RECORD_PARTS * one packet). */
export const MAX_PENDING_RECORDS = 32;

export interface RecordPart {
  readonly id: string;
  readonly i: number;
  readonly n: number;
  readonly body: string;
  readonly signer?: string;
  readonly sig?: string;
}

/** Identifies one signed record across its parts: the signature is unique per signed body. */
export function partId(sig: string): string {
  return createHash('sha256').update(sig).digest('base64url').slice(0, 22);
}

/**
 * Cuts `rec` into at most MAX_RECORD_PARTS parts for which `fits(part)` holds (the caller measures the framed
 * broadcast). Undefined when it cannot be done: the record goes by push-pull.
 */
export function splitRecord(rec: SignedStateRecord, fits: (part: RecordPart) => boolean): RecordPart[] | undefined {
  const id = partId(rec.sig);
  const text = rec.body;
  const parts: RecordPart[] = [];
  let start = 0;
  while (start < text.length) {
    if (parts.length === MAX_RECORD_PARTS) return undefined;
    const head = parts.length === 0 ? { signer: rec.signer, sig: rec.sig } : {};
    // n is not known yet: measure with the largest n, whose digit count bounds every smaller one.
    const make = (end: number): RecordPart => ({
      id,
      i: parts.length,
      n: MAX_RECORD_PARTS,
      body: text.slice(start, end),
      ...head,
    });
    let lo = start;
    let hi = text.length;
    // Largest end with fits(): binary search, since escaping makes bytes per character vary.
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (fits(make(mid))) lo = mid;
      else hi = mid - 1;
    }
    if (lo === start) return undefined; // not even one character fits beside the part's envelope
    parts.push(make(lo));
    start = lo;
  }
  return parts.map((p) => ({ ...p, n: parts.length }));
}

export type PartResult =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'complete'; readonly record: SignedStateRecord }
  | { readonly kind: 'bad'; readonly detail: string };

function isPart(raw: unknown): raw is RecordPart {
  if (typeof raw !== 'object' || raw === null) return false;
  const p = raw as Record<string, unknown>;
  return (
    typeof p['id'] === 'string' &&
    p['id'].length > 0 &&
    p['id'].length <= 64 &&
    Number.isInteger(p['n']) &&
    (p['n'] as number) >= 2 &&
    (p['n'] as number) <= MAX_RECORD_PARTS &&
    Number.isInteger(p['i']) &&
    (p['i'] as number) >= 0 &&
    (p['i'] as number) < (p['n'] as number) &&
    typeof p['body'] === 'string' &&
    (p['i'] !== 0 || (typeof p['signer'] === 'string' && typeof p['sig'] === 'string'))
  );
}

interface Pending {
  readonly n: number;
  readonly bodies: (string | undefined)[];
  have: number;
  signer?: string;
  sig?: string;
}

/** Puts split records back together. Never throws; bounded by `maxPending` incomplete records. */
export class PartAssembler {
  readonly #pending = new Map<string, Pending>();
  readonly #maxPending: number;

  constructor(maxPending = MAX_PENDING_RECORDS) {
    this.#maxPending = maxPending;
  }

  get pending(): number {
    return this.#pending.size;
  }

  add(raw: unknown): PartResult {
    if (!isPart(raw)) return { kind: 'bad', detail: 'record part of the wrong shape' };
    let entry = this.#pending.get(raw.id);
    if (entry === undefined) {
      if (this.#pending.size >= this.#maxPending) this.#pending.delete(this.#pending.keys().next().value as string);
      entry = { n: raw.n, bodies: new Array<string | undefined>(raw.n).fill(undefined), have: 0 };
      this.#pending.set(raw.id, entry);
    }
    if (entry.n !== raw.n)
      return { kind: 'bad', detail: `part ${raw.i} of ${raw.id} says ${raw.n} parts, earlier ones ${entry.n}` };
    if (entry.bodies[raw.i] !== undefined) return { kind: 'incomplete' }; // a retransmission
    entry.bodies[raw.i] = raw.body;
    entry.have++;
    if (raw.i === 0) {
      entry.signer = raw.signer;
      entry.sig = raw.sig;
    }
    if (entry.have < entry.n) return { kind: 'incomplete' };
    this.#pending.delete(raw.id);
    if (entry.sig === undefined || entry.signer === undefined || partId(entry.sig) !== raw.id) {
      return { kind: 'bad', detail: `parts of ${raw.id} do not belong to the signature they carry` };
    }
    return { kind: 'complete', record: { signer: entry.signer, body: entry.bodies.join(''), sig: entry.sig } };
  }
}
