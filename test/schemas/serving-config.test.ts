// The serving config contract: name, revision, and every refusal a consumer (gateway, overlay-sync) makes, in
// validation order, each with a message naming the field.
import { describe, expect, it } from 'vitest';
import type { ServingConfigDocument, ServingPayload } from '../../schemas/generated/serving-config.ts';
import {
  buildServingDocument,
  serializeServing,
  servingConfigMapName,
  servingRevision,
  SYNC_MAX_SERVING_BYTES,
  validateServing,
} from '../../schemas/serving/serving-config.ts';

const payload = (): ServingPayload => ({
  network: 'grid',
  local_site: 'west',
  sites: [
    { site: 'east', signals_address: '10.0.0.2:9443' },
    { site: 'west', signals_address: '[::1]:9443' },
  ],
  entries: [
    { site: 'east', provider: 'llm-b', models: ['m1'], cluster: 'east-hop', admission: 'all', ready: true },
    {
      site: 'west',
      provider: 'llm-a',
      models: ['m1', 'm2'],
      cluster: 'llm-a',
      admission: 'none',
      ready: false,
      excluded: 'unhealthy',
    },
  ],
});
const documentOf = (p: ServingPayload = payload()): ServingConfigDocument =>
  buildServingDocument({ gateway: 'edge', namespace: 'grid-system' }, p, '2026-12-01T10:00:00Z');
const text = (d: unknown) => JSON.stringify(d);
const options = {
  maxBytes: SYNC_MAX_SERVING_BYTES,
  expectedScope: { network: 'grid', gateway: 'edge', namespace: 'grid-system', local_site: 'west' },
};

/** A document whose `serving` was edited and whose revision was recomputed, so only the semantic rule can refuse it. */
function resigned(edit: (p: ServingPayload) => void): string {
  const p = payload();
  edit(p);
  return text(documentOf(p));
}

describe('serving config contract', () => {
  it('names the ConfigMap like the overlay: plain, or truncated and hash-suffixed past 63 characters', () => {
    expect(servingConfigMapName('grid', 'edge')).toBe('grid-serving-grid-edge');
    const long = servingConfigMapName('a-very-long-network-name-indeed', 'a-very-long-gateway-name-as-well');
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^grid-serving-a-very-long-network--a-very-long-gateway--[0-9a-f]{8}$/);
    expect(servingConfigMapName('a-very-long-network-name-indeed', 'a-very-long-gateway-name-as-welL')).not.toBe(long);
  });

  it('the revision covers the serving payload only, whatever the key order; generated_at and scope do not count', () => {
    const a = documentOf();
    const b = buildServingDocument({ gateway: 'other', namespace: 'elsewhere' }, payload(), '2030-01-01T00:00:00Z');
    expect(a.revision.value).toBe(b.revision.value);
    const reordered = JSON.parse(text(a.serving)) as Record<string, unknown>;
    expect(servingRevision(Object.fromEntries(Object.entries(reordered).reverse()))).toBe(a.revision.value);
    const changed = payload();
    changed.entries[0]!.admission = 'none';
    expect(documentOf(changed).revision.value).not.toBe(a.revision.value);
  });

  it('accepts what the builder produces, as serialized', () => {
    const verdict = validateServing(serializeServing(documentOf()), options);
    expect(verdict).toMatchObject({ ok: true, revision: documentOf().revision.value });
  });

  it('accepts unknown keys (forward compatibility)', () => {
    const p = payload() as ServingPayload & { extra?: unknown };
    (p.entries[0] as unknown as Record<string, unknown>)['weight_hint'] = 3;
    const d = documentOf(p) as unknown as Record<string, unknown>;
    d['future'] = { anything: true };
    expect(validateServing(text(d), options).ok).toBe(true);
  });

  const good = documentOf();
  const withDoc = (edit: (d: any) => void): string => {
    const d = JSON.parse(text(good));
    edit(d);
    return text(d);
  };
  const cases: [string, string, string, string][] = [
    ['over the byte limit', text(good) + ' '.repeat(SYNC_MAX_SERVING_BYTES), 'oversized', 'limit'],
    ['not JSON', '{"schema_version":', 'malformed', 'not JSON'],
    ['an array', '[]', 'malformed', 'not a JSON object'],
    [
      'schema_version 2.0',
      withDoc((d) => {
        d.schema_version = '2.0';
      }),
      'unsupported_schema',
      '"2.0" is not 1.x',
    ],
    [
      'no schema_version',
      withDoc((d) => {
        delete d.schema_version;
      }),
      'malformed',
      'schema_version',
    ],
    [
      'no revision',
      withDoc((d) => {
        delete d.revision;
      }),
      'malformed',
      'revision',
    ],
    [
      'revision of another algorithm',
      withDoc((d) => {
        d.revision.algorithm = 'md5';
      }),
      'malformed',
      '/revision/algorithm',
    ],
    [
      'an entry without cluster',
      withDoc((d) => {
        delete d.serving.entries[0].cluster;
      }),
      'malformed',
      '/serving/entries/0',
    ],
    [
      'admission "existing"',
      withDoc((d) => {
        d.serving.entries[0].admission = 'existing';
      }),
      'malformed',
      '/serving/entries/0/admission',
    ],
    [
      'a blank provider',
      withDoc((d) => {
        d.serving.entries[0].provider = '   ';
      }),
      'malformed',
      '/serving/entries/0/provider',
    ],
    [
      'a signals address that is not host:port',
      withDoc((d) => {
        d.serving.sites[0].signals_address = 'https://east/v1/signals';
      }),
      'malformed',
      '/serving/sites/0/signals_address',
    ],
    [
      'scope.network differing from serving.network',
      withDoc((d) => {
        d.scope.network = 'other';
      }),
      'scope_mismatch',
      'scope.network',
    ],
    [
      "another gateway's config",
      withDoc((d) => {
        d.scope.gateway = 'edge-2';
      }),
      'scope_mismatch',
      'scope.gateway is "edge-2"',
    ],
    [
      'an entry edited after the revision',
      withDoc((d) => {
        d.serving.entries[0].ready = false;
      }),
      'digest_mismatch',
      'recomputed',
    ],
    [
      'a provider listed twice',
      resigned((p) => {
        p.entries.push({ ...p.entries[0]! });
      }),
      'invalid_entry',
      'appears twice',
    ],
    [
      'an entry whose site is not in sites',
      resigned((p) => {
        p.sites = p.sites.filter((s) => s.site !== 'east');
      }),
      'invalid_entry',
      'site "east" is not in sites',
    ],
    [
      'a site listed twice',
      resigned((p) => {
        p.sites.push({ site: 'west' });
      }),
      'invalid_entry',
      'listed twice',
    ],
    [
      'an excluded provider that admits all',
      resigned((p) => {
        p.entries[1]!.admission = 'all';
      }),
      'invalid_entry',
      'excluded (unhealthy) but admits all',
    ],
  ];
  it.each(cases)('refuses %s', (_name, raw, reason, message) => {
    const verdict = validateServing(raw, options);
    expect(verdict.ok).toBe(false);
    if (verdict.ok) return;
    expect(verdict.reason).toBe(reason);
    expect(verdict.message).toContain(message);
  });
});
