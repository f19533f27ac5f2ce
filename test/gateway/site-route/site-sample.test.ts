// How one site's rows become a SiteSample (reference docs/site-selection.md, "Inputs": "The gateway concludes
// in-flight as running plus waiting per endpoint, times ready endpoints, plus what flow control holds"; "Zero reads
// as not ready"; docs/architecture/signals.md: "A reader treats a missing signal as neutral, not zero"), and how the
// gateway's environment asks for a serving config.
import { describe, expect, it } from 'vitest';
import type { PeerSignalRow } from '../../../schemas/generated/peer-signals.ts';
import { concludeSite } from '../../../daemons/gateway/site-route/site-sample.ts';
import { servingOptionsFromEnv } from '../../../daemons/gateway/site-route/site-view-service.ts';
import { answerRows } from '../../../daemons/gateway/site-route/site-signals-poller.ts';

const row = (provider: string, signals: Omit<PeerSignalRow['signals'], 'healthy'>): PeerSignalRow => ({
  provider,
  age_ms: 10,
  generation: 1,
  signals: { healthy: true, ...signals },
});

describe('concludeSite', () => {
  it.each<[string, PeerSignalRow[], { inFlight?: number; waiting?: number; readyEndpoints?: number }]>([
    [
      'running and waiting per endpoint times ready, plus held',
      [row('p', { running_per_endpoint: 3, waiting_per_endpoint: 1, ready_endpoints: 2, flow_control_held: 4 })],
      { inFlight: 12, waiting: 6, readyEndpoints: 2 },
    ],
    [
      'providers of one site add up',
      [
        row('p', { running_per_endpoint: 1, ready_endpoints: 2 }),
        row('q', { running_per_endpoint: 2, waiting_per_endpoint: 1, ready_endpoints: 1 }),
      ],
      { inFlight: 5, waiting: 1, readyEndpoints: 3 },
    ],
    [
      'zero ready endpoints is a reading (not ready), not a missing one',
      [row('p', { running_per_endpoint: 4, waiting_per_endpoint: 2, ready_endpoints: 0 })],
      { inFlight: 0, waiting: 0, readyEndpoints: 0 },
    ],
    [
      'averages without an endpoint count conclude nothing',
      [row('p', { running_per_endpoint: 4, waiting_per_endpoint: 2 })],
      {},
    ],
    ['no pool series at all: every signal missing', [row('p', { queue_depth: 0.5, kv_cache_utilization: 0.9 })], {}],
    ['held work alone is waiting, not in-flight', [row('p', { flow_control_held: 3 })], { waiting: 3 }],
    ['no rows', [], {}],
  ])('%s', (_name, rows, expected) => {
    const sample = concludeSite('east', rows, 42);
    expect(sample).toEqual({ site: 'east', atMs: 42, ...expected });
  });

  it('counts only the providers the serving config names at the site', () => {
    const rows = [
      row('p', { running_per_endpoint: 1, ready_endpoints: 1 }),
      row('other', { running_per_endpoint: 100, ready_endpoints: 10 }),
    ];
    expect(concludeSite('east', rows, 0, new Set(['p']))).toMatchObject({ inFlight: 1, readyEndpoints: 1 });
    expect(concludeSite('east', rows, 0, new Set(['nobody']))).toEqual({ site: 'east', atMs: 0 });
  });
});

describe('answerRows', () => {
  const doc = (rows: unknown[], site = 'east', network = 'grid') => ({ schema_version: '1.0', site, network, rows });
  it('drops a bad row, a skewed row and a second row for one provider, and keeps the rest', () => {
    const good = row('p', { running_per_endpoint: 1, ready_endpoints: 1 });
    const answer = answerRows(
      doc([good, { provider: 'x' }, { ...row('q', {}), age_ms: -5 }, { ...good, age_ms: 11 }]),
      'east',
      'grid',
    );
    // Only the skewed row is a refused relayed age (the gateway's age report counts it as skewCount).
    expect(answer).toEqual({ ok: true, rows: [good], refused: 3, refusedAges: 1 });
  });
  it.each([
    ['another site', doc([], 'west'), 'names site "west"'],
    ['another network', doc([], 'east', 'other'), 'network "other"'],
    ['no rows', { schema_version: '1.0', site: 'east', network: 'grid' }, 'rows'],
    ['schema 2.0', { ...doc([]), schema_version: '2.0' }, 'schema_version'],
  ])('refuses a document for %s', (_name, body, message) => {
    const answer = answerRows(body, 'east', 'grid');
    expect(answer.ok).toBe(false);
    if (!answer.ok) expect(answer.error).toContain(message);
  });
});

describe('servingOptionsFromEnv', () => {
  it('is off without GRID_SERVING_CONFIG', () => {
    expect(servingOptionsFromEnv({})).toBeUndefined();
    expect(servingOptionsFromEnv({ GRID_SIGNALS_TLS_DIR: '/tls' })).toBeUndefined();
  });
  it('reads the file, the client identity directory and the poll settings', () => {
    expect(
      servingOptionsFromEnv({
        GRID_SERVING_CONFIG: '/run/serving/serving-config.json',
        GRID_SIGNALS_TLS_DIR: '/tls',
        GRID_SIGNALS_POLL_INTERVAL_MS: '500',
        GRID_SIGNALS_STALE_AFTER_MS: '2000',
      }),
    ).toEqual({
      file: '/run/serving/serving-config.json',
      tls: { caFile: '/tls/ca.crt', certFile: '/tls/tls.crt', keyFile: '/tls/tls.key' },
      pollIntervalMs: 500,
      staleAfterMs: 2000,
    });
  });
  it.each([
    [{ GRID_SERVING_CONFIG: '/s.json' }, 'GRID_SIGNALS_TLS_DIR is not'],
    [
      { GRID_SERVING_CONFIG: '/s.json', GRID_SIGNALS_TLS_DIR: '/tls', GRID_SIGNALS_POLL_INTERVAL_MS: '5s' },
      'GRID_SIGNALS_POLL_INTERVAL_MS must be a whole number',
    ],
    [{ GRID_SERVING_CONFIG: '/s.json', GRID_SIGNALS_TLS_DIR: '/tls', GRID_SIGNALS_POLL_INTERVAL_MS: '10' }, 'from 100'],
    [
      { GRID_SERVING_CONFIG: '/s.json', GRID_SIGNALS_TLS_DIR: '/tls', GRID_SIGNALS_STALE_AFTER_MS: '-1' },
      'GRID_SIGNALS_STALE_AFTER_MS',
    ],
  ])('refuses %j', (env, message) => {
    expect(() => servingOptionsFromEnv(env)).toThrow(message);
  });
});
