/** FNV-1a 32-bit (SPEC §2.2): the stable_id of a candidate and the suffix of long overlay ConfigMap names. */

const OFFSET_BASIS = 0x811c9dc5;
const PRIME = 0x01000193;
const encoder = new TextEncoder();

/** FNV-1a 32 over the UTF-8 bytes of `input`, as 8 lowercase hex digits. */
export function fnv1a32Hex(input: string): string {
  let hash = OFFSET_BASIS;
  for (const byte of encoder.encode(input)) {
    hash = Math.imul(hash ^ byte, PRIME) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

/**
 * The candidate identity a provider gateway routes on (`candidate_id` in provider_route, `x-ai-routing-candidate`
 * on the hop). Computed from the four fields alone so the compiler can write it at synth time, before any operator runs.
 */
export function stableId(kind: string, name: string, site: string, cluster: string): string {
  return fnv1a32Hex(`${kind}/${name}/${site}/${cluster}`);
}
