/**
 * FNV-1a 32-bit (docs/contract.md §2.2): the stable_id of a candidate and the suffix of long overlay ConfigMap names.
 */

const OFFSET_BASIS = 0x811c9dc5;
const PRIME = 0x01000193;
const SLASH = 0x2f;

/**
 * Folds the UTF-8 bytes of `text` into `hash`. The bytes are produced from the UTF-16 units in place rather than by
 * TextEncoder: the renderer hashes one stable_id per candidate, and an encoded copy per call was garbage that a large
 * overlay paid for in collections. Lone surrogates become U+FFFD (EF BF BD), as TextEncoder writes them.
 */
function foldUtf8(hash: number, text: string): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) {
    let unit = text.charCodeAt(i);
    if (unit < 0x80) {
      h = Math.imul(h ^ unit, PRIME) >>> 0;
      continue;
    }
    if (unit < 0x800) {
      h = Math.imul(h ^ (0xc0 | (unit >> 6)), PRIME) >>> 0;
      h = Math.imul(h ^ (0x80 | (unit & 0x3f)), PRIME) >>> 0;
      continue;
    }
    if (unit >= 0xd800 && unit <= 0xdfff) {
      const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
      if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        const point = 0x10000 + ((unit - 0xd800) << 10) + (next - 0xdc00);
        i++;
        h = Math.imul(h ^ (0xf0 | (point >> 18)), PRIME) >>> 0;
        h = Math.imul(h ^ (0x80 | ((point >> 12) & 0x3f)), PRIME) >>> 0;
        h = Math.imul(h ^ (0x80 | ((point >> 6) & 0x3f)), PRIME) >>> 0;
        h = Math.imul(h ^ (0x80 | (point & 0x3f)), PRIME) >>> 0;
        continue;
      }
      unit = 0xfffd;
    }
    h = Math.imul(h ^ (0xe0 | (unit >> 12)), PRIME) >>> 0;
    h = Math.imul(h ^ (0x80 | ((unit >> 6) & 0x3f)), PRIME) >>> 0;
    h = Math.imul(h ^ (0x80 | (unit & 0x3f)), PRIME) >>> 0;
  }
  return h;
}

function hex(hash: number): string {
  return hash.toString(16).padStart(8, '0');
}

/** FNV-1a 32 over the UTF-8 bytes of `input`, as 8 lowercase hex digits. */
export function fnv1a32Hex(input: string): string {
  return hex(foldUtf8(OFFSET_BASIS, input));
}

/**
 * The candidate identity a provider gateway routes on (`candidate_id` in provider_route, `x-ai-routing-candidate`
 * on the hop): FNV-1a of `kind/name/site/cluster`, folded part by part so no joined string is built. Computed from
 * the four fields alone so the compiler can write it at synth time, before any operator runs.
 */
export function stableId(kind: string, name: string, site: string, cluster: string): string {
  return hex(stableIdHash(kind, name, site, cluster));
}

/** stable_id as its unsigned 32-bit number (the renderer also de-duplicates on it); stableIdText formats it. */
export function stableIdHash(kind: string, name: string, site: string, cluster: string): number {
  let h = foldUtf8(OFFSET_BASIS, kind);
  h = Math.imul(h ^ SLASH, PRIME) >>> 0;
  h = foldUtf8(h, name);
  h = Math.imul(h ^ SLASH, PRIME) >>> 0;
  h = foldUtf8(h, site);
  h = Math.imul(h ^ SLASH, PRIME) >>> 0;
  return foldUtf8(h, cluster);
}

/** The stable_id text of a stableIdHash: 8 lowercase hex digits. */
export function stableIdText(hash: number): string {
  return hex(hash);
}
