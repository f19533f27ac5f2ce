// Stored-state pinning (reference praxis-proxy/grid docs/architecture/prefix-affinity.md, "Stored responses and
// conversations"): response and conversation ids leave the gateway tagged with the site that stored them, as
// resp_<site>.<id> and conv_<site>.<id>; a request naming one goes only to that site with the tag stripped. Pure,
// except IdTagger which carries a few bytes across the chunks of one streamed body.

const PREFIXES = ['resp_', 'conv_'] as const;
/** Site names go into ids, so they must be DNS-1123 labels (no dot: the first dot ends the site). */
export const SITE_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export interface TaggedId {
  readonly site: string;
  /** The id as the site issued it (the tag stripped). */
  readonly id: string;
}

/** `resp_<site>.<id>` or `conv_<site>.<id>`; undefined for an id this gateway did not tag. */
export function parseTaggedId(value: string): TaggedId | undefined {
  const prefix = PREFIXES.find((p) => value.startsWith(p));
  if (prefix === undefined) return undefined;
  const dot = value.indexOf('.', prefix.length);
  if (dot === -1) return undefined;
  const site = value.slice(prefix.length, dot);
  const rest = value.slice(dot + 1);
  if (!SITE_LABEL.test(site) || rest.length === 0) return undefined;
  return { site, id: `${prefix}${rest}` };
}

export function tagId(id: string, site: string): string {
  const prefix = PREFIXES.find((p) => id.startsWith(p));
  return prefix === undefined ? id : `${prefix}${site}.${id.slice(prefix.length)}`;
}

/** What a request pins: the site, the body with its ids untagged (null when unchanged), and the target untagged. */
export interface Pin {
  readonly site: string;
  readonly body: Record<string, unknown> | null;
  readonly target: string | null;
}

export class PinConflict extends Error {}

const STORED_PATH = /^\/v1\/(responses|conversations)\/([^/?]+)(.*)$/;

/**
 * The site a request is pinned to by `previous_response_id`, `conversation` (a string or {id}) or a stored id in its
 * path; undefined when it names none this gateway tagged. Throws PinConflict when it names two sites.
 */
export function pinOf(target: string, body: Record<string, unknown> | undefined): Pin | undefined {
  let site: string | undefined;
  const claim = (tagged: TaggedId): string => {
    if (site !== undefined && site !== tagged.site)
      throw new PinConflict(`the request names stored state of two sites ("${site}" and "${tagged.site}")`);
    site = tagged.site;
    return tagged.id;
  };
  let newBody: Record<string, unknown> | null = null;
  if (body !== undefined) {
    const previous = body['previous_response_id'];
    const conversation = body['conversation'];
    const edited = { ...body };
    let changed = false;
    if (typeof previous === 'string') {
      const tagged = parseTaggedId(previous);
      if (tagged !== undefined) {
        edited['previous_response_id'] = claim(tagged);
        changed = true;
      }
    }
    if (typeof conversation === 'string') {
      const tagged = parseTaggedId(conversation);
      if (tagged !== undefined) {
        edited['conversation'] = claim(tagged);
        changed = true;
      }
    } else if (
      typeof conversation === 'object' &&
      conversation !== null &&
      typeof (conversation as Record<string, unknown>)['id'] === 'string'
    ) {
      const tagged = parseTaggedId((conversation as Record<string, string>)['id']!);
      if (tagged !== undefined) {
        edited['conversation'] = { ...(conversation as Record<string, unknown>), id: claim(tagged) };
        changed = true;
      }
    }
    if (changed) newBody = edited;
  }
  let newTarget: string | null = null;
  const match = STORED_PATH.exec(target);
  if (match !== null) {
    let raw: string;
    try {
      raw = decodeURIComponent(match[2]!);
    } catch {
      raw = match[2]!;
    }
    const tagged = parseTaggedId(raw);
    if (tagged !== undefined) newTarget = `/v1/${match[1]!}/${encodeURIComponent(claim(tagged))}${match[3]!}`;
  }
  return site === undefined ? undefined : { site, body: newBody, target: newTarget };
}

const PATTERNS = PREFIXES.map((p) => Buffer.from(`"${p}`));
const BACKSLASH = 0x5c;

/**
 * Tags every JSON string starting resp_ or conv_ in a response body, chunk by chunk (JSON bodies and SSE streams
 * alike): the ids a client gets back (the response's, a conversation's, an echoed previous_response_id) all carry the
 * site. An escaped quote (\"resp_ inside generated text) is not a string start and is left alone.
 */
export class IdTagger {
  readonly #tags: Buffer[];
  #carry: Buffer = Buffer.alloc(0);

  constructor(site: string) {
    this.#tags = PREFIXES.map((p) => Buffer.from(`"${p}${site}.`));
  }

  push(chunk: Buffer): Buffer {
    let buf = this.#carry.length === 0 ? chunk : Buffer.concat([this.#carry, chunk]);
    // Hold back a tail that could be the start of a pattern split across chunks (and the byte before it).
    let hold = 0;
    for (let k = Math.min(buf.length, PATTERNS[0]!.length - 1); k > 0 && hold === 0; k--) {
      const tail = buf.subarray(buf.length - k);
      if (PATTERNS.some((p) => p.subarray(0, k).equals(tail))) hold = k;
    }
    if (hold > 0) {
      const keep = Math.min(buf.length, hold + 1);
      this.#carry = Buffer.from(buf.subarray(buf.length - keep));
      buf = buf.subarray(0, buf.length - keep);
    } else {
      this.#carry = Buffer.alloc(0);
    }
    return this.#rewrite(buf);
  }

  end(): Buffer {
    const rest = this.#carry;
    this.#carry = Buffer.alloc(0);
    return this.#rewrite(rest);
  }

  /** The last byte already emitted: the byte before the next buffer's first. */
  #last = -1;

  #rewrite(buf: Buffer): Buffer {
    const parts: Buffer[] = [];
    let from = 0;
    for (let i = 0; i < buf.length; i++) {
      if (buf[i] !== 0x22) continue;
      const before = i === 0 ? this.#last : buf[i - 1]!;
      if (before === BACKSLASH) continue;
      for (let p = 0; p < PATTERNS.length; p++) {
        const pattern = PATTERNS[p]!;
        if (i + pattern.length <= buf.length && buf.subarray(i, i + pattern.length).equals(pattern)) {
          parts.push(buf.subarray(from, i), this.#tags[p]!);
          from = i + pattern.length;
          i = from - 1;
          break;
        }
      }
    }
    if (buf.length > 0) this.#last = buf[buf.length - 1]!;
    if (from === 0) return buf;
    parts.push(buf.subarray(from));
    return Buffer.concat(parts);
  }
}
