import { createHash } from 'node:crypto';
import { canonicalizeInto } from '../canonical-json.ts';
import { type ConsumerDialect, DIALECT_RULES } from './dialect.ts';

/**
 * The semantic revision of a routing payload (docs/contract.md §2.3): SHA-256 of the JCS bytes of
 * `{candidates, local_site, network, selection_policy?}` exactly as serialized. Consumers pass the raw parsed JSON,
 * so unknown candidate keys count and a typed copy can never hide a difference. generated_at is excluded, which is
 * why re-rendering unchanged state yields the same revision.
 *
 * A consumer that does not know selection_policy (Praxis AI main) leaves it out of what it hashes, so under its
 * `dialect` the revision is computed without it: a payload carrying one never matches there.
 *
 * Throws CanonicalJsonError when the payload holds something JCS cannot encode.
 */
export function overlayRevision(payload: Readonly<Record<string, unknown>>, dialect: ConsumerDialect = 'agn'): string {
  const semantic: Record<string, unknown> = {
    candidates: payload['candidates'],
    local_site: payload['local_site'],
    network: payload['network'],
  };
  if (DIALECT_RULES[dialect].readsSelectionPolicy && Object.hasOwn(payload, 'selection_policy'))
    semantic['selection_policy'] = payload['selection_policy'];
  // Streamed into the hash: the canonical text of a large overlay is never held whole.
  const hash = createHash('sha256');
  canonicalizeInto(semantic, (chunk) => hash.update(chunk, 'utf8'));
  return hash.digest('hex');
}
